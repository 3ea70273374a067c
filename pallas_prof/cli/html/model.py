"""What the HTML report shows, read out of a run's report.json and its kernel files.

Every key of report.json that the page uses is read here and nowhere else, so
moving the page onto a typed run report changes this module only. The views
are plain frozen dataclasses: the template and the charts take them as they are.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from .advice import advice_view
from .probes import probes_view

# the stages in the order Triton runs them (a waterfall draws them one after another)
COMPILE_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")


@dataclasses.dataclass(frozen=True)
class Line:
  """One line of a listing with the weight of what it lowered to."""
  number: int
  text: str
  weight: float | None = None       # share of the kernel's instructions (or samples)
  eqns: tuple[int, ...] = ()        # equations behind the line
  note: str = ""                    # "[4] exp @ softmax.py:21", the primitives, a stall reason
  stall: str = ""                   # the top stall reason, when the profile measured one


@dataclasses.dataclass(frozen=True)
class Listing:
  title: str
  lines: tuple[Line, ...]
  missing: str = ""                 # why there is no listing (no cubin, no nvdisasm, old run)


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
  advice: Any = None                # advice.AdviceView: the panel beside the heated lines


@dataclasses.dataclass(frozen=True)
class ErrorView:
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
  lines = tuple((line, line.lstrip().startswith(">>")) for line in text.splitlines())
  return ErrorView(kernel=str(err.get("kernel") or "?"), reason=str(err.get("reason") or ""),
                   location=str(err.get("location") or ""), hint=str(err.get("hint") or ""),
                   report=lines)


def kernel_view(run: dict, k: dict, prof: dict, run_dir: str | None, *, several: bool,
                origin: dict | None = None) -> KernelView:
  p = {x.get("label"): x for x in prof.get("kernels") or []}.get(k["label"]) or {}
  static = p.get("static") or {}
  eqs = equation_weights(p)
  device = prof.get("device") or {}
  device_text = f"{device.get('index', '?')}: {device.get('name', '')}" if device else ""
  meta = _kernel_meta(run_dir, k)
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
      user_source=_user_listing(run, k, eqs),
      generated=_generated_listing(run_dir, k, meta, eqs),
      stages=_stage_listings(run_dir, k, {e["index"]: e.get("weight") or 0.0 for e in eqs}),
      roofline=_roofline(p, prof), waterfall=_waterfall(k), clocks=_clocks(p, prof),
      waterfall_note=_waterfall_note(k),
      verdict=p.get("verdict") or "", probes=probes_view(p.get("probes")),
      advice=advice_view(run, k["label"]))


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
           ("shared memory", f"{res['shared_bytes']} B" if res.get("shared_bytes") is not None
            else "-"),
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


# --- listings ---------------------------------------------------------------------------

def _kernel_dir(run_dir: str | None, k: dict) -> str | None:
  rel = (k.get("files") or {}).get("kernel")
  if run_dir is None or not rel:
    return None
  d = os.path.join(run_dir, os.path.dirname(rel))
  return d if os.path.isdir(d) else None


def _kernel_meta(run_dir: str | None, k: dict) -> dict:
  d = _kernel_dir(run_dir, k)
  if d is None:
    return {}
  try:
    with open(os.path.join(d, "kernel.json")) as f:
      return json.load(f)
  except (OSError, ValueError):
    return {}


def stall_of(e: dict) -> str:
  """The equation's top stall reason in words, when the profile measured stalls."""
  shares = e.get("stall_shares") or []
  if shares:
    top = max(shares, key=lambda x: x.get("samples") or 0)
    return str(top.get("words") or top.get("reason") or "") if top.get("samples") else ""
  return ""


def find_user_file(run: dict, path: str | None) -> str | None:
  """The user's file as the run saw it: absolute, or relative to the directory the run
  started in, which is not recorded: try the script's directory and its parents, then here."""
  if not path:
    return None
  if os.path.isabs(path):
    return path if os.path.isfile(path) else None
  script_dir = os.path.dirname(run.get("script") or "")
  candidates = []
  d = script_dir
  while d and d != os.path.dirname(d):
    candidates.append(os.path.join(d, path))
    d = os.path.dirname(d)
  candidates.append(os.path.abspath(path))
  for c in candidates:
    if os.path.isfile(c):
      return c
  return None


def _user_listing(run: dict, k: dict, eqs: list[dict]) -> Listing:
  """The kernel's function in the user's file, each line heated by its equations."""
  info = k.get("source_info") or ""            # "softmax_kernel at examples/softmax.py:18"
  where = info.rsplit(" at ", 1)[-1] if " at " in info else ""
  file_part, _, def_line = where.rpartition(":")
  files = {e.get("user_file") for e in eqs if e.get("user_file")} or {file_part or None}
  main_file = file_part if file_part in files or not eqs else sorted(f for f in files if f)[0]
  path = find_user_file(run, main_file)
  title = f"your kernel: {main_file or '?'}"
  if path is None:
    return Listing(title, (), missing=f"the source file {main_file!r} is not on this machine "
                                      "(the weights per equation are in the generated source)")
  with open(path, errors="replace") as f:
    text = f.read().splitlines()
  by_line: dict[int, list[dict]] = {}
  for e in eqs:
    if e.get("user_file") == main_file and e.get("user_line"):
      by_line.setdefault(e["user_line"], []).append(e)
  start = int(def_line) if def_line.isdigit() else min(by_line, default=1)
  end = _block_end(text, start)
  if by_line:
    start, end = min(start, min(by_line)), max(end, max(by_line))
  lines = []
  for n in range(max(1, start), min(len(text), end) + 1):
    mine = by_line.get(n, [])
    weight = sum(e.get("weight") or 0.0 for e in mine) if mine else None
    stalls = [stall_of(e) for e in sorted(mine, key=lambda e: -(e.get("weight") or 0))]
    lines.append(Line(n, text[n - 1], weight, tuple(e["index"] for e in mine),
                      ", ".join(f"[{e['index']}] {e['primitive']}" for e in mine),
                      next((s for s in stalls if s), "")))
  return Listing(title, tuple(lines))


def _block_end(text: list[str], start: int) -> int:
  """The last line of the function that starts at `start` (decorators above it aside)."""
  if not 1 <= start <= len(text):
    return start
  indent = len(text[start - 1]) - len(text[start - 1].lstrip())
  end = start
  for n in range(start + 1, len(text) + 1):
    line = text[n - 1]
    if not line.strip():
      continue
    if len(line) - len(line.lstrip()) <= indent:
      break
    end = n
  return end


def _generated_listing(run_dir: str | None, k: dict, meta: dict, eqs: list[dict]) -> Listing:
  d = _kernel_dir(run_dir, k)
  title = "generated Triton source"
  if d is None or not os.path.exists(os.path.join(d, "source.py")):
    return Listing(title, (), missing="this run directory holds no generated source "
                                      "(kernels/ was not saved with it)")
  with open(os.path.join(d, "source.py"), errors="replace") as f:
    text = f.read().splitlines()
  line_map = {int(n): i for n, i in (meta.get("line_map") or {}).items()}
  by_index = {e["index"]: e for e in eqs}
  lines = []
  for n, t in enumerate(text, start=1):
    i = line_map.get(n)
    e = by_index.get(i) if i is not None else None
    code, _, _ = t.partition("  # [") if i is not None else (t, "", "")
    lines.append(Line(n, code.rstrip() if i is not None else t,
                      (e.get("weight") or 0.0) if e else None, (i,) if i is not None else (),
                      f"[{e['index']}] {e['primitive']}" if e else "",
                      stall_of(e) if e else ""))
  return Listing(title, tuple(lines))


def _stage_listings(run_dir: str | None, k: dict,
                    weights: dict[int, float]) -> tuple[Listing, ...]:
  """PTX and SASS, each instruction heated by its equation (the profiler's correlation)."""
  d = _kernel_dir(run_dir, k)
  if d is None or not os.path.exists(os.path.join(d, "kernel.ptx")):
    why = "this run directory holds no compiled stages"
    return (Listing("PTX", (), missing=why), Listing("SASS", (), missing=why))
  from ...profiler.correlate import annotated_listing   # nvdisasm for SASS: only when asked
  from ..artifacts import load_kernel
  try:
    _, ck = load_kernel(d)
  except (OSError, ValueError, KeyError, TypeError) as e:
    why = f"the saved kernel does not load: {type(e).__name__}: {e}"
    return (Listing("PTX", (), missing=why), Listing("SASS", (), missing=why))
  out = []
  for stage in ("ptx", "sass"):
    try:
      annotated = annotated_listing(ck, stage)
    except Exception as e:  # noqa: BLE001 - no nvdisasm, no cubin: the page says why
      out.append(Listing(stage.upper(), (), missing=f"{type(e).__name__}: {e}"))
      continue
    out.append(Listing(stage.upper(), tuple(
        Line(a.number, a.text,
             weights.get(a.eqn, a.weight) if a.is_instruction and a.eqn is not None
             else (a.weight if a.is_instruction else None),
             (a.eqn,) if a.eqn is not None else (),
             f"[{a.eqn}] {a.primitive}" if a.eqn is not None and a.is_instruction else "")
        for a in annotated)))
  return tuple(out)


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


def _waterfall(k: dict) -> tuple[tuple[str, float], ...]:
  comp = k.get("compile") or {}
  out = [("lowering", k.get("lowering_ms") or 0.0)]
  if comp.get("worker_wait_ms"):
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
