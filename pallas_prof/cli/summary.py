"""A run's kernels as every view shows them: typed, built once from the run's records.

report.json keeps a kernel's resources, a compile failure and where the run happened as
the backend and processes.py wrote them (plain dicts, so that old runs still load). The
views (terminal/, html/, processes.py's merged table) read these typed records instead:
one KernelSummary per kernel and device profiled, its Resources, a CompileFailure, and
an Origin worded in one place.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol

from .. import units
from ..profiler.schema import KernelProfile, ProfileReport


@dataclasses.dataclass(frozen=True)
class Resources:
  """What ptxas (or the AMD backend) said a kernel uses (CompiledKernel.resources())."""
  registers: int | None = None          # None where the cubin was not assembled
  shared_bytes: int | None = None
  spill_stores: int | None = None
  spill_loads: int | None = None

  @classmethod
  def of(cls, resources: Mapping[str, Any] | None) -> "Resources":
    r = resources or {}
    return cls(r.get("registers"), r.get("shared_bytes"), r.get("spill_stores"),
               r.get("spill_loads"))

  @property
  def spills(self) -> int | None:
    return units.spills(dataclasses.asdict(self))

  @property
  def registers_text(self) -> str:
    return "-" if self.registers is None else str(self.registers)

  @property
  def shared_text(self) -> str:
    return units.size(self.shared_bytes)

  @property
  def spills_text(self) -> str:
    return "-" if self.spills is None else str(self.spills)


@dataclasses.dataclass(frozen=True)
class FailedEquation:
  index: int
  primitive: str
  location: str


# whose fault a compile failure is, in words (compile_diagnostics.py decides it)
FAULT_WORDS = {"triton": "Triton's, not the kernel's", "kernel": "the kernel's",
               "pallas-prof": "pallas-prof's",
               "machine": "the machine's, not Triton's nor the kernel's"}


@dataclasses.dataclass(frozen=True)
class CompileFailure:
  """A compile's failure as the report shows it (ErrorEntry.compile_failure)."""
  equations: tuple[FailedEquation, ...] = ()
  fault: str | None = None
  reproducer_script: str | None = None
  workaround: str | None = None

  @classmethod
  def of(cls, failure: Mapping[str, Any] | None) -> "CompileFailure | None":
    if not failure:
      return None
    workaround = failure.get("workaround")
    return cls(tuple(FailedEquation(e["index"], e["primitive"], e["location"])
                     for e in failure.get("equations") or ()),
               failure.get("fault"), (failure.get("reproducer") or {}).get("script"),
               str(workaround) if workaround else None)

  @property
  def fault_words(self) -> str | None:
    return FAULT_WORDS.get(self.fault, self.fault)


@dataclasses.dataclass(frozen=True)
class Origin:
  """Where a run happened (processes.origin() wrote it into report.json)."""
  host: str | None = None
  pid: int | None = None
  process_index: int | None = None      # jax.distributed's, where it was initialised
  process_count: int | None = None
  devices: tuple[str, ...] = ()

  @classmethod
  def of(cls, origin: Mapping[str, Any] | None) -> "Origin | None":
    """None for a run from before report.json said where it ran."""
    if not origin:
      return None
    return cls(origin.get("host.name"), origin.get("process.pid"),
               origin.get("jax.process_index"), origin.get("jax.process_count"),
               tuple(origin.get("devices") or ()))

  def _process(self) -> str | None:
    if self.process_index is None:
      return None
    return f"{self.process_index}/{'?' if self.process_count is None else self.process_count}"

  @property
  def words(self) -> str:
    """"process 0/2 vm pid 11917": the process's name in lists and on the page."""
    name = f"{self.host or '?'} pid {'?' if self.pid is None else self.pid}"
    process = self._process()
    return f"process {process} {name}" if process else name

  @property
  def short(self) -> str:
    """"0/2 vm:11917": the terminal table's cell."""
    where = f"{self.host or '?'}:{'?' if self.pid is None else self.pid}"
    process = self._process()
    return f"{process} {where}" if process else where


class KernelRecord(Protocol):
  """What a summary reads of a kernel: report.py's KernelEntry, or a ProfileReport's kernel
  seen as one (terminal/profile_view.py's ProfiledKernel)."""
  label: str
  name: str
  grid: tuple[int, ...]
  resources: Mapping[str, Any] | None


@dataclasses.dataclass(frozen=True)
class KernelSummary:
  """One kernel on one device profiled (or on none), as the kernels tables, the page and
  the merged table show it."""
  kernel: KernelRecord
  profile: KernelProfile | None = None          # the kernel on this device, if profiled
  device_profile: ProfileReport | None = None   # the device's profile, if any
  resources: Resources = Resources()

  @property
  def label(self) -> str:
    return self.kernel.label

  @property
  def device(self):
    return self.device_profile.device if self.device_profile is not None else None

  @property
  def device_text(self) -> str:
    """"0: NVIDIA H200", or "" where no GPU was profiled."""
    device = self.device
    return f"{device.index}: {device.name}" if device is not None else ""

  @property
  def grid_text(self) -> str:
    return "x".join(map(str, self.kernel.grid)) or "()"


def summaries(report) -> tuple[KernelSummary, ...]:
  """Each kernel of the report on each device profiled (one row with no profile where
  the run profiled nothing)."""
  profiles = tuple(report.profiles) or (None,)
  return tuple(summary(report, k, p) for k in report.kernels for p in profiles)


def summary(report, kernel, device_profile) -> KernelSummary:
  profile = (report.kernel_profile(kernel.label, device_profile)
             if device_profile is not None else None)
  return KernelSummary(kernel, profile, device_profile, Resources.of(kernel.resources))
