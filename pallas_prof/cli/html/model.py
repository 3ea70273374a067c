"""What the HTML report shows, read out of a run's report.json and its kernel files.

Every key of report.json that the page uses is read here and nowhere else, so
moving the page onto a typed run report changes this module only. The views
are plain frozen dataclasses: the template and the charts take them as they are.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from .. import units
from .equations import equation_table, work_facts
from .listings import (Line, Listing, find_user_file, generated_listing,  # noqa: F401
                       stage_listings, user_listing)
from .advice import advice_view
from .probes import probes_view

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
  probes: Any = None                # probes.ProbesView with `--probes`
  gpu: bool = False                 # timed on a GPU (else: a CPU run, its static figures)
  equations: Any = None             # equations.EquationTable: the per-equation breakdown
  work: tuple[tuple[str, str], ...] = ()   # the work model, in words
  advice: Any = None                # advice.AdviceView: the panel beside the heated lines


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


def run_view(run: dict, run_dir: str | None, *, origin: dict | None = None) -> RunView:
  """The page's content for one run (report.json as a dict) saved in `run_dir`."""
  plat = run.get("platform") or {}
  profiles = run.get("profiles") or ([run["profile"]] if run.get("profile") else [])
  profiles = profiles or [{}]
  devices = ", ".join(sorted(set(plat.get("devices") or []))) or plat.get("backend", "")
  facts = [("script", os.path.basename(run.get("script") or "?")),
           ("exit code", str(run.get("exit_code"))),
           ("created", str(run.get("created", ""))),
           ("devices", devices),
           ("jax", str(plat.get("jax"))), ("triton", str(plat.get("triton"))),
           ("command", " ".join(run.get("command") or []))]
  kernels = []
  for k in run.get("kernels") or []:
    for prof in profiles:
      kernels.append(kernel_view(run, k, prof, run_dir, several=len(profiles) > 1,
                                 origin=origin))
  first = profiles[0]
  return RunView(
      title=f"pallas-prof {os.path.basename(run.get('script') or '?')}",
      facts=tuple((k, v) for k, v in facts if v and v != "None"),
      message=first.get("message") or "",
      kernels=tuple(kernels),
      errors=tuple(error_view(e) for e in run.get("errors") or []),
      notes=tuple((run.get("notes") or []) + (first.get("notes") or [])))


def error_view(err: dict) -> ErrorView:
  text = err.get("report") or ""
  if err.get("hint"):           # the page says it beside the report, in "what to do"
    text = text.split("\n\n  hint: ")[0]
  lines = tuple((line, line.lstrip().startswith(">>")) for line in text.splitlines())
  stage = err.get("stage")
  title = ("failed at run time" if stage == "run" else
           f"compile failed ({stage} stage)" if stage and stage != "lowering" else
           "lowering failed")
  return ErrorView(title=title, kernel=str(err.get("kernel") or "?"), reason=str(err.get("reason") or ""),
                   location=str(err.get("location") or ""), hint=str(err.get("hint") or ""),
                   report=lines)


def kernel_view(run: dict, k: dict, prof: dict, run_dir: str | None, *, several: bool,
                origin: dict | None = None) -> KernelView:
  p = {x.get("label"): x for x in prof.get("kernels") or []}.get(k["label"]) or {}
  static = p.get("static") or {}
  eqs = equation_weights(p)
  device = prof.get("device") or {}
  device_text = f"{device.get('index', '?')}: {device.get('name', '')}" if device else ""
  basis = _basis_words(p)
  anchor = "k-" + "".join(c if c.isalnum() else "-" for c in k["label"])
  if several or origin:
    anchor += f"-{device.get('index', 'x')}"
  if origin:
    anchor += "-p" + "".join(c if c.isalnum() else "-" for c in _origin_words(origin))
  return KernelView(
      label=k["label"], name=k.get("name", ""), anchor=anchor, device=device_text,
      process=_origin_words(origin), facts=_kernel_facts(k, p, prof),
      weight_basis=basis,
      user_source=user_listing(run, k, eqs),
      generated=generated_listing(run_dir, k, eqs),
      stages=stage_listings(run_dir, k, {e["index"]: e.get("weight") or 0.0 for e in eqs}),
      roofline=_roofline(p, prof), waterfall=_waterfall(k, bool(prof.get("gpu_present"))), clocks=_clocks(p, prof),
      waterfall_note=_waterfall_note(k),
      verdict=_verdict(p), probes=probes_view(p.get("probes")),
      gpu=bool(prof.get("gpu_present")),
      equations=equation_table(p, eqs, lambda path: find_user_file(run, path)),
      work=work_facts(p), advice=advice_view(run, k["label"]))


def _verdict(p: dict) -> str:
  """The kernel's verdict, less its heaviest equations: the page's table lists them (a
  static verdict says nothing else)."""
  verdict = re.split(r"\bheaviest equations\b", p.get("verdict") or "")[0].rstrip("; ")
  return "" if verdict == "static only" else verdict


def _origin_words(origin: dict | None) -> str:
  if not origin:
    return ""
  if origin.get("name"):
    return str(origin["name"])
  parts = [origin.get("host.name"), f"pid {origin['process.pid']}" if origin.get("process.pid")
           else None]
  if origin.get("jax.process_index") is not None:
    parts.append(f"process {origin['jax.process_index']}/{origin.get('jax.process_count', '?')}")
  return " ".join(str(x) for x in parts if x)


def _basis_words(p: dict) -> str:
  attribution = p.get("attribution") or {}
  if attribution.get("basis") and attribution["basis"] != "static":
    return (f"measured ({attribution['basis']}): "
            + (attribution.get("description") or "each line's share of the kernel's samples"))
  basis = (p.get("static") or {}).get("weight_basis")
  if not basis:
    return "no weights: this run recorded no per-equation profile"
  if basis in ("ptx", "sass"):
    return (f"static: each line's share of the kernel's {basis.upper()} instructions "
            "(counted, not timed)")
  return f"{basis}: each line's share of the kernel's measured samples"


def equation_weights(p: dict) -> list[dict]:
  """The kernel's equations with the weights shown: the profiler's measured attribution
  where it has one (PC sampling, ncu: weights and stall reasons), else the static share of
  instructions. Each: index, primitive, user_file, user_line, weight, stall."""
  static = [dict(e) for e in (p.get("static") or {}).get("equations") or []]
  attribution = p.get("attribution") or {}
  if not attribution.get("equations") or attribution.get("basis") == "static":
    return static
  measured = {e["index"]: e for e in attribution["equations"]}
  by_index = {e["index"]: e for e in static}
  out = []
  for index in sorted(set(by_index) | set(measured)):
    e = dict(by_index.get(index) or {})
    m = measured.get(index) or {}
    for key in ("index", "primitive", "user_file", "user_line"):
      if e.get(key) is None and m.get(key) is not None:
        e[key] = m[key]
    e["weight"] = m.get("weight", 0.0)
    e["stall_shares"] = m.get("stalls") or []
    e["time_s"] = m.get("time_s")
    out.append(e)
  return out


def _fmt(x, unit="", digits=1) -> str:
  if x is None:
    return "-"
  return f"{x:.{digits}f}{unit}"


def _rate(value, unit) -> str:
  if not value:
    return "-"
  for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if value >= scale:
      return f"{value / scale:.1f} {prefix}{unit}"
  return f"{value:.0f} {unit}"


def _kernel_facts(k: dict, p: dict, prof: dict) -> tuple[tuple[str, str], ...]:
  res = k.get("resources") or {}
  comp = k.get("compile") or {}
  facts = [("grid", "x".join(map(str, k.get("grid") or [])) or "()"),
           ("warps / stages", f"{k.get('num_warps')} / {k.get('num_stages')}"),
           ("operands", ", ".join(k.get("in_avals") or []) + " -> "
            + ", ".join(k.get("out_avals") or []) if k.get("in_avals") or k.get("out_avals")
            else ""),
           ("registers", str(res.get("registers", "-"))),
           ("shared memory", units.size(res.get("shared_bytes"))),
           ("spills", str((res.get("spill_stores") or 0) + (res.get("spill_loads") or 0))
            if res else "-"),
           ("lowering", _fmt(k.get("lowering_ms"), " ms")),
           ("compile", f"cached ({comp['cache']})" if comp.get("cache") in ("memory", "disk")
            else _fmt(comp.get("total_ms"), " ms"))]
  rt = p.get("runtime") or {}
  if rt.get("median_s") is not None:
    facts.append((f"{rt.get('mode', 'sustained')} median",
                  f"{rt['median_s'] * 1e6:.2f} µs [{(rt.get('p10_s') or 0) * 1e6:.2f}-"
                  f"{(rt.get('p90_s') or 0) * 1e6:.2f}]"))
    sustained = rt.get("sustained") or {}
    if sustained.get("median_s") is not None:
      facts.append(("sustained median", f"{sustained['median_s'] * 1e6:.2f} µs"))
  rates = p.get("rates") or {}
  if rates.get("bytes_per_s"):
    facts.append(("achieved", " ".join(x for x in (
        _rate(rates.get("bytes_per_s"), "B/s"), _rate(rates.get("flops_per_s"), "FLOP/s"))
        if x != "-")))
  if not prof.get("gpu_present"):
    facts.append(("launches (CPU interpreter)", str(k.get("cpu_launches", 0))))
  for note in k.get("workarounds") or ():
    facts.append(("Triton workaround", note))
  return tuple((what, value) for what, value in facts if value)


# --- charts' data ------------------------------------------------------------------------

def _roofline(p: dict, prof: dict) -> Roofline:
  work = p.get("work") or {}
  rates = p.get("rates") or {}
  ceil = prof.get("ceilings") or {}
  intensity = rates.get("arithmetic_intensity")
  if intensity is None and work.get("bytes"):
    intensity = (work.get("flops") or 0) / work["bytes"]
  if not prof.get("gpu_present"):
    return Roofline(intensity=intensity, absent="no roofline: nothing was timed on a GPU in "
                    "this run (CPU: Triton's interpreter), so there is no achieved rate and "
                    "no measured ceiling to draw.")
  if not rates.get("bytes_per_s") and not rates.get("flops_per_s"):
    return Roofline(intensity=intensity, absent="no roofline: the kernel was not timed "
                    "(see the notes) or its work model has no bytes")
  if not ceil.get("copy_bytes_per_s") and not ceil.get("matrix_flops_per_s"):
    return Roofline(intensity=intensity, flops_per_s=rates.get("flops_per_s"),
                    bytes_per_s=rates.get("bytes_per_s"),
                    absent="no roofline: the GPU's ceilings were not measured in this run")
  return Roofline(
      intensity=intensity, flops_per_s=rates.get("flops_per_s"),
      bytes_per_s=rates.get("bytes_per_s"), copy_bytes_per_s=ceil.get("copy_bytes_per_s"),
      matrix_flops_per_s=tuple(sorted((ceil.get("matrix_flops_per_s") or {}).items(),
                                      key=lambda kv: -kv[1])),
      verdict=rates.get("verdict") or "")


def _waterfall(k: dict, gpu: bool = True) -> tuple[tuple[str, float], ...]:
  comp = k.get("compile") or {}
  out = [("lowering", k.get("lowering_ms") or 0.0)]
  # on a CPU the program compiled nothing: pallas-prof compiled for sm_90 after the
  # script, and the worker it started then is no part of the kernel's compile
  if comp.get("worker_wait_ms") and gpu:
    out.append(("worker wait", comp["worker_wait_ms"]))
  stages = comp.get("stages_ms") or {}
  out += [(s, stages[s]) for s in COMPILE_STAGES if s in stages]
  out += [(s, v) for s, v in stages.items() if s not in COMPILE_STAGES]
  return tuple((name, float(ms)) for name, ms in out if ms is not None)


def _waterfall_note(k: dict) -> str:
  cache = (k.get("compile") or {}).get("cache")
  if cache in ("memory", "disk"):
    return (f"this run took the kernel from the {cache} cache: the stages are those of the "
            "compile that filled it")
  return ""


def _clocks(p: dict, prof: dict) -> Clocks:
  nvml: dict[str, Any] = p.get("nvml") or {}
  if not prof.get("gpu_present"):
    return Clocks(absent="no GPU in this run: there were no timed launches to watch")
  if not nvml:
    return Clocks(absent="no GPU readings: NVML was not sampled in this run")
  s = nvml.get("series") or {}
  common = dict(summary=nvml.get("summary") or "", throttled=bool(nvml.get("throttled")),
                max_sm_clock_mhz=nvml.get("max_sm_clock_mhz"),
                power_limit_w=nvml.get("power_limit_w"))
  if not s.get("t_s"):
    return Clocks(**common, absent="this run kept NVML's summary only, not its readings over "
                                   "time (runs from before the series was recorded)")
  return Clocks(**common, t_s=tuple(s["t_s"]), sm_clock_mhz=tuple(s.get("sm_clock_mhz") or ()),
                power_w=tuple(s.get("power_w") or ()),
                slowdown=tuple(tuple(x) for x in s.get("slowdown") or ()))


def merged_view(runs: list[tuple[str, dict]], names: list[str]) -> RunView:
  """One page for the runs of several processes: every kernel of every process and device,
  and a table of the processes. `names` says which process each run is."""
  kernels, errors, notes, table = [], [], [], []
  for (run_dir, run), name in zip(runs, names):
    origin = dict(run.get("origin") or {})
    origin.setdefault("name", name)
    profiles = run.get("profiles") or ([run["profile"]] if run.get("profile") else [{}])
    for k in run.get("kernels") or []:
      for prof in profiles:
        kernels.append(kernel_view(run, k, prof, run_dir, several=len(profiles) > 1,
                                   origin=origin))
    errors += [error_view(e) for e in run.get("errors") or []]
    notes += [f"{name}: {n}" for n in (run.get("notes") or [])]
    plat = run.get("platform") or {}
    table.append((name, str(origin.get("host.name", "?")), str(origin.get("process.pid", "?")),
                  ", ".join(origin.get("devices") or []) or plat.get("backend", ""),
                  str(len(run.get("kernels") or [])), str(run.get("exit_code")), run_dir))
  first = runs[0][1]
  plat = first.get("platform") or {}
  return RunView(
      title=f"pallas-prof {os.path.basename(first.get('script') or '?')}: "
            f"{len(runs)} processes",
      facts=(("script", os.path.basename(first.get("script") or "?")),
             ("processes", str(len(runs))), ("jax", str(plat.get("jax"))),
             ("triton", str(plat.get("triton")))),
      message="", kernels=tuple(kernels), errors=tuple(errors), notes=tuple(notes),
      processes_header=("process", "host", "pid", "devices", "kernels", "exit code",
                        "run directory"),
      processes=tuple(table))
