"""The bounds-checked mode's record of one checked access (a CheckSite), kept with the
GeneratedKernel (artifacts.py) and written to kernel.json, so a saved or ejected kernel
can still say which access of which ref went out of bounds (backend/lowering/features/bounds.py
emits the checks, backend/running/bounds_errors.py words the findings); and the words for
a block that starts outside its array, which the lowering's check before launch
(lowering/blockspec.py) and the bounds-checked mode's after the kernel both say."""
from __future__ import annotations

import dataclasses

from .. import serial
from ..serial import Saved

# a checked index is recorded in the flag buffer as OFFSET - index and index + OFFSET,
# clamped to (-OFFSET, OFFSET): the lowering writes it so, the run-time check reads it back
OFFSET = 1 << 30


def _optional(default):
  return serial.field(default=default, omit_empty=True)


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
  # "": an index of the access outside its ref (block); "block": the block itself (the
  # BlockSpec's index map) outside the array, checked_axes then holding the block indices'
  # ranges and, after them, the grid's program ids' (one per dimension of `grid`). Left
  # out of kernel.json when empty: an access site is saved as it was before blocks were
  kind: str = _optional("")
  operand: str = _optional("")         # "input 0", "output 1": which of the call's operands
  where: tuple = _optional(())         # (file, line, function) of the BlockSpec's index map
  grid: tuple[int, ...] = _optional(())
  squeezed: tuple[bool, ...] = _optional(())   # per dimension: the index is an element's

  @property
  def slots(self) -> int:
    return 1 + 2 * len(self.checked_axes) + 2 * len(self.grid)


OUTSIDE_HINT = ("an index map returns block indices (element offsets divided by the block "
                "size), each in 0 to cdiv(size, block size) - 1 for every program of the "
                "grid (the last block may be partial: its lanes past the end are masked). "
                "Make the grid match the array (pl.cdiv(size, block)), or clamp the index "
                "(jnp.minimum(i + 1, blocks - 1)) and guard the access with pl.when")


def block_outside_words(axis: int, block: int, block_size: int, size: int,
                        squeezed: bool) -> str:
  """Why block index `block` along `axis` is outside an array of `size` there, in blocks
  of `block_size` (a squeezed dimension: the index is an element's)."""
  if squeezed:
    return (f"index {block} along dimension {axis}, a squeezed dimension of {size}, is "
            f"outside 0 to {size - 1}")
  edge = "before the array's start" if block < 0 else f"at or past the end ({size} elements)"
  blocks = -(-size // block_size)
  return (f"along dimension {axis}, block {block} starts at element {block * block_size}, "
          f"{edge}; blocks of {block_size} make block indices 0 to {blocks - 1} there")
