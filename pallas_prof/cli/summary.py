"""A run's kernels as every view shows them: typed, built once from the run's records.

report.json keeps a kernel's resources, a compile failure and where the run happened as
the backend and processes.py wrote them (plain dicts, so that old runs still load). The
views (terminal/, html/, processes.py's merged table) read these typed records instead:
one KernelSummary per kernel and device profiled (the whole row: the kernel's entry, its
profile on that device, its failure and advice), its Resources, a CompileFailure, and
an Origin worded in one place.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .. import units
from ..advice.schema import KernelAdvice
from ..backend.equation_text import Aval
from ..events import HOST_NAME, JAX_PROCESS_COUNT, JAX_PROCESS_INDEX, PROCESS_PID
from ..profiler.attribution_schema import Attribution
from ..profiler.probe_schema import ProbeResult
from ..profiler.schema import (Ceilings, DeviceInfo, InsituStats, KernelProfile, NvmlWindow,
                               ProfileReport, Rates, RuntimeStats, StaticProfile, WorkModel)
from ..profiler.verdict import Verdict


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
    return cls(origin.get(HOST_NAME), origin.get(PROCESS_PID),
               origin.get(JAX_PROCESS_INDEX), origin.get(JAX_PROCESS_COUNT),
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


@dataclasses.dataclass(frozen=True)
class KernelSummary:
  """One kernel on one device profiled (or on none): the whole row that the kernels tables,
  the page, the merged table and `pallas_prof.profile()`'s tables show, built once from the
  run's records (summaries()). The renderers read it, never the KernelEntry or the
  KernelProfile it was made of."""
  label: str
  name: str = ""
  platform: str | None = None           # where the program ran it: "gpu", "cpu"
  source_info: str | None = None        # "softmax_kernel at examples/softmax.py:18"
  grid: tuple[int, ...] = ()
  num_warps: int | None = None
  num_stages: int | None = None
  in_avals: tuple[Aval, ...] = ()
  out_avals: tuple[Aval, ...] = ()
  lowering_ms: float | None = None
  cpu_launches: int | None = None       # launches by Triton's interpreter
  # report.CompileInfo (not imported: the report renders itself through the views that
  # read this module); None for a profile's kernel, which has no compile times
  compile: Any = None
  resources: Resources = Resources()
  workarounds: tuple[str, ...] = ()     # a run's Triton workarounds
  failed: str | None = None             # how the kernel failed, in words
  advice: KernelAdvice | None = None
  first: bool = True                    # the first device's row (or the only one)
  # the device and the kernel's profile on it
  device: DeviceInfo | None = None
  gpu: bool = False                     # the device's profile timed kernels on a GPU
  ceilings: Ceilings | None = None
  profiled: bool = False                # the device's profile has the kernel
  static: StaticProfile | None = None
  work: WorkModel | None = None
  runtime: RuntimeStats | None = None
  nvml: NvmlWindow | None = None
  rates: Rates | None = None
  insitu: InsituStats | None = None
  attribution: Attribution | None = None
  probes: ProbeResult | None = None
  weight_basis: str = "static"
  verdict: Verdict = Verdict()

  @property
  def device_text(self) -> str:
    """"0: NVIDIA H200", or "" where no GPU was profiled."""
    device = self.device
    return f"{device.index}: {device.name}" if device is not None else ""

  @property
  def grid_text(self) -> str:
    return "x".join(map(str, self.grid)) or "()"


def summaries(report) -> tuple[KernelSummary, ...]:
  """Each kernel of the report on each device profiled (one row with no profile where
  the run profiled nothing); a view that made its rows itself (a ProfileReport's,
  terminal/profile_view.py) gives those."""
  rows = getattr(report, "summary_rows", None)
  if rows is not None:
    return tuple(rows)
  profiles = tuple(report.profiles) or (None,)
  return tuple(summary(report, k, p, first=i == 0) for k in report.kernels
               for i, p in enumerate(profiles))


def summary(report, kernel, device_profile, first: bool = True) -> KernelSummary:
  """The row of a run's kernel (report.py's KernelEntry) on the device of `device_profile`."""
  kp = (report.kernel_profile(kernel.label, device_profile)
        if device_profile is not None else None)
  return KernelSummary(
      label=kernel.label, name=kernel.name, platform=kernel.platform,
      source_info=kernel.source_info, grid=tuple(kernel.grid), num_warps=kernel.num_warps,
      num_stages=kernel.num_stages, in_avals=tuple(kernel.in_avals),
      out_avals=tuple(kernel.out_avals), lowering_ms=kernel.lowering_ms,
      cpu_launches=kernel.cpu_launches, compile=kernel.compile,
      resources=Resources.of(kernel.resources), workarounds=tuple(kernel.workarounds),
      failed=report.kernel_failure(kernel), advice=report.kernel_advice(kernel.label),
      first=first,
      **_profiled(kp, device_profile))


def profile_summary(kp: KernelProfile, report: ProfileReport) -> KernelSummary:
  """The row of a kernel of `pallas_prof.profile()`'s report, which knows the kernels as the
  profiler saw them: their static figures stand for the run's, and there are no compile
  times, launch counts, failures or advice."""
  st = kp.static
  return KernelSummary(
      label=kp.label, name=kp.name, platform="gpu" if report.gpu_present else "cpu",
      grid=tuple(st.grid) if st else (), num_warps=st.num_warps if st else None,
      num_stages=st.num_stages if st else None, in_avals=tuple(kp.in_avals),
      out_avals=tuple(kp.out_avals),
      resources=Resources.of(dict(st.resources) if st else None), **_profiled(kp, report))


def _profiled(kp: KernelProfile | None, device_profile: ProfileReport | None) -> dict:
  """The row's device and profile fields."""
  out: dict[str, Any] = {}
  if device_profile is not None:
    out.update(device=device_profile.device, gpu=bool(device_profile.gpu_present),
               ceilings=device_profile.ceilings)
  if kp is not None:
    out.update(profiled=True, static=kp.static, work=kp.work, runtime=kp.runtime,
               nvml=kp.nvml, rates=kp.rates, insitu=kp.insitu, attribution=kp.attribution,
               probes=kp.probes, weight_basis=kp.weight_basis, verdict=kp.verdict)
  return out
