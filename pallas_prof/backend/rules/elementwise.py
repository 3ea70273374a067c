"""Elementwise math, comparisons, select, converts, with XLA's exact semantics.

Policy: 16- and 8-bit floats are computed in f32 and rounded back after each
operation (what XLA does, and what Triton's interpreter needs); integer
division and remainder truncate toward zero with XLA's results for zero
divisors; float max/min propagate NaN; shifts past the bit width give XLA's
answers; transcendental functions call CUDA's libdevice, like JAX's own
Triton backend.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from .. import emit
from ..codegen import Value, is_bool, is_float, is_int, is_low_float, is_signed, literal, tl_dtype
from ..errors import Unsupported
from . import register

F32 = np.dtype(np.float32)


def _compute(ctx, v: Value) -> Value:
  return emit.cast(ctx.b, v, F32, "f32") if is_low_float(v.dtype) else v


def _finish(ctx, v: Value, dtype) -> Value:
  return emit.cast(ctx.b, v, dtype) if v.dtype != np.dtype(dtype) else v


def _out_dtype(ctx):
  return np.dtype(ctx.avals_out[0].dtype)


def _shape(ctx):
  return tuple(ctx.avals_out[0].shape)


def _require_float(ctx, name, *values):
  for v in values:
    if not is_float(v.dtype):
      raise Unsupported(f"{name} of {v.dtype}", f"{name} needs a floating-point operand; "
                        "convert with .astype(jnp.float32) first")


# --- unary float functions (libdevice) --------------------------------------------

_LIBDEVICE_UNARY = {
    lax.exp_p: "exp", lax.exp2_p: "exp2", lax.expm1_p: "expm1", lax.log_p: "log",
    lax.log1p_p: "log1p", lax.sqrt_p: "sqrt", lax.rsqrt_p: "rsqrt", lax.cbrt_p: "cbrt",
    lax.sin_p: "sin", lax.cos_p: "cos", lax.tan_p: "tan", lax.asin_p: "asin",
    lax.acos_p: "acos", lax.atan_p: "atan", lax.sinh_p: "sinh", lax.cosh_p: "cosh",
    lax.tanh_p: "tanh", lax.asinh_p: "asinh", lax.acosh_p: "acosh", lax.atanh_p: "atanh",
    lax.erf_p: "erf", lax.erfc_p: "erfc", lax.erf_inv_p: "erfinv", lax.floor_p: "floor",
    lax.ceil_p: "ceil", lax.lgamma_p: "lgamma",
}


def _libdevice_unary(fn_name: str):
  def rule(ctx, x, **params):
    _require_float(ctx, fn_name, x)
    xc = _compute(ctx, x)
    r = ctx.value(fn_name, f"libdevice.{fn_name}({xc})", xc.dtype, x.shape)
    return _finish(ctx, r, x.dtype)
  rule.__name__ = f"_{fn_name}_rule"
  return rule


for _prim, _fn in _LIBDEVICE_UNARY.items():
  register(_prim)(_libdevice_unary(_fn))


@register(lax.logistic_p)
def _logistic(ctx, x, **params):
  _require_float(ctx, "logistic", x)
  xc = _compute(ctx, x)
  r = ctx.value("sigmoid", f"1.0 / (1.0 + libdevice.exp(-{xc}))", xc.dtype, x.shape)
  return _finish(ctx, r, x.dtype)


@register(lax.round_p)
def _round(ctx, x, *, rounding_method):
  _require_float(ctx, "round", x)
  xc = _compute(ctx, x)
  fn = "rint" if int(rounding_method) == int(lax.RoundingMethod.TO_NEAREST_EVEN) else "round"
  r = ctx.value("rounded", f"libdevice.{fn}({xc})", xc.dtype, x.shape)
  return _finish(ctx, r, x.dtype)


@register(lax.is_finite_p)
def _is_finite(ctx, x):
  xc = _compute(ctx, x)
  return ctx.value("finite", f"tl.abs({xc}) < float(\"inf\")", np.bool_, x.shape)


@register(lax.abs_p)
def _abs(ctx, x):
  if is_bool(x.dtype) or (is_int(x.dtype) and not is_signed(x.dtype)):
    return x
  xc = _compute(ctx, x)
  r = ctx.value("abs", f"tl.abs({xc})", xc.dtype, x.shape)
  return _finish(ctx, r, x.dtype)


@register(lax.neg_p)
def _neg(ctx, x):
  if is_bool(x.dtype):
    raise Unsupported("negating a bool", "use ~x (logical not)")
  xc = _compute(ctx, x)
  expr = f"-{xc}" if is_signed(xc.dtype) or is_float(xc.dtype) else f"{literal(0, xc.dtype)} - {xc}"
  r = ctx.value("neg", expr, xc.dtype, x.shape)
  return _finish(ctx, r, x.dtype)


@register(lax.sign_p)
def _sign(ctx, x):
  dt = x.dtype
  if is_float(dt):
    xc = _compute(ctx, x)
    # sign(NaN) = NaN and sign(+-0) = +-0, as XLA does.
    r = ctx.value("sign", f"tl.where({xc} > 0, 1.0, tl.where({xc} < 0, -1.0, {xc}))",
                  xc.dtype, x.shape)
    return _finish(ctx, r, dt)
  if is_signed(dt):
    return ctx.value("sign", f"({x} > 0).to({tl_dtype(dt)}) - ({x} < 0).to({tl_dtype(dt)})",
                     dt, x.shape)
  return ctx.value("sign", f"({x} > 0).to({tl_dtype(dt)})", dt, x.shape)


@register(lax.not_p)
def _not(ctx, x):
  return ctx.value("not", f"~{x}", x.dtype, x.shape)


@register(lax.square_p)
def _square(ctx, x):
  xc = _compute(ctx, x)
  return _finish(ctx, ctx.value("sq", f"{xc} * {xc}", xc.dtype, x.shape), x.dtype)


@register(lax.integer_pow_p)
def _integer_pow(ctx, x, *, y):
  xc = _compute(ctx, x)
  if y == 0:
    return ctx.full(x.shape, 1, x.dtype, "pow")
  n = abs(y)
  # exponentiation by squaring, spelled out
  result, base = None, xc
  while n:
    if n & 1:
      result = base if result is None else ctx.value("pow", f"{result} * {base}", xc.dtype, x.shape)
    n >>= 1
    if n:
      base = ctx.value("pow_sq", f"{base} * {base}", xc.dtype, x.shape)
  if y < 0:
    if not is_float(x.dtype):
      raise Unsupported("integer_pow with a negative exponent on integers")
    result = ctx.value("pow", f"1.0 / {result}", xc.dtype, x.shape)
  if result is xc:
    result = ctx.value("pow", f"{xc}", xc.dtype, x.shape)
  return _finish(ctx, result, x.dtype)


def _reciprocal(ctx, x, *, approx=False):
  _require_float(ctx, "reciprocal", x)
  xc = _compute(ctx, x)
  return _finish(ctx, ctx.value("recip", f"1.0 / {xc}", xc.dtype, x.shape), x.dtype)


try:
  from jax._src.pallas import primitives as _pp
  register(_pp.reciprocal_p)(_reciprocal)
except AttributeError:  # pragma: no cover - older JAX
  pass


@register(lax.population_count_p)
def _popcount(ctx, x):
  dt = x.dtype
  if dt.itemsize == 8:
    r = ctx.value("popc", f"libdevice.popcll({x})", np.int32, x.shape)
  else:
    x32 = _zext32(ctx, x)
    r = ctx.value("popc", f"libdevice.popc({x32})", np.int32, x.shape)
  return emit.cast(ctx.b, r, dt) if dt != np.int32 else r


@register(lax.clz_p)
def _clz(ctx, x):
  dt = x.dtype
  bits = dt.itemsize * 8
  if bits == 64:
    r = ctx.value("clz", f"libdevice.clzll({x})", np.int32, x.shape)
  else:
    x32 = _zext32(ctx, x)
    expr = f"libdevice.clz({x32})" if bits == 32 else f"libdevice.clz({x32}) - {32 - bits}"
    r = ctx.value("clz", expr, np.int32, x.shape)
  return emit.cast(ctx.b, r, dt) if dt != np.int32 else r


def _zext32(ctx, x: Value) -> Value:
  """Zero-extends a <=32-bit int to int32 (bits preserved, no sign fill)."""
  dt = x.dtype
  if dt == np.int32:
    return x
  if dt == np.uint32:
    return ctx.value("bits", f"{x}.to(tl.int32, bitcast=True)", np.int32, x.shape)
  unsigned = {1: "tl.uint8", 2: "tl.uint16"}[dt.itemsize]
  u = f"{x}.to({unsigned}, bitcast=True)" if is_signed(dt) else str(x)
  return ctx.value("bits", f"{u}.to(tl.uint32).to(tl.int32, bitcast=True)", np.int32, x.shape)


# --- binary arithmetic --------------------------------------------------------------

_OPERATORS = {lax.add_p: "+", lax.sub_p: "-", lax.mul_p: "*"}


def _arith(op: str, name: str):
  def rule(ctx, x, y, **params):
    dt = _out_dtype(ctx)
    if is_bool(dt):
      expr = {"+": "|", "*": "&"}.get(op)
      if expr is None:
        raise Unsupported(f"{name} on bool")
      return ctx.value(name, f"{x} {expr} {y}", dt, _shape(ctx))
    xc, yc = _compute(ctx, x), _compute(ctx, y)
    r = ctx.value(name, f"{xc} {op} {yc}", xc.dtype, _shape(ctx))
    return _finish(ctx, r, dt)
  return rule


for _prim, _op in _OPERATORS.items():
  register(_prim)(_arith(_op, _prim.name))


@register(lax.div_p)
def _div(ctx, x, y):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if is_float(dt):
    xc, yc = _compute(ctx, x), _compute(ctx, y)
    return _finish(ctx, ctx.value("div", f"{xc} / {yc}", xc.dtype, shape), dt)
  if is_bool(dt):
    raise Unsupported("division of bools")
  if y.const is not None and y.const not in (0, -1):
    return ctx.value("div", f"{x} // {y}", dt, shape)
  # XLA: x / 0 = -1 (all ones), INT_MIN / -1 = INT_MIN; both are UB in LLVM.
  safe = _safe_divisor(ctx, x, y, dt)
  q = f"{x} // {safe}"
  return ctx.value("div", f"tl.where({y} == 0, {literal(_all_ones(dt), dt)}, {q})", dt, shape)


@register(lax.rem_p)
def _rem(ctx, x, y):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if is_float(dt):
    xc, yc = _compute(ctx, x), _compute(ctx, y)
    return _finish(ctx, ctx.value("rem", f"{xc} % {yc}", xc.dtype, shape), dt)
  if y.const is not None and y.const not in (0, -1):
    return ctx.value("rem", f"{x} % {y}", dt, shape)
  safe = _safe_divisor(ctx, x, y, dt)
  return ctx.value("rem", f"tl.where({y} == 0, {x}, {x} % {safe})", dt, shape)


def _all_ones(dt):
  return -1 if is_signed(dt) else int(np.iinfo(dt).max)


def _safe_divisor(ctx, x: Value, y: Value, dt) -> str:
  one = literal(1, dt)
  if is_signed(dt):
    lo = literal(int(np.iinfo(dt).min), dt)
    cond = f"({y} == 0) | (({x} == {lo}) & ({y} == {literal(-1, dt)}))"
  else:
    cond = f"{y} == 0"
  return ctx.b.assign("divisor", f"tl.where({cond}, {one}, {y})")


def _minmax(kind: str):
  def rule(ctx, x, y):
    dt = _out_dtype(ctx)
    shape = _shape(ctx)
    if is_bool(dt):
      return ctx.value(kind, f"{x} {'|' if kind == 'max' else '&'} {y}", dt, shape)
    fn = "tl.maximum" if kind == "max" else "tl.minimum"
    if is_float(dt):
      xc, yc = _compute(ctx, x), _compute(ctx, y)
      r = ctx.value(kind, f"{fn}({xc}, {yc}, propagate_nan=tl.PropagateNan.ALL)", xc.dtype, shape)
      return _finish(ctx, r, dt)
    return ctx.value(kind, f"{fn}({x}, {y})", dt, shape)
  return rule


register(lax.max_p)(_minmax("max"))
register(lax.min_p)(_minmax("min"))


@register(lax.pow_p)
def _pow(ctx, x, y):
  dt = _out_dtype(ctx)
  _require_float(ctx, "pow", x)
  xc = _compute(ctx, x)
  yc = _compute(ctx, y) if is_float(y.dtype) else emit.cast(ctx.b, y, xc.dtype)
  return _finish(ctx, ctx.value("pow", f"libdevice.pow({xc}, {yc})", xc.dtype, _shape(ctx)), dt)


@register(lax.atan2_p)
def _atan2(ctx, x, y):
  dt = _out_dtype(ctx)
  _require_float(ctx, "atan2", x, y)
  xc, yc = _compute(ctx, x), _compute(ctx, y)
  return _finish(ctx, ctx.value("atan2", f"libdevice.atan2({xc}, {yc})", xc.dtype,
                                _shape(ctx)), dt)


@register(lax.nextafter_p)
def _nextafter(ctx, x, y):
  dt = _out_dtype(ctx)
  if dt not in (np.float32, np.float64):
    raise Unsupported(f"nextafter on {dt}", "use float32 or float64")
  return ctx.value("nextafter", f"libdevice.nextafter({x}, {y})", dt, _shape(ctx))


# --- bitwise and shifts -----------------------------------------------------------

def _bitwise(op: str):
  def rule(ctx, x, y):
    return ctx.value({"&": "and", "|": "or", "^": "xor"}[op], f"{x} {op} {y}",
                     _out_dtype(ctx), _shape(ctx))
  return rule


register(lax.and_p)(_bitwise("&"))
register(lax.or_p)(_bitwise("|"))
register(lax.xor_p)(_bitwise("^"))


def _as_unsigned(dt) -> str:
  return {1: "tl.uint8", 2: "tl.uint16", 4: "tl.uint32", 8: "tl.uint64"}[dt.itemsize]


def _as_signed(dt) -> str:
  return {1: "tl.int8", 2: "tl.int16", 4: "tl.int32", 8: "tl.int64"}[dt.itemsize]


def _shift(kind: str):
  def rule(ctx, x, y):
    dt = _out_dtype(ctx)
    shape = _shape(ctx)
    bits = dt.itemsize * 8
    in_range_const = y.const is not None and 0 <= y.const < bits
    if kind == "shl":
      body = lambda s: f"{x} << {s}"
      outside = literal(0, dt)
    elif kind == "shr_logical":
      if is_signed(dt):
        body = lambda s: (f"({x}.to({_as_unsigned(dt)}, bitcast=True) >> "
                          f"{s}.to({_as_unsigned(dt)}, bitcast=True)).to({tl_dtype(dt)}, bitcast=True)"
                          if not isinstance(s, int) else
                          f"({x}.to({_as_unsigned(dt)}, bitcast=True) >> {s}).to({tl_dtype(dt)}, bitcast=True)")
      else:
        body = lambda s: f"{x} >> {s}"
      outside = literal(0, dt)
    else:  # arithmetic
      if is_signed(dt):
        body = lambda s: f"{x} >> {s}"
      else:
        body = lambda s: (f"({x}.to({_as_signed(dt)}, bitcast=True) >> "
                          f"{s}.to({_as_signed(dt)}, bitcast=True)).to({tl_dtype(dt)}, bitcast=True)"
                          if not isinstance(s, int) else
                          f"({x}.to({_as_signed(dt)}, bitcast=True) >> {s}).to({tl_dtype(dt)}, bitcast=True)")
      outside = None
    if in_range_const:
      return ctx.value(kind, body(int(y.const)) if y.const is not None else body(y), dt, shape)
    in_range = ctx.b.assign("in_range", f"({y} >= 0) & ({y} < {bits})" if is_signed(dt)
                            else f"{y} < {bits}")
    safe = ctx.b.assign("shift", f"tl.where({in_range}, {y}, {literal(0, dt)})")
    safe_v = Value(safe, dt, y.shape)
    if outside is None:
      # arithmetic right shift by >= bits fills with the sign bit
      sign_fill = (f"tl.where({x} < 0, {literal(-1, dt)}, {literal(0, dt)})" if is_signed(dt)
                   else f"tl.where(({x} >> {bits - 1}) != 0, {literal(_all_ones(dt), dt)}, "
                        f"{literal(0, dt)})")
      return ctx.value(kind, f"tl.where({in_range}, {body(safe_v)}, {sign_fill})", dt, shape)
    return ctx.value(kind, f"tl.where({in_range}, {body(safe_v)}, {outside})", dt, shape)
  return rule


register(lax.shift_left_p)(_shift("shl"))
register(lax.shift_right_logical_p)(_shift("shr_logical"))
register(lax.shift_right_arithmetic_p)(_shift("shr_arith"))


# --- comparisons and selection -----------------------------------------------------

_COMPARISONS = {lax.eq_p: "==", lax.ne_p: "!=", lax.lt_p: "<", lax.le_p: "<=",
                lax.gt_p: ">", lax.ge_p: ">="}


def _compare(op: str, name: str):
  def rule(ctx, x, y):
    xc, yc = _compute(ctx, x), _compute(ctx, y)
    if is_bool(x.dtype) and op in ("<", "<=", ">", ">="):
      xc = emit.cast(ctx.b, x, np.int8)
      yc = emit.cast(ctx.b, y, np.int8)
    return ctx.value(name, f"{xc} {op} {yc}", np.bool_, _shape(ctx))
  return rule


for _prim, _op in _COMPARISONS.items():
  register(_prim)(_compare(_op, _prim.name))


@register(lax.select_n_p)
def _select_n(ctx, which, *cases):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if len(cases) == 1:
    return cases[0]
  if is_bool(which.dtype):
    return ctx.value("select", f"tl.where({which}, {cases[1]}, {cases[0]})", dt, shape)
  # n-way: a chain of wheres on the integer selector
  result = cases[-1]
  for i in range(len(cases) - 2, -1, -1):
    result = ctx.value("select", f"tl.where({which} == {literal(i, which.dtype)}, {cases[i]}, "
                       f"{result})", dt, shape)
  return result


@register(lax.clamp_p)
def _clamp(ctx, lo, x, hi):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if is_float(dt):
    loc, xc, hic = _compute(ctx, lo), _compute(ctx, x), _compute(ctx, hi)
    nan = "propagate_nan=tl.PropagateNan.ALL"
    r = ctx.value("clamp", f"tl.minimum(tl.maximum({xc}, {loc}, {nan}), {hic}, {nan})",
                  xc.dtype, shape)
    return _finish(ctx, r, dt)
  return ctx.value("clamp", f"tl.minimum(tl.maximum({x}, {lo}), {hi})", dt, shape)


# --- conversions ---------------------------------------------------------------------

@register(lax.convert_element_type_p)
def _convert(ctx, x, *, new_dtype, weak_type=False, sharding=None):
  out = emit.cast(ctx.b, x, new_dtype)
  if tuple(out.shape) != tuple(x.shape):
    raise AssertionError("cast changed shape")
  return out


@register(lax.bitcast_convert_type_p)
def _bitcast(ctx, x, *, new_dtype):
  new = np.dtype(new_dtype)
  if new.itemsize != x.dtype.itemsize:
    raise Unsupported(f"bitcast from {x.dtype} to {new} (different widths)",
                      "bitcast between types of the same width, then shift/mask")
  if is_bool(new) or is_bool(x.dtype):
    raise Unsupported("bitcast to or from bool", "compare with 0 instead")
  if new == x.dtype:
    return x
  return ctx.value("bits", f"{x}.to({tl_dtype(new)}, bitcast=True)", new, x.shape)


def _identity(ctx, x, **params):
  return x


def _reduce_precision(ctx, x, *, exponent_bits, mantissa_bits):
  import jax.numpy as jnp
  for dt in (jnp.bfloat16, jnp.float16, jnp.float32):
    info = jnp.finfo(dt)
    if info.nexp == exponent_bits and info.nmant == mantissa_bits:
      return emit.cast(ctx.b, emit.cast(ctx.b, x, dt), x.dtype)
  raise Unsupported(f"reduce_precision to e{exponent_bits}m{mantissa_bits}",
                    "round through a real dtype (bf16, f16) with astype")


def _optional(module, name):
  return getattr(module, name, None)


from jax._src import ad_util as _ad_util  # noqa: E402
from jax._src.lax import lax as _lax_internal  # noqa: E402

register(_optional(_lax_internal, "copy_p"), _optional(_ad_util, "stop_gradient_p"))(_identity)
register(_optional(lax, "optimization_barrier_p"))(lambda ctx, *xs: list(xs))
register(_optional(_lax_internal, "reduce_precision_p"))(_reduce_precision)
