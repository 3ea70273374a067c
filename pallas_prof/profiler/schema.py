"""The profiler's report: plain dataclasses, JSON-serialisable with `to_dict()`.

    ProfileReport                       what pallas_prof.profile() returns
      schema_version  int               bumped when a field changes meaning (2: runtime.median_s
                                        is the cold mode's; runtime.sustained added)
      created         float             time.time() of the report
      gpu_present     bool              False: static correlation only
      message         str               one plain sentence about what was done
                                        ("no NVIDIA GPU: ...", "replayed 3 kernels on ...")
      device          DeviceInfo|None   the GPU the kernels ran on
      ceilings        Ceilings|None     measured copy bandwidth / matrix rates
      kernels         [KernelProfile]
      notes           [str]             anything the reader should know (CUPTI busy, ...)

    KernelProfile                       one kernel (one KernelRecord)
      label, name     str               "softmax_kernel#a35bdc", "softmax_kernel"
      in_avals, out_avals [Aval]        the shapes it ran on (backend/equation_text.py;
                                        the file holds their text)
      static          StaticProfile     resources, instruction counts, per-equation weights
      work            WorkModel         bytes and FLOPs the jaxpr implies (or the cost estimate)
      runtime         RuntimeStats|None replay timing (GPU only): median_s etc. of the cold
                                        mode (L2 cold, unthrottled) when timed; .cold and
                                        .sustained (back-to-back) hold each mode timed
      nvml            NvmlWindow|None   GPU state during the timed window
      rates           Rates|None        achieved bytes/s, FLOP/s, % of ceilings, verdict
      insitu          InsituStats|None  launches and times as the program really ran (CUPTI)
      ncu             NcuResult|None    Nsight Compute figures (when asked)
      weight_basis    str               "pc_sampling" | "ncu" | "static": where the weights
                                        below come from
      attribution     Attribution|None  per-equation and per-line weights, stall reasons,
                                        memory waits charged to loads (measured on a GPU,
                                        static instruction shares without one):
                                        attribution_schema.py
      probes          ProbeResult|None  with probes: cycles and ns per region, each CTA on
                                        its SM, distortion (distortion_pct), reconciliation
      verdict         Verdict           one line for humans (bound, efficiency, throttling,
                                        heaviest equations): verdict.py; the file holds its text
      errors          [str]             parts that failed, each naming the part and why

Built in place, not frozen: profile() (api.py) fills each KernelProfile as its steps
finish (replay, rates, in-situ, ncu, attribution, probes, verdict) and returns them in a
ProfileReport that nothing changes afterwards. JSON both ways: pallas_prof/serial.py.

Times are seconds, rates per second, sizes bytes; percentages are 0..100.
Equation indices are those of GeneratedKernel.eqns (the `[i]` in the
generated source's comments).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..backend.equation_text import Aval, first_result_aval
from ..serial import Record, plain, to_json
from . import presentation
from .attribution_schema import Attribution
from .probe_schema import ProbeResult
from .verdict import Verdict

SCHEMA_VERSION = 2


# --- static correlation --------------------------------------------------------------------

@dataclasses.dataclass
class EquationProfile(Record):
  """One jaxpr equation and the compiled instructions attributed to it."""
  index: int
  path: str                     # "4" or "4.body.2": position in the nesting
  primitive: str
  text: str                     # the equation as jaxpr text
  user_file: str | None         # the user's source line (inherited from the enclosing eqn if none)
  user_line: int | None
  function: str | None
  parent: int | None            # enclosing control-flow equation
  region: str
  generated_lines: list[int]    # lines of the generated Triton source
  ptx_instructions: int
  sass_instructions: int
  weight: float                 # share (0..1) of the kernel's instructions (SASS, else PTX)
  inclusive_weight: float       # weight of the equation and everything nested in it
  loop_instructions: int        # of its instructions, those inside a loop of the machine code
  ptx_counts: dict[str, int]    # category -> count (see correlate.CATEGORIES)
  sass_counts: dict[str, int]
  hardware: dict[str, float] | None = None   # ncu source-counter sums, when ncu ran
  # its results' avals, typed (the file holds their text); the advice reads a saved
  # profile's block shapes from them
  out_avals: list[Aval] = dataclasses.field(default_factory=list)

  @staticmethod
  def upgrade_layout(data: dict) -> dict:
    """A profile saved before the equations' avals were: its first result's, from its text."""
    if "out_avals" in data or not isinstance(data.get("text"), str):
      return data
    return {**data, "out_avals": [str(a) for a in first_result_aval(data["text"])]}


@dataclasses.dataclass
class StaticProfile(Record):
  kernel: str
  target: str                   # "cuda:90"
  generated_path: str
  grid: list[int]
  launch_grid: list[int]
  num_warps: int
  num_stages: int
  resources: dict[str, Any]     # registers, spills, shared bytes, stack (from ptxas / Triton)
  ptx_instructions: int
  sass_instructions: int
  weight_basis: str             # "sass" or "ptx" (when nvdisasm is unavailable)
  sass_error: str | None
  ptx_counts: dict[str, int]
  sass_counts: dict[str, int]
  unattributed_instructions: int   # prologue (program ids, block offsets) and the like
  unattributed_counts: dict[str, int]
  equations: list[EquationProfile]
  top_equations: list[int]      # equation indices, heaviest first

  def equation(self, index: int) -> EquationProfile:
    return self.equations[index]


@dataclasses.dataclass
class AnnotatedLine(Record):
  """One line of a stage's listing (source, ttir, ttgir, llir, ptx, sass)."""
  number: int
  text: str
  generated_line: int | None    # the Triton source line it comes from
  eqn: int | None
  primitive: str | None
  user_location: str | None     # "/path/file.py:25"
  weight: float | None          # the equation's weight (share of instructions)
  is_instruction: bool = False  # ptx / sass: an instruction (not a directive or label)


# --- the work model -----------------------------------------------------------------------

@dataclasses.dataclass
class WorkModel(Record):
  """Bytes and FLOPs of one launch."""
  source: str                   # "model" (from the jaxpr) or "cost_estimate" (the user's)
  bytes: int | None             # inputs read once + outputs written once
  block_bytes: int | None       # global-memory traffic the block loads/stores imply (all programs)
  flops: int | None
  dot_flops: int | None         # dot_general (tensor-core candidates)
  elementwise_flops: int | None # float arithmetic, reductions, transcendentals
  transcendentals: int | None
  dot_dtype: str | None         # operand class of the dots: bf16, f16, tf32, f32, int8, fp8 ...
  programs: int                 # grid size
  exact: bool                   # False when a loop's trip count is known only at run time
  notes: list[str]


# --- runtime --------------------------------------------------------------------------------

@dataclasses.dataclass
class DeviceInfo(Record):
  index: int                    # CUDA ordinal (as CUDA_VISIBLE_DEVICES presents it)
  name: str
  uuid: str
  pci_bus_id: str
  compute_capability: int       # 90 for sm_90
  sm_count: int
  l2_bytes: int
  memory_bytes: int
  driver_version: int


@dataclasses.dataclass
class Correctness(Record):
  reference: str                # "interpreter" or "jax reference" or a description
  passed: bool
  max_abs_error: list[float]    # per output
  max_rel_error: list[float]
  tolerance: list[list[float]]  # per output: [atol, rtol]
  message: str


@dataclasses.dataclass
class TimingStats(Record):
  """One timing mode's per-launch times (CUDA events around each timed launch)."""
  mode: str                     # "cold" or "sustained"
  launches: int                 # timed launches kept
  warmup_launches: int
  median_s: float
  p10_s: float
  p90_s: float
  min_s: float
  mean_s: float
  timed_window_s: float         # wall time of the timed launches (recovery sleeps included)
  paced_gap_s: float = 0.0      # cold: idle before each launch once the GPU throttled (0: none)


@dataclasses.dataclass
class ThrottleStats(Record):
  """The cold mode's throttle guard: SM clock checks through NVML after each batch."""
  available: bool               # False: NVML unavailable, nothing checked (see note)
  threshold: float              # throttled: SM clock below threshold x max (and a slowdown reason)
  recovery_delay_s: float       # slept after a throttled check, before redoing the batch
  max_sm_clock_mhz: float | None
  min_sm_clock_mhz: float | None = None   # lowest clock seen at a check
  checks: int = 0
  throttled_checks: int = 0
  recoveries: int = 0           # recovery sleeps
  recovery_s: float = 0.0       # seconds slept in all
  discarded_launches: int = 0   # timed launches thrown away because the GPU was throttled
  kept_throttled_launches: int = 0   # throttled launches kept once the recovery budget ran out
  reasons: list[str] = dataclasses.field(default_factory=list)   # slowdown reasons seen
  note: str = ""


HEADLINE = ("launches", "warmup_launches", "median_s", "p10_s", "p90_s", "min_s", "mean_s",
            "timed_window_s")


@dataclasses.dataclass
class RuntimeStats(Record):
  """Replay timing, inputs rotated past L2. `cold` and `sustained` hold each mode
  that was timed; the headline (median_s, p10_s, p90_s, min_s, mean_s, launches,
  warmup_launches, timed_window_s, read through properties and written flat into
  to_dict()) is that of `mode`: "cold" (L2 made cold before each launch,
  throttled samples redone; what Nsight Compute measures) when it was timed,
  else "sustained" (back-to-back launches; what a program's loop sees)."""
  device_index: int
  input_sets: int               # rotated sets of inputs (and outputs)
  set_bytes: int                # bytes of one set (inputs + outputs)
  l2_bytes: int
  outputs_written: bool         # every output element was overwritten (poison check)
  unwritten_elements: list[int | None]   # per output; None where the check does not apply
  mode: str                     # which timing the headline figures are
  cold: TimingStats | None = None
  sustained: TimingStats | None = None
  correctness: Correctness | None = None
  notes: list[str] = dataclasses.field(default_factory=list)
  throttle: ThrottleStats | None = None  # the cold mode's throttle guard
  l2_flush_bytes: int | None = None      # bytes the cold mode's flush kernel reads

  @property
  def headline(self) -> TimingStats:
    main = self.cold if self.mode == "cold" else self.sustained
    if main is None:
      raise ValueError(f"runtime stats name {self.mode!r} as their headline but hold no such timing")
    return main

  median_s = property(lambda self: self.headline.median_s)
  p10_s = property(lambda self: self.headline.p10_s)
  p90_s = property(lambda self: self.headline.p90_s)
  min_s = property(lambda self: self.headline.min_s)
  mean_s = property(lambda self: self.headline.mean_s)
  launches = property(lambda self: self.headline.launches)
  warmup_launches = property(lambda self: self.headline.warmup_launches)
  timed_window_s = property(lambda self: self.headline.timed_window_s)

  def to_dict(self) -> dict[str, Any]:
    out = super().to_dict()
    out.update(plain({k: getattr(self.headline, k) for k in HEADLINE}))
    return out

  @staticmethod
  def upgrade_layout(data: dict) -> dict:
    """Older reports' layout (serial.from_fields reads through this): the headline flat
    (median_s, ...) with no TimingStats of its mode, and before the cold mode no "mode"
    (back-to-back: sustained). Reports since hold both; the flat keys repeat the headline."""
    data = dict(data)
    mode = data.get("mode") or "sustained"
    data["mode"] = mode
    if data.get(mode) is None:
      data[mode] = {"mode": mode, **{k: data.get(k) for k in HEADLINE}}
    return data


@dataclasses.dataclass
class Stat(Record):
  min: float | None
  median: float | None
  max: float | None


@dataclasses.dataclass
class NvmlWindow(Record):
  """NVML readings over a window (the replay's timed launches, or idle)."""
  samples: int
  duration_s: float
  sm_clock_mhz: Stat
  mem_clock_mhz: Stat
  max_sm_clock_mhz: float | None
  power_w: Stat
  power_limit_w: float | None
  temperature_c: Stat
  gpu_util_pct: Stat
  mem_util_pct: Stat
  energy_j: float | None        # total energy counter difference over the window
  throttle_reasons: list[str]   # every reason seen (GpuIdle left out)
  throttled: bool               # a slowdown reason (power, thermal, hw) was active
  summary: str                  # "SM 1980 MHz (max 1980), 512 W, 45 C, no throttling"
  unavailable: list[str]        # readings the device does not support
  # the readings over time, thinned to at most nvml.SERIES_POINTS (the HTML report draws them):
  # {"t_s": [...], "sm_clock_mhz": [...], "power_w": [...], "slowdown": [reason names...]}
  series: dict[str, list] = dataclasses.field(default_factory=dict)


# --- rates ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Ceilings(Record):
  """Measured once per GPU, cached by device UUID."""
  device_name: str
  device_uuid: str
  copy_bytes_per_s: float | None     # device-to-device, bytes read + written
  copy_method: str
  matrix_flops_per_s: dict[str, float]   # "bf16", "f16", "tf32" -> FLOP/s
  matrix_method: str
  measured_at: float
  details: dict[str, Any]
  notes: list[str]


@dataclasses.dataclass
class Rates(Record):
  bytes_per_s: float | None
  flops_per_s: float | None
  bandwidth_pct: float | None        # of the measured copy bandwidth
  compute_pct: float | None          # of the measured matrix rate for the dots' dtype
  compute_ceiling: str | None        # which ceiling ("bf16", ...)
  arithmetic_intensity: float | None # FLOPs per byte
  ridge_point: float | None          # intensity where the two ceilings meet
  bound: str                         # "memory", "compute" or "unknown"
  efficiency_pct: float | None       # the bound ceiling's percentage
  verdict: str


# --- in situ and ncu ------------------------------------------------------------------------

@dataclasses.dataclass
class InsituStats(Record):
  """A kernel as the user's program ran it (CUPTI's activity records)."""
  name: str
  launches: int
  total_s: float
  mean_s: float
  device_ids: list[int]
  shared_name_with: list[str]        # other labels with the same kernel name (counts are shared)
  launches_by_device: dict[int, int] = dataclasses.field(default_factory=dict)  # all devices


@dataclasses.dataclass
class NcuResult(Record):
  command: list[str]
  launches: int
  gpu_time_s: list[float]            # gpu__time_duration of each profiled launch
  median_s: float | None
  replay_median_s: float | None
  difference_pct: float | None       # (ncu - replay) / replay * 100
  source_counters: dict[str, dict[str, float]] | None   # eqn index -> metric -> sum
  source_metrics: list[str]
  notes: list[str]
  # SASS address (hex string) -> stall reason (stalls.py's names) -> warp-stall samples
  instruction_samples: dict[str, dict[str, float]] | None = None
  attribution: Attribution | None = None     # the same samples per equation (attribution.py)


@dataclasses.dataclass
class KernelProfile(Record):
  label: str
  name: str
  in_avals: list[Aval]
  out_avals: list[Aval]
  static: StaticProfile | None
  work: WorkModel | None
  runtime: RuntimeStats | None = None
  nvml: NvmlWindow | None = None
  rates: Rates | None = None
  insitu: InsituStats | None = None
  ncu: NcuResult | None = None
  weight_basis: str = "static"       # "pc_sampling", "ncu" or "static": what `attribution` is
  attribution: Attribution | None = None   # the weights shown (hot equations, show, spans)
  probes: ProbeResult | None = None  # when profiled with probes (probe_schema.py)
  verdict: Verdict = Verdict()
  errors: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ProfileReport(Record):
  gpu_present: bool
  message: str
  device: DeviceInfo | None
  ceilings: Ceilings | None
  kernels: list[KernelProfile]
  notes: list[str]
  created: float
  schema_version: int = SCHEMA_VERSION

  def to_json(self, **kwargs) -> str:
    return to_json(self, **kwargs)

  # printed as `pallas-prof run` prints a run's kernels, by the view installed from above
  # (presentation.py): rich's protocol for console.print(report), the same as text for
  # print(report), and a repr of one line for the interactive prompt
  def __rich_console__(self, console, options):
    yield from presentation.view().render_profile(self, console, options)

  def __str__(self) -> str:
    return presentation.view().profile_text(self)

  def __repr__(self) -> str:
    return presentation.view().short_repr(self)

  # in Jupyter and IPython, as JAX arrays show themselves (no %load_ext needed): the page of
  # a run in a notebook, the tables at a terminal prompt
  def _repr_html_(self) -> str:
    return presentation.view().profile_html(self)

  def _repr_pretty_(self, printer, cycle) -> None:
    printer.text(str(self))

  def kernel(self, label_or_name: str) -> KernelProfile:
    for k in self.kernels:
      if k.label == label_or_name:
        return k
    matches = [k for k in self.kernels if k.name == label_or_name]
    if len(matches) == 1:
      return matches[0]
    raise KeyError(f"no single kernel {label_or_name!r} in the report; have "
                   + ", ".join(k.label for k in self.kernels))
