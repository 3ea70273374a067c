"""Elementwise math, comparisons, select, converts, with XLA's exact semantics.

Policy: 16- and 8-bit floats are computed in f32 and rounded back after each
operation (what XLA does, and what Triton's interpreter needs); integer
division and remainder truncate toward zero with XLA's results for zero
divisors; float max/min propagate NaN; shifts past the bit width give XLA's
answers; transcendental functions and sqrt call CUDA's libdevice, the
functions XLA's GPU emitter and JAX's own Triton backend call, and f32
division is Triton's `/` (div.full.f32), which is what XLA compiles it to
(-nvptx-prec-divf32=1); on the CPU both are exact, like XLA on the CPU. An
operation whose operands are all constants is computed in the kernel like any
other (Python would compute it with its own arithmetic: unbounded ints, f64
floats).

The `accuracy` parameter of the transcendental primitives is accepted and
ignored: libdevice gives its one (full) accuracy, as in JAX's Triton backend.
"""
from __future__ import annotations

import math

import jax
import numpy as np
import jax.numpy as jnp
from jax import lax

from ... import compat
from .. import emit
from ..codegen import COMPLEX_HINT, DECOMPOSITION, Value, is_bool, is_float, is_int, is_low_float, is_signed, literal, tl_dtype
from ...errors import Unsupported
from .table import ARITHMETIC, REDUCTION, TRANSCENDENTAL, register
from .. import triton_names as tl

F32 = np.dtype(np.float32)


def _optional(module, name):
  return getattr(module, name, None)


def elementwise(*primitives, work: str | None = None, library: tuple[str, ...] = (),
                foldable: bool = False):
  """Registers an elementwise rule behind the checks every such rule needs;
  `work`: what each element costs (rules.table.ARITHMETIC, ...), if anything; `library`
  and `foldable` as register() takes them."""
  def wrap(rule):
    def checked(ctx, *operands, **params):
      _reject_complex(ctx)
      values = [v for v in operands if isinstance(v, Value)]
      if values and all(v.const is not None and not v.shape for v in values):
        # all-constant operands: make one a 0-d tensor so Triton, not Python,
        # does the arithmetic (int wrap-around, f32 rounding)
        operands = (emit.materialize(ctx.b, operands[0]),) + tuple(operands[1:])
      return rule(ctx, *operands, **params)
    checked.__name__ = rule.__name__
    checked.__doc__ = rule.__doc__
    register(*primitives, work=work, library=library, foldable=foldable)(checked)
    return rule
  return wrap


def _reject_complex(ctx):
  for aval in list(ctx.avals_in) + list(ctx.avals_out):
    dtype = getattr(aval, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.complexfloating):
      raise Unsupported(f"{np.dtype(dtype).name} values: Triton has no complex numbers",
                        COMPLEX_HINT)


def _compute(ctx, v: Value) -> Value:
  return emit.cast(ctx.b, v, F32, "f32") if is_low_float(v.dtype) else v


def _finish(ctx, v: Value, dtype) -> Value:
  return emit.cast(ctx.b, v, dtype) if v.dtype != np.dtype(dtype) else v


def _out_dtype(ctx):
  return np.dtype(ctx.avals_out[0].dtype)


def _shape(ctx):
  return tuple(ctx.avals_out[0].shape)


def _require_float(name, *values):
  for v in values:
    if not is_float(v.dtype):
      raise Unsupported(f"{name} of {v.dtype}", f"{name} needs a floating-point operand; "
                        "convert with .astype(jnp.float32) first")


def _float_op(ctx, name: str, expr_of, *operands, dtype=None) -> Value:
  """`expr_of(*computed operands)` in f32 (or f64), rounded to the result dtype."""
  computed = [_compute(ctx, v) for v in operands]
  work = computed[0].dtype
  r = ctx.value(name, expr_of(*computed), work, _shape(ctx))
  return _finish(ctx, r, dtype or _out_dtype(ctx))


# --- unary float functions (libdevice) --------------------------------------------

_LIBDEVICE_UNARY = {
    lax.exp_p: "exp", lax.exp2_p: "exp2", lax.expm1_p: "expm1", lax.log_p: "log",
    lax.log1p_p: "log1p", lax.sqrt_p: "sqrt", lax.rsqrt_p: "rsqrt", lax.cbrt_p: "cbrt",
    lax.sin_p: "sin", lax.cos_p: "cos", lax.tan_p: "tan", lax.asin_p: "asin",
    lax.acos_p: "acos", lax.atan_p: "atan", lax.sinh_p: "sinh", lax.cosh_p: "cosh",
    lax.tanh_p: "tanh", lax.asinh_p: "asinh", lax.acosh_p: "acosh", lax.atanh_p: "atanh",
    lax.erf_p: "erf", lax.erfc_p: "erfc", lax.floor_p: "floor",
    lax.ceil_p: "ceil", lax.lgamma_p: "lgamma",
}


def _libdevice_unary(fn_name: str):
  def rule(ctx, x, **params):
    _require_float(fn_name, x)
    return _float_op(ctx, fn_name, lambda a: f"libdevice.{fn_name}({a})", x)
  rule.__name__ = f"_{fn_name}_rule"
  return rule


for _prim, _fn in _LIBDEVICE_UNARY.items():
  elementwise(_prim, work=ARITHMETIC if _fn in ("floor", "ceil") else TRANSCENDENTAL,
              library=(_fn,), foldable=True)(_libdevice_unary(_fn))

@elementwise(lax.erf_inv_p, work=TRANSCENDENTAL, foldable=True)
def _erf_inv(ctx, x, **params):
  """JAX's own erf_inv polynomial (what XLA and JAX's Triton backend compute),
  so results match XLA bit for bit; libdevice's erfinv differs in the last ulps."""
  _require_float("erf_inv", x)
  xc = _compute(ctx, x)
  closed = jax.make_jaxpr(compat.erf_inv_lowering_helper())(
      jax.ShapeDtypeStruct(xc.shape, xc.dtype))
  (out,) = ctx.lower_jaxpr(closed.jaxpr, [xc], DECOMPOSITION, consts=closed.consts)
  return _finish(ctx, out, x.dtype)


# Primitives newer JAX versions have (jax 0.11: log2, one_minus_square).
if getattr(lax, "log2_p", None) is not None:
  elementwise(lax.log2_p, work=TRANSCENDENTAL, library=("log2",), foldable=True)(
      _libdevice_unary("log2"))
if getattr(lax, "one_minus_square_p", None) is not None:
  @elementwise(lax.one_minus_square_p, work=ARITHMETIC, foldable=True)
  def _one_minus_square(ctx, x, **params):
    _require_float("one_minus_square", x)
    # (1 + x)(1 - x), as XLA and JAX's own backend expand it
    return _float_op(ctx, "one_minus_square", lambda a: f"(1.0 + {a}) * (1.0 - {a})", x)


@elementwise(lax.logistic_p, work=TRANSCENDENTAL, library=("exp",), foldable=True)
def _logistic(ctx, x, **params):
  _require_float("logistic", x)
  # a Python float takes the other operand's float type in Triton
  return _float_op(ctx, "sigmoid", lambda a: f"1.0 / (1.0 + libdevice.exp({a} * -1.0))", x)


@elementwise(lax.round_p, work=ARITHMETIC, library=("nearbyint", "round"), foldable=True)
def _round(ctx, x, *, rounding_method):
  _require_float("round", x)
  # nearbyint, not rint: the same rounding (to nearest even), and every Triton's AMD
  # device library has it (Triton 3.6's lacks rint)
  fn = "nearbyint" if int(rounding_method) == int(lax.RoundingMethod.TO_NEAREST_EVEN) \
      else "round"
  return _float_op(ctx, "rounded", lambda a: f"libdevice.{fn}({a})", x)


@elementwise(lax.is_finite_p, foldable=True)
def _is_finite(ctx, x):
  _require_float("is_finite", x)
  xc = _compute(ctx, x)
  return ctx.value("finite", f"{tl.abs}({xc}) < float(\"inf\")", np.bool_, x.shape)


@elementwise(lax.abs_p, work=ARITHMETIC, foldable=True)
def _abs(ctx, x):
  if is_bool(x.dtype) or (is_int(x.dtype) and not is_signed(x.dtype)):
    return x
  if is_float(x.dtype):
    return _float_op(ctx, "abs", lambda a: f"{tl.abs}({a})", x)
  return ctx.value("abs", f"{tl.abs}({x})", x.dtype, x.shape)   # abs(INT_MIN) = INT_MIN


@elementwise(lax.neg_p, work=ARITHMETIC, foldable=True)
def _neg(ctx, x):
  if is_bool(x.dtype):
    raise Unsupported("negating a bool", "use ~x (logical not)")
  if is_float(x.dtype):
    # Triton's unary minus is 0 - x, which gives +0 for +0; XLA gives -0.
    return _float_op(ctx, "neg", lambda a: f"{a} * -1.0", x)
  return ctx.value("neg", f"{literal(0, x.dtype)} - {x}", x.dtype, x.shape)


@elementwise(lax.sign_p, work=ARITHMETIC, foldable=True)
def _sign(ctx, x):
  dt = x.dtype
  if is_float(dt):
    # sign(NaN) = NaN and sign(+-0) = +-0, as XLA does.
    return _float_op(ctx, "sign",
                     lambda a: f"{tl.where}({a} > 0, 1.0, {tl.where}({a} < 0, -1.0, {a}))", x)
  if is_signed(dt):
    return ctx.value("sign", f"({x} > 0).to({tl_dtype(dt)}) - ({x} < 0).to({tl_dtype(dt)})",
                     dt, x.shape)
  return ctx.value("sign", f"({x} > 0).to({tl_dtype(dt)})", dt, x.shape)


@elementwise(lax.not_p, foldable=True)
def _not(ctx, x):
  if is_bool(x.dtype):
    return ctx.value("not", f"{x} ^ True", x.dtype, x.shape)
  # xor with all ones spelled out: the interpreter cannot build -1 for unsigned `~`
  return ctx.value("not", f"{x} ^ {literal(_all_ones(x.dtype), x.dtype)}", x.dtype, x.shape)


@elementwise(lax.square_p, work=ARITHMETIC, foldable=True)
def _square(ctx, x):
  if not is_float(x.dtype):
    return ctx.value("sq", f"{x} * {x}", x.dtype, x.shape)
  return _float_op(ctx, "sq", lambda a: f"{a} * {a}", x)


@elementwise(lax.integer_pow_p, work=ARITHMETIC, foldable=True)
def _integer_pow(ctx, x, *, y):
  if y == 0:
    return emit.full(ctx.b, x.shape, 1, x.dtype, "pow")
  if y < 0 and not is_float(x.dtype):
    raise Unsupported("integer_pow with a negative exponent on integers")

  def multiply(a: Value, b: Value, hint: str) -> Value:
    # XLA expands integer_pow into multiplies of x's type: 16-bit floats are
    # rounded after each one
    if is_float(x.dtype):
      return _float_op(ctx, hint, lambda p, q: f"{p} * {q}", a, b, dtype=x.dtype)
    return ctx.value(hint, f"{a} * {b}", x.dtype, x.shape)

  # exponentiation by squaring, in the order of XLA's expansion
  n, result, base = abs(y), None, x
  while n:
    if n & 1:
      result = base if result is None else multiply(result, base, "pow")
    n >>= 1
    if n:
      base = multiply(base, base, "pow_sq")
  if y < 0:
    result = _float_op(ctx, "pow", lambda r: f"1.0 / {r}", result, dtype=x.dtype)
  return result


def _reciprocal(ctx, x, **params):
  # approx=True allows an approximation; the exact quotient is one
  _require_float("reciprocal", x)
  return _float_op(ctx, "recip", lambda a: f"1.0 / {a}", x)


elementwise(compat.reciprocal_p, work=ARITHMETIC)(_reciprocal)


# --- bit counts ------------------------------------------------------------------------

@elementwise(lax.population_count_p, library=("popc",), foldable=True)
def _popcount(ctx, x):
  r = ctx.value("popc", f"libdevice.popc({_bits_for_libdevice(ctx, x)})", np.int32, x.shape)
  return emit.cast(ctx.b, r, x.dtype)


@elementwise(lax.clz_p, library=("clz",), foldable=True)
def _clz(ctx, x):
  bits = x.dtype.itemsize * 8
  expr = f"libdevice.clz({_bits_for_libdevice(ctx, x)})"
  if bits < 32:
    expr = f"{expr} - {32 - bits}"   # zero-extended: the extra high bits are zeros
  r = ctx.value("clz", expr, np.int32, x.shape)
  return emit.cast(ctx.b, r, x.dtype)


def _bits_for_libdevice(ctx, x: Value) -> Value:
  """x's bits as int32 (zero-extended from 8/16 bits) or int64: what popc/clz take."""
  dt = x.dtype
  if dt in (np.int32, np.int64):
    return x
  if dt.itemsize >= 4:
    target = tl.int32 if dt.itemsize == 4 else tl.int64
    return ctx.value("bits", f"{x}.to({target}, bitcast=True)", np.dtype(target[3:]), x.shape)
  u = f"{x}.to({_as_unsigned(dt)}, bitcast=True)" if is_signed(dt) else str(x)
  return ctx.value("bits", f"{u}.to({tl.uint32}).to({tl.int32}, bitcast=True)", np.int32, x.shape)


# --- binary arithmetic --------------------------------------------------------------

_OPERATORS = {lax.add_p: "+", lax.sub_p: "-", lax.mul_p: "*"}


def _to_out(ctx, *operands) -> list[Value]:
  """Operands in the result dtype: mul(out_dtype=...) converts them first, as XLA does."""
  dt = _out_dtype(ctx)
  return [emit.cast(ctx.b, v, dt) for v in operands]


def _arith(op: str, name: str):
  def rule(ctx, x, y, **params):
    dt = _out_dtype(ctx)
    x, y = _to_out(ctx, x, y)
    if is_bool(dt):
      expr = {"+": "|", "*": "&"}.get(op)
      if expr is None:
        raise Unsupported(f"{name} on bool", "use logical operations (^, &, |) on bools")
      return ctx.value(name, f"{x} {expr} {y}", dt, _shape(ctx))
    if is_float(dt):
      return _float_op(ctx, name, lambda a, b: f"{a} {op} {b}", x, y)
    return ctx.value(name, f"{x} {op} {y}", dt, _shape(ctx))
  rule.__name__ = f"_{name}_rule"
  return rule


for _prim, _op in _OPERATORS.items():
  elementwise(_prim, work=ARITHMETIC, foldable=True)(_arith(_op, _prim.name))

elementwise(compat.add_jaxvals_p, work=ARITHMETIC)(_arith("+", "add_any"))


@elementwise(lax.div_p, work=ARITHMETIC, foldable=True)
def _div(ctx, x, y):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if is_float(dt):
    return _float_op(ctx, "div", lambda a, b: f"{a} / {b}", x, y)
  if is_bool(dt):
    raise Unsupported("division of bools")
  if y.const is not None and y.const not in (0, -1):
    return ctx.value("div", f"{x} // {y}", dt, shape)
  # XLA: x / 0 = -1 (all ones), INT_MIN / -1 = INT_MIN; both are UB in LLVM.
  safe = _safe_divisor(ctx, x, y, dt)
  q = f"{x} // {safe}"
  return ctx.value("div", f"{tl.where}({y} == 0, {literal(_all_ones(dt), dt)}, {q})", dt, shape)


@elementwise(lax.rem_p, work=ARITHMETIC, library=("fmod",), foldable=True)
def _rem(ctx, x, y):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if is_float(dt):
    # fmod (the sign of the dividend), exactly: Triton's % on floats becomes
    # x - trunc(x / y) * y on the GPU
    return _float_op(ctx, "rem", lambda a, b: f"libdevice.fmod({a}, {b})", x, y)
  if is_bool(dt):
    raise Unsupported("remainder of bools")
  if y.const is not None and y.const not in (0, -1):
    return ctx.value("rem", f"{x} % {y}", dt, shape)
  # XLA: x % 0 = x, INT_MIN % -1 = 0
  safe = _safe_divisor(ctx, x, y, dt)
  return ctx.value("rem", f"{tl.where}({y} == 0, {x}, {x} % {safe})", dt, shape)


def _all_ones(dt):
  return -1 if is_signed(dt) else int(np.iinfo(dt).max)


def _safe_divisor(ctx, x: Value, y: Value, dt) -> str:
  one = literal(1, dt)
  if is_signed(dt):
    lo = literal(int(np.iinfo(dt).min), dt)
    cond = f"({y} == 0) | (({x} == {lo}) & ({y} == {literal(-1, dt)}))"
  else:
    cond = f"{y} == 0"
  return ctx.b.assign("divisor", f"{tl.where}({cond}, {one}, {y})")


def _minmax(kind: str):
  def rule(ctx, x, y):
    dt = _out_dtype(ctx)
    shape = _shape(ctx)
    if is_bool(dt):
      return ctx.value(kind, f"{x} {'|' if kind == 'max' else '&'} {y}", dt, shape)
    fn = tl.maximum if kind == "max" else tl.minimum
    if is_float(dt):
      return _float_op(
          ctx, kind, lambda a, b: f"{fn}({a}, {b}, propagate_nan={tl.propagate_nan_all})", x, y)
    return ctx.value(kind, f"{fn}({x}, {y})", dt, shape)
  rule.__name__ = f"_{kind}_rule"
  return rule


elementwise(lax.max_p, work=ARITHMETIC, foldable=True)(_minmax("max"))
elementwise(lax.min_p, work=ARITHMETIC, foldable=True)(_minmax("min"))


@elementwise(lax.pow_p, work=TRANSCENDENTAL, library=("pow",), foldable=True)
def _pow(ctx, x, y):
  _require_float("pow", x)
  xc = _compute(ctx, x)
  # an integer exponent is converted to the base's type first, as XLA does
  yc = _compute(ctx, y) if is_float(y.dtype) else emit.cast(ctx.b, y, xc.dtype)
  r = ctx.value("pow", f"libdevice.pow({xc}, {yc})", xc.dtype, _shape(ctx))
  return _finish(ctx, r, _out_dtype(ctx))


@elementwise(lax.atan2_p, work=TRANSCENDENTAL, library=("atan2",), foldable=True)
def _atan2(ctx, x, y):
  _require_float("atan2", x, y)
  return _float_op(ctx, "atan2", lambda a, b: f"libdevice.atan2({a}, {b})", x, y)


@elementwise(lax.nextafter_p, work=ARITHMETIC, foldable=True)
def _nextafter(ctx, x, y):
  """XLA's bit-level NextAfter, for every float width (libdevice has f32/f64 only)."""
  dt = _out_dtype(ctx)
  _require_float("nextafter", x, y)
  shape = _shape(ctx)
  bits = dt.itemsize * 8
  it = np.dtype(f"int{bits}")
  sign_bit = literal(-(1 << (bits - 1)), it)
  magnitude = literal((1 << (bits - 1)) - 1, it)
  b = ctx.b
  x, y = emit.materialize(b, x), emit.materialize(b, y)   # a literal has no .to()
  xi = b.assign("from_bits", f"{x}.to({tl_dtype(it)}, bitcast=True)")
  yi = b.assign("to_bits", f"{y}.to({tl_dtype(it)}, bitcast=True)")
  x_abs = b.assign("from_abs", f"{xi} & {magnitude}")
  y_abs = b.assign("to_abs", f"{yi} & {magnitude}")
  # a step away from zero, or toward it when the signs differ or |x| > |y|
  toward_zero = b.assign("toward_zero", f"(({xi} & {sign_bit}) != ({yi} & {sign_bit})) | "
                         f"({x_abs} > {y_abs})")
  stepped = b.assign("stepped", f"{tl.where}({toward_zero}, {xi} - {literal(1, it)}, "
                     f"{xi} + {literal(1, it)})")
  # from +-0: the smallest subnormal with y's sign; equal (or both zero): y
  tiniest = b.assign("tiniest", f"({yi} & {sign_bit}) | {literal(1, it)}")
  r = b.assign("next_bits", f"{tl.where}({x_abs} == 0, {tl.where}({y_abs} == 0, {yi}, {tiniest}), "
               f"{stepped})")
  r = b.assign("next_bits", f"{tl.where}({xi} == {yi}, {yi}, {r})")
  xc, yc = _compute(ctx, x), _compute(ctx, y)
  nan_bits = literal(_quiet_nan_bits(dt), it)
  r = b.assign("next_bits", f"{tl.where}({xc} != {xc}, {nan_bits}, {tl.where}({yc} != {yc}, "
               f"{nan_bits}, {r}))")
  return ctx.value("nextafter", f"{r}.to({tl_dtype(dt)}, bitcast=True)", dt, shape)


def _quiet_nan_bits(dt) -> int:
  nan = np.asarray(np.nan, dtype=np.float32).astype(dt)
  return int(nan.view(np.dtype(f"int{dt.itemsize * 8}")))


@elementwise(getattr(lax, "mulhi_p", None), library=("mulhi",))
def _mulhi(ctx, x, y):
  """The high half of the double-width product."""
  dt = _out_dtype(ctx)
  if not is_int(dt):
    raise Unsupported(f"mulhi of {dt}", "mulhi takes integers")
  x, y = emit.materialize(ctx.b, x), emit.materialize(ctx.b, y)   # libdevice takes tensors
  if dt.itemsize >= 4:
    return ctx.value("mulhi", f"libdevice.mulhi({x}, {y})", dt, _shape(ctx))
  wide = tl.int32 if is_signed(dt) else tl.uint32
  bits = dt.itemsize * 8
  product = ctx.b.assign("product", f"{x}.to({wide}) * {y}.to({wide})")
  return ctx.value("mulhi", f"({product} >> {bits}).to({tl_dtype(dt)})", dt, _shape(ctx))


# --- bitwise and shifts -----------------------------------------------------------

def _bitwise(op: str):
  def rule(ctx, x, y):
    return ctx.value({"&": "and", "|": "or", "^": "xor"}[op], f"{x} {op} {y}",
                     _out_dtype(ctx), _shape(ctx))
  rule.__name__ = f"_bitwise_{op}_rule"
  return rule


elementwise(lax.and_p, foldable=True)(_bitwise("&"))
elementwise(lax.or_p, foldable=True)(_bitwise("|"))
elementwise(lax.xor_p, foldable=True)(_bitwise("^"))


def _as_unsigned(dt) -> str:
  return {1: tl.uint8, 2: tl.uint16, 4: tl.uint32, 8: tl.uint64}[dt.itemsize]


def _as_signed(dt) -> str:
  return {1: tl.int8, 2: tl.int16, 4: tl.int32, 8: tl.int64}[dt.itemsize]


def _shift(kind: str):
  """XLA's shifts: amounts are read as unsigned; at or past the width, a left or
  logical right shift gives 0 and an arithmetic right shift the sign fill."""
  def rule(ctx, x, y):
    dt = _out_dtype(ctx)
    shape = _shape(ctx)
    bits = dt.itemsize * 8
    x = emit.materialize(ctx.b, x)   # a literal has no .to()
    if kind == "shr_logical":
      view = _as_unsigned(dt)      # >> is logical on unsigned types in Triton
    elif kind == "shr_arith":
      view = _as_signed(dt)        # ... and arithmetic on signed ones
    else:
      view = tl_dtype(dt)

    def shifted(amount: str) -> str:
      op = "<<" if kind == "shl" else ">>"
      if view == tl_dtype(dt):
        return f"{x} {op} {amount}"
      return (f"({x}.to({view}, bitcast=True) {op} {amount}.to({view}, bitcast=True))"
              f".to({tl_dtype(dt)}, bitcast=True)")

    def typed(value: int) -> str:   # a 0-d tensor of dt: no promotion to int32
      return emit.materialize(ctx.b, emit.const(value, dt)).expr

    if y.const is not None:
      amount = int(y.const)
      if 0 <= amount < bits:
        return ctx.value(kind, shifted(typed(amount)), dt, shape)
      if kind == "shr_arith":   # the sign fill is a shift by bits - 1
        return ctx.value(kind, shifted(typed(bits - 1)), dt, shape)
      return emit.full(ctx.b, shape, 0, dt, kind)
    in_range = ctx.b.assign("in_range", f"({y} >= 0) & ({y} < {bits})" if is_signed(dt)
                            else f"{y} < {literal(bits, dt)}")
    if kind == "shr_arith":
      amount = ctx.b.assign("shift", f"{tl.where}({in_range}, {y}, {literal(bits - 1, dt)})")
      return ctx.value(kind, shifted(amount), dt, shape)
    amount = ctx.b.assign("shift", f"{tl.where}({in_range}, {y}, {literal(0, dt)})")
    return ctx.value(kind, f"{tl.where}({in_range}, {shifted(amount)}, {literal(0, dt)})", dt, shape)
  rule.__name__ = f"_{kind}_rule"
  return rule


elementwise(lax.shift_left_p, foldable=True)(_shift("shl"))
elementwise(lax.shift_right_logical_p, foldable=True)(_shift("shr_logical"))
elementwise(lax.shift_right_arithmetic_p, foldable=True)(_shift("shr_arith"))


# --- comparisons and selection -----------------------------------------------------

_COMPARISONS = {lax.eq_p: "==", lax.ne_p: "!=", lax.lt_p: "<", lax.le_p: "<=",
                lax.gt_p: ">", lax.ge_p: ">="}


def _compare(op: str, name: str):
  def rule(ctx, x, y):
    # 16-bit floats compare as f32 values (the interpreter holds bf16 as bits)
    xc, yc = _compute(ctx, x), _compute(ctx, y)
    if is_bool(x.dtype) and op in ("<", "<=", ">", ">="):
      xc = emit.cast(ctx.b, x, np.int8)   # False < True
      yc = emit.cast(ctx.b, y, np.int8)
    return ctx.value(name, f"{xc} {op} {yc}", np.bool_, _shape(ctx))
  rule.__name__ = f"_{name}_rule"
  return rule


for _prim, _op in _COMPARISONS.items():
  elementwise(_prim, foldable=True)(_compare(_op, _prim.name))


def _total_order(op: str, name: str):
  """eq_to/lt_to/le_to (what sorting compares with): floats in IEEE total order,
  -NaN < -inf < ... < -0 < +0 < ... < inf < NaN, NaNs ordered by their bits."""
  def rule(ctx, x, y):
    if not is_float(x.dtype):
      return _compare(op, name)(ctx, x, y)
    it = np.dtype(f"int{x.dtype.itemsize * 8}")
    bits = it.itemsize * 8

    def key(v: Value) -> str:
      # negative floats: flip every bit but the sign, so larger magnitudes sort lower
      raw = ctx.b.assign("bits", f"{emit.materialize(ctx.b, v)}.to({tl_dtype(it)}, bitcast=True)")
      flip = literal((1 << (bits - 1)) - 1, it)
      return ctx.b.assign("order_key", f"{raw} ^ (({raw} >> {literal(bits - 1, it)}) & {flip})")

    return ctx.value(name, f"{key(x)} {op} {key(y)}", np.bool_, _shape(ctx))
  rule.__name__ = f"_{name}_rule"
  return rule


for _name, _op in (("eq_to", "=="), ("lt_to", "<"), ("le_to", "<=")):
  elementwise(_optional(lax, f"{_name}_p"))(_total_order(_op, _name))


@elementwise(lax.select_n_p, foldable=True)
def _select_n(ctx, which, *cases):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if len(cases) == 1:
    return cases[0]
  if which.const is not None:
    return emit.broadcast_to(ctx.b, cases[int(which.const)], shape)
  if is_bool(which.dtype):
    return ctx.value("select", f"{tl.where}({which}, {cases[1]}, {cases[0]})", dt, shape)
  # n-way: a chain of wheres on the integer selector
  result = cases[-1]
  for i in range(len(cases) - 2, -1, -1):
    result = ctx.value("select", f"{tl.where}({which} == {literal(i, which.dtype)}, {cases[i]}, "
                       f"{result})", dt, shape)
  return result


@elementwise(lax.clamp_p, work=ARITHMETIC, foldable=True)
def _clamp(ctx, lo, x, hi):
  dt = _out_dtype(ctx)
  shape = _shape(ctx)
  if is_float(dt):
    nan = f"propagate_nan={tl.propagate_nan_all}"
    return _float_op(ctx, "clamp", lambda l, v, h: f"{tl.minimum}({tl.maximum}({v}, {l}, {nan}), "
                     f"{h}, {nan})", lo, x, hi)
  if is_bool(dt):
    return ctx.value("clamp", f"({x} | {lo}) & {hi}", dt, shape)
  return ctx.value("clamp", f"{tl.minimum}({tl.maximum}({x}, {lo}), {hi})", dt, shape)


# --- multiply-add and polynomials (jax 0.12.1: lax.fmuladd, lax.fma, lax.polynomial) ---------

def _multiply_add(ctx, name: str, a: Value, b: Value, c: Value, dtype) -> Value:
  """a * b + c rounded once, in float32 for narrower floats and then to `dtype` (as XLA
  lowers fmuladd on the GPU and the CPU for them); for integers, a multiply and an add."""
  a, b, c = (emit.cast(ctx.b, v, dtype) for v in (a, b, c))
  if not is_float(dtype):
    return ctx.value(name, f"{a} * {b} + {c}", dtype, _shape(ctx))
  computed = [_compute(ctx, v) for v in (a, b, c)]
  r = ctx.value(name, f"{tl.fma}({computed[0]}, {computed[1]}, {computed[2]})",
                computed[0].dtype, _shape(ctx))
  return _finish(ctx, r, dtype)


def _fmuladd(ctx, a, b, c):
  dt = _out_dtype(ctx)
  _require_float("fmuladd", a, b, c)
  ctx.record(elementwise_flops=2 * math.prod(_shape(ctx)))     # a multiply and an add
  return _multiply_add(ctx, "fma", a, b, c, dt)


elementwise(_optional(lax, "fmuladd_p"), _optional(lax, "fma_p"), work=ARITHMETIC,
            foldable=True)(_fmuladd)


@elementwise(_optional(lax, "polynomial_p"), work=ARITHMETIC)
def _polynomial(ctx, x, *coeffs, unroll=None):
  """Horner's rule, a_0 + x (a_1 + x (a_2 + ...)), every step one multiply-add rounded to the
  result's dtype, as lax.polynomial's own lowering does; unrolled whatever `unroll` says
  (XLA's scan past it is the same steps in a loop: a kernel's code wants them inline)."""
  dt = _out_dtype(ctx)
  if is_float(dt):      # a multiply and an add a step (the table's default counts one)
    ctx.record(elementwise_flops=2 * (len(coeffs) - 1) * math.prod(_shape(ctx)))
  acc = emit.cast(ctx.b, coeffs[-1], dt)
  for c in reversed(coeffs[:-1]):
    acc = _multiply_add(ctx, "horner", acc, x, c, dt)
  # (the value takes the result's shape from its first step: only a polynomial of one
  # coefficient, which lax.polynomial does not bind, could end at a coefficient's shape)
  return emit.broadcast_to(ctx.b, acc, _shape(ctx)) if acc.shape != _shape(ctx) else acc


# --- conversions ---------------------------------------------------------------------

@elementwise(lax.convert_element_type_p, foldable=True)
def _convert(ctx, x, *, new_dtype, weak_type=False, sharding=None):
  return emit.cast(ctx.b, x, new_dtype)


@elementwise(lax.bitcast_convert_type_p)
def _bitcast(ctx, x, *, new_dtype):
  new = np.dtype(new_dtype)
  if new.itemsize != x.dtype.itemsize:
    raise Unsupported(f"bitcast from {x.dtype} to {new} (different widths: "
                      f"{x.dtype.itemsize * 8} and {new.itemsize * 8} bits)",
                      "bitcast between types of the same width, then shift and mask")
  if is_bool(new) or is_bool(x.dtype):
    raise Unsupported("bitcast to or from bool", "compare with 0 instead")
  if new == x.dtype:
    return x
  return ctx.value("bits", f"{x}.to({tl_dtype(new)}, bitcast=True)", new, x.shape)


def _identity(ctx, x, **params):
  return x


def _reduce_precision(ctx, x, *, exponent_bits, mantissa_bits):
  """XLA's ReducePrecision on the bits: round the mantissa to nearest even, then
  overflow to +-inf and flush what falls below the normal range to +-0."""
  _require_float("reduce_precision", x)
  dt = x.dtype
  info = jnp.finfo(dt)
  bits, src_mantissa, src_exponent = dt.itemsize * 8, int(info.nmant), int(info.nexp)
  it = np.dtype(f"int{bits}")

  def c(value: int) -> str:   # an unsigned bit pattern as a constant of the signed type
    value &= (1 << bits) - 1
    return literal(value - (1 << bits) if value >> (bits - 1) else value, it)

  b = ctx.b
  xi = b.assign("bits", f"{x}.to({tl_dtype(it)}, bitcast=True)")
  r = xi
  if mantissa_bits < src_mantissa:
    shift = src_mantissa - mantissa_bits
    last_bit = 1 << shift
    rounding = b.assign("rounding", f"(({xi} >> {c(shift)}) & {c(1)}) + {c((last_bit >> 1) - 1)}")
    r = b.assign("bits", f"({xi} + {rounding}) & {c(~(last_bit - 1))}")
  if exponent_bits < src_exponent:
    exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
    bias = (1 << (src_exponent - 1)) - 1
    reduced_bias = (1 << (exponent_bits - 1)) - 1
    exponent = b.assign("exponent", f"{r} & {c(exponent_mask)}")
    signed_zero = b.assign("signed_zero", f"{r} & {c(1 << (bits - 1))}")
    r = b.assign("bits", f"{tl.where}({exponent} > {c((bias + reduced_bias) << src_mantissa)}, "
                 f"{signed_zero} | {c(exponent_mask)}, {r})")
    r = b.assign("bits", f"{tl.where}({exponent} <= {c((bias - reduced_bias) << src_mantissa)}, "
                 f"{signed_zero}, {r})")
  reduced = b.assign("reduced", f"{r}.to({tl_dtype(dt)}, bitcast=True)")
  xc = _compute(ctx, x)
  if mantissa_bits > 0:   # NaN stays NaN (rounding could carry it into an infinity)
    return ctx.value("reduced", f"{tl.where}({xc} != {xc}, {x}, {reduced})", dt, x.shape)
  return Value(reduced, dt, x.shape, loops=x.loops)


elementwise(compat.copy_p, compat.stop_gradient_p)(_identity)
register(_optional(lax, "optimization_barrier_p"))(lambda ctx, *xs: list(xs))
elementwise(compat.reduce_precision_p, work=REDUCTION)(_reduce_precision)


# --- what Triton cannot express ------------------------------------------------------

def _unsupported(reason: str, hint: str):
  def rule(ctx, *operands, **params):
    raise Unsupported(reason, hint)
  return rule


for _name in ("complex_p", "conj_p", "real_p", "imag_p"):
  register(_optional(lax, _name), limits="always refused: complex numbers")(
      _unsupported("complex numbers", COMPLEX_HINT))

_SPECIAL_FUNCTIONS = ("digamma", "polygamma", "igamma_grad_a", "zeta", "bessel_i1e")
for _name in _SPECIAL_FUNCTIONS:
  register(_optional(lax, f"{_name}_p"), limits="always refused: no libdevice function")(
      _unsupported(f"`{_name}` has no libdevice function to lower to",
                   f"compute it outside the kernel (jax.scipy.special or lax.{_name}) and "
                   "pass the result in as an input, or write an approximation from "
                   "supported operations"))


# --- special functions XLA itself computes from lax operations -------------------------

def _decomposed(impl_name: str, broadcast_and_upcast: bool):
  """Lowers a primitive through JAX's own lax-level implementation of it (the
  one XLA compiles for these primitives), traced at the operands' types."""
  def rule(ctx, *operands, **params):
    impl = compat.lax_special_impl(impl_name, broadcast_and_upcast)
    if impl is None:   # pragma: no cover - a JAX without this implementation
      raise Unsupported(f"this JAX has no lax implementation `{impl_name}` to lower",
                        "compute it outside the kernel and pass the result in")
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ctx.avals_in]
    closed = jax.make_jaxpr(lambda *args: impl(*args, **params))(*avals)
    (out,) = ctx.lower_jaxpr(closed.jaxpr, list(operands), DECOMPOSITION,
                             consts=closed.consts)
    return out
  rule.__name__ = f"_{impl_name}_rule"
  return rule


elementwise(_optional(lax, "bessel_i0e_p"))(_decomposed("bessel_i0e_impl", False))
elementwise(_optional(lax, "igamma_p"))(_decomposed("igamma_impl", True))
elementwise(_optional(lax, "igammac_p"))(_decomposed("igammac_impl", True))
elementwise(_optional(lax, "regularized_incomplete_beta_p"))(
    _decomposed("regularized_incomplete_beta_impl", True))
