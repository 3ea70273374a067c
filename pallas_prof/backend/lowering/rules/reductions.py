"""Reductions (sum/max/min/prod/and/or/xor/argmax/argmin) over any axes, and
cumulative scans. Padded lanes are replaced by the reduction's identity
first; max/min propagate NaN as XLA does; argmax/argmin take the first index
of the extreme value and count NaN as the extreme.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from .. import emit
from ..codegen import Value, is_bool, is_float, is_low_float, next_pow2
from ...errors import Unsupported
from .table import REDUCTION, register
from .. import triton_names as tl

F32 = np.dtype(np.float32)

_COMBINERS = {
    "max_nan": f"""
def combine_max_nan(a, b):
    # XLA's max: NaN wins
    return {tl.maximum}(a, b, propagate_nan={tl.propagate_nan_all})
""",
    "min_nan": f"""
def combine_min_nan(a, b):
    # XLA's min: NaN wins
    return {tl.minimum}(a, b, propagate_nan={tl.propagate_nan_all})
""",
    "prod": """
def combine_prod(a, b):
    return a * b
""",
    "logaddexp": f"""
def combine_logaddexp(a, b):
    # log(exp(a) + exp(b)) as jnp.logaddexp: the larger plus log1p of the other's share;
    # equal arguments (both -inf or both inf too) take log1p(1), NaN wins
    larger = {tl.maximum}(a, b, propagate_nan={tl.propagate_nan_all})
    apart = {tl.where}(a == b, 0.0, -{tl.abs}(a - b))
    return larger + libdevice.log1p({tl.exp}(apart))
""",
    "and": """
def combine_and(a, b):
    return a & b
""",
    "or": """
def combine_or(a, b):
    return a | b
""",
    "xor": """
def combine_xor(a, b):
    return a ^ b
""",
    "argmax": f"""
def combine_argmax(v1, i1, v2, i2):
    # first index of the largest value; NaN counts as largest (jnp.argmax)
    nan1 = v1 != v1
    nan2 = v2 != v2
    greater = (v1 > v2) | (nan1 & (nan2 == 0))
    equal = (v1 == v2) | (nan1 & nan2)
    pick1 = greater | (equal & (i1 < i2))
    return {tl.where}(pick1, v1, v2), {tl.where}(pick1, i1, i2)
""",
    "argmin": f"""
def combine_argmin(v1, i1, v2, i2):
    # first index of the smallest value; NaN counts as smallest (jnp.argmin)
    nan1 = v1 != v1
    nan2 = v2 != v2
    less = (v1 < v2) | (nan1 & (nan2 == 0))
    equal = (v1 == v2) | (nan1 & nan2)
    pick1 = less | (equal & (i1 < i2))
    return {tl.where}(pick1, v1, v2), {tl.where}(pick1, i1, i2)
""",
}


def combiner(ctx, kind: str) -> str:
  return ctx.b.helper(f"combine_{kind}", _COMBINERS[kind])


def _drop_axis(shape, axis):
  return tuple(d for i, d in enumerate(shape) if i != axis)


def _reduce_one(ctx, x: Value, axis: int, kind: str) -> Value:
  """Reduces one axis of x (already in compute dtype and identity-padded)."""
  out_shape = _drop_axis(x.shape, axis)
  dt = x.dtype
  if kind == "sum":
    if is_bool(dt):
      expr = f"{tl.reduce}({x}, {axis}, {combiner(ctx, 'or')})"
      return ctx.value("any", expr, dt, out_shape)
    r = ctx.value("sum", f"{tl.sum}({x}, axis={axis})", sum_dtype(dt), out_shape)
    return emit.cast(ctx.b, r, dt) if r.dtype != dt else r
  if kind in ("max", "min"):
    if is_float(dt):
      expr = f"{tl.reduce}({x}, {axis}, {combiner(ctx, kind + '_nan')})"
    elif is_bool(dt):
      expr = f"{tl.reduce}({x}, {axis}, {combiner(ctx, 'or' if kind == 'max' else 'and')})"
    else:
      # tl.max/tl.min widen integers narrower than 32 bits to int32
      fn = tl.max if kind == "max" else tl.min
      r = ctx.value(kind, f"{fn}({x}, axis={axis})", _minmax_dtype(dt), out_shape)
      return emit.cast(ctx.b, r, dt)
    return ctx.value(kind, expr, dt, out_shape)
  if kind in ("prod", "and", "or", "xor"):
    op = kind
    if is_bool(dt) and kind == "prod":
      op = "and"
    return ctx.value(kind, f"{tl.reduce}({x}, {axis}, {combiner(ctx, op)})", dt, out_shape)
  raise AssertionError(kind)


def _minmax_dtype(dt) -> np.dtype:
  return np.dtype(np.int32) if dt.itemsize < 4 else dt


def sum_dtype(dt) -> np.dtype:
  # tl.sum widens integers narrower than 32 bits to int32
  if np.issubdtype(dt, np.integer) and dt.itemsize < 4:
    return np.dtype(np.int32) if np.issubdtype(dt, np.signedinteger) else np.dtype(np.uint32)
  return dt


def _reduction(kind: str):
  def rule(ctx, x, *, axes, **params):
    out_dtype = np.dtype(ctx.avals_out[0].dtype)
    xc = emit.cast(ctx.b, x, F32) if is_low_float(x.dtype) else x
    xc = emit.mask_padding(ctx.b, xc, axes, emit.identity_of(kind, xc.dtype), f"{kind}_in")
    for axis in sorted(axes, reverse=True):
      xc = _reduce_one(ctx, xc, axis, kind)
    return emit.cast(ctx.b, xc, out_dtype) if xc.dtype != out_dtype else xc
  rule.__name__ = f"_reduce_{kind}"
  return rule


register(lax.reduce_sum_p, work=REDUCTION)(_reduction("sum"))
register(lax.reduce_max_p, work=REDUCTION)(_reduction("max"))
register(lax.reduce_min_p, work=REDUCTION)(_reduction("min"))
register(lax.reduce_prod_p, work=REDUCTION)(_reduction("prod"))
register(lax.reduce_and_p)(_reduction("and"))
register(lax.reduce_or_p)(_reduction("or"))
register(lax.reduce_xor_p)(_reduction("xor"))


def _arg_reduction(kind: str):
  def rule(ctx, x, *, axes, index_dtype):
    if len(axes) != 1:
      raise Unsupported(f"{kind} over several axes", "reshape to one axis first")
    (axis,) = axes
    xc = emit.cast(ctx.b, x, F32) if is_low_float(x.dtype) else x
    if is_bool(xc.dtype):
      xc = emit.cast(ctx.b, xc, np.int8)
    fill = emit.identity_of(kind, xc.dtype)
    xc = emit.mask_padding(ctx.b, xc, (axis,), fill, f"{kind}_in")
    n = next_pow2(x.shape[axis])
    idx = emit.expand_to_rank(Value(f"{tl.arange}(0, {n})", np.dtype(np.int32), (x.shape[axis],)),
                              (axis,), x.ndim)
    idx_name = ctx.b.assign("positions", f"{tl.broadcast_to}({idx}, {emit.shape_expr(xc.padded)})")
    out_shape = _drop_axis(x.shape, axis)
    pair = ctx.b.assign(kind, f"{tl.reduce}(({xc}, {idx_name}), {axis}, {combiner(ctx, kind)})")
    result = Value(f"{pair}[1]", np.dtype(np.int32), out_shape)
    result = ctx.value(f"{kind}_idx", str(result), np.int32, out_shape)
    return emit.cast(ctx.b, result, index_dtype)
  return rule


_ONE_AXIS = "one axis at a time (reshape to one axis first)"
register(lax.argmax_p, work=REDUCTION, limits=_ONE_AXIS)(_arg_reduction("argmax"))
register(lax.argmin_p, work=REDUCTION, limits=_ONE_AXIS)(_arg_reduction("argmin"))


def _cumulative(kind: str):
  def rule(ctx, x, *, axis, reverse):
    dt = x.dtype
    # float16 scans in float16, as XLA (and JAX's Triton backend) accumulate it;
    # bfloat16 and 8-bit floats go through f32 (Triton's interpreter has no
    # bf16 arithmetic). A log-sum-exp takes every 16-bit float through f32: its
    # exp and log1p have no 16-bit forms in libdevice.
    low = is_low_float(dt) and (np.dtype(dt) != np.float16 or kind == "logsumexp")
    xc = emit.cast(ctx.b, x, F32) if low else x
    if is_bool(xc.dtype):
      raise Unsupported(f"cum{kind} on bool", "convert to int32 first")
    if reverse:
      # padded lanes come first in a reversed scan: make them neutral
      xc = emit.mask_padding(ctx.b, xc, (axis,), emit.identity_of(kind, xc.dtype))
    out_dtype = sum_dtype(xc.dtype) if kind == "sum" else xc.dtype
    scan, reduce = _scan_and_reduce(ctx, kind, xc.dtype, reverse)
    # another lowering, where Triton fails on this one (a workaround's)
    out = ctx.kernel.listeners.lower_scan(ctx, xc, axis, kind, reverse, out_dtype, scan, reduce)
    if out is None:
      out = ctx.value(f"cum{kind}", scan(xc, axis), out_dtype, x.shape)
    return emit.cast(ctx.b, out, dt) if out.dtype != dt else out
  return rule


def _scan_and_reduce(ctx, kind: str, dtype, reverse: bool):
  """(scan, reduce): functions of (value, axis) giving the expression of the plain
  cumulative scan of `kind`, and of the reduction with the same combiner."""
  rev = ", reverse=True" if reverse else ""
  if kind == "sum":
    return (lambda v, a: f"{tl.cumsum}({v}, axis={a}{rev})",
            lambda v, a: f"{tl.sum}({v}, axis={a})")
  if kind == "prod":     # (its combiner is added to the source only where a form reduces)
    return (lambda v, a: f"{tl.cumprod}({v}, axis={a}{rev})",
            lambda v, a: f"{tl.reduce}({v}, {a}, {combiner(ctx, 'prod')})")
  if kind == "logsumexp":
    return (lambda v, a: f"{tl.associative_scan}({v}, {a}, {combiner(ctx, 'logaddexp')}{rev})",
            lambda v, a: f"{tl.reduce}({v}, {a}, {combiner(ctx, 'logaddexp')})")
  fn = combiner(ctx, f"{kind}_nan") if is_float(dtype) else ctx.b.helper(
      f"combine_{kind}_int", f"""
def combine_{kind}_int(a, b):
    return {tl.maximum if kind == 'max' else tl.minimum}(a, b)
""")
  return (lambda v, a: f"{tl.associative_scan}({v}, {a}, {fn}{rev})",
          lambda v, a: f"{tl.reduce}({v}, {a}, {fn})")


register(lax.cumsum_p, work=REDUCTION)(_cumulative("sum"))
register(lax.cumprod_p, work=REDUCTION)(_cumulative("prod"))
register(lax.cummax_p, work=REDUCTION)(_cumulative("max"))
register(lax.cummin_p, work=REDUCTION)(_cumulative("min"))
register(lax.cumlogsumexp_p, work=REDUCTION, library=("log1p",))(_cumulative("logsumexp"))
