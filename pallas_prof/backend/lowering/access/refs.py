"""How a rule sees a kernel operand: a pointer into global memory plus the
view (block, slice, gather) the current indexing selects. The memory rules
make and read these; the dispatcher's memory-effect analysis reads their names.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..codegen import Value


@dataclasses.dataclass(frozen=True)
class ViewDim:
  """One dimension of the array behind a ref, as the current view indexes it.

  kind "int": the view fixes this dimension at `start` (squeezed / int index).
  kind "slice": `size` elements `start, start+stride, ...`.
  `static_offset` is the view's start relative to its block when known at
  lowering time; `extent` is the block's size along this dimension.
  """
  kind: str
  start: Value
  size: int = 1
  stride: int = 1
  static_offset: int | None = 0
  extent: int = 1
  index: Value | None = None     # kind "gather": the integer index array


@dataclasses.dataclass(frozen=True)
class BlockIndices:
  """The bounds-checked mode's view of a ref's block (lowering/blockspec.py): the block
  index the index map picked along each checked dimension, how many blocks there are
  there, the program ids, and what a violation says (check_sites.CheckSite's fields)."""
  axes: tuple[int, ...]
  indices: tuple[str, ...]        # the block index's expression, per axis in `axes`
  counts: tuple[int, ...]         # valid block indices along it: 0 to count - 1
  program_ids: tuple[str, ...]    # per dimension of the grid
  site: tuple = ()                # (field, value) pairs of its CheckSite


@dataclasses.dataclass(frozen=True)
class RefValue:
  """A kernel operand in global memory: a pointer plus the block it sees."""
  name: str
  dtype: np.dtype
  array_shape: tuple[int, ...]
  dims: tuple[ViewDim, ...]
  ragged: tuple[bool, ...]       # the block grid overhangs the array on this dim
  index_dtype: np.dtype
  label: str                     # the user's name for it (x_ref)
  gather_position: int = 0       # where integer-array index dims land in a read's shape
  # the block's first element per dimension (bounds-checked mode: indices
  # relative to it must lie in [0, extent)); () when not known
  origin: tuple = ()
  # the bounds-checked mode: the block's indices, checked at each access (None: off, or
  # every index a constant inside the array)
  block: BlockIndices | None = None

  @property
  def shape(self) -> tuple[int, ...]:
    return tuple(d.size for d in self.dims if d.kind == "slice")

  @property
  def loops(self) -> frozenset[int]:
    """The loops its view varies with (Value.loops): its starts' and index arrays'."""
    return frozenset().union(*(v.loops for d in self.dims for v in (d.start, d.index)
                               if v is not None))

  @property
  def strides(self) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(self.array_shape):
      strides.append(acc)
      acc *= d
    return tuple(reversed(strides))

  def with_dims(self, dims) -> "RefValue":
    return dataclasses.replace(self, dims=tuple(dims))

  def contiguous_bytes(self) -> int | None:
    """Bytes of the longest run of consecutive addresses one access of this view moves
    (a row of its block, or several rows where the view covers whole rows): how well
    the access coalesces. None for a gather or packed int4, whose runs are not known
    at lowering."""
    if not self.dims:
      return None
    itemsize = np.dtype(self.dtype).itemsize
    run = 1
    for d, extent in zip(reversed(self.dims), reversed(self.array_shape), strict=True):
      if d.kind == "gather":
        return None
      if d.kind != "slice":
        break
      if d.stride != 1:
        break
      run *= d.size
      if d.size < extent:
        break
    return run * itemsize

