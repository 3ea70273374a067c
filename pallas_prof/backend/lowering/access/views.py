"""A ref's view: indexers (ints, pl.ds, integer arrays) and transforms compose
onto the ViewDims of a RefValue; the memory rules read and write through it.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ... import compat
from .. import emit
from ..codegen import Value
from ...errors import Unsupported
from .refs import RefValue, ViewDim


# --- views -----------------------------------------------------------------------

def _as_int(ctx, v, dtype) -> Value:
  if isinstance(v, Value):
    out = emit.cast(ctx.b, v, dtype, "idx")
    if out is not v:      # what a feature (TMA) needs to know of starts
      ctx.kernel.listeners.index_sum(ctx.kernel, out, [(v, 1)])
    return out
  if isinstance(v, (int, np.integer)):
    return emit.const(int(v), dtype)
  raise Unsupported(f"index of type {type(v).__name__}", "use ints, pl.ds or int arrays")


def _add_scaled(ctx, base: Value, offset: Value, stride: int, dtype, hint) -> Value:
  """base + offset * stride, folding constants."""
  if offset.const is not None and base.const is not None:
    return emit.const(base.const + offset.const * stride, dtype)
  scaled = offset.expr if stride == 1 else f"{offset} * {stride}"
  if offset.const is not None:
    if offset.const == 0:
      return base
    scaled = str(offset.const * stride)
  loops = base.loops | offset.loops
  if base.const == 0:
    if stride == 1 and offset.const is None:
      return offset
    out = Value(ctx.assign_once(hint, scaled, f"{hint}: {scaled}"), np.dtype(dtype), loops=loops)
  else:
    expr = f"{base} + {scaled}"
    out = Value(ctx.assign_once(hint, expr, f"{hint}: {expr}"), np.dtype(dtype), loops=loops)
  ctx.kernel.listeners.index_sum(ctx.kernel, out, [(base, 1), (offset, stride)])   # for TMA
  return out


def apply_indexer(ctx, ref: RefValue, indexer, read) -> RefValue:
  """Composes one NDIndexer (from x_ref.at[...] or x_ref[...]) onto a view."""
  if not isinstance(indexer, compat.NDIndexer):
    raise _unsupported_transform(indexer)
  visible = [i for i, d in enumerate(ref.dims) if d.kind == "slice"]
  if len(visible) != len(indexer.indices):
    raise Unsupported(f"indexer of rank {len(indexer.indices)} on a ref of rank {len(visible)}")
  dims = list(ref.dims)
  dt = ref.index_dtype
  for axis, idx in zip(visible, indexer.indices, strict=True):
    d = ref.dims[axis]
    if isinstance(idx, compat.Slice):
      dims[axis] = _slice_dim(ctx, ref, axis, d, idx)
      continue
    index = _index_value(ctx, idx, dt, read)
    if index.shape:
      # `size` keeps the indexed dimension's length: the index's bounds
      dims[axis] = ViewDim("gather", d.start, d.size, d.stride, None, d.extent,
                           gather_index(ctx, index, d, dt))
      continue
    if index.const is not None and index.const < 0:
      index = emit.const(index.const + d.size, dt)   # x_ref[-1]: NumPy's wrap-around
    start = _add_scaled(ctx, d.start, index, d.stride, dt, f"{ref.name}_i{axis}")
    static = None
    if d.static_offset is not None and index.const is not None:
      static = d.static_offset + index.const * d.stride
    dims[axis] = ViewDim("int", start, 1, 1, static, d.extent)
  return dataclasses.replace(ref, dims=tuple(dims),
                             gather_position=_gather_position(indexer))


def _slice_dim(ctx, ref: RefValue, axis: int, d: ViewDim, idx) -> ViewDim:
  if not isinstance(idx.size, (int, np.integer)):
    raise Unsupported("a pl.ds with a dynamic size", "slice sizes must be static ints")
  if not isinstance(idx.stride, (int, np.integer)):
    raise Unsupported("a pl.ds with a dynamic stride", "strides must be static ints")
  dt = ref.index_dtype
  start = _as_int(ctx, idx.start, dt)
  stride = int(idx.stride)
  new_start = _add_scaled(ctx, d.start, start, d.stride, dt, f"{ref.name}_s{axis}")
  static = None
  if d.static_offset is not None and start.const is not None:
    static = d.static_offset + start.const * d.stride
  return ViewDim("slice", new_start, int(idx.size), d.stride * stride, static, d.extent)


def _index_value(ctx, idx, dt, read) -> Value:
  """A scalar or array index as a Value (an index ref is read first, with
  `read(ctx, ref)`: the memory rules' read)."""
  if isinstance(idx, (int, np.integer)):
    return emit.const(int(idx), dt)
  if isinstance(idx, RefValue):
    idx = read(ctx, idx)         # x_ref[idx_ref]: JAX allows a ref of indices
  if not isinstance(idx, Value):
    raise Unsupported(f"index of type {type(idx).__name__}", "use ints, pl.ds or int arrays")
  if not np.issubdtype(idx.dtype, np.integer):
    raise Unsupported(f"an index of dtype {idx.dtype}", "index with integers")
  return idx if idx.shape else emit.cast(ctx.b, idx, dt, "idx")


def gather_index(ctx, index: Value, d: ViewDim, dt) -> Value:
  """An integer-array index in the index dtype, used as given.

  Like JAX's own Triton backend, and unlike jnp's gather, entries are not
  wrapped or clamped: `i * block + jnp.arange(block)` must stay a contiguous
  range that Triton can turn into vector loads (a where/min/max on it costs
  2x on layer norm). Reads out of range are undefined (mask them, as JAX's
  GPU kernels do); writes out of range are dropped.
  """
  return emit.cast(ctx.b, index, dt, "gidx")


def _gather_position(indexer) -> int:
  """Where an indexer's integer-array dims go in the result (JAX = NumPy's rule):
  in place when the non-slice indices are adjacent, else in front."""
  is_int = [not isinstance(i, compat.Slice) for i in indexer.indices]
  if not any(is_int):
    return 0
  positions = [i for i, flag in enumerate(is_int) if flag]
  if any(b - a != 1 for a, b in itertools.pairwise(positions)):
    return 0
  return positions[0]   # every index before the first int index is a slice


def _unsupported_transform(transform) -> Unsupported:
  kind = type(transform).__name__
  hints = {
      "BitcastTransform": ("bitcasting a ref (x_ref.bitcast(...))",
                           "load the value and use lax.bitcast_convert_type on it"),
      "ReshapeTransform": ("reshaping a ref (x_ref.reshape(...))",
                           "load the value and reshape it, or give the BlockSpec the "
                           "shape you need"),
      "TransposeTransform": ("transposing a ref (x_ref.T / x_ref.transpose(...))",
                             "load the value and transpose it (jnp.transpose / .T)"),
  }
  reason, hint = hints.get(kind, (f"the ref transform {kind}",
                                  "only indexing (slices, pl.ds, ints, int arrays) is "
                                  "supported on refs; load the value and transform it"))
  return Unsupported(reason, hint)


def apply_transforms(ctx, ref, transforms, read) -> RefValue:
  if not isinstance(ref, RefValue):
    raise Unsupported("indexing a value that is not a kernel ref")
  for t in transforms:
    if any(d.kind == "gather" for d in ref.dims):
      raise Unsupported("indexing a ref view that was itself indexed by an array",
                        "index with the array last")
    ref = apply_indexer(ctx, ref, t, read)
  return ref


def result_shape(ref: RefValue) -> tuple[int, ...]:
  """The shape of a read through this view (NumPy's advanced-indexing order)."""
  slice_sizes = [d.size for d in ref.dims if d.kind == "slice"]
  gathers = [d for d in ref.dims if d.kind == "gather"]
  if not gathers:
    return tuple(slice_sizes)
  int_shape = np.broadcast_shapes(*[g.index.shape for g in gathers])
  pos = ref.gather_position
  return tuple(slice_sizes[:pos]) + tuple(int_shape) + tuple(slice_sizes[pos:])
