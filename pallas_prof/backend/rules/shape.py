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

from .. import emit
from ..codegen import Value, is_bool, is_float, next_pow2, padded_shape, tl_dtype
from ..errors import Unsupported
from . import register


@register(lax.broadcast_in_dim_p)
def _broadcast_in_dim(ctx, x, *, shape, broadcast_dimensions, sharding=None):
  shape = tuple(shape)
  if not x.shape:
    if x.const is not None:
      return ctx.full(shape, x.const, x.dtype, "bcast")
    if not shape:
      return x
    return ctx.value("bcast", f"tl.broadcast_to({x}, {emit.shape_expr(padded_shape(shape))})",
                     x.dtype, shape)
  expanded = emit.expand_to_rank(x, tuple(broadcast_dimensions), len(shape))
  in_shape = [1] * len(shape)
  for src, dst in enumerate(broadcast_dimensions):
    in_shape[dst] = x.shape[src]
  if tuple(in_shape) == shape:
    if expanded == str(x):
      return x
    return ctx.value("expand", expanded, x.dtype, shape)
  return ctx.value("bcast", f"tl.broadcast_to({expanded}, {emit.shape_expr(padded_shape(shape))})",
                   x.dtype, shape)


def _reshape_value(ctx, x: Value, shape: tuple[int, ...], hint="reshaped") -> Value:
  shape = tuple(shape)
  if tuple(x.shape) == shape:
    return x
  if math.prod(x.shape) != math.prod(shape):
    raise Unsupported(f"reshape of {x.shape} to {shape} changes the size")
  if not shape:
    return _to_scalar(ctx, x)
  if not x.shape:
    return ctx.value(hint, f"tl.broadcast_to({x}, {emit.shape_expr(padded_shape(shape))})",
                     x.dtype, shape)
  non_unit_in = [d for d in x.shape if d != 1]
  non_unit_out = [d for d in shape if d != 1]
  exact = all(next_pow2(d) == d for d in (*x.shape, *shape))
  if not exact and non_unit_in != non_unit_out:
    raise Unsupported(
        f"reshape of {x.shape} to {shape}: pallas-prof pads non-power-of-two blocks, "
        "and this reshape would move padded lanes",
        "reshape before loading (index the ref differently), or use power-of-two sizes")
  return ctx.value(hint, f"tl.reshape({x}, {emit.shape_expr(padded_shape(shape))})",
                   x.dtype, shape)


def _to_scalar(ctx, x: Value) -> Value:
  """A one-element tensor to a scalar (exactly: a reduction of a single lane)."""
  flat = x if x.ndim == 1 else ctx.value("flat", f"tl.reshape({x}, (1,))", x.dtype, (1,))
  if is_bool(x.dtype):
    as_int = ctx.value("flat_i8", f"{flat}.to(tl.int8)", np.int8, (1,))
    return ctx.value("scalar", f"tl.max({as_int}, axis=0) != 0", x.dtype, ())
  return ctx.value("scalar", f"tl.max({flat}, axis=0)", x.dtype, ())


@register(lax.reshape_p)
def _reshape(ctx, x, *, new_sizes, dimensions=None, sharding=None, **params):
  if dimensions is not None and tuple(dimensions) != tuple(range(x.ndim)):
    raise Unsupported("reshape with a dimension permutation", "transpose first")
  return _reshape_value(ctx, x, tuple(new_sizes))


@register(lax.squeeze_p)
def _squeeze(ctx, x, *, dimensions):
  return _reshape_value(ctx, x, tuple(ctx.avals_out[0].shape), "squeezed")


_expand_dims_p = getattr(lax, "expand_dims_p", None)
if _expand_dims_p is not None:  # pragma: no cover - not a primitive in current JAX
  register(_expand_dims_p)(lambda ctx, x, **p: _reshape_value(ctx, x, tuple(ctx.avals_out[0].shape)))


@register(lax.transpose_p)
def _transpose(ctx, x, *, permutation):
  perm = tuple(permutation)
  if perm == tuple(range(x.ndim)):
    return x
  shape = tuple(x.shape[p] for p in perm)
  expr = f"tl.trans({x})" if x.ndim == 2 else f"tl.permute({x}, {perm})"
  return ctx.value("transposed", expr, x.dtype, shape)


@register(lax.iota_p)
def _iota(ctx, *, dtype, shape, dimension, sharding=None):
  shape = tuple(shape)
  n = shape[dimension]
  base = Value(f"tl.arange(0, {next_pow2(n)})", np.dtype(np.int32), (n,))
  v = ctx.value("iota", str(base), np.int32, (n,))
  v = emit.cast(ctx.b, v, dtype, "iota")
  if len(shape) == 1:
    return v
  expanded = emit.expand_to_rank(v, (dimension,), len(shape))
  return ctx.value("iota", f"tl.broadcast_to({expanded}, {emit.shape_expr(padded_shape(shape))})",
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
  n_out = next_pow2(size)
  pos = f"{start} + tl.arange(0, {n_out})" + (f" * {stride}" if stride != 1 else "")
  pos = f"tl.minimum({pos}, {x.shape[axis] - 1})"  # padded lanes stay in range
  index = emit.expand_to_rank(Value(f"({pos})", np.dtype(np.int32), (size,)), (axis,), x.ndim)
  index_shape = tuple(n_out if i == axis else next_pow2(d) for i, d in enumerate(x.shape))
  idx = ctx.b.assign("lanes", f"tl.broadcast_to({index}, {emit.shape_expr(index_shape)})")
  return ctx.value("sliced", f"tl.gather({x}, {idx}, {axis})", x.dtype, out_shape)


def _take_one(ctx, x: Value, axis: int, start, out_shape) -> Value:
  # Select one lane exactly: zero the others and sum the raw bits.
  bits_t = _bits_dtype(x.dtype) if not is_bool(x.dtype) else np.dtype(np.int8)
  raw = (f"{x}.to({tl_dtype(bits_t)}, bitcast=True)" if not is_bool(x.dtype)
         else f"{x}.to(tl.int8)")
  lane = emit.expand_to_rank(Value(f"tl.arange(0, {next_pow2(x.shape[axis])})", np.dtype(np.int32),
                                   (x.shape[axis],)), (axis,), x.ndim)
  picked = ctx.b.assign("lane_bits", f"tl.where({lane} == {start}, {raw}, 0)")
  summed = ctx.b.assign("picked", f"tl.sum({picked}, axis={axis}, keep_dims=True)")
  if is_bool(x.dtype):
    return ctx.value("elem", f"{summed} != 0", x.dtype, out_shape)
  if bits_t.itemsize < 4:
    summed = f"{summed}.to({tl_dtype(bits_t)})"
  return ctx.value("elem", f"{summed}.to({tl_dtype(x.dtype)}, bitcast=True)", x.dtype, out_shape)


@register(lax.slice_p)
def _slice(ctx, x, *, start_indices, limit_indices, strides):
  strides = strides or (1,) * x.ndim
  out = x
  for axis, (s, l, st) in enumerate(zip(start_indices, limit_indices, strides)):
    size = max(0, -(-(l - s) // st))
    out = _take_lanes(ctx, out, axis, int(s), size, int(st))
  return out


@register(lax.dynamic_slice_p)
def _dynamic_slice(ctx, x, *starts, slice_sizes):
  out = x
  for axis, (start, size) in enumerate(zip(starts, slice_sizes)):
    if size == x.shape[axis]:
      continue
    # XLA clamps the start so the slice stays in bounds
    if start.const is not None:
      s = int(min(max(start.const, 0), x.shape[axis] - size))
    else:
      s = ctx.b.assign("start", f"tl.minimum(tl.maximum({emit.cast(ctx.b, start, np.int32)}, 0), "
                       f"{x.shape[axis] - size})")
    out = _take_lanes(ctx, out, axis, s, int(size))
  return out


@register(lax.concatenate_p)
def _concatenate(ctx, *xs, dimension):
  if len(xs) == 1:
    return xs[0]
  shape = tuple(ctx.avals_out[0].shape)
  if len(xs) != 2 or xs[0].shape != xs[1].shape or any(next_pow2(d) != d for d in xs[0].shape):
    raise Unsupported("concatenate of other than two equal power-of-two shaped values",
                      "write the pieces to the output ref separately")
  a, b = xs
  rank = a.ndim
  joined = ctx.b.assign("joined", f"tl.join({a}, {b})")   # new last dim of size 2
  perm = list(range(rank))
  perm.insert(dimension, rank)                                 # (.., 2, n_dim, ..)
  moved = ctx.b.assign("joined_t", f"tl.permute({joined}, {tuple(perm)})")
  return ctx.value("concat", f"tl.reshape({moved}, {emit.shape_expr(shape)})", a.dtype, shape)
