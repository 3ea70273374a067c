"""LoweringOptions: how one pallas_call is lowered, in one frozen object.

Registration makes it from the call's CompilerParams and the process's modes
(bounds checks); lower_kernel reads it; the GeneratedKernel keeps it; the
tuner's candidates, the workaround search and the profiler's probed variant
are the same options with a field or two replaced (`replace`), lowered again
through the registry record's `relower`. Nothing re-declares the fields.

`settings` is the tuned part, a TunedSettings (num_warps, num_stages,
launch_group, tma, persistent): what the tuner tries, the advice's trials change and the
tuning files name. It is also how every tuning record saves them, by name
(a serial.Saved record; tune/validate.py checks one read back before it is made):
`with_settings` puts one back onto the options of a kernel.
"""
from __future__ import annotations

import dataclasses
import numbers
import typing
from typing import ClassVar

from ..serial import Misfit, Saved, decode

DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
# JAX's built-in backend pipelines no loops on ROCm unless asked (num_stages=1)
ROCM_DEFAULT_NUM_STAGES = 1
TUNED_FIELDS = ("num_warps", "num_stages", "launch_group", "tma", "persistent", "loop_stages")


@dataclasses.dataclass(frozen=True)
class TunedSettings(Saved):
  """The tuned part of LoweringOptions, by name: what a tuner config, an advice action
  of kind a, a tuning file's entry and a tuner's cache set. Saved as an object of these
  fields (tma as true/false) wherever a tuning is kept; frozen, so it keys a dict."""
  num_warps: int = DEFAULT_NUM_WARPS
  num_stages: int = DEFAULT_NUM_STAGES
  launch_group: int = 0
  tma: bool = False
  persistent: int = 0
  loop_stages: int = 0

  def __post_init__(self):
    # one spelling per value, as LoweringOptions keeps them: {"tma": 1} is tma=True
    for name in ("num_warps", "num_stages", "launch_group", "persistent", "loop_stages"):
      object.__setattr__(self, name, int(getattr(self, name) or 0))
    object.__setattr__(self, "tma", bool(self.tma))

  def changed(self, change: dict) -> "TunedSettings":
    """These settings with the tuned fields a change names (an action's or a config's);
    the change's other fields (a block shape's operand) are not settings."""
    return dataclasses.replace(self, **{k: v for k, v in change.items() if k in TUNED_FIELDS})

  def fields(self) -> dict:
    return dataclasses.asdict(self)

  @property
  def label(self) -> str:
    """"8w 3s", "8w 3s g8" for a grouped launch order, "8w 3s tma" with TMA loads,
    "8w 3s p132" for 132 persistent programs, "8w 3s l3" for loops pipelined in 3 stages."""
    text = f"{self.num_warps}w {self.num_stages}s"
    text += f" g{self.launch_group}" if self.launch_group else ""
    text += " tma" if self.tma else ""
    text += f" p{self.persistent}" if self.persistent else ""
    return text + (f" l{self.loop_stages}" if self.loop_stages else "")


# --- the records two of LoweringOptions' fields hold --------------------------------------
# (here, with the options, because artifacts.py and the registry hold them and neither may
# import the lowering's features; features/probes.py and features/workaround_plan.py use them)

# the profiler's probed variant (lowering/features/probes.py describes its buffer)
PARAM = "pp_probes"          # the buffer's parameter in the generated source
HEADER_WORDS = 3             # header, globaltimer at entry, globaltimer at end
MAX_PROGRAMS = 4096          # sampled programs at most (every stride-th program)
MAX_WARPS = 4                # sampled warps per program at most


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
  """How much of the grid the probed variant records."""
  max_programs: int = MAX_PROGRAMS
  max_warps: int = MAX_WARPS

  def __post_init__(self):
    if self.max_programs < 1 or self.max_warps < 1:
      raise ValueError(f"ProbeOptions: max_programs and max_warps must be >= 1, got "
                       f"{self.max_programs} and {self.max_warps}")


@dataclasses.dataclass(frozen=True)
class ProbeRegion(Saved):
  """The code between two probes: the prologue, or top-level equations."""
  slot: int                        # its end boundary: clock word HEADER_WORDS + slot
  eqns: tuple[int, ...]            # equation indices (empty: the prologue)
  primitive: str                   # of its first equation ("prologue")
  kind: str                        # load | store | dot | loop | conditional | prologue | ...
  file: str | None
  line: int | None
  main: int | None = None          # the equation it is named after (not a view)
  loads: tuple[str, ...] = ()      # loads it begins with, as "[0] get @ file.py:19"
  waits: bool = False              # a run of loads whose end waits for their data

  @property
  def label(self) -> str:
    if not self.eqns:
      return {"prologue": "prologue (program ids, block offsets)",
              "epilogue": "end of the kernel"}.get(self.kind, self.kind)
    where = f" @ {self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else ""
    more = f" (+{len(self.eqns) - 1 - len(self.loads)})" \
        if len(self.eqns) > 1 + len(self.loads) else ""
    name = f"[{self.eqns[0] if self.main is None else self.main}] {self.primitive}{where}{more}"
    if not self.loads:
      return name
    loads = self.loads[0] + (f" +{len(self.loads) - 1} loads" if len(self.loads) > 1 else "")
    return f"{loads} → {name}"

  DERIVED: ClassVar[tuple[str, ...]] = ("label",)      # written for the file's readers


@dataclasses.dataclass(frozen=True)
class ProbeLayout(Saved):
  """Where the probed variant writes what (the buffer's layout above)."""
  regions: tuple[ProbeRegion, ...]
  programs: int                    # programs of the launch grid
  program_stride: int              # every program_stride-th program is sampled
  num_warps: int
  warp_stride: int                 # every warp_stride-th warp of a sampled program
  row_words: int
  param: str = PARAM

  @property
  def sampled_programs(self) -> int:
    return -(-self.programs // self.program_stride)

  @property
  def sampled_warps(self) -> int:
    return -(-self.num_warps // self.warp_stride)

  @property
  def rows(self) -> int:
    return self.sampled_programs * self.sampled_warps

  @property
  def words(self) -> int:
    return self.rows * self.row_words

  @property
  def nbytes(self) -> int:
    return 8 * self.words


@dataclasses.dataclass(frozen=True)
class WorkaroundPlan(Saved):
  """Lowerings that keep Triton off a failing path: what workarounds.py asks lower_kernel
  for after a compile failed with a fault of Triton's. It names equations (by index) and
  the form each is lowered in instead of its plain one (for a scan: scan_forms.py), plus
  notes of changes made outside the lowering (another num_warps)."""
  scan_forms: tuple[tuple[int, str], ...] = ()   # (equation index, form), scan_forms.py
  num_warps: int | None = None                   # lowered with these instead of the kernel's
  notes: tuple[str, ...] = ()                    # changes made outside the rules (num_warps)
  because: str = ""                              # the failure it avoids, in one line
  # a saved plan's file says what it is for beside the plan (workarounds.py)
  OTHER_KEYS: ClassVar[tuple[str, ...]] = ("format", "fault")

  def form_of(self, index: int) -> str | None:
    for i, form in self.scan_forms:
      if i == index:
        return form
    return None

  def only(self, indices) -> "WorkaroundPlan":
    """The plan for these equations only."""
    keep = set(indices)
    return dataclasses.replace(self, scan_forms=tuple(p for p in self.scan_forms
                                                      if p[0] in keep))


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
  """Everything lower_kernel needs besides the call itself (jaxpr, grid mapping,
  name, call site, aliases).

  `launch_group` > 1: programs run in grouped order (grid.grouped_launch) where
  the grid allows it; the GeneratedKernel's launch_group says whether it did.
  `persistent` > 0: that many programs are launched, each looping over the launch
  grid's points (grid.persistent_launch) where there are more; the GeneratedKernel's
  persistent says whether it did.
  `loop_stages` > 0: each innermost loop that loads and has no dot is Triton's
  `tl.range(..., num_stages=loop_stages)`, whose loads Triton then pipelines (the kernel's
  num_stages pipelines only a dot's); the GeneratedKernel's loop_stages says whether any
  loop took it.
  `tma`: dense blocks load (and an output's one block stores) through Hopper's
  TMA where that provably moves the same elements (tma.py).
  `check_bounds`: the bounds-checked debug build (lowering/features/bounds.py).
  `probes`: True or a ProbeOptions for the profiler's probed variant
  (lowering/features/probes.py); None or False for the kernel as the user's program runs it.
  `workarounds`: a WorkaroundPlan, equations lowered in other forms because Triton
  fails on their plain ones (compiling/failures/workarounds.py).
  `debug`: print the jaxpr and the generated source (pallas_call(debug=True));
  it changes no code, so it takes no part in equality.
  """
  num_warps: int = DEFAULT_NUM_WARPS
  num_stages: int = DEFAULT_NUM_STAGES
  compute_capability: int = 90
  enable_fp_fusion: bool = False
  launch_group: int = 0
  tma: bool = False
  persistent: int = 0
  loop_stages: int = 0
  check_bounds: bool = False
  probes: bool | ProbeOptions | None = None
  workarounds: WorkaroundPlan | None = None
  debug: bool = dataclasses.field(default=False, compare=False)

  # what a kernel's file (kernel.json) keeps of them, under these names: GeneratedKernel.save
  # writes them, a saved run's reader makes a kernel's options of them (cli/saved_runs/kernel.py)
  SAVED: ClassVar[tuple[str, ...]] = ("num_warps", "num_stages", "enable_fp_fusion",
                                      "check_bounds", "launch_group", "tma", "persistent",
                                      "loop_stages")

  def __post_init__(self):
    # one spelling per value: a tuner config's {"tma": 1} and tma=True are one candidate
    object.__setattr__(self, "tma", bool(self.tma))
    object.__setattr__(self, "launch_group", int(self.launch_group or 0))
    object.__setattr__(self, "persistent", int(self.persistent or 0))
    object.__setattr__(self, "loop_stages", int(self.loop_stages or 0))
    object.__setattr__(self, "check_bounds", bool(self.check_bounds))

  def replace(self, **changes) -> "LoweringOptions":
    return dataclasses.replace(self, **changes)

  def saved(self) -> dict:
    """The fields SAVED names, by name; persistent and loop_stages only where set, so that
    a kernel.json of a kernel without them is what it was before the fields (and reads
    where they are unknown)."""
    return {name: getattr(self, name) for name in self.SAVED
            if name not in ("persistent", "loop_stages") or getattr(self, name)}

  @property
  def settings(self) -> TunedSettings:
    """The tuned part, by name."""
    return TunedSettings(self.num_warps, self.num_stages, self.launch_group, self.tma,
                         self.persistent, self.loop_stages)

  def with_settings(self, settings: TunedSettings) -> "LoweringOptions":
    return self.replace(**settings.fields())

  @property
  def label(self) -> str:
    return self.settings.label


# what each tuned option may be, in words (Triton refuses another value deep in a compile, or
# CUDA the launch): CompilerParams refuses one at the user's line, a saved kernel's reader
# one in its file (cli/saved_runs/kernel.py)
_ALLOWED = {
    "num_warps": (lambda w: 1 <= w <= 32 and not w & (w - 1),
                  "must be a power of two from 1 to 32 (a program runs 32 threads per warp, "
                  "at most 1024)"),
    "num_stages": (lambda s: s >= 1, "must be an integer >= 1 (1: no software pipelining)"),
    "launch_group": (lambda g: g >= 0,
                     "must be an integer >= 0 (0 or 1: the plain launch order)"),
    "persistent": (lambda p: 0 <= p <= 2**31 - 1,
                   "must be an integer >= 0 (0: one program per point of the grid)"),
    "loop_stages": (lambda s: 0 <= s <= 16,
                    "must be an integer from 0 to 16 (0: loops as written; Triton's own "
                    "pipelining of a dot's loads is num_stages)"),
}


def option_problem(name: str, value) -> str | None:
  """What is wrong with `value` as the option `name`, None if nothing (or no rule)."""
  if name not in _ALLOWED:
    return None
  allowed, want = _ALLOWED[name]
  whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
  return None if whole and allowed(value) else want


def option_property(name: str) -> property:
  """A read-only view of one of the options of a record that keeps them as `options` (a
  GeneratedKernel's num_warps): the record keeps no copy of its own."""
  return property(lambda record: getattr(record.options, name), doc=f"options.{name}")


def read_saved_options(saved: dict, where: str) -> "LoweringOptions":
  """A kernel's LoweringOptions from what kernel.json keeps of them (LoweringOptions.SAVED:
  num_warps and num_stages required, the rest as an older file may lack them); what no file
  keeps (the target, probes, a workaround plan) at its defaults. A value pallas-prof never
  writes (num_warps=3) is refused, naming the field and the rule."""
  hints = typing.get_type_hints(LoweringOptions)
  values = {}
  for name in LoweringOptions.SAVED:
    value = saved.get(name)
    if value is None:
      if name in ("num_warps", "num_stages"):
        raise Misfit(f"{where}.{name}", hints[name], None)
      continue
    value = decode(hints[name], value, f"{where}.{name}", strict=True)
    problem = option_problem(name, value)
    if problem:
      raise Misfit(f"{where}.{name} is {value!r}, which pallas-prof never writes: it "
                          f"{problem}")
    values[name] = value
  return LoweringOptions(**values)
