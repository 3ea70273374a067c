"""The run report: what `pallas-prof run` found, as frozen dataclasses.

    RunReport                      report.json of a run directory (schema SCHEMA)
      kernels   (KernelEntry)      each kernel lowered: grid, compile, resources, files
      errors    (ErrorEntry)       lowering errors, each with its annotated text
      profiles  (ProfileReport)    the profiler's report, one per device profiled
                                   (pallas_prof.profiler.schema: its classes as they are)
      advice    (KernelAdvice)     per kernel: diagnoses with evidence, ranked actions,
                                   measured or estimated savings (pallas_prof.advice.schema)
      traces    Traces             the trace files the run wrote

`RunReport.save(dir)` is the one writer of report.json, `RunReport.load(dir)`
its reader; `to_dict`/`from_dict` are inverse (tested both ways). Both go
through pallas_prof/serial.py, the one serialiser: reading is by field name,
led by the dataclasses' type hints, so a field the profiler adds (measured
weights, stall reasons, ...) is read back without a change here, a field an
older report lacks gets its default, and a key this version does not know is
left out. A report of another schema is refused with a message naming both
schemas.

A RunReport renders itself: `console.print(report)` (rich's
`__rich_console__` protocol; see render.py for the tables).
"""
from __future__ import annotations

import dataclasses
import json
import os
import typing
from typing import Any

from ..advice.schema import KernelAdvice
from ..backend.equation_text import Aval
from ..profiler import presentation
from ..profiler.schema import ProfileReport
from ..safe_files import write_atomic
from ..serial import Misfit, Record, decode, from_fields, plain, to_json  # noqa: F401 (their home)
from .. import units
from .kernel_failures import by_kernel, of
from ..run_layout import REPORT
from .saved_runs import figures as run_figures, files as run_files

SCHEMA = "pallas-prof/run/1"
FILE = REPORT           # (run_layout's name; this module's readers call it FILE)
# schemas this version reads; run/1 has been the only one (its trace file was
# named trace.otlp.json until the .jsonl rename: "traces" says which)
READABLE_SCHEMAS = (SCHEMA,)


BOUNDS_CHECKED = ("bounds-checked run (PALLAS_PROF_CHECK=bounds or "
                  "install(check_bounds=True)): every load and store of {which} was checked, "
                  "so the timings, registers and instructions here are the checked build's, "
                  "not the kernel's; run without it to measure the kernel")


class ReportError(run_files.SavedRunError):
  """A report that cannot be read; the message says what to do (an ordinary exception:
  cli/main.py turns it into the command's end)."""


# --- the report ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Platform(Record):
  jax: str | None = None
  triton: str | None = None
  pallas_prof: str | None = None
  python: str | None = None
  backend: str | None = None
  devices: tuple[str, ...] = ()

  def describe(self) -> str:
    where = ", ".join(sorted(set(self.devices))) or self.backend or ""
    return f"jax {self.jax}  triton {self.triton}  {where}"


@dataclasses.dataclass(frozen=True)
class CompileInfo(Record):
  target: str | None = None                   # "cuda:90"
  cache: str | None = None                    # "miss", "memory", "disk"
  total_ms: float | None = None
  stages_ms: dict[str, float] = dataclasses.field(default_factory=dict)
  worker_wait_ms: float | None = None         # waited for the compile worker before it began


@dataclasses.dataclass(frozen=True)
class KernelEntry(Record):
  REQUIRED: typing.ClassVar[tuple[str, ...]] = ("label", "name")
  label: str
  name: str
  source_info: str | None = None              # the user's file:line of the pallas_call
  platform: str | None = None                 # where the program ran it: "gpu", "cpu"
  grid: tuple[int, ...] = ()
  launch_grid: tuple[int, ...] = ()
  num_warps: int | None = None
  num_stages: int | None = None
  in_avals: tuple[Aval, ...] = ()              # the call's operands (report.json: their text)
  out_avals: tuple[Aval, ...] = ()
  lowering_ms: float | None = None
  equations: int | None = None
  lowering_gc_ms: float | None = None         # of lowering_ms: Python's garbage collector
  cpu_launches: int | None = None             # launches by Triton's interpreter
  files: dict[str, str] = dataclasses.field(default_factory=dict)   # what -> path in the run dir
  compile: CompileInfo | None = None
  resources: dict[str, Any] | None = None     # CompiledKernel.resources()
  # lowering's warnings, e.g. outputs with elements the grid never writes, accesses
  # CompilerParams(tma=True) asked to move through TMA that stay plain (and why)
  warnings: tuple[str, ...] = ()
  # what was lowered otherwise because Triton failed on the plain lowering
  workarounds: tuple[str, ...] = ()
  # how the kernel failed (to compile, at run time), where it did: it then has no advice
  failed: str | None = None
  # built with a check of every access (PALLAS_PROF_CHECK=bounds): its figures are the
  # checked build's
  bounds_checked: bool = False

  @property
  def spills(self) -> int | None:
    return units.spills(self.resources)


@dataclasses.dataclass(frozen=True)
class ErrorEntry(Record):
  kernel: str | None = None
  primitive: str | None = None
  location: str | None = None                 # the user's file:line
  reason: str | None = None
  hint: str | None = None
  stage: str | None = None                    # "lowering" or a compile stage
  report: str | None = None                   # the annotated error, as plain text
  # a compile's failure read (backend/compiling/failures/compile_diagnostics.py): failing pass, assertion,
  # op and layout, equations, fault (triton | kernel | pallas-prof), reproducer, workaround
  compile_failure: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Traces(Record):
  otlp_json: str | None = None                # OTLP-JSON lines, relative to the run directory
  perfetto: str | None = None                 # Chrome trace events (ui.perfetto.dev)

  def files(self) -> tuple[str, ...]:
    return tuple(f for f in (self.otlp_json, self.perfetto) if f)


@dataclasses.dataclass(frozen=True)
class RunReport(Record):
  script: str | None = None
  exit_code: int | None = None
  command: tuple[str, ...] = ()
  created: str | None = None                  # local time, ISO 8601
  script_seconds: float | None = None
  platform: Platform = dataclasses.field(default_factory=Platform)
  kernels: tuple[KernelEntry, ...] = ()
  errors: tuple[ErrorEntry, ...] = ()
  notes: tuple[str, ...] = ()
  profiles: tuple[ProfileReport, ...] = ()    # one per device profiled
  traces: Traces = dataclasses.field(default_factory=Traces)
  # where it ran: host.name, process.pid, jax.process_index/count, devices (processes.py)
  origin: dict[str, Any] = dataclasses.field(default_factory=dict)
  advice: tuple[KernelAdvice, ...] = ()       # per kernel (pallas_prof/advice)
  schema: str = SCHEMA

  def kernel_advice(self, label: str) -> KernelAdvice | None:
    return next((a for a in self.advice if a.label == label), None)

  def bounds_checked_line(self) -> str | None:
    """Says that kernels ran bounds-checked, and which, where any did."""
    checked = [k.label for k in self.kernels if k.bounds_checked]
    if not checked:
      return None
    which = ("the kernels" if len(checked) == len(self.kernels) else
             "kernel" + "s" * (len(checked) > 1) + " " + ", ".join(checked))
    return BOUNDS_CHECKED.format(which=which)

  def kernel_failure(self, kernel: KernelEntry) -> str | None:
    """How `kernel` failed, in words (a report written before `failed`: from its errors)."""
    return kernel.failed or of(kernel, by_kernel(self.errors))

  @property
  def profile(self) -> ProfileReport | None:
    """The first device's profile (the only one unless --device listed several)."""
    return self.profiles[0] if self.profiles else None

  def kernel_profile(self, label: str, profile: ProfileReport | None = None):
    profile = profile if profile is not None else self.profile
    for k in (profile.kernels if profile is not None else ()):
      if k.label == label:
        return k
    return None

  # report.json ------------------------------------------------------------------------
  def to_dict(self) -> dict[str, Any]:
    out = super().to_dict()
    # "profile" (the first device's) is what readers before "profiles" look at
    out["profile"] = out["profiles"][0] if out["profiles"] else None
    return out

  @classmethod
  def from_dict(cls, data: dict) -> "RunReport":
    schema = data.get("schema")
    if schema not in READABLE_SCHEMAS:
      raise ReportError(f"pallas-prof: this is a report of schema {schema!r}; this version "
                        f"of pallas-prof reads {', '.join(READABLE_SCHEMAS)}")
    data = dict(data)
    if data.get("profile"):
      # "profile" is the first device's, as readers before "profiles" took it
      data["profiles"] = [data["profile"], *(data.get("profiles") or [])[1:]]
    return from_fields(cls, data)

  def to_json(self, **kwargs) -> str:
    return to_json(self, **kwargs)

  @classmethod
  def from_json(cls, text: str) -> "RunReport":
    return cls.from_dict(json.loads(text))

  def save(self, run_dir: str) -> str:
    """Writes report.json whole or not at all (a temp file renamed over it): a reader
    finds the old report or the new one, never a part of one; OSError if it cannot."""
    return write_atomic(os.path.join(run_dir, FILE), self.to_json(indent=1), mode=0o644)

  @classmethod
  def load(cls, run_dir: str) -> "RunReport":
    """report.json of `run_dir` (or the .json file named), read through saved_runs/files.py
    (a regular file of bounded size, no link out), decoded by type, and the files it
    names checked to be the run's own; ReportError (or RunFileError) says what is wrong."""
    if run_dir.endswith(".json"):
      run_dir, name = os.path.dirname(run_dir) or ".", os.path.basename(run_dir)
    else:
      name = FILE
    path = os.path.join(run_dir, name)
    if not os.path.lexists(path):
      raise ReportError(f"pallas-prof: no {FILE} in {run_dir!r}; give the directory a "
                        "`pallas-prof run` wrote (its last line names it)")
    text = run_files.read_text(run_dir, name)
    try:
      data = json.loads(text)
    except (ValueError, RecursionError) as e:
      raise ReportError(f"pallas-prof: {path} is not JSON ({e}); it was cut short or "
                        "damaged: write the run again with `pallas-prof run`") from None
    if not isinstance(data, dict) or "schema" not in data:
      raise ReportError(f"pallas-prof: {path} is not a pallas-prof run report (no schema); "
                        "give the directory a `pallas-prof run` wrote, or write the run again")
    try:
      report = cls.from_dict(data)
    except ReportError as e:
      raise ReportError(f"{e} ({path})") from None
    except Misfit as e:
      raise ReportError(f"pallas-prof: {path} is damaged: "
                        f"{e.describe().replace('report.', '', 1)}; write the run again "
                        "with `pallas-prof run`") from None
    damaged = run_figures.damage(report)
    if damaged is not None:
      raise ReportError(f"pallas-prof: {path} is damaged: {damaged}; a run writes no such "
                        "figure, so it is not compared: write the run again with "
                        "`pallas-prof run`")
    outside = report.foreign_path()
    if outside is not None:
      raise ReportError(f"pallas-prof: {path} is damaged: {outside[0]} names {outside[1]!r}, "
                        "not a file inside the run directory; write the run again with "
                        "`pallas-prof run`")
    # not a field (report.json does not hold it): where its kernels' files are, for the
    # page a notebook shows of it (notebook.py)
    object.__setattr__(report, "loaded_from", run_dir)
    return report

  def foreign_path(self) -> tuple[str, str] | None:
    """(field, path) of the first file the report names that is not a relative path
    inside its run directory (absolute, or leading out through `..`); None if none is."""
    named = [(f"kernels[{i}].files.{what}", rel) for i, k in enumerate(self.kernels)
             for what, rel in k.files.items()]
    named += [(f"traces.{what}", rel) for what, rel in (("otlp_json", self.traces.otlp_json),
                                                        ("perfetto", self.traces.perfetto))
              if rel is not None]
    for field, rel in named:
      parts = os.path.normpath(rel).split(os.sep) if isinstance(rel, str) else [".."]
      if not rel or os.path.isabs(rel) or "\0" in rel or parts[0] == "..":
        return field, rel
    return None

  # rendering (render.py) ----------------------------------------------------------------
  def __rich_console__(self, console, options):
    # lazy: at the top it would load numpy, rich whenever this module is imported
    from .terminal.render import render_report
    yield from render_report(self, console, options)

  # in Jupyter and IPython, as JAX arrays show themselves (no %load_ext needed): the page
  # of report.html in a notebook, the tables `pallas-prof run` prints at a terminal prompt
  # (through the view pallas_prof/__init__.py installs, profiler/presentation.py: the page's
  # renderer reads this module, so this module cannot import it back)
  def _repr_html_(self) -> str:
    return presentation.view().run_html(self)

  def _repr_pretty_(self, printer, cycle) -> None:
    printer.text(presentation.view().run_text(self))
