"""The bounds-checked mode's record of one checked access (a CheckSite), kept with the
GeneratedKernel (artifacts.py) and written to kernel.json, so a saved or ejected kernel
can still say which access of which ref went out of bounds (backend/lowering/features/bounds.py
emits the checks, backend/running/bounds_errors.py words the findings)."""
from __future__ import annotations

import dataclasses

from ..serial import Saved

# a checked index is recorded in the flag buffer as OFFSET - index and index + OFFSET,
# clamped to (-OFFSET, OFFSET): the lowering writes it so, the run-time check reads it back
OFFSET = 1 << 30


@dataclasses.dataclass(frozen=True)
class CheckSite(Saved):
  """One checked access: where its record starts in the flag buffer, and what
  to say about it."""
  base: int
  eqn_index: int
  access: str                          # "read" | "write" | "atomic"
  ref: str                             # the user's name for the ref (x_ref)
  block_shape: tuple[int, ...]         # the ref as the kernel sees it (block, or whole array)
  array_shape: tuple[int, ...]
  dtype: str
  # the dimensions checked at run time (the flag holds their index ranges);
  # the others are statically inside the ref: static_ranges says where
  checked_axes: tuple[int, ...] = ()
  static_ranges: tuple[str | None, ...] = ()

  @property
  def slots(self) -> int:
    return 1 + 2 * len(self.checked_axes)
