"""What the events of pallas_prof/events.py carry: the payloads, on the ground floor.

The backend and the tuners send these; observers (instrument/observer.py, a test, a
progress bar) read them. They live here, below everything that sends or reads them,
so that events.py needs nothing above it: the backend imports events, and events
never imports the backend, tune/, profiler/ or advice/ back (not even for a type
checker), which would close a circle of imports.

The records the backend and the tuners fill in are plain frozen-or-not dataclasses
defined here (compile.py and tune/records.py re-export them under their old names).
What profile() and the advice send is defined where it is made (profiler/schema.py,
advice/schema.py); an observer may rely only on the fields the Protocols below name.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence


class Stage(Protocol):
  """One Triton stage of a compile (backend/compiling/triton_run.py's StageRecord,
  which stays there: the compile worker loads that file without the package)."""
  stage: str
  start_ns: int
  end_ns: int
  size: int

  @property
  def seconds(self) -> float: ...


@dataclasses.dataclass
class CompileRecord:
  """What one compile did, for observers: times, stages, resources, error."""
  kernel: str
  key: str
  target: str
  start_ns: int
  end_ns: int
  stages: list[Stage]
  cache: str                    # "miss", "memory" or "disk"
  attributes: dict[str, Any]
  error: BaseException | None = None
  source_key: str | None = None  # GeneratedKernel.key: which lowering this compile belongs to
  # when the compile was asked for; before start_ns when it waited for the compile
  # worker (behind other compiles, or for the worker's start-up and Triton's import)
  requested_ns: int | None = None


@dataclasses.dataclass(frozen=True)
class CandidateRecord:
  label: str                    # the config, short: "8w 3s", "bm=64 bn=128"
  start_ns: int                 # its check and timing (a cached choice: none, 0)
  end_ns: int
  seconds: float | None         # median time; None when dropped or not timed
  error: str | None = None      # why it was dropped
  chosen: bool = False
  compile_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class TuningRecord:
  kind: str                     # "params" (num_warps, num_stages) or "blocks" (autotune)
  name: str                     # the kernel, or the tuned function
  start_ns: int
  end_ns: int
  default: str
  best: str
  from_cache: bool
  candidates: tuple[CandidateRecord, ...]
  source_key: str | None = None   # the kernel's GeneratedKernel.key (its lowering's span)
  clock: str | None = None        # what timed the candidates: "gpu", "wall", "replay"

  @property
  def speedup(self) -> float | None:
    times = {c.label: c.seconds for c in self.candidates}
    d, b = times.get(self.default), times.get(self.best)
    return d / b if d and b else None


class Equation(Protocol):
  """One equation being lowered (backend/lowering/codegen.py's EqnInfo)."""
  index: int
  path: str
  primitive: str
  region: str
  parent: int | None
  file: str | None
  line: int | None
  function: str | None

  @property
  def text(self) -> str: ...
  @property
  def in_avals(self) -> Sequence[Any]: ...
  @property
  def out_avals(self) -> Sequence[Any]: ...


class ProfiledKernel(Protocol):
  """A kernel profile() profiled (profiler/schema.py's KernelProfile)."""
  name: str
  errors: Sequence[str]


class Device(Protocol):
  """The GPU a kernel was profiled on (profiler/schema.py's DeviceInfo)."""
  name: str


class AdvisedKernel(Protocol):
  """One kernel's advice (advice/schema.py's KernelAdvice)."""
  name: str
