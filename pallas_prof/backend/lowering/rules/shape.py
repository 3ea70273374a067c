"""Shape ops on values in registers: broadcast, reshape, squeeze, transpose,
iota, slicing (static and dynamic) and concatenation.

Values keep power-of-two padded shapes, so a reshape is only exact when it
does not move padded lanes: every reshape of power-of-two shapes, and any
reshape that only adds or removes unit dimensions. Slices of a value gather
the wanted lanes (tl.gather); picking one element sums its bits.
"""
from __future__ import annotations

import math

import numpy as np
from jax import lax

from ... import compat
from .. import emit
from ..codegen import Value, is_bool, is_low_float, next_pow2, padded_shape, tl_dtype
from ...errors import Unsupported
from .table import register
from .. import triton_names as tl


@register(lax.broadcast_in_dim_p)
def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions, sharding=None):
  shape = tuple(shape)
  if not x.shape:
    if x.const is not None:
      return emit.full(ctx.b, shape, x.const, x.dtype, "bcast")
    if not shape:
      return x
    return ctx.value("bcast", f"{tl.broadcast_to}({x}, {emit.shape_expr(padded_shape(shape))})",
                     x.dtype, shape)
  expanded = emit.expand_to_rank(x, tuple(broadcast_dimensions), len(shape))
  in_shape = [1] * len(shape)
  for src, dst in enumerate(broadcast_dimensions):
    in_shape[dst] = x.shape[src]
  if tuple(in_shape) == shape:
    if expanded == str(x):
      return x
    return ctx.value("expand", expanded, x.dtype, shape)
  return ctx.value("bcast", f"{tl.broadcast_to}({expanded}, {emit.shape_expr(padded_shape(shape))})",
                   x.dtype, shape)


def reshape_value(ctx, x: Value, shape: tuple[int, ...], hint="reshaped") -> Value:
  shape = tuple(shape)
  if tuple(x.shape) == shape:
    return x
  if math.prod(x.shape) != math.prod(shape):
    raise Unsupported(f"reshape of {x.shape} to {shape} changes the size")
  if x.const is not None and not x.shape:
    return emit.full(ctx.b, shape, x.const, x.dtype, hint)
  if not shape:
    return _to_scalar(ctx, x)
  if not x.shape:
    return ctx.value(hint, f"{tl.broadcast_to}({x}, {emit.shape_expr(padded_shape(shape))})",
                     x.dtype, shape)
  if not _keeps_padded_layout(x.shape, shape):
    raise Unsupported(
        f"reshape of {x.shape} to {shape}: pallas-prof pads each dimension to a power of "
        "two, and this reshape would mix padded lanes into the result",
        "reshape the ref or the array outside the kernel, or use power-of-two sizes for "
        "the dimensions after the first of each reshaped group")
  return ctx.value(hint, f"{tl.reshape}({x}, {emit.shape_expr(padded_shape(shape))})",
                   x.dtype, shape)


def _keeps_padded_layout(in_shape, out_shape) -> bool:
  """Whether reshaping the padded tensor row-major is the logical reshape.

  Unit dimensions never matter. The rest split into groups of dimensions whose
  sizes multiply to the same number on both sides (e.g. (5, 8) -> (40,) or
  (5, 8) -> (10, 4)). When every dimension of a group but its first is a power
  of two, the logical elements keep their row-major offsets within the padded
  group, and both sides pad the group to next_pow2(its size): nothing moves.
  """
  dims_in = [d for d in in_shape if d != 1]
  dims_out = [d for d in out_shape if d != 1]
  i = j = 0
  while i < len(dims_in) and j < len(dims_out):
    group_in, group_out = [dims_in[i]], [dims_out[j]]
    i, j = i + 1, j + 1
    while math.prod(group_in) != math.prod(group_out):
      if math.prod(group_in) < math.prod(group_out):
        group_in.append(dims_in[i])
        i += 1
      else:
        group_out.append(dims_out[j])
        j += 1
    if any(next_pow2(d) != d for d in group_in[1:] + group_out[1:]):
      return False
  return True


def _to_scalar(ctx, x: Value) -> Value:
  """A one-element tensor to a scalar: a reduction of its single lane that keeps
  the dtype exactly (tl.max/tl.sum would widen narrow types)."""
  flat = x if x.ndim == 1 else ctx.value("flat", f"{tl.reshape}({x}, (1,))", x.dtype, (1,))
  first = ctx.b.helper("combine_first", _COMBINE_FIRST)
  if is_bool(x.dtype):
    as_int = ctx.value("flat_i8", f"{flat}.to({tl.int8})", np.int8, (1,))
    return ctx.value("scalar", f"{tl.reduce}({as_int}, 0, {first}) != 0", x.dtype, ())
  return ctx.value("scalar", f"{tl.reduce}({flat}, 0, {first})", x.dtype, ())


_COMBINE_FIRST = """
def combine_first(a, b):
    return a
"""


@register(lax.reshape_p, limits=(
    "no dimension permutation; blocks are padded to powers of two, so a reshape that would "
    "mix padded lanes into the result is refused (power-of-two trailing sizes always work)"))
def _reshape(ctx, x, *, new_sizes, dimensions=None, sharding=None, **params):
  if dimensions is not None and tuple(dimensions) != tuple(range(x.ndim)):
    raise Unsupported("reshape with a dimension permutation", "transpose first")
  return reshape_value(ctx, x, tuple(new_sizes))


@register(lax.squeeze_p)
def _squeeze(ctx, x, *, dimensions):
  return reshape_value(ctx, x, tuple(ctx.avals_out[0].shape), "squeezed")


_expand_dims_p = getattr(lax, "expand_dims_p", None)
if _expand_dims_p is not None:  # pragma: no cover - not a primitive in current JAX
  register(_expand_dims_p)(lambda ctx, x, **p: reshape_value(ctx, x, tuple(ctx.avals_out[0].shape)))


@register(lax.transpose_p)
def _transpose(ctx, x, *, permutation):
  perm = tuple(permutation)
  if perm == tuple(range(x.ndim)):
    return x
  shape = tuple(x.shape[p] for p in perm)
  expr = f"{tl.trans}({x})" if x.ndim == 2 else f"{tl.permute}({x}, {perm})"
  return ctx.value("transposed", expr, x.dtype, shape)


@register(lax.iota_p)
def _iota(ctx, *, dtype, shape, dimension, sharding=None):
  shape = tuple(shape)
  n = shape[dimension]
  base = Value(f"{tl.arange}(0, {next_pow2(n)})", np.dtype(np.int32), (n,))
  v = ctx.value("iota", str(base), np.int32, (n,))
  if is_low_float(dtype):
    # int -> 16-bit float through f32 (exact for any block size): Triton's
    # interpreter cannot convert ints to bfloat16 directly
    v = emit.cast(ctx.b, v, np.float32, "iota")
  v = emit.cast(ctx.b, v, dtype, "iota")
  if len(shape) == 1:
    return v
  expanded = emit.expand_to_rank(v, (dimension,), len(shape))
  return ctx.value("iota", f"{tl.broadcast_to}({expanded}, {emit.shape_expr(padded_shape(shape))})",
                   v.dtype, shape)


# --- slices of values -------------------------------------------------------------

def _bits_dtype(dtype):
  return {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32),
          8: np.dtype(np.int64)}[np.dtype(dtype).itemsize]


def _take_lanes(ctx, x: Value, axis: int, start: Value | int, size: int, stride: int = 1) -> Value:
  """x[..., start:start+size*stride:stride, ...] along one axis."""
  out_shape = tuple(size if i == axis else d for i, d in enumerate(x.shape))
  if size == x.shape[axis] and stride == 1 and isinstance(start, int) and start == 0:
    return x
  if size == 1:
    return _take_one(ctx, x, axis, start, out_shape)
  positions = f"{start} + {tl.arange}(0, {next_pow2(size)})" + (f" * {stride}" if stride != 1 else "")
  positions = f"{tl.minimum}({positions}, {x.shape[axis] - 1})"  # padded lanes stay in range
  return _gather_lanes(ctx, x, axis, positions, size, "sliced")


def _take_one(ctx, x: Value, axis: int, start, out_shape) -> Value:
  # Select one lane exactly: zero the others and sum the raw bits.
  bits_t = _bits_dtype(x.dtype) if not is_bool(x.dtype) else np.dtype(np.int8)
  raw = (f"{x}.to({tl_dtype(bits_t)}, bitcast=True)" if not is_bool(x.dtype)
         else f"{x}.to({tl.int8})")
  lane = emit.expand_to_rank(Value(f"{tl.arange}(0, {next_pow2(x.shape[axis])})", np.dtype(np.int32),
                                   (x.shape[axis],)), (axis,), x.ndim)
  picked = ctx.b.assign("lane_bits", f"{tl.where}({lane} == {start}, {raw}, 0)")
  summed = ctx.b.assign("picked", f"{tl.sum}({picked}, axis={axis}, keep_dims=True)")
  if is_bool(x.dtype):
    return ctx.value("elem", f"{summed} != 0", x.dtype, out_shape)
  if bits_t.itemsize < 4:
    summed = f"{summed}.to({tl_dtype(bits_t)})"
  return ctx.value("elem", f"{summed}.to({tl_dtype(x.dtype)}, bitcast=True)", x.dtype, out_shape)


@register(lax.slice_p)
def _slice(ctx, x, *, start_indices, limit_indices, strides):
  strides = strides or (1,) * x.ndim
  out = x
  for axis, (s, l, st) in enumerate(zip(start_indices, limit_indices, strides, strict=True)):
    size = max(0, -(-(l - s) // st))
    out = _take_lanes(ctx, out, axis, int(s), size, int(st))
  return out


@register(lax.dynamic_slice_p)
def _dynamic_slice(ctx, x, *starts, slice_sizes):
  out = x
  for axis, (start, size) in enumerate(zip(starts, slice_sizes, strict=True)):
    if size == x.shape[axis]:
      continue
    out = _take_lanes(ctx, out, axis, _clamped_start(ctx, start, x.shape[axis] - size), int(size))
  return out


def _clamped_start(ctx, start: Value, limit: int) -> int | str:
  """XLA clamps dynamic starts into [0, limit] so the window stays in bounds."""
  if start.const is not None:
    return int(min(max(start.const, 0), limit))
  start = emit.cast(ctx.b, start, np.int32)
  return ctx.b.assign("start", f"{tl.minimum}({tl.maximum}({start}, 0), {limit})")


@register(lax.dynamic_update_slice_p)
def _dynamic_update_slice(ctx, x, update, *starts):
  placed, in_window = update, []
  for axis, start in enumerate(starts):
    n, m = x.shape[axis], update.shape[axis]
    if m == n:
      continue
    s = _clamped_start(ctx, start, n - m)
    placed = _place_along(ctx, placed, axis, s, n)
    inside = Value(window_test(f"{tl.arange}(0, {next_pow2(n)})", s, m), np.dtype(np.bool_), (n,))
    in_window.append(emit.expand_to_rank(inside, (axis,), x.ndim))
  if not in_window:
    return update
  mask = ctx.b.assign("in_window", " & ".join(in_window))
  return ctx.value("updated", f"{tl.where}({mask}, {placed}, {x})", x.dtype, x.shape)


def window_test(lanes: str, start, size: int) -> str:
  """start <= lanes < start + size, as ONE unsigned comparison.

  Not as `(lanes >= start) & (lanes < start + size)`: LLVM's NVPTX backend
  splits a select on an `and` into two nested selp, ptxas fuses those into a
  predicated select that overwrites the untouched value's register in place,
  and ptxas (12.8 to 13.0 alike) then pairs a 16-bit float multiply that still
  needed the old value into an HFMA2 placed after that overwrite: a float16
  dynamic_update_slice changed another output's elements (the GPU fuzzer's
  seed 18680; tests/backend/compiling/test_ptxas_hazards.py). One comparison gives
  ptxas a single select into a fresh register."""
  shifted = lanes if start == 0 else f"({lanes} - {start})"
  return f"({shifted}.to({tl.uint32}) < {size})"


@register(getattr(lax, "split_p", None))
def _split(ctx, x, *, sizes, axis):
  pieces, start = [], 0
  for size in sizes:
    pieces.append(_take_lanes(ctx, x, axis, start, int(size)))
    start += size
  return pieces


@register(lax.pad_p)
def _pad(ctx, x, fill, *, padding_config):
  out = x
  for axis, (low, high, interior) in enumerate(padding_config):
    if (low, high, interior) != (0, 0, 0):
      out = _pad_axis(ctx, out, axis, low, high, interior, fill)
  return out


def _pad_axis(ctx, x: Value, axis: int, low: int, high: int, interior: int, fill: Value) -> Value:
  """lax.pad along one axis: lane p of the result is x[(p - low) / (interior + 1)]
  where that is a whole index in range, else `fill` (negative low/high crop)."""
  n = x.shape[axis]
  size = low + n + max(n - 1, 0) * interior + high
  shape = tuple(size if i == axis else d for i, d in enumerate(x.shape))
  if n == 0 or size <= 0:
    return emit.broadcast_to(ctx.b, fill, shape)
  step = interior + 1
  offset = ctx.b.assign("pad_offset", f"{tl.arange}(0, {next_pow2(size)}) - {low}")
  source = f"{tl.minimum}({tl.maximum}({offset}, 0) // {step}, {n - 1})"
  if next_pow2(n) < next_pow2(size):
    x = grow_axis(ctx, x, axis, next_pow2(size))
  taken = _gather_lanes(ctx, x, axis, source, size, "pad_src")
  valid = window_test(offset, 0, (n - 1) * step + 1)
  if step > 1:
    valid += f" & ({offset} % {step} == 0)"
  mask = emit.expand_to_rank(Value(f"({valid})", np.dtype(np.bool_), (size,)), (axis,), x.ndim)
  fill_values = emit.broadcast_to(ctx.b, fill, shape)
  return ctx.value("padded", f"{tl.where}({mask}, {taken}, {fill_values})", x.dtype, shape)


def _gather_lanes(ctx, x: Value, axis: int, positions: str, size: int, hint: str) -> Value:
  """Lane k of the result (along `axis`, `size` logical lanes) is lane
  positions[k] of x; `positions` is an int32 expression of next_pow2(size)
  lanes, each within [0, x.shape[axis])."""
  index = emit.expand_to_rank(Value(f"({positions})", np.dtype(np.int32), (size,)), (axis,),
                              x.ndim)
  index_shape = tuple(next_pow2(size) if i == axis else next_pow2(d)
                      for i, d in enumerate(x.shape))
  idx = ctx.b.assign("lanes", f"{tl.broadcast_to}({index}, {emit.shape_expr(index_shape)})")
  out_shape = tuple(size if i == axis else d for i, d in enumerate(x.shape))
  return ctx.value(hint, f"{tl.gather}({x}, {idx}, {axis})", x.dtype, out_shape)


@register(lax.rev_p)
def _rev(ctx, x, *, dimensions):
  out = x
  for axis in dimensions:
    n = x.shape[axis]
    if n <= 1:
      continue
    # padded lanes of the result read lane 0 (any in-range lane will do)
    positions = f"{tl.maximum}({n - 1} - {tl.arange}(0, {next_pow2(n)}), 0)"
    out = _gather_lanes(ctx, out, axis, positions, n, "reversed")
  return out


@register(lax.concatenate_p)
def _concatenate(ctx, *xs, dimension):
  xs = [x for x in xs if x.shape[dimension] != 0]
  if len(xs) == 1:
    return xs[0]
  shape = tuple(ctx.avals_out[0].shape)
  if len(xs) == 2 and xs[0].shape == xs[1].shape and all(next_pow2(d) == d for d in shape):
    return _concatenate_halves(ctx, *xs, dimension, shape)
  # Each piece is gathered into place along the whole output axis; a chain of
  # wheres on the lane position then picks, per lane, the piece that owns it.
  total = shape[dimension]
  placed, ends, offset = [], [], 0
  for x in xs:
    placed.append(_place_along(ctx, x, dimension, offset, total))
    offset += x.shape[dimension]
    ends.append(offset)
  lane = emit.expand_to_rank(Value(f"{tl.arange}(0, {next_pow2(total)})", np.dtype(np.int32),
                                   (total,)), (dimension,), len(shape))
  result = placed[-1]
  for piece, end in zip(reversed(placed[:-1]), reversed(ends[:-1]), strict=True):
    result = ctx.value("concat", f"{tl.where}({lane} < {end}, {piece}, {result})",
                       result.dtype, shape)
  return result


def _place_along(ctx, x: Value, axis: int, offset: int | str, total: int) -> Value:
  """x moved to lanes [offset, offset + n) of an axis of `total` lanes (other
  lanes hold copies of x's edge lanes, overwritten by the caller)."""
  n = x.shape[axis]
  if n == 1:
    shape = tuple(total if i == axis else d for i, d in enumerate(x.shape))
    return ctx.value("piece", f"{tl.broadcast_to}({x}, {emit.shape_expr(padded_shape(shape))})",
                     x.dtype, shape)
  # Triton's compiler rejects a gather whose result is longer than its source
  # along the axis: grow the source first
  if next_pow2(n) < next_pow2(total):
    x = grow_axis(ctx, x, axis, next_pow2(total))
  positions = (f"{tl.minimum}({tl.maximum}({tl.arange}(0, {next_pow2(total)}) - {offset}, 0), "
               f"{n - 1})")
  return _gather_lanes(ctx, x, axis, positions, total, "piece")


def grow_axis(ctx, x: Value, axis: int, target: int) -> Value:
  """x with `axis` widened to `target` (a power of two) lanes by repetition:
  lane r * p + i holds lane i (p = the padded size). The logical shape is
  unchanged along other axes; along `axis` it becomes `target`."""
  p = next_pow2(x.shape[axis])
  padded = list(padded_shape(x.shape))
  rank = x.ndim
  # a repeat dimension before `axis`, broadcast, then merged into `axis`
  expanded = emit.expand_to_rank(x, tuple(i if i < axis else i + 1 for i in range(rank)), rank + 1)
  repeated = padded[:axis] + [target // p] + padded[axis:]
  rep = ctx.b.assign("repeated", f"{tl.broadcast_to}({expanded}, {emit.shape_expr(repeated)})")
  merged = padded[:axis] + [target] + padded[axis + 1:]
  shape = tuple(target if i == axis else d for i, d in enumerate(x.shape))
  return ctx.value("grown", f"{tl.reshape}({rep}, {emit.shape_expr(merged)})", x.dtype, shape)


def _concatenate_halves(ctx, a: Value, b: Value, dimension: int, shape) -> Value:
  """Two equal power-of-two pieces: interleave with tl.join, then reshape."""
  rank = a.ndim
  joined = ctx.b.assign("joined", f"{tl.join}({a}, {b})")   # new last dim of size 2
  perm = list(range(rank))
  perm.insert(dimension, rank)                                 # (.., 2, n_dim, ..)
  moved = ctx.b.assign("joined_t", f"{tl.permute}({joined}, {tuple(perm)})")
  return ctx.value("concat", f"{tl.reshape}({moved}, {emit.shape_expr(shape)})", a.dtype, shape)




@register(compat.stack_p)
def _stack(ctx, *xs, axis):
  """jnp.stack: a unit axis inserted in each piece, then a concatenation."""
  if len(xs) == 2 and axis == xs[0].ndim and xs[0].shape == xs[1].shape:
    shape = tuple(xs[0].shape) + (2,)
    return ctx.value("stacked", f"{tl.join}({xs[0]}, {xs[1]})", xs[0].dtype, shape)
  pieces = []
  for x in xs:
    shape = tuple(x.shape[:axis]) + (1,) + tuple(x.shape[axis:])
    positions = tuple(i if i < axis else i + 1 for i in range(x.ndim))
    pieces.append(ctx.value("unit", emit.expand_to_rank(x, positions, x.ndim + 1), x.dtype, shape))
  return _concatenate(ctx, *pieces, dimension=axis)


@register(compat.unstack_p)
def _unstack(ctx, x, *, axis):
  n = x.shape[axis]
  if n == 2 and axis == x.ndim - 1:
    shape = tuple(x.shape[:-1])
    pair = ctx.b.assign("halves", f"{tl.split}({x})")
    return [ctx.value("half", f"{pair}[{i}]", x.dtype, shape) for i in range(2)]
  out_shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
  return [reshape_value(ctx, _take_lanes(ctx, x, axis, i, 1), out_shape) for i in range(n)]
