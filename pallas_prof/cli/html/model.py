"""What the HTML report shows, read out of the typed run report (cli/report.py's
RunReport, as `pallas-prof run` made it or RunReport.load read it back) and the
run's kernel files.

The views are plain frozen dataclasses: the template and the charts take them as
they are. equations.py, listings.py, probes.py and advice.py make the views of
their sections from the same typed records.
"""
from __future__ import annotations

import dataclasses
import os

from typing import Mapping

from ...backend.equation_text import aval_texts
from ...profiler.schema import ProfileReport
from ... import units
from ..report import CompileInfo, ErrorEntry, RunReport
from ..summary import KernelSummary, Origin, summaries
from .equations import EquationTable, WeightedEquation, equation_table, work_facts
from .kernel_files import SavedKernel, read_saved_kernels
from .listings import (Line, Listing, find_user_file, generated_listing,  # noqa: F401
                       stage_listings, user_listing)
from .advice import AdviceView, advice_view
from .probes import ProbesView, probes_view

# the stages in the order Triton runs them (a waterfall draws them one after another)
COMPILE_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")


@dataclasses.dataclass(frozen=True)
class Roofline:
  """The kernel's point against measured ceilings; `absent` says why there is no chart."""
  intensity: float | None = None    # FLOP per byte moved (the work model's)
  flops_per_s: float | None = None
  bytes_per_s: float | None = None
  copy_bytes_per_s: float | None = None
  matrix_flops_per_s: tuple[tuple[str, float], ...] = ()
  verdict: str = ""
  absent: str = ""


@dataclasses.dataclass(frozen=True)
class Clocks:
  """NVML readings during the timed window."""
  summary: str = ""
  throttled: bool = False
  t_s: tuple[float, ...] = ()
  sm_clock_mhz: tuple[float | None, ...] = ()
  power_w: tuple[float | None, ...] = ()
  slowdown: tuple[tuple[str, ...], ...] = ()
  max_sm_clock_mhz: float | None = None
  power_limit_w: float | None = None
  absent: str = ""


@dataclasses.dataclass(frozen=True)
class KernelView:
  label: str
  name: str
  anchor: str
  device: str                       # "0: NVIDIA H200", or "" on a CPU run
  process: str                      # "host.example pid 123 process 0/2", or "" for one process
  facts: tuple[tuple[str, str], ...]     # (what, value) shown as the kernel's headline figures
  weight_basis: str                 # what the heat measures, in words
  user_source: Listing
  generated: Listing
  stages: tuple[Listing, ...]       # PTX and SASS, coloured like the source
  roofline: Roofline
  waterfall: tuple[tuple[str, float], ...]   # (stage, ms) in the order they ran
  waterfall_note: str               # "from the cache: ..." when this run compiled nothing
  clocks: Clocks
  verdict: str
  probes: ProbesView | None = None  # with `--probes`
  gpu: bool = False                 # timed on a GPU (else: a CPU run, its static figures)
  equations: EquationTable | None = None   # the per-equation breakdown
  work: tuple[tuple[str, str], ...] = ()   # the work model, in words
  advice: AdviceView | None = None  # the panel beside the heated lines


@dataclasses.dataclass(frozen=True)
class ErrorView:
  title: str                              # "failed at run time", "lowering failed", ...
  kernel: str
  reason: str
  location: str
  hint: str
  report: tuple[tuple[str, bool], ...]    # the error report's lines, the failing ones marked


@dataclasses.dataclass(frozen=True)
class RunView:
  title: str
  facts: tuple[tuple[str, str], ...]
  message: str
  kernels: tuple[KernelView, ...]
  errors: tuple[ErrorView, ...]
  notes: tuple[str, ...]
  # a report merged from several processes: one row per process (see merge.py)
  processes_header: tuple[str, ...] = ()
  processes: tuple[tuple[str, ...], ...] = ()


def _profiles(run: RunReport) -> tuple[ProfileReport | None, ...]:
  """Each device's profile; one None where the run profiled nothing (--no-analysis)."""
  return run.profiles or (None,)


def run_view(run: RunReport, run_dir: str | None,
             saved: Mapping[str, SavedKernel] | None = None) -> RunView:
  """The page's content for one run saved in `run_dir`; `saved`: its kernels' files, read
  before (kernel_files.py), else read here first."""
  saved = read_saved_kernels(run, run_dir) if saved is None else saved
  plat = run.platform
  profiles = _profiles(run)
  devices = ", ".join(sorted(set(plat.devices))) or plat.backend or ""
  facts = [("script", os.path.basename(run.script or "?")),
           ("exit code", str(run.exit_code)),
           ("created", str(run.created or "")),
           ("devices", devices),
           ("jax", str(plat.jax)), ("triton", str(plat.triton)),
           ("command", " ".join(run.command)),
           ("bounds checks", run.bounds_checked_line() or "")]
  kernels = [kernel_view(run, s, saved[s.label], several=len(profiles) > 1)
             for s in summaries(run)]
  first = profiles[0]
  return RunView(
      title=f"pallas-prof {os.path.basename(run.script or '?')}",
      facts=tuple((k, v) for k, v in facts if v and v != "None"),
      message=(first.message if first is not None else "") or "",
      kernels=tuple(kernels),
      errors=tuple(error_view(e) for e in run.errors),
      notes=tuple(run.notes) + tuple(first.notes if first is not None else ()))


def error_view(err: ErrorEntry) -> ErrorView:
  text = err.report or ""
  if err.hint:                  # the page says it beside the report, in "what to do"
    text = text.split("\n\n  hint: ")[0]
  lines = tuple((line, line.lstrip().startswith(">>")) for line in text.splitlines())
  stage = err.stage
  title = ("failed at run time" if stage == "run" else
           f"compile failed ({stage} stage)" if stage and stage != "lowering" else
           "lowering failed")
  return ErrorView(title=title, kernel=str(err.kernel or "?"), reason=str(err.reason or ""),
                   location=str(err.location or ""), hint=str(err.hint or ""),
                   report=lines)


def kernel_view(run: RunReport, s: KernelSummary, saved: SavedKernel, *, several: bool,
                process: str = "") -> KernelView:
  """One kernel on one device (its row `s`, its files `saved`); `process`: which process
  ran it, on a page of several (processes.process_name, summary.Origin.words)."""
  eqs = equation_weights(s)
  gpu = s.gpu
  anchor = "k-" + "".join(c if c.isalnum() else "-" for c in s.label)
  if several or process:
    anchor += f"-{s.device.index if s.device is not None else 'x'}"
  if process:
    anchor += "-p" + "".join(c if c.isalnum() else "-" for c in process)
  return KernelView(
      label=s.label, name=s.name or "", anchor=anchor, device=s.device_text,
      process=process,
      facts=_kernel_facts(s, gpu) + _failure_fact(s),
      weight_basis=_basis_words(s),
      user_source=user_listing(run, s, eqs),
      generated=generated_listing(saved, eqs),
      stages=stage_listings(saved, {e.index: e.weight or 0.0 for e in eqs}),
      roofline=_roofline(s), waterfall=_waterfall(s, gpu), clocks=_clocks(s, gpu),
      waterfall_note=_waterfall_note(s),
      verdict=s.verdict.beside_table, probes=probes_view(s.probes),
      gpu=gpu,
      equations=equation_table(s, eqs, lambda path: find_user_file(run, path)),
      work=work_facts(s), advice=advice_view(s))


def _failure_fact(s: KernelSummary) -> tuple[tuple[str, str], ...]:
  """A kernel that failed says so among its facts, where its advice panel would be."""
  return (("failed", f"{s.failed}; no advice: fix the failure first"),) if s.failed else ()


def _measured(s) -> bool:
  """Whether the kernel's weights were measured (samples, ncu), not counted."""
  return bool(s.attribution is not None and s.attribution.basis
              and s.attribution.basis != "static")


def _basis_words(s: KernelSummary) -> str:
  if _measured(s):
    return (f"measured ({s.attribution.basis}): "
            + (s.attribution.description or "each line's share of the kernel's samples"))
  basis = s.static.weight_basis if s.static is not None else None
  if not basis:
    return "no weights: this run recorded no per-equation profile"
  if basis in ("ptx", "sass"):
    return (f"static: each line's share of the kernel's {basis.upper()} instructions "
            "(counted, not timed)")
  return f"{basis}: each line's share of the kernel's measured samples"


def equation_weights(s) -> list[WeightedEquation]:
  """The kernel's equations with the weights shown: the profiler's measured attribution
  where it has one (PC sampling, ncu: weights and stall reasons), else the static share of
  instructions. `s`: its row (KernelSummary), or a profile's kernel (KernelProfile)."""
  static = list(s.static.equations) if s.static is not None else []
  att = s.attribution
  if att is None or not att.equations or att.basis == "static":
    return [WeightedEquation(e.index, e.primitive, e.user_file, e.user_line, e.weight, e)
            for e in static]
  measured = {m.index: m for m in att.equations}
  by_index = {e.index: e for e in static}
  out = []
  for index in sorted(set(by_index) | set(measured)):
    e, m = by_index.get(index), measured.get(index)

    def pick(name):     # the static record's, else the measured one's
      value = getattr(e, name) if e is not None else None
      return getattr(m, name) if value is None and m is not None else value

    out.append(WeightedEquation(
        index, pick("primitive"), pick("user_file"), pick("user_line"),
        m.weight if m is not None else 0.0, e,
        stalls=tuple(m.stalls or ()) if m is not None else (),
        time_s=m.time_s if m is not None else None))
  return out


def _fmt(x, unit="", digits=1) -> str:
  if x is None:
    return "-"
  return f"{x:.{digits}f}{unit}"


def _kernel_facts(s: KernelSummary, gpu: bool) -> tuple[tuple[str, str], ...]:
  res = s.resources
  comp = s.compile or CompileInfo()
  facts = [("grid", s.grid_text),
           ("warps / stages", f"{s.num_warps} / {s.num_stages}"),
           ("operands", aval_texts(s.in_avals) + " -> " + aval_texts(s.out_avals)
            if s.in_avals or s.out_avals else ""),
           ("registers", res.registers_text),
           ("shared memory", res.shared_text),
           ("spills", res.spills_text),
           ("lowering", _fmt(s.lowering_ms, " ms")),
           ("compile", f"cached ({comp.cache})" if comp.cache in ("memory", "disk")
            else _fmt(comp.total_ms, " ms"))]
  rt = s.runtime
  if rt is not None and rt.median_s is not None:
    facts.append((f"{rt.mode or 'sustained'} median",
                  f"{rt.median_s * 1e6:.2f} µs [{(rt.p10_s or 0) * 1e6:.2f}-"
                  f"{(rt.p90_s or 0) * 1e6:.2f}]"))
    if rt.sustained is not None and rt.sustained.median_s is not None:
      facts.append(("sustained median", f"{rt.sustained.median_s * 1e6:.2f} µs"))
  rates = s.rates
  if rates is not None and rates.bytes_per_s:
    facts.append(("achieved", " ".join(x for x in (
        units.rate(rates.bytes_per_s, "B/s"), units.rate(rates.flops_per_s, "FLOP/s"))
        if x != "-")))
  if not gpu:
    facts.append(("launches (CPU interpreter)", str(s.cpu_launches)))
  for note in s.workarounds:
    facts.append(("Triton workaround", note))
  return tuple((what, value) for what, value in facts if value)


# --- charts' data ------------------------------------------------------------------------

def _roofline(s: KernelSummary) -> Roofline:
  work, rates, ceil = s.work, s.rates, s.ceilings
  intensity = rates.arithmetic_intensity if rates is not None else None
  if intensity is None and work is not None and work.bytes:
    intensity = (work.flops or 0) / work.bytes
  if not s.gpu:
    return Roofline(intensity=intensity, absent="no roofline: nothing was timed on a GPU in "
                    "this run (CPU: Triton's interpreter), so there is no achieved rate and "
                    "no measured ceiling to draw.")
  if rates is None or (not rates.bytes_per_s and not rates.flops_per_s):
    return Roofline(intensity=intensity, absent="no roofline: the kernel was not timed "
                    "(see the notes) or its work model has no bytes")
  if ceil is None or (not ceil.copy_bytes_per_s and not ceil.matrix_flops_per_s):
    return Roofline(intensity=intensity, flops_per_s=rates.flops_per_s,
                    bytes_per_s=rates.bytes_per_s,
                    absent="no roofline: the GPU's ceilings were not measured in this run")
  return Roofline(
      intensity=intensity, flops_per_s=rates.flops_per_s,
      bytes_per_s=rates.bytes_per_s, copy_bytes_per_s=ceil.copy_bytes_per_s,
      matrix_flops_per_s=tuple(sorted((ceil.matrix_flops_per_s or {}).items(),
                                      key=lambda kv: -kv[1])),
      verdict=rates.verdict or "")


def _waterfall(s: KernelSummary, gpu: bool = True) -> tuple[tuple[str, float], ...]:
  comp = s.compile or CompileInfo()
  out = [("lowering", s.lowering_ms or 0.0)]
  # on a CPU the program compiled nothing: pallas-prof compiled for sm_90 after the
  # script, and the worker it started then is no part of the kernel's compile
  if comp.worker_wait_ms and gpu:
    out.append(("worker wait", comp.worker_wait_ms))
  stages = comp.stages_ms or {}
  out += [(s, stages[s]) for s in COMPILE_STAGES if s in stages]
  out += [(s, v) for s, v in stages.items() if s not in COMPILE_STAGES]
  return tuple((name, float(ms)) for name, ms in out if ms is not None)


def _waterfall_note(s: KernelSummary) -> str:
  cache = s.compile.cache if s.compile is not None else None
  if cache in ("memory", "disk"):
    return (f"this run took the kernel from the {cache} cache: the stages are those of the "
            "compile that filled it")
  return ""


def _clocks(s: KernelSummary, gpu: bool) -> Clocks:
  nvml = s.nvml
  if not gpu:
    return Clocks(absent="no GPU in this run: there were no timed launches to watch")
  if nvml is None:
    return Clocks(absent="no GPU readings: NVML was not sampled in this run")
  s = nvml.series or {}
  common = dict(summary=nvml.summary or "", throttled=bool(nvml.throttled),
                max_sm_clock_mhz=nvml.max_sm_clock_mhz, power_limit_w=nvml.power_limit_w)
  if not s.get("t_s"):
    return Clocks(**common, absent="this run kept NVML's summary only, not its readings over "
                                   "time (runs from before the series was recorded)")
  return Clocks(**common, t_s=tuple(s["t_s"]), sm_clock_mhz=tuple(s.get("sm_clock_mhz") or ()),
                power_w=tuple(s.get("power_w") or ()),
                slowdown=tuple(tuple(x) for x in s.get("slowdown") or ()))


def merged_view(runs: list[tuple[str, RunReport]], names: list[str]) -> RunView:
  """One page for the runs of several processes: every kernel of every process and device,
  and a table of the processes. `names` says which process each run is."""
  kernels, errors, notes, table = [], [], [], []
  files = [read_saved_kernels(run, run_dir) for run_dir, run in runs]   # before any view
  for (run_dir, run), name, saved in zip(runs, names, files, strict=True):
    origin = Origin.of(run.origin) or Origin()
    several = len(_profiles(run)) > 1
    kernels += [kernel_view(run, s, saved[s.label], several=several, process=name)
                for s in summaries(run)]
    errors += [error_view(e) for e in run.errors]
    notes += [f"{name}: {n}" for n in run.notes]
    table.append((name, origin.host or "?", "?" if origin.pid is None else str(origin.pid),
                  ", ".join(origin.devices) or run.platform.backend or "",
                  str(len(run.kernels)), str(run.exit_code), run_dir))
  first = runs[0][1]
  plat = first.platform
  return RunView(
      title=f"pallas-prof {os.path.basename(first.script or '?')}: "
            f"{len(runs)} processes",
      facts=(("script", os.path.basename(first.script or "?")),
             ("processes", str(len(runs))), ("jax", str(plat.jax)),
             ("triton", str(plat.triton))),
      message="", kernels=tuple(kernels), errors=tuple(errors), notes=tuple(notes),
      processes_header=("process", "host", "pid", "devices", "kernels", "exit code",
                        "run directory"),
      processes=tuple(table))
