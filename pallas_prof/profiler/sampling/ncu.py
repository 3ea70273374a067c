"""Optional hardware counters: Nsight Compute on a replay of the kernel.

`run()` saves the kernel's LaunchSpec, runs the replay runner in a
subprocess under `ncu --clock-control none` (the clocks stay as the GPU
sets them, as in the replay's own timing), and reads ncu's CSV:

  timing   gpu__time_duration.sum of each profiled launch, compared with the
           replay's median
  source   the SourceCounters section on the Source page (`--page source
           --print-source sass`): per-SASS-instruction samples and counts,
           summed per equation through the static correlation
GPU only; ncu needs permission to read performance counters.
"""
from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np

from ..driver import ProfilerError
from ..launchspec import LaunchSpec
from ..schema import NcuResult
from ..static.correlate import correlate
from .stalls import canonical

UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
         "second": 1.0, "s": 1.0}


class NcuUnavailable(ProfilerError):
  pass


def find_ncu() -> str | None:
  path = shutil.which("ncu")
  if path:
    return path
  candidates = sorted(glob.glob("/usr/local/cuda*/bin/ncu") +
                      glob.glob("/opt/nvidia/nsight-compute/*/ncu"))
  return candidates[-1] if candidates else None


def _root() -> str:
  here = os.path.abspath(__file__)       # <root>/pallas_prof/profiler/sampling/x.py
  for _ in range(4):
    here = os.path.dirname(here)
  return here


def _env() -> dict[str, str]:
  env = dict(os.environ)
  env["PYTHONPATH"] = _root() + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  return env


def replay_command(spec_dir: str, device: int, launches: int, warmup: int) -> list[str]:
  # the runner's default mode, "plain", launches without the cold mode's L2 flush kernel:
  # ncu flushes the caches before each profiled launch itself (--cache-control all)
  return [sys.executable, "-m", "pallas_prof.profiler.timing.runner", spec_dir, "--launches",
          str(launches), "--warmup", str(warmup), "--device", str(device)]


def timing_command(ncu: str, kernel: str, spec_dir: str, device: int, launches: int,
                   warmup: int) -> list[str]:
  return [ncu, "--clock-control", "none", "--target-processes", "all",
          "--kernel-name", kernel, "--launch-skip", str(warmup), "--launch-count", str(launches),
          "--metrics", "gpu__time_duration.sum", "--csv", "--print-units", "base",
          *replay_command(spec_dir, device, launches, warmup)]


def source_command(ncu: str, kernel: str, spec_dir: str, device: int, warmup: int,
                   report: str) -> list[str]:
  return [ncu, "--clock-control", "none", "--target-processes", "all",
          "--kernel-name", kernel, "--launch-skip", str(warmup), "--launch-count", "1",
          "--section", "SourceCounters", "--section", "WarpStateStats",
          "--import-source", "yes", "--export", report, "--force-overwrite",
          *replay_command(spec_dir, device, 1, warmup)]


def _csv_rows(text: str) -> list[list[str]]:
  lines = [line for line in text.splitlines() if line.startswith('"')]
  return list(csv.reader(io.StringIO("\n".join(lines))))


def _number(text: str) -> float | None:
  t = text.strip().replace(",", "")
  if not t or t.lower() in ("n/a", "nan", "-"):
    return None
  try:
    return float(t)
  except ValueError:
    return None


def parse_timing_csv(text: str, metric: str = "gpu__time_duration.sum") -> list[float]:
  """Seconds of each profiled launch from `ncu --csv --metrics ...` output."""
  rows = _csv_rows(text)
  if not rows:
    return []
  header = rows[0]
  try:
    name_col = header.index("Metric Name")
    value_col = header.index("Metric Value")
  except ValueError:
    return []
  unit_col = header.index("Metric Unit") if "Metric Unit" in header else None
  out = []
  for row in rows[1:]:
    if len(row) <= max(name_col, value_col) or row[name_col] != metric:
      continue
    value = _number(row[value_col])
    if value is None:
      continue
    unit = row[unit_col].strip() if unit_col is not None and unit_col < len(row) else "nsecond"
    out.append(value * UNITS.get(unit, 1e-9))
  return out


def parse_source_csv(text: str) -> tuple[list[dict[str, object]], list[str]]:
  """Rows of ncu's Source page (SASS view): address, source text, numeric metrics."""
  rows = _csv_rows(text)
  header_index = None
  for i, row in enumerate(rows):
    low = [c.lower() for c in row]
    if any("address" in c for c in low) and any(c == "source" for c in low):
      header_index = i
      break
  if header_index is None:
    return [], []
  header = rows[header_index]
  addr_col = next(i for i, c in enumerate(header) if "address" in c.lower())
  src_col = next(i for i, c in enumerate(header) if c.lower() == "source")
  metrics = [c for i, c in enumerate(header) if i not in (addr_col, src_col)]
  out = []
  for row in rows[header_index + 1:]:
    if len(row) != len(header):
      continue
    address = _address(row[addr_col])
    if address is None:
      continue
    values = {}
    for i, c in enumerate(header):
      if i in (addr_col, src_col):
        continue
      v = _number(row[i])
      if v is not None:
        values[c] = v
    out.append({"address": address, "source": row[src_col].strip(), "metrics": values})
  numeric = [m for m in metrics if any(m in r["metrics"] for r in out)]
  return out, numeric


def _address(text: str) -> int | None:
  t = text.strip().replace(" ", "")
  if not t:
    return None
  try:
    return int(t, 16) if t.lower().startswith("0x") or re.search(r"[a-f]", t.lower()) else int(t)
  except ValueError:
    return None


def _opcode(source: str) -> str:
  s = source.strip()
  if s.startswith("@"):
    s = s.split(None, 1)[1] if " " in s else ""
  return s.split(None, 1)[0].rstrip(";") if s else ""


def align_to_sass(rows, sass) -> tuple[dict[int, int], str]:
  """ncu source rows -> index into our SASS instructions; by offset from the
  first address, else by order; accepted only if the opcodes agree."""
  if not rows or not sass:
    return {}, "nothing to align"
  by_addr = {ins.address: k for k, ins in enumerate(sass)}
  first = min(r["address"] for r in rows)
  for how, mapping in (
      ("address offset", {i: by_addr.get(r["address"] - first) for i, r in enumerate(rows)}),
      ("order", {i: i for i in range(min(len(rows), len(sass)))})):
    pairs = [(i, k) for i, k in mapping.items() if k is not None]
    if not pairs:
      continue
    agree = sum(1 for i, k in pairs if _opcode(rows[i]["source"]) == sass[k].opcode)
    if agree >= 0.9 * len(pairs) and len(pairs) >= 0.9 * len(rows):
      return dict(pairs), how
  return {}, "ncu's SASS does not line up with the cubin's disassembly"


def per_equation(rows, sass, metrics) -> tuple[dict[str, dict[str, float]], str]:
  mapping, how = align_to_sass(rows, sass)
  sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
  for i, k in mapping.items():
    eqn = sass[k].eqn
    key = "unattributed" if eqn is None else str(eqn)
    for m in metrics:
      v = rows[i]["metrics"].get(m)
      if v is not None:
        sums[key][m] += v
  return {k: dict(v) for k, v in sums.items()}, how


def run(ck, *, device: int = 0, launches: int = 5, warmup: int = 2, source: bool = True,
        replay_median_s: float | None = None, aliases=(), zeroed_outputs=(),
        timeout: float = 300.0, keep_dir: str | None = None,
        instructions: bool = False) -> NcuResult:
  """Nsight Compute on a replay of `ck` (CompiledKernel or LaunchSpec).
  instructions: also keep the warp-stall samples per SASS instruction
  (NcuResult.instruction_samples), for attribution.py."""
  ncu = find_ncu()
  if ncu is None:
    raise NcuUnavailable("ncu (Nsight Compute) is not on PATH")
  spec = ck if isinstance(ck, LaunchSpec) else LaunchSpec.from_compiled(ck, aliases,
                                                                        zeroed_outputs)
  directory = keep_dir or tempfile.mkdtemp(prefix="pallas-prof-ncu-")
  notes = []
  try:
    spec_dir = os.path.join(directory, "spec")
    spec.save(spec_dir)
    command = timing_command(ncu, spec.name, spec_dir, device, launches, warmup)
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_env())
    _raise_for(result, "timing run")
    times = parse_timing_csv(result.stdout)
    if not times:
      notes.append("ncu printed no gpu__time_duration rows: " + _tail(result.stdout + result.stderr))
    median = float(np.median(times)) if times else None
    diff = (100 * (median - replay_median_s) / replay_median_s
            if median is not None and replay_median_s else None)
    counters, metrics, per_instruction = None, [], None
    if source and ck.generated is not None:
      try:
        counters, metrics, how, per_instruction = _source_counters(
            ncu, ck, spec, spec_dir, device, warmup, directory, timeout)
        notes.append(f"source counters aligned to the SASS by {how}")
      except ProfilerError as e:
        notes.append(f"source counters: {e}")
    return NcuResult(command=command, launches=len(times), gpu_time_s=times, median_s=median,
                     replay_median_s=replay_median_s, difference_pct=diff,
                     source_counters=counters, source_metrics=metrics, notes=notes,
                     instruction_samples=per_instruction if instructions else None)
  finally:
    if keep_dir is None:
      shutil.rmtree(directory, ignore_errors=True)


def _source_counters(ncu, ck, spec, spec_dir, device, warmup, directory, timeout):
  report = os.path.join(directory, "source")
  result = subprocess.run(source_command(ncu, spec.name, spec_dir, device, warmup, report),
                          capture_output=True, text=True, timeout=timeout, env=_env())
  _raise_for(result, "source-counter run")
  page = subprocess.run([ncu, "--import", report + ".ncu-rep", "--page", "source", "--csv",
                         "--print-source", "sass"], capture_output=True, text=True,
                        timeout=timeout)
  _raise_for(page, "source page export")
  rows, metrics = parse_source_csv(page.stdout)
  if not rows:
    raise ProfilerError("no Source page rows in ncu's CSV: " + _tail(page.stdout + page.stderr))
  corr = correlate(ck)
  counters, how = per_equation(rows, corr.sass, metrics)
  if not counters:
    raise ProfilerError(how)
  return counters, metrics, how, instruction_samples(rows, corr.sass)


ALL_SAMPLES = "Warp Stall Sampling (All Samples)"


def instruction_samples(rows, sass) -> dict[str, dict[str, float]]:
  """SASS address (hex) -> stall reason (stalls.py's names) -> warp-stall samples,
  from the Source page's stall_* columns (the not-issued duplicates left out)."""
  mapping, _ = align_to_sass(rows, sass)
  out: dict[str, dict[str, float]] = {}
  for i, k in mapping.items():
    reasons: dict[str, float] = {}
    for metric, value in rows[i]["metrics"].items():
      if not metric.startswith("stall_") or not value:
        continue
      reason, counted = canonical(metric)
      if counted:
        reasons[reason] = reasons.get(reason, 0.0) + value
    if not reasons and rows[i]["metrics"].get(ALL_SAMPLES):
      reasons = {"unknown": rows[i]["metrics"][ALL_SAMPLES]}
    if reasons:
      out[hex(sass[k].address)] = reasons
  return out


def _raise_for(result, what: str) -> None:
  text = result.stdout + result.stderr
  if "ERR_NVGPUCTRPERM" in text:
    raise NcuUnavailable("ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): "
                         "run as root or set NVreg_RestrictProfilingToAdminUsers=0")
  if result.returncode != 0:
    raise ProfilerError(f"ncu {what} exited with {result.returncode}: {_tail(text)}")


def _tail(text: str, n: int = 1500) -> str:
  text = text.strip()
  return text if len(text) <= n else "..." + text[-n:]
