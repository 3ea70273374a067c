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
its reader; `to_dict`/`from_dict` are inverse (tested both ways). Reading is by
field name, led by the dataclasses' type hints: a field the profiler adds
(measured weights, stall reasons, ...) is read back without a change here, a
field an older report lacks gets its default (None where there is none), and
a key this version does not know is left out. A report of another schema is
refused with a message naming both schemas.

A RunReport renders itself: `console.print(report)` (rich's
`__rich_console__` protocol; see render.py for the tables).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import types
import typing
from typing import Any

from ..advice.schema import KernelAdvice
from ..profiler.schema import HEADLINE, ProfileReport, RuntimeStats

SCHEMA = "pallas-prof/run/1"
FILE = "report.json"
# schemas this version reads; run/1 has been the only one (its trace file was
# named trace.otlp.json until the .jsonl rename: "traces" says which)
READABLE_SCHEMAS = (SCHEMA,)


class ReportError(SystemExit):
  """A report that cannot be read; the message says what to do."""


# --- decoding by type hints ------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
  return typing.get_type_hints(cls)


class _Misfit(ValueError):
  """A value of report.json that is not of its field's type (decode says where)."""


def decode(tp, value, where: str = "report"):
  """`value` (as json.load gives it) as an instance of the type `tp`; a value of another
  kind (a list where a record belongs, a string for a number) raises _Misfit naming
  `where`, so that a damaged report is refused instead of printed as garbage."""
  if value is None:
    return None
  origin = typing.get_origin(tp)
  if origin in (typing.Union, types.UnionType):
    options = [a for a in typing.get_args(tp) if a is not type(None)]
    for option in options:
      if _fits(option, value):
        return decode(option, value, where)
    raise _Misfit(where, options[0] if options else tp, value)
  if not _fits(tp, value):
    raise _Misfit(where, tp, value)
  if dataclasses.is_dataclass(tp) and isinstance(tp, type):
    return from_fields(tp, value, where)
  if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
    args = typing.get_args(tp)
    item = args[0] if args else Any
    items = [decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if origin is tuple or tp is tuple else items
  if origin is dict or tp is dict:
    args = typing.get_args(tp)
    key_type, value_type = args if args else (Any, Any)
    return {_key(key_type, k): decode(value_type, v, f"{where}.{k}") for k, v in value.items()}
  if tp is float and isinstance(value, int):
    return float(value)
  return value


def _fits(tp, value) -> bool:
  origin = typing.get_origin(tp) or tp
  if tp is Any or origin in (typing.Union, types.UnionType):
    return True
  if dataclasses.is_dataclass(tp) or origin is dict:
    return isinstance(value, dict)
  if origin in (list, tuple, typing.Sequence):
    return isinstance(value, list)
  if tp is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if isinstance(origin, type):
    return isinstance(value, origin)
  return True


def _kind(value) -> str:
  if value is None:
    return "missing"
  return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
          int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _wanted(tp) -> str:
  origin = typing.get_origin(tp) or tp
  if dataclasses.is_dataclass(tp) or origin is dict:
    return "an object"
  if origin in (list, tuple, typing.Sequence):
    return "a list"
  return {str: "a string", int: "a whole number", float: "a number",
          bool: "true/false"}.get(tp, str(tp))


def _key(tp, key):
  # JSON object keys are strings: dict[int, ...] comes back with int keys
  if tp is int:
    try:
      return int(key)
    except ValueError:
      return key
  return key


def _runtime_stats(data: dict) -> dict:
  """RuntimeStats as older reports wrote them: the headline figures flat (median_s, ...)
  with no TimingStats of their mode, and before the cold mode no "mode" at all (those
  timings were back-to-back: sustained). Reports since hold both; the flat keys repeat
  the headline's."""
  data = dict(data)
  mode = data.get("mode") or "sustained"
  data["mode"] = mode
  if data.get(mode) is None:
    data[mode] = {"mode": mode, **{k: data.get(k) for k in HEADLINE}}
  return data


# older layouts of a type, brought up to its fields before decoding
_UPGRADES = {RuntimeStats: _runtime_stats}


def from_fields(cls, data: dict, where: str = "report"):
  """An instance of the dataclass `cls` from a dict: known fields only, defaults for missing."""
  upgrade = _UPGRADES.get(cls)
  if upgrade is not None:
    data = upgrade(data)
  hints = _hints(cls)
  for name in getattr(cls, "REQUIRED", ()):
    if data.get(name) is None:          # what every view keys on: nothing to show without it
      raise _Misfit(f"{where}.{name}", hints[name], None)
  kwargs = {}
  for f in dataclasses.fields(cls):
    if f.name in data:
      kwargs[f.name] = decode(hints[f.name], data[f.name], f"{where}.{f.name}")
    elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
      kwargs[f.name] = _empty(hints[f.name])     # an older report without this field
  return cls(**kwargs)


def _empty(tp):
  """What a field without a default holds when a report lacks it: an empty collection, or None."""
  origin = typing.get_origin(tp) or tp
  return {list: [], dict: {}, tuple: ()}.get(origin) if isinstance(origin, type) else None


def plain(x):
  """Dataclasses, tuples and numbers as json.dump writes them. A class's own to_dict is
  called at any depth (RuntimeStats writes its headline figures flat; the profiler's
  ProfileReport.to_dict, through dataclasses.asdict, would leave them out when nested)."""
  if dataclasses.is_dataclass(x) and not isinstance(x, type):
    own = getattr(type(x), "to_dict", None)
    if own is not None and own.__qualname__ == f"{type(x).__qualname__}.to_dict":
      return x.to_dict()
    return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
  if isinstance(x, dict):
    return {str(k): plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [plain(v) for v in x]
  if isinstance(x, float) and x != x:
    return None
  if hasattr(x, "item") and callable(x.item):      # numpy scalars
    return x.item()
  return x


def _json_default(x):
  if hasattr(x, "item") and callable(x.item):      # numpy scalars
    return x.item()
  return str(x)


class _Record:
  def to_dict(self) -> dict[str, Any]:
    return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

  @classmethod
  def from_dict(cls, data: dict):
    return from_fields(cls, data)


# --- the report ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Platform(_Record):
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
class CompileInfo(_Record):
  target: str | None = None                   # "cuda:90"
  cache: str | None = None                    # "miss", "memory", "disk"
  total_ms: float | None = None
  stages_ms: dict[str, float] = dataclasses.field(default_factory=dict)
  worker_wait_ms: float | None = None         # waited for the compile worker before it began


@dataclasses.dataclass(frozen=True)
class KernelEntry(_Record):
  REQUIRED: typing.ClassVar[tuple[str, ...]] = ("label", "name")
  label: str
  name: str
  source_info: str | None = None              # the user's file:line of the pallas_call
  platform: str | None = None                 # where the program ran it: "gpu", "cpu"
  grid: tuple[int, ...] = ()
  launch_grid: tuple[int, ...] = ()
  num_warps: int | None = None
  num_stages: int | None = None
  in_avals: tuple[str, ...] = ()
  out_avals: tuple[str, ...] = ()
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

  @property
  def spills(self) -> int | None:
    res = self.resources or {}
    if res.get("spill_stores") is None:
      return None
    return res["spill_stores"] + (res.get("spill_loads") or 0)


@dataclasses.dataclass(frozen=True)
class ErrorEntry(_Record):
  kernel: str | None = None
  primitive: str | None = None
  location: str | None = None                 # the user's file:line
  reason: str | None = None
  hint: str | None = None
  stage: str | None = None                    # "lowering" or a compile stage
  report: str | None = None                   # the annotated error, as plain text
  # a compile's failure read (backend/compile_diagnostics.py): failing pass, assertion,
  # op and layout, equations, fault (triton | kernel | pallas-prof), reproducer, workaround
  compile_failure: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Traces(_Record):
  otlp_json: str | None = None                # OTLP-JSON lines, relative to the run directory
  perfetto: str | None = None                 # Chrome trace events (ui.perfetto.dev)

  def files(self) -> tuple[str, ...]:
    return tuple(f for f in (self.otlp_json, self.perfetto) if f)


@dataclasses.dataclass(frozen=True)
class RunReport(_Record):
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
    return json.dumps(self.to_dict(), default=_json_default, **kwargs)

  @classmethod
  def from_json(cls, text: str) -> "RunReport":
    return cls.from_dict(json.loads(text))

  def save(self, run_dir: str) -> str:
    path = os.path.join(run_dir, FILE)
    with open(path, "w") as f:
      f.write(self.to_json(indent=1))
    return path

  @classmethod
  def load(cls, run_dir: str) -> "RunReport":
    path = run_dir if run_dir.endswith(".json") else os.path.join(run_dir, FILE)
    try:
      with open(path) as f:
        text = f.read()
    except FileNotFoundError:
      raise ReportError(f"pallas-prof: no {FILE} in {run_dir!r}; give the directory a "
                        "`pallas-prof run` wrote (its last line names it)") from None
    try:
      data = json.loads(text)
    except json.JSONDecodeError as e:
      raise ReportError(f"pallas-prof: {path} is not JSON ({e})") from None
    if not isinstance(data, dict) or "schema" not in data:
      raise ReportError(f"pallas-prof: {path} is not a pallas-prof run report (no schema)")
    try:
      return cls.from_dict(data)
    except ReportError as e:
      raise ReportError(f"{e.code} ({path})") from None
    except _Misfit as e:
      where, tp, value = e.args
      raise ReportError(f"pallas-prof: {path} is damaged: {where.replace('report.', '', 1)} "
                        f"is {_kind(value)} where {_wanted(tp)} belongs; write the run again "
                        "with `pallas-prof run`") from None

  # rendering (render.py) ----------------------------------------------------------------
  def __rich_console__(self, console, options):
    from .render import render_report
    yield from render_report(self, console, options)
