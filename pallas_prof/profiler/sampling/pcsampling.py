"""Stall sampling of a replayed kernel: CUPTI's PC sampling API, in a child process.

The API is bound through ctypes in cupti_pcs.py (which says why this mechanism); here
the child that drives it, its sampling plan, and the parent that starts the child and
reads what it wrote.

Why a child process. CUPTI admits one subscriber per process and the user's
program may hold it (pallas-prof's own in-situ capture through Proton does);
PC sampling must be enabled on the context before the kernel's module is
loaded; and the sampled launches must not disturb the timed ones. The child
loads no JAX (pallas_prof's package __init__ is skipped): numpy, ml_dtypes and
cuda-bindings only.

What the child does: enable PC sampling on the device's primary context,
configure it (all stall reasons, continuous mode, start/stop control, a
sampling period chosen for ~SAMPLES_WANTED samples), load the cubin (the
Replayer), fill one input set, time UNSAMPLED launches with CUDA events, then
start sampling, launch the same way, stop, and read the samples; it writes one
JSON file (`read()` parses it). The printed runtime never comes from these
launches: it is the parent's unsampled replay.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from .. import driver
from ..attribution_schema import SamplingRun
from ..driver import ProfilerError, call
from .cupti_pcs import Cupti, PcSampler
from .stalls import canonical

FORMAT = 1
SAMPLES_WANTED = 200_000      # across all sampled launches
MIN_KERNEL_SECONDS = 0.02     # sampled launches: at least this much kernel time ...
MAX_LAUNCHES = 200            # ... and at most this many launches
SAMPLES_PER_CTA = 32          # at least this many sampling periods in a CTA's shortest life


# --- the child -------------------------------------------------------------------------------

def period_log2(kernel_s: float, launches: int, clock_hz: float, sms: int,
                wanted: int = SAMPLES_WANTED, ctas: int | None = None) -> int:
  """The sampling period (2^N cycles, N in 5..24) that gives about `wanted` samples:
  each SM takes one sample per period.

  With `ctas` (the grid's size) the period is also kept under 1/SAMPLES_PER_CTA of the
  shortest life a CTA can have (the kernel's time over its most waves: one CTA per SM at
  a time). The CTAs of a wave of a uniform kernel start together and live about as long,
  so a period near that life could sample each of them at the same phase. A precaution,
  not a measured cause: on the H200 a pair of loops (ka_two) gave the same shares at a
  period of 2^15 cycles, near its CTAs' life, and at 2^7 (contention.py explains them).
  The cost of the shorter period: more samples per launch (fewer launches are taken) and
  a few dropped ones at 2^7 there, which the report counts."""
  cycles = max(kernel_s, 1e-7) * clock_hz * launches * sms
  n = round(math.log2(max(cycles / wanted, 1.0)))
  if ctas:
    waves = math.ceil(ctas / sms)
    shortest_life = max(kernel_s, 1e-7) * clock_hz / waves
    n = min(n, math.floor(math.log2(max(shortest_life / SAMPLES_PER_CTA, 1.0))))
  return int(min(24, max(5, n)))


def sampled_launches(kernel_s: float) -> int:
  return int(min(MAX_LAUNCHES, max(3, math.ceil(MIN_KERNEL_SECONDS / max(kernel_s, 1e-7)))))


def sampling_plan(kernel_s: float, clock_hz: float, sms: int, ctas: int | None,
                  wanted: int = SAMPLES_WANTED, period: int | None = None) -> tuple[int, int]:
  """(period_log2, launches): launches enough for MIN_KERNEL_SECONDS of kernel time, a
  period for about `wanted` samples; where the CTAs' life forces a shorter period, fewer
  launches (at least 3) bring the count back near `wanted`. `period` (log2) overrides the
  period (sampling_rounds.py: a longer one where CUPTI dropped samples); the launches
  then grow to bring the count near `wanted`, up to MAX_LAUNCHES."""
  launches = sampled_launches(kernel_s)
  n = period_log2(kernel_s, launches, clock_hz, sms, wanted, ctas) if period is None \
      else int(min(24, max(5, period)))
  if period is not None:
    per_launch = max(kernel_s, 1e-7) * clock_hz * sms / 2 ** n
    return n, int(max(3, min(MAX_LAUNCHES, math.ceil(wanted / per_launch))))
  per_launch = max(kernel_s, 1e-7) * clock_hz * sms / 2 ** n
  launches = int(max(3, min(launches, math.ceil(wanted / per_launch))))
  return n, launches


def _time(r, pool_start, pool_end, n: int) -> list[float]:
  out = []
  for i in range(n):
    call("cuEventRecord", pool_start, r.stream)
    r.launch(i)
    call("cuEventRecord", pool_end, r.stream)
    call("cuEventSynchronize", pool_end)
    out.append(float(call("cuEventElapsedTime", pool_start, pool_end)) / 1e3)
  return out


def child(spec_dir: str, device: int, out_path: str, seed: int | None,
          kernel_s: float | None = None, period: int | None = None) -> dict:
  # lazy: keeps numpy out of this module's import (start-up time)
  import numpy as np
  from ..launchspec import LaunchSpec
  from ..timing.replayer import Replayer
  started = time.perf_counter()
  spec = LaunchSpec.load(spec_dir)
  cupti = Cupti()
  result = {"format": FORMAT, "kernel": spec.name, "library": cupti.path,
            "cupti_version": cupti.version, "notes": []}
  phases = {}

  def phase(name):
    phases[name] = time.perf_counter() - started

  with driver.primary_context(device) as ctx:
    phase("context")
    sms = ctx.attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
    try:
      clock_hz = ctx.attribute("CU_DEVICE_ATTRIBUTE_CLOCK_RATE") * 1e3
    except Exception:  # noqa: BLE001 - CUDA 13 dropped the attribute; an H100/H200's boost
      clock_hz = 1.98e9
    sampler = PcSampler(cupti, int(ctx.context))
    events = (call("cuEventCreate", 0), call("cuEventCreate", 0))
    probe_s = []
    if not kernel_s:
      # the period needs the kernel's time (the parent passes its replay's median);
      # else time a few launches of a module loaded and unloaded before enable()
      with Replayer(spec, device, seed) as probe:
        probe.prepare(n_sets=1)
        _time(probe, *events, 2)
        probe_s = _time(probe, *events, 3)
        kernel_s = float(np.median(probe_s))
    ctas = math.prod(spec.launch_grid)
    n, launches = sampling_plan(kernel_s, clock_hz, sms, ctas, period=period)
    phase("probe")
    sampler.enable(n)
    phase("enable")
    try:
      with Replayer(spec, device, seed) as r:
        r.prepare(n_sets=1)
        phase("load_and_inputs")
        _time(r, *events, 2)                                 # warm-up
        unsampled = _time(r, *events, launches)
        call("cuCtxSynchronize")
        phase("unsampled")
        sampler.start()
        sampled = _time(r, *events, launches)
        call("cuCtxSynchronize")
        sampler.stop()
        phase("sampled")
        sampler.read(result)
        phase("read")
    finally:
      sampler.disable()
      sampler._accumulate(result)      # anything CUPTI flushed into the buffer at disable
      for e in events:
        call("cuEventDestroy", e)
  result.update({"period_log2": n, "launches": launches, "sms": sms, "clock_hz": clock_hz,
                 "ctas": ctas,
                 "stall_reasons": {str(k): v for k, v in sampler.names.items()},
                 "probe_s": probe_s, "unsampled_s": unsampled, "sampled_s": sampled,
                 "phases_s": phases, "child_seconds": time.perf_counter() - started})
  with open(out_path, "w") as f:
    json.dump(result, f)
  return result


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description="PC-sample a saved kernel (LaunchSpec directory)")
  parser.add_argument("spec_dir")
  parser.add_argument("--out", required=True)
  parser.add_argument("--device", type=int, default=0)
  parser.add_argument("--seed", type=int, default=None)
  parser.add_argument("--kernel-seconds", type=float, default=None,
                      help="the kernel's time (sets the sampling period); timed if not given")
  parser.add_argument("--period-log2", type=int, default=None, help="the sampling period")
  args = parser.parse_args(argv)
  child(args.spec_dir, args.device, args.out, args.seed, args.kernel_seconds, args.period_log2)
  return 0


# --- the parent ------------------------------------------------------------------------------

def _root() -> str:
  here = os.path.abspath(__file__)       # <root>/pallas_prof/profiler/sampling/x.py
  for _ in range(4):
    here = os.path.dirname(here)
  return here


# Runs main() with the pallas_prof package stubbed, so that its __init__ (which
# imports JAX, slow) is skipped: the child needs the profiler's modules only.
_BOOT = ("import sys, types; root = sys.argv.pop(1); p = types.ModuleType('pallas_prof'); "
         "p.__path__ = [root + '/pallas_prof']; sys.modules['pallas_prof'] = p; "
         "from pallas_prof.profiler.sampling.pcsampling import main; "
         "sys.exit(main(sys.argv[1:]))")


def command(spec_dir: str, out_path: str, device: int,
            kernel_s: float | None = None, period: int | None = None) -> list[str]:
  extra = ["--kernel-seconds", repr(float(kernel_s))] if kernel_s else []
  extra += ["--period-log2", str(int(period))] if period is not None else []
  return [sys.executable, "-c", _BOOT, _root(), spec_dir, "--out", out_path,
          "--device", str(device), *extra]


def sample(ck, *, device: int = 0, aliases=(), zeroed_outputs=(), timeout: float = 120.0,
           keep: str | None = None, kernel_s: float | None = None,
           period: int | None = None) -> dict:
  """PC-samples a CompiledKernel (or LaunchSpec) in a child process; the child's
  JSON (see child()). keep: a path to copy that JSON to (a run directory).
  kernel_s: the kernel's time from a replay (else the child times it first);
  period: the sampling period's log2 (else sampling_plan's)."""
  # lazy: at the top it would load numpy whenever this module is imported
  from ..launchspec import LaunchSpec
  spec = ck if isinstance(ck, LaunchSpec) else LaunchSpec.from_compiled(ck, aliases,
                                                                        zeroed_outputs)
  with tempfile.TemporaryDirectory(prefix="pallas-prof-pcs-") as d:
    spec.save(os.path.join(d, "spec"))
    out = os.path.join(d, "samples.json")
    started = time.perf_counter()
    proc = subprocess.run(command(os.path.join(d, "spec"), out, device, kernel_s, period),
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    if proc.returncode != 0 or not os.path.exists(out):
      tail = (proc.stdout + proc.stderr).strip()[-1500:]
      raise ProfilerError(f"the PC-sampling child exited with {proc.returncode}: {tail}")
    with open(out) as f:
      data = json.load(f)
    data["wall_seconds"] = wall
    if keep:
      os.makedirs(os.path.dirname(keep) or ".", exist_ok=True)
      with open(keep, "w") as f:
        json.dump(data, f)
    return data


def instruction_samples(data: dict, function: str) -> tuple[dict[int, dict[str, float]], int]:
  """The child's samples of `function` as SASS address -> stall reason -> samples
  (the not-issued duplicates left out), and the samples of other functions."""
  names = {int(k): canonical(v) for k, v in data.get("stall_reasons", {}).items()}
  out: dict[int, dict[str, float]] = {}
  other = 0
  for key, reasons in data.get("pcs", {}).items():
    name, _, offset = key.rpartition("\t")
    counted = {}
    for idx, n in reasons.items():
      reason, keep = names.get(int(idx), (f"reason_{idx}", True))
      if keep and n:
        counted[reason] = counted.get(reason, 0.0) + float(n)
    if name != function:
      other += int(sum(counted.values()))
      continue
    into = out.setdefault(int(offset), {})
    for r, n in counted.items():
      into[r] = into.get(r, 0.0) + n
  return out, other


def sampling_run(data: dict, other: int):
  unsampled = statistics.median(data["unsampled_s"]) if data.get("unsampled_s") else None
  sampled = statistics.median(data["sampled_s"]) if data.get("sampled_s") else None
  overhead = 100 * (sampled / unsampled - 1) if unsampled and sampled else None
  return SamplingRun(
      mechanism="CUPTI PC sampling API (libcupti through ctypes, in a child process)",
      library=data.get("library", "?"), cupti_version=data.get("cupti_version"),
      period_cycles=2 ** int(data.get("period_log2", 0)), launches=int(data.get("launches", 0)),
      total_samples=int(data.get("total_samples", 0)),
      dropped_samples=int(data.get("dropped_samples", 0)), other_function_samples=other,
      unsampled_median_s=unsampled, sampled_median_s=sampled, overhead_pct=overhead,
      child_seconds=float(data.get("wall_seconds", data.get("child_seconds", 0.0))))


if __name__ == "__main__":
  sys.exit(main())
