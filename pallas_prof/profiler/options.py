"""ProfileOptions: what one profile() call was asked, in one frozen object.

profile() (api.py) keeps its keyword arguments, which users call it with; it builds
this once and hands it to each phase (replay, attribution, probes), which read the
fields they need by name. Values that would fail every kernel's replay (an unknown
timing mode, no launch to time) are refused here, before any kernel is compiled.
It is the conductor's, as api.py is: no room imports it (tests/test_structure.py).
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable

from .driver import ProfilerError


@dataclasses.dataclass(frozen=True)
class ProfileOptions:
  """profile()'s arguments (its docstring says what each does)."""
  device: int = 0
  replay: bool = True
  min_launches: int = 100
  min_seconds: float = 0.2
  nvml: bool = True
  ceilings: Any = True
  refresh_ceilings: bool = False
  ncu: bool = False
  insitu: Any = None
  reference: str | Callable | dict | None = None
  tolerance: Any = None
  top: int = 5
  mode: str = "both"
  sample: bool = True
  keep_samples: str | None = None
  probes: Any = False

  def __post_init__(self):
    # lazy: at the top it would load numpy whenever this module is imported
    from .timing.policy import MODES
    if self.mode not in MODES:
      raise ProfilerError(f"profile(mode={self.mode!r}): the timing mode is one of "
                          f"{', '.join(MODES)}")
    if isinstance(self.min_launches, bool) or \
        not isinstance(self.min_launches, numbers.Integral) or \
        self.min_launches < 1:
      raise ProfilerError(f"profile(min_launches={self.min_launches!r}): give a whole number "
                          "of launches to time, 1 or more")

  @property
  def samples_taken(self) -> bool:
    """PC samples are taken of a replay: none without one."""
    return self.sample and self.replay

  def reference_for(self, target):
    """The reference a kernel's outputs are checked against: a dict names it by label or
    name."""
    return _by_kernel(self.reference, target)

  def tolerance_for(self, target):
    return _by_kernel(self.tolerance, target)


def _by_kernel(value, target):
  if isinstance(value, dict):
    return value.get(target.label, value.get(target.name))
  return value
