"""LoweringOptions: how one pallas_call is lowered, in one frozen object.

Registration makes it from the call's CompilerParams and the process's modes
(bounds checks); lower_kernel reads it; the GeneratedKernel keeps it; the
tuner's candidates, the workaround search and the profiler's probed variant
are the same options with a field or two replaced (`replace`), lowered again
through the registry record's `relower`. Nothing re-declares the fields.

`settings` is the tuned part, a TunedSettings (num_warps, num_stages,
launch_group, tma): what the tuner tries, the advice's trials change and the
tuning files name. `key` is its tuple, as the tuner's disk cache and tuning files
store it (`with_key` reads one back onto the options of a kernel).
"""
from __future__ import annotations

import dataclasses
from typing import Any

DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
TUNED_FIELDS = ("num_warps", "num_stages", "launch_group", "tma")


@dataclasses.dataclass(frozen=True)
class TunedSettings:
  """The tuned part of LoweringOptions, by name: what a tuner config, an advice action
  of kind a and a tuning file's entry set."""
  num_warps: int = DEFAULT_NUM_WARPS
  num_stages: int = DEFAULT_NUM_STAGES
  launch_group: int = 0
  tma: bool = False

  def __post_init__(self):
    # one spelling per value, as LoweringOptions keeps them: {"tma": 1} is tma=True
    for name in ("num_warps", "num_stages", "launch_group"):
      object.__setattr__(self, name, int(getattr(self, name) or 0))
    object.__setattr__(self, "tma", bool(self.tma))

  @classmethod
  def from_key(cls, key) -> "TunedSettings":
    """The settings of a stored key (a shorter key leaves the rest at their defaults)."""
    return cls(**dict(zip(TUNED_FIELDS, key)))

  def changed(self, change: dict) -> "TunedSettings":
    """These settings with the tuned fields a change names (an action's or a config's);
    the change's other fields (a block shape's operand) are not settings."""
    return dataclasses.replace(self, **{k: v for k, v in change.items() if k in TUNED_FIELDS})

  def fields(self) -> dict:
    return dataclasses.asdict(self)

  @property
  def key(self) -> tuple[int, int, int, int]:
    """(num_warps, num_stages, launch_group, tma), as stored on disk."""
    return (self.num_warps, self.num_stages, self.launch_group, int(self.tma))

  @property
  def label(self) -> str:
    return key_label(self.key)


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
  """Everything lower_kernel needs besides the call itself (jaxpr, grid mapping,
  name, call site, aliases).

  `launch_group` > 1: programs run in grouped order (grid.grouped_launch) where
  the grid allows it; the GeneratedKernel's launch_group says whether it did.
  `tma`: dense blocks load (and an output's one block stores) through Hopper's
  TMA where that provably moves the same elements (tma.py).
  `check_bounds`: the bounds-checked debug build (lowering/features/bounds.py).
  `probes`: True or a probes.ProbeOptions for the profiler's probed variant
  (probes.py); None or False for the kernel as the user's program runs it.
  `workarounds`: a workaround_plan.WorkaroundPlan, equations lowered in other
  forms because Triton fails on their plain ones (workarounds.py).
  `debug`: print the jaxpr and the generated source (pallas_call(debug=True));
  it changes no code, so it takes no part in equality.
  """
  num_warps: int = DEFAULT_NUM_WARPS
  num_stages: int = DEFAULT_NUM_STAGES
  compute_capability: int = 90
  enable_fp_fusion: bool = False
  launch_group: int = 0
  tma: bool = False
  check_bounds: bool = False
  probes: Any = None
  workarounds: Any = None
  debug: bool = dataclasses.field(default=False, compare=False)

  def __post_init__(self):
    # one spelling per value: a tuner config's {"tma": 1} and tma=True are one candidate
    object.__setattr__(self, "tma", bool(self.tma))
    object.__setattr__(self, "launch_group", int(self.launch_group or 0))

  def replace(self, **changes) -> "LoweringOptions":
    return dataclasses.replace(self, **changes)

  @property
  def settings(self) -> TunedSettings:
    """The tuned part, by name."""
    return TunedSettings(self.num_warps, self.num_stages, self.launch_group, self.tma)

  def with_settings(self, settings: TunedSettings) -> "LoweringOptions":
    return self.replace(**settings.fields())

  @property
  def key(self) -> tuple[int, int, int, int]:
    """(num_warps, num_stages, launch_group, tma): the tuned part, as stored on disk."""
    return self.settings.key

  def with_key(self, key) -> "LoweringOptions":
    """These options with a stored key's fields (a shorter key leaves the rest)."""
    return self.replace(**dict(zip(TUNED_FIELDS, key)))

  @property
  def label(self) -> str:
    return key_label(self.key)


def key_label(key) -> str:
  """"8w 3s", "8w 3s g8" for a grouped launch order, "8w 3s tma" with TMA loads."""
  text = f"{key[0]}w {key[1]}s"
  text += f" g{key[2]}" if len(key) > 2 and key[2] else ""
  return text + (" tma" if len(key) > 3 and key[3] else "")
