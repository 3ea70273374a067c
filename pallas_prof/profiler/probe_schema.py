"""What `--probes` reports per kernel (report.json: kernels[i].probes), as types.

Made by probe_results.summarize (the figures) and probing.py (distortion,
reconciliation); read back from report.json by type (pallas_prof/serial.py decodes by
these annotations).
"""
from __future__ import annotations

import dataclasses

from ..serial import Record

# report.json keeps the first CTAs only (the trace has them all): a 4,096-program
# sample would add a megabyte to every report
MAX_JSON_CTAS = 512


@dataclasses.dataclass
class RegionFigures(Record):
  """One probe region over the sampled warps of the sampled CTAs."""
  slot: int
  label: str
  kind: str
  eqns: list[int]
  user_file: str | None
  user_line: int | None
  cycles_median: float
  cycles_p10: float
  cycles_p90: float
  ns_median: float
  share: float                   # of all sampled warps' cycles from entry to end
  loads: list[str] = dataclasses.field(default_factory=list)   # loads it begins with
  waits: bool = False            # loads whose region ends after their data arrived
  # the same region with its CTA alone on its SM (ProbeResult.alone): its work, without
  # the time it waits for what it shares with other CTAs' warps
  alone_cycles_median: float | None = None
  alone_share: float | None = None

  @property
  def beside_over_alone(self) -> float | None:
    """How many times longer the region takes beside other CTAs than alone."""
    if not self.alone_cycles_median:
      return None
    return self.cycles_median / self.alone_cycles_median

  def to_dict(self) -> dict:
    return {**super().to_dict(), "beside_over_alone": self.beside_over_alone}


@dataclasses.dataclass
class CtaSpan:
  """One sampled CTA on its SM: ns from the launch's first probed entry;
  `boundaries_ns`: its first sampled warp's region boundaries, same clock."""
  program: int
  sm: int
  start_ns: float
  end_ns: float
  boundaries_ns: list[float]


@dataclasses.dataclass
class Distortion(Record):
  """The probed kernel against the plain one, timed alike in the same replay."""
  runtime_plain_s: float | None
  runtime_probed_s: float | None
  runtime_pct: float | None
  registers_plain: int | None
  registers_probed: int | None
  sass_plain: int | None
  sass_probed: int | None
  sass_pct: float | None         # all instructions, the probes' own included
  sass_probe_instructions: int | None = None   # from the probes' lines of the source
  sass_kernel_pct: float | None = None         # the kernel's own instructions (probes apart)
  distrust: list[str] = dataclasses.field(default_factory=list)            # which figures not to trust, in words (above probing.DISTRUST_PCT)


@dataclasses.dataclass
class ReconciledRegion(Record):
  label: str
  probe_share: float
  sampling_share: float | None   # the report's weight of the same equations (inclusive)
  difference_points: float | None      # probe share - the compared share, in points
  stood_share: float | None = None     # the samples where the warps stood (before charging)


@dataclasses.dataclass
class Reconciliation(Record):
  basis: str                     # the attribution's weight_basis
  regions: list[ReconciledRegion]
  probed_span_s: float | None    # first sampled CTA entry to last sampled end
  replay_median_s: float | None  # the plain kernel's headline runtime
  disagreements: list[str]
  # what difference_points compares with: "stood" (where the sampled warps stood), or
  # "charged" (waits charged to the loads), where a region of loads ends in a wait
  compared_with: str = "stood"


@dataclasses.dataclass
class RegionPlacement(Record):
  """Where the compilers put a region's code, from the probed SASS's line info: between
  its two clock reads, or moved across one (LLVM and ptxas schedule pure arithmetic
  freely around the probes; Triton's pipeliner moves loads)."""
  label: str
  instructions: int              # of its equations, between its boundaries
  moved_out: int                 # of its equations, outside them
  foreign: int                   # of other regions' equations, between its boundaries


@dataclasses.dataclass
class AloneReading(Record):
  """The probed variant launched again with one CTA per SM (Replayer.isolate): the
  regions' figures then are what each took with no other CTA's warps on its SM."""
  ctas_per_sm_beside: int        # as the kernel runs (occupancy)
  ctas_per_sm_alone: int
  shared_bytes: int              # the dynamic shared memory each CTA asked for
  cta_ns_median: float
  span_ns: float
  # the kernel without probes, as it runs: where it differs from ctas_per_sm_beside the
  # probes' registers changed the occupancy, and the reading beside the others with it
  ctas_per_sm_plain: int | None = None


@dataclasses.dataclass
class ProbeResult(Record):
  """What `--probes` measured for one kernel."""
  regions: list[RegionFigures]
  programs: int
  sampled_programs: int
  program_stride: int
  num_warps: int
  sampled_warps: int
  rows: int
  ns_per_cycle: float | None     # from the globaltimer and clock64 spans of the same rows
  cta_ns_median: float
  sms: int                       # SMs the sampled CTAs ran on
  max_concurrent_ctas: int       # of the sampled ones, at any instant
  span_ns: float                 # first sampled entry to last sampled end
  ctas: list[CtaSpan]
  ctas_total: int = 0            # sampled CTAs (report.json keeps MAX_JSON_CTAS of them)
  distortion: Distortion | None = None
  distortion_pct: float | None = None    # the runtime's: probed against plain, in %
  reconciliation: Reconciliation | None = None
  placement: list[RegionPlacement] = dataclasses.field(default_factory=list)
  notes: list[str] = dataclasses.field(default_factory=list)
  alone: AloneReading | None = None

  @property
  def waves(self) -> float:
    """Programs over the CTAs resident at once (the sampled ones, times the stride)."""
    return self.programs / max(self.max_concurrent_ctas * self.program_stride, 1)

  def to_dict(self) -> dict:
    out = super().to_dict()
    out["ctas"] = out["ctas"][:MAX_JSON_CTAS]
    return out
