"""Elementwise lowering rules against jax.numpy/lax on CPU, dtype by dtype.

Every test runs kernels through pallas-prof (Triton's interpreter on CPU) on
fresh random inputs plus the special values where XLA's answer is defined
(NaN, +-inf, +-0, integer extremes, shifts past the width), and compares with
the same computation jitted by XLA on CPU. Results XLA rounds exactly are
compared bit for bit; transcendental functions within the dtype's tolerance.
Each family also compiles its kernels for sm_90 (for some dtypes), so the
generated code is proven against the real compiler, not only the interpreter.

Several operations share one kernel (one output each) where they share
inputs: one lowering, one interpreter run and one XLA compile instead of many.
"""
from __future__ import annotations

import contextlib
import inspect
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.backend.lowering.rules import RULES
from testkit.helpers import (FLOATS, INTS, assert_close, elementwise_call, pallas, random_array,
                           xla_on_cpu)

# NaN and infinity inputs make numpy (behind the interpreter) warn; expected here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:(overflow|invalid value|divide by zero) encountered:RuntimeWarning")

SHAPE = (4, 16)
SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0)
ALL_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
HERE = os.path.basename(__file__)


# --- running and checking -----------------------------------------------------------

def x64_for(*dtypes):
  """64-bit dtypes need JAX's x64 mode: it is switched on for that test only."""
  if any(jnp.dtype(d).itemsize == 8 for d in dtypes):
    return jax.enable_x64(True)
  return contextlib.nullcontext()


def run(fn, *arrays, compile_check=False):
  """(pallas-prof result, XLA-on-CPU reference) of `fn` on `arrays`."""
  arrays = [jnp.asarray(a) for a in arrays]
  ref = np.asarray(jax.jit(fn)(*arrays))
  kernel_registry.clear()
  out = np.asarray(elementwise_call(fn, *arrays, out_dtype=ref.dtype))
  assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
  if compile_check:
    assert_compiles()
  return out, ref


def run_many(fns: dict, *arrays, compile_check=False, references=None):
  """Every fn of `fns` in one kernel (an output each) and in one XLA program.

  Returns {label: (pallas-prof result, reference)}. `references` (a function of
  the arrays returning {label: array}) replaces the XLA program of `fns`."""
  arrays = [jnp.asarray(a) for a in arrays]
  labels = list(fns)
  if references is None:
    refs = jax.jit(lambda *a: [fns[k](*a) for k in labels])(*arrays)
  else:
    computed = references(*arrays)
    refs = [computed[k] for k in labels]
  refs = [np.asarray(r) for r in refs]

  def kernel(*all_refs):
    ins, outs = all_refs[:len(arrays)], all_refs[len(arrays):]
    values = [r[...] for r in ins]
    for label, out in zip(labels, outs):
      out[...] = fns[label](*values)

  kernel_registry.clear()
  out_shape = tuple(jax.ShapeDtypeStruct(r.shape, r.dtype) for r in refs)
  outs = pallas(kernel, out_shape)(*arrays)
  if compile_check:
    assert_compiles()
  return {k: (np.asarray(o), r) for k, o, r in zip(labels, outs, refs)}


def assert_compiles():
  """The kernel just lowered also compiles to a cubin for sm_90."""
  records = kernel_registry.kernels()
  assert len(records) == 1, [r.name for r in records]
  ck = compile_kernel(records[0].generated, ("cuda", 90))
  assert ".target sm_90" in ck.ptx and len(ck.cubin) > 0


def assert_same(out, ref, err_msg=""):
  """Bit-exact (so the sign of zero counts), except that any NaN matches any NaN."""
  out, ref = np.asarray(out), np.asarray(ref)
  assert out.shape == ref.shape and out.dtype == ref.dtype, \
      (err_msg, out.shape, ref.shape, out.dtype, ref.dtype)
  if jnp.issubdtype(ref.dtype, jnp.floating):
    nan_out, nan_ref = np.isnan(out.astype(np.float32)), np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(nan_out, nan_ref, err_msg=f"NaN positions {err_msg}")
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[ref.dtype.itemsize]
    bad = np.where(nan_out, 0, out.view(bits)) != np.where(nan_ref, 0, ref.view(bits))
    assert not bad.any(), (f"{err_msg}: {bad.sum()} mismatches, e.g. got {out[bad][:6]} "
                           f"expected {ref[bad][:6]} at {np.argwhere(bad)[:6].tolist()}")
  else:
    np.testing.assert_array_equal(out, ref, err_msg=err_msg)


def assert_all_same(results: dict):
  check_each(results, assert_same)


def check_each(results: dict, check):
  """Runs check(out, ref, label) on every result; reports every failing label."""
  failures = []
  for label, (out, ref) in results.items():
    try:
      check(out, ref, label)
    except AssertionError as e:
      failures.append(f"--- {label}: {e}")
  assert not failures, f"{len(failures)} of {len(results)} failed:\n" + "\n".join(failures)


def with_specials(x, specials):
  """x with its first elements replaced by `specials` (in x's dtype)."""
  x = np.array(x)
  flat = x.reshape(-1)
  if jnp.issubdtype(x.dtype, jnp.floating):
    values = np.asarray(jnp.asarray(np.asarray(specials, np.float64), x.dtype))
  else:
    values = np.asarray([int(v) for v in specials], dtype=np.int64 if x.dtype != np.uint64
                        else np.uint64).astype(x.dtype)
  flat[:len(values)] = values
  return flat.reshape(x.shape)


def full_range_ints(rng, shape, dtype):
  """Random ints over the dtype's whole range (never zero)."""
  info = jnp.iinfo(dtype)
  x = rng.integers(int(info.min), int(info.max), size=shape, endpoint=True,
                   dtype=np.dtype(dtype))
  return np.where(x == 0, 1, x).astype(dtype)


def line_of(fn, marker):
  lines, first = inspect.getsourcelines(fn)
  return first + next(i for i, line in enumerate(lines) if marker in line)


# --- unary float functions -----------------------------------------------------------

# name -> (function, low, high, extra special inputs, (atol, rtol) for float32 or None)
UNARY_FLOAT = {
    "exp": (lax.exp, -10, 10, (88.0, -104.0), None),
    "exp2": (lax.exp2, -10, 10, (128.0, -150.0), None),
    "expm1": (lax.expm1, -5, 5, (1e-4, -1e-4), None),
    "log": (lax.log, 0.05, 20, (1.0, -1.0), None),
    "log1p": (lax.log1p, -0.9, 10, (-1.0, -2.0, 1e-5), None),
    "sqrt": (lax.sqrt, 0, 20, (-1.0, 4.0, 2.0), None),
    "rsqrt": (lax.rsqrt, 0.05, 20, (-1.0, 4.0), None),
    "cbrt": (lax.cbrt, -20, 20, (-8.0, 27.0), None),
    "sin": (lax.sin, -6, 6, (), None),
    "cos": (lax.cos, -6, 6, (), None),
    "tan": (lax.tan, -1.4, 1.4, (), None),
    "asin": (lax.asin, -1, 1, (1.0, -1.0, 1.5), None),
    "acos": (lax.acos, -1, 1, (1.0, -1.0, 1.5), None),
    "atan": (lax.atan, -10, 10, (), None),
    "sinh": (lax.sinh, -5, 5, (), None),
    "cosh": (lax.cosh, -5, 5, (), None),
    "tanh": (lax.tanh, -5, 5, (20.0, -20.0), None),
    "asinh": (lax.asinh, -10, 10, (), None),
    "acosh": (lax.acosh, 1, 10, (1.0, 0.5), None),
    "atanh": (lax.atanh, -0.95, 0.95, (1.0, -1.0, 2.0), None),
    "erf": (lax.erf, -3, 3, (), None),
    "erfc": (lax.erfc, -3, 3, (), None),
    "erf_inv": (lax.erf_inv, -0.95, 0.95, (1.0, -1.0, 1.5), None),
    # lgamma: near its zeros (x = 1, 2) only an absolute error is meaningful
    "lgamma": (lax.lgamma, 0.1, 8, (1.0, 2.0, -1.0, -2.0, -0.5, -2.5), (2e-5, 1e-5)),
    "floor": (lax.floor, -10, 10, (0.5, -0.5, 2.5), None),
    "ceil": (lax.ceil, -10, 10, (0.5, -0.5, 2.5), None),
    "round_away": (lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), -10, 10,
                   (0.5, -0.5, 1.5, 2.5, -2.5, -0.25), None),
    "round_even": (lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), -10, 10,
                   (0.5, -0.5, 1.5, 2.5, -2.5, -0.25), None),
    "logistic": (lax.logistic, -10, 10, (100.0, -100.0), None),
    "abs": (lax.abs, -5, 5, (), None),
    "neg": (lax.neg, -5, 5, (), None),
    "sign": (lax.sign, -5, 5, (), None),
    "square": (lax.square, -5, 5, (), None),
    "reciprocal": (pl.reciprocal, -5, 5, (3.0,), None),
}

# XLA rounds these exactly (no approximation): compared bit for bit
EXACT_UNARY = {"floor", "ceil", "round_away", "round_even", "abs", "neg", "sign", "square",
               "sqrt", "reciprocal"}


@pytest.mark.parametrize("dtype", FLOATS + ("float64",))
def test_unary_float(rng, dtype):
  """Every unary float function in one kernel (an input and an output each)."""
  names = sorted(UNARY_FLOAT)
  with x64_for(dtype):
    inputs = []
    for name in names:
      _, low, high, extra, _ = UNARY_FLOAT[name]
      inputs.append(with_specials(random_array(rng, SHAPE, dtype, low=low, high=high),
                                  SPECIALS + extra))
    fns = {name: (lambda *xs, i=i, name=name: UNARY_FLOAT[name][0](xs[i]))
           for i, name in enumerate(names)}

    @jax.jit
    def references(*xs):
      refs = {}
      for i, name in enumerate(names):
        # pl.reciprocal has no XLA lowering; its meaning is 1 / x
        fn = (lambda x: 1 / x) if name == "reciprocal" else UNARY_FLOAT[name][0]
        if jnp.dtype(dtype).itemsize == 2 and name not in EXACT_UNARY:
          # 16-bit floats are computed in f32 and rounded once (the project's
          # policy, and what libdevice does). JAX's CPU lowering of some
          # functions works in the 16-bit type itself, e.g. exp2(x) =
          # exp(f16(ln 2) * x), several ulps off; the reference rounds once.
          refs[name] = fn(xs[i].astype(jnp.float32)).astype(dtype)
        else:
          refs[name] = fn(xs[i])
      return refs

    results = run_many(fns, *inputs, references=references,
                       compile_check=dtype in ("bfloat16", "float64"))

  def check(out, ref, name):
    assert out.dtype == ref.dtype == np.dtype(dtype)
    if name in EXACT_UNARY:
      assert_same(out, ref, name)
      return
    tol = UNARY_FLOAT[name][4]
    atol, rtol = tol if (tol and dtype == "float32") else (None, None)
    assert_close(out, ref, dtype, atol=atol, rtol=rtol, err_msg=name)
    # where XLA gives NaN or an infinity, so must we
    nonfinite = ~np.isfinite(ref.astype(np.float64))
    assert_same(out[nonfinite], ref[nonfinite], name)
  check_each(results, check)


@pytest.mark.parametrize("dtype", FLOATS + ("float64",))
def test_is_finite(rng, dtype):
  with x64_for(dtype):
    x = with_specials(random_array(rng, SHAPE, dtype), SPECIALS + (65504.0, -1e30))
    out, ref = run(lax.is_finite, x, compile_check=dtype == "bfloat16")
  assert ref.dtype == np.bool_
  assert_same(out, ref)


@pytest.mark.parametrize("dtype", FLOATS + ("float64",))
def test_integer_pow_float(rng, dtype):
  powers = (0, 1, 2, 3, 5, 8, -1, -2, -3)
  with x64_for(dtype):
    x = with_specials(random_array(rng, SHAPE, dtype, low=-3, high=3, nonzero=True), SPECIALS)
    results = run_many({f"x**{p}": (lambda v, p=p: lax.integer_pow(v, p)) for p in powers}, x,
                       compile_check=dtype in ("bfloat16", "float64"))
  for label, (out, ref) in results.items():
    assert_close(out, ref, dtype, err_msg=label)


@pytest.mark.parametrize("dtype", INTS + ("uint8",))
def test_integer_pow_int(rng, dtype):
  with x64_for(dtype):
    x = full_range_ints(rng, SHAPE, dtype)
    results = run_many({f"x**{p}": (lambda v, p=p: lax.integer_pow(v, p))
                        for p in (0, 1, 2, 3, 7)}, x, compile_check=dtype == "int8")
  assert_all_same(results)


@pytest.mark.parametrize("dtype", INTS + ("uint8",))
def test_unary_int(rng, dtype):
  ops = {"neg": lax.neg, "sign": lax.sign, "square": lax.square, "not": lax.bitwise_not}
  if jnp.issubdtype(dtype, jnp.signedinteger):
    ops["abs"] = lax.abs    # lax.abs refuses unsigned ints
  with x64_for(dtype):
    info = jnp.iinfo(dtype)
    x = with_specials(full_range_ints(rng, SHAPE, dtype),
                      (info.min, info.max, 0, 1, -1 if info.min < 0 else 2))
    results = run_many(ops, x, compile_check=dtype in ("int8", "uint32"))
  assert_all_same(results)


def test_not_bool(rng):
  x = random_array(rng, SHAPE, jnp.bool_)
  out, ref = run(lax.bitwise_not, x, compile_check=True)
  assert_same(out, ref)


# --- binary arithmetic ----------------------------------------------------------------

FLOAT_BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
    "max": lax.max, "min": lax.min, "pow": lax.pow, "atan2": lax.atan2,
    "nextafter": lax.nextafter,
}


def _float_pair(rng, name, dtype):
  x = random_array(rng, SHAPE, dtype)
  y = random_array(rng, SHAPE, dtype, nonzero=True)
  if name == "pow":
    x = random_array(rng, SHAPE, dtype, low=0.1, high=4)
    y = random_array(rng, SHAPE, dtype, low=-3, high=3)
    xs = (np.nan, 1.0, np.nan, 0.0, 0.0, -2.0, -2.0, -8.0, np.inf, -np.inf, 2.0, -0.0)
    ys = (0.0, np.nan, 1.0, 0.0, -1.0, 3.0, 0.5, 1 / 3, -1.0, 3.0, np.inf, -3.0)
  else:
    xs = (np.nan, 1.0, np.nan, np.inf, -np.inf, np.inf, 0.0, -0.0, 0.0, 5.0, -5.0, 1.0, -0.0)
    ys = (1.0, np.nan, np.nan, 1.0, np.inf, np.inf, 0.0, 0.0, -0.0, 0.0, np.inf, -np.inf, -0.0)
  x = with_specials(x, xs)
  y = with_specials(y, ys)
  # equal pairs exercise max/min ties, nextafter(x, x) and comparisons
  x.reshape(-1)[-6:] = y.reshape(-1)[-6:]
  return x, y


@pytest.mark.parametrize("dtype", FLOATS + ("float64",))
def test_binary_float(rng, dtype):
  names = sorted(FLOAT_BINARY)
  with x64_for(dtype):
    inputs = [a for name in names for a in _float_pair(rng, name, dtype)]
    fns = {name: (lambda *xs, i=i, name=name: FLOAT_BINARY[name](xs[2 * i], xs[2 * i + 1]))
           for i, name in enumerate(names)}
    results = run_many(fns, *inputs, compile_check=dtype in ("bfloat16", "float64", "float16"))

  def check(out, ref, name):
    if name in ("pow", "atan2"):
      assert_close(out, ref, dtype, err_msg=name)
      nonfinite = ~np.isfinite(ref.astype(np.float64))
      assert_same(out[nonfinite], ref[nonfinite], name)
    elif name in ("max", "min"):
      assert_same(*_zero_sign_ignored(out, ref), name)
    else:
      assert_same(out, ref, name)
  check_each(results, check)


def _zero_sign_ignored(out, ref):
  """max(-0, +0) may be either zero (HLO leaves it open; numpy and PTX differ)."""
  zeros = (out.astype(np.float32) == 0) & (ref.astype(np.float32) == 0)
  return (np.where(zeros, 0, out).astype(out.dtype), np.where(zeros, 0, ref).astype(ref.dtype))


def test_pow_integer_exponent(rng):
  x = with_specials(random_array(rng, SHAPE, jnp.float32, low=-3, high=3), SPECIALS)
  y = random_array(rng, SHAPE, jnp.int32, low=-4, high=4)
  out, ref = run(lax.pow, x, y, compile_check=True)
  assert_close(out, ref, jnp.float32)


INT_BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
    "max": lax.max, "min": lax.min,
}


def _int_pair(rng, dtype, small_divisor=False):
  info = jnp.iinfo(dtype)
  x = full_range_ints(rng, SHAPE, dtype)
  if small_divisor:   # zero and small divisors, to see the rounding and x / 0
    y = rng.integers(max(int(info.min), -9), 9, size=SHAPE, endpoint=True).astype(dtype)
  else:
    y = full_range_ints(rng, SHAPE, dtype)
  signed = info.min < 0
  xs = [info.min, info.min, info.max, 7, -7 if signed else 7, 0, 7, info.max, 5]
  ys = [-1 if signed else 1, 0, 0, 0, 2, 0, -2 if signed else 2, info.max, 5]
  return with_specials(x, xs), with_specials(y, ys)


@pytest.mark.parametrize("dtype", INTS + ("uint8",))
def test_binary_int(rng, dtype):
  """Wrap-around, XLA's x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN."""
  with x64_for(dtype):
    x, y = _int_pair(rng, dtype)
    results = run_many({k: INT_BINARY[k] for k in ("add", "sub", "mul", "max", "min")}, x, y,
                       compile_check=dtype in ("int8", "uint32"))
    assert_all_same(results)
    x, y = _int_pair(rng, dtype, small_divisor=True)
    results = run_many({"div": lax.div, "rem": lax.rem}, x, y,
                       compile_check=dtype in ("int16", "uint32"))
    assert_all_same(results)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint32"])
def test_div_rem_by_constant(rng, dtype):
  """Literal divisors take a shorter path; 0 and -1 must keep XLA's answers."""
  info = jnp.iinfo(dtype)
  x = with_specials(full_range_ints(rng, SHAPE, dtype), (info.min, info.max, 0))
  divisors = (3, 0, -1, -7) if info.min < 0 else (3, 0, 7)
  fns = {}
  for d in divisors:
    fns[f"div by {d}"] = lambda v, d=d: lax.div(v, jnp.asarray(d, dtype))
    fns[f"rem by {d}"] = lambda v, d=d: lax.rem(v, jnp.asarray(d, dtype))
  assert_all_same(run_many(fns, x, compile_check=dtype == "int32"))


def test_bool_arith(rng):
  x, y = random_array(rng, SHAPE, jnp.bool_), random_array(rng, SHAPE, jnp.bool_)
  assert_all_same(run_many({"max": lax.max, "min": lax.min, "jnp.add": jnp.add,
                            "jnp.multiply": jnp.multiply}, x, y, compile_check=True))


def test_mul_with_out_dtype(rng):
  """mul(out_dtype=...) converts its operands first (no int8 overflow)."""
  x = full_range_ints(rng, SHAPE, jnp.int8)
  y = full_range_ints(rng, SHAPE, jnp.int8)
  out, ref = run(lambda a, b: lax.mul(a, b, out_dtype=jnp.int32), x, y, compile_check=True)
  assert ref.dtype == np.int32
  assert_same(out, ref)
  xf = random_array(rng, SHAPE, jnp.bfloat16)
  yf = random_array(rng, SHAPE, jnp.bfloat16)
  out, ref = run(lambda a, b: lax.mul(a, b, out_dtype=jnp.float32), xf, yf)
  assert_same(out, ref)


def test_add_any(rng):
  from jax._src import ad_util
  x, y = random_array(rng, SHAPE, jnp.bfloat16), random_array(rng, SHAPE, jnp.bfloat16)
  out, ref = run(ad_util.add_jaxvals, x, y, compile_check=True)
  assert_same(out, ref)


@pytest.mark.parametrize("dtype", ALL_INTS)
def test_mulhi(rng, dtype):
  with x64_for(dtype):
    x, y = full_range_ints(rng, SHAPE, dtype), full_range_ints(rng, SHAPE, dtype)
    info = jnp.iinfo(dtype)
    x = with_specials(x, (info.min, info.max, info.max, -1 if info.min < 0 else 1))
    y = with_specials(y, (info.min, info.max, info.min, info.max))
    out, ref = run(lax.mulhi, x, y, compile_check=dtype in ("int16", "uint32", "int64"))
  assert_same(out, ref)


# Weak-typed Python literals: label -> (fn(x, c), c). The reference receives c as
# a runtime array: XLA on CPU rewrites a division by a scalar (a literal, or a
# broadcast runtime scalar) into a multiplication by its reciprocal, which is
# not the exactly rounded quotient the kernel computes. c = None: the literal
# is used as written in the reference too.
WEAK_LITERALS = {
    "x*2": (lambda x, c: x * c, 2), "3-x": (lambda x, c: c - x, 3),
    "x+1": (lambda x, c: x + c, 1), "x//3": (lambda x, c: x // c, 3),
    "x%3": (lambda x, c: x % c, 3), "max(x,2)": (lambda x, c: jnp.maximum(x, c), 2),
    "x>1": (lambda x, c: x > c, 1), "x==2": (lambda x, c: x == c, 2),
    "x&5": (lambda x, c: x & c, 5), "x<<2": (lambda x, c: x << c, 2),
}
WEAK_FLOAT_LITERALS = {
    "x*0.1": (lambda x, c: x * c, 0.1), "2.5-x": (lambda x, c: c - x, 2.5),
    "x/3": (lambda x, c: x / c, 3), "x+1e-3": (lambda x, c: x + c, 1e-3),
    "x**2": (lambda x, c: x ** 2, None), "x**0.5": (lambda x, c: x ** c, 0.5),
    "x//3": (lambda x, c: x // c, 3), "x%3": (lambda x, c: x % c, 3),
    "max(x,2)": (lambda x, c: jnp.maximum(x, c), 2),
    "x>1": (lambda x, c: x > c, 1), "x==2": (lambda x, c: x == c, 2),
    "x*2": (lambda x, c: x * c, 2), "3-x": (lambda x, c: c - x, 3),
}


@pytest.mark.parametrize("dtype", FLOATS + INTS + ("uint8", "float64"))
def test_weak_typed_literals(rng, dtype):
  """x * 2, 3 - x, ... compute in x's dtype, with the literal rounded to it."""
  with x64_for(dtype):
    if jnp.issubdtype(dtype, jnp.floating):
      x = random_array(rng, SHAPE, dtype, low=0.5, high=50)
      x = with_specials(x, (2.0, 1.0, 3.0, np.nan))
      cases = WEAK_FLOAT_LITERALS
    else:
      x = with_specials(full_range_ints(rng, SHAPE, dtype), (2, 1, 3))
      cases = WEAK_LITERALS
    fns = {k: (lambda v, f=f, c=c: f(v, c)) for k, (f, c) in cases.items()}

    def references(v):
      consts = {k: np.full(SHAPE, c, dtype) for k, (f, c) in cases.items() if c is not None}
      return jax.jit(lambda v, cs: {k: f(v, cs[k]) if k in cs else f(v, None)
                                    for k, (f, c) in cases.items()})(v, consts)

    results = run_many(fns, x, references=references,
                       compile_check=dtype in ("bfloat16", "int16", "uint32"))
  def check(out, ref, label):
    expected = np.bool_ if label in ("x>1", "x==2") else np.dtype(dtype)
    assert ref.dtype == expected, (label, ref.dtype)
    if label == "x**0.5":   # pow: libdevice and XLA are each within an ulp
      assert_close(out, ref, dtype, err_msg=label)
    else:
      assert_same(out, ref, label)
  check_each(results, check)


# --- bitwise ops and shifts -------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_INTS + ("bool",))
def test_bitwise(rng, dtype):
  with x64_for(dtype):
    if dtype == "bool":
      x, y = random_array(rng, SHAPE, dtype), random_array(rng, SHAPE, dtype)
    else:
      x, y = full_range_ints(rng, SHAPE, dtype), full_range_ints(rng, SHAPE, dtype)
    results = run_many({"and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor,
                        "not": lambda a, b: lax.bitwise_not(a)}, x, y,
                       compile_check=dtype in ("bool", "uint16", "int64", "uint64"))
  assert_all_same(results)


SHIFTS = {"shift_left": lax.shift_left, "shift_right_logical": lax.shift_right_logical,
          "shift_right_arithmetic": lax.shift_right_arithmetic}


@pytest.mark.parametrize("dtype", ALL_INTS)
def test_shifts(rng, dtype):
  """Amounts past the width and negative ones (read as unsigned) give XLA's answers."""
  with x64_for(dtype):
    info = jnp.iinfo(dtype)
    bits, signed = info.bits, info.min < 0
    x = full_range_ints(rng, SHAPE, dtype)
    y = rng.integers(-3 if signed else 0, bits + 3, size=SHAPE, endpoint=True).astype(dtype)
    y = with_specials(y, (0, bits - 1, bits, bits + 1, info.max, 1) +
                      ((-1, info.min) if signed else ()))
    x = with_specials(x, (-1 if signed else info.max, 1, -5 if signed else 5, info.max, 3,
                          info.min if signed else 1, 7, 7))
    fns = dict(SHIFTS)
    for name, shift in SHIFTS.items():
      for amount in (0, 3, bits - 1, bits, bits + 5) + ((-1,) if signed else ()):
        fns[f"{name} by literal {amount}"] = \
            lambda v, s, shift=shift, a=amount: shift(v, jnp.asarray(a, dtype))
    results = run_many(fns, x, y, compile_check=dtype in ("int8", "uint32", "int64"))
  assert_all_same(results)


@pytest.mark.parametrize("dtype", ALL_INTS)
def test_bit_counts(rng, dtype):
  with x64_for(dtype):
    info = jnp.iinfo(dtype)
    x = with_specials(full_range_ints(rng, SHAPE, dtype), (0, 1, info.max, info.min, 2, 3))
    results = run_many({"population_count": lax.population_count, "clz": lax.clz}, x,
                       compile_check=dtype in ("int8", "uint32", "int64", "uint64"))
  assert_all_same(results)


# --- comparisons, select, clamp ------------------------------------------------------

COMPARISONS = {"eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt,
               "ge": lax.ge}


def _comparison_pair(rng, dtype):
  """Two operands for a comparison test: random bools, floats with NaN/inf/-0, or ints."""
  if dtype == "bool":
    return random_array(rng, SHAPE, dtype), random_array(rng, SHAPE, dtype)
  if jnp.issubdtype(dtype, jnp.floating):
    return _float_pair(rng, "cmp", dtype)
  return _int_pair(rng, dtype)


@pytest.mark.parametrize("dtype", FLOATS + INTS + ("bool", "float64", "uint8"))
def test_comparisons(rng, dtype):
  """NaN compares unequal (also to itself), -0 == +0, unsigned order, False < True."""
  with x64_for(dtype):
    x, y = _comparison_pair(rng, dtype)
    if not (dtype == "bool" or jnp.issubdtype(dtype, jnp.floating)):
      y.reshape(-1)[20:28] = x.reshape(-1)[20:28]
    results = run_many(COMPARISONS, x, y,
                       compile_check=dtype in ("bool", "uint32", "bfloat16"))
  assert_all_same(results)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64", "int32", "uint32", "bool"])
def test_total_order_comparisons(rng, dtype):
  """eq_to/lt_to/le_to: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN."""
  with x64_for(dtype):
    x, y = _comparison_pair(rng, dtype)
    if jnp.issubdtype(dtype, jnp.floating):
      x = with_specials(x, (-np.nan, np.nan, -0.0, 0.0, -np.inf, 1.0))
      y = with_specials(y, (np.nan, -np.nan, 0.0, -0.0, -np.inf, -1.0))
    fns = {p.name: (lambda a, b, p=p: p.bind(a, b))
           for p in (lax.eq_to_p, lax.lt_to_p, lax.le_to_p)}
    results = run_many(fns, x, y, compile_check=dtype in ("bfloat16", "float64"))
  assert_all_same(results)


@pytest.mark.parametrize("case_dtype", ["float32", "bfloat16", "int8", "uint32", "bool"])
def test_select_n(rng, case_dtype):
  cases = [random_array(rng, SHAPE, case_dtype) for _ in range(3)]
  flag = random_array(rng, SHAPE, jnp.bool_)
  which2 = rng.integers(0, 1, size=SHAPE, endpoint=True).astype(np.int32)
  which3 = rng.integers(0, 2, size=SHAPE, endpoint=True).astype(np.int32)
  scalar = rng.integers(0, 2, endpoint=True, size=()).astype(np.int32)
  fns = {
      "bool selector": lambda f, w2, w3, s, a, b, c: lax.select_n(f, a, b),
      "int32 selector, 2 cases": lambda f, w2, w3, s, a, b, c: lax.select_n(w2, a, b),
      "int32 selector, 3 cases": lambda f, w2, w3, s, a, b, c: lax.select_n(w3, a, b, c),
      "scalar selector": lambda f, w2, w3, s, a, b, c: lax.select_n(s, a, b, c),
      "scalar bool selector": lambda f, w2, w3, s, a, b, c: lax.select_n(s > 0, a, c),
  }
  results = run_many(fns, flag, which2, which3, scalar, *cases,
                     compile_check=case_dtype == "bfloat16")
  assert_all_same(results)


def test_where_with_literals(rng):
  x = random_array(rng, SHAPE, jnp.float16)
  results = run_many({"where(x>0, x, 0.5)": lambda v: jnp.where(v > 0, v, 0.5),
                      "where(x>0, 1.0, -2.0)":
                          lambda v: jnp.where(v > 0, 1.0, -2.0).astype(v.dtype),
                      "where(True, x, 1)": lambda v: lax.select_n(True, jnp.ones_like(v), v)},
                     x, compile_check=True)
  assert_all_same(results)


@pytest.mark.parametrize("dtype", FLOATS + ("int8", "int32", "uint32"))
def test_clamp(rng, dtype):
  x = random_array(rng, SHAPE, dtype)
  if jnp.issubdtype(dtype, jnp.floating):
    x = with_specials(x, SPECIALS + (np.nan,))
    lo = with_specials(random_array(rng, SHAPE, dtype, low=-3, high=0),
                       (0.0, 1.0, np.nan, -1.0, -0.0, -1.0, 0.0))
    hi = with_specials(random_array(rng, SHAPE, dtype, low=0, high=3),
                       (1.0, 2.0, 1.0, 1.0, 0.0, 1.0, -0.0))
  else:
    lo = random_array(rng, SHAPE, dtype, low=0 if dtype == "uint32" else -30, high=10)
    hi = random_array(rng, SHAPE, dtype, low=10, high=60)
  low, high = (1, 2) if dtype == "uint32" else (-1, 2)
  results = run_many({
      "array bounds": lax.clamp,
      "scalar bounds":
          lambda l, v, h: lax.clamp(jnp.asarray(low, dtype), v, jnp.asarray(high, dtype)),
      "jnp.clip": lambda l, v, h: jnp.clip(v, low, high)}, lo, x, hi,
      compile_check=dtype in ("bfloat16", "int8"))
  for label, (out, ref) in results.items():
    assert_same(*_zero_sign_ignored(out, ref), label)


# --- conversions ----------------------------------------------------------------------

CONVERT_DTYPES = ("float32", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint32",
                  "bool")

FLOAT_CONVERT_SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.7, 127.5,
                          -128.5, 128.0, 255.9, 256.0, 32767.9, 32768.0, -32769.0, 65504.0,
                          65520.0, -70000.0, 2.0 ** 31, -2.0 ** 31, 3e9, -3e9, 2.0 ** 32,
                          2.0 ** 63, -2.0 ** 63, 1e30, -1e30, 1e-8, 1.00390625, 3.4e38,
                          1 + 2 ** -8 + 2 ** -20, 2049.0, -0.99)
INT_CONVERT_SPECIALS = (2 ** 24 + 2 ** 16 + 1, 2 ** 24 + 1, 65519, 65520, -65535, 2049 * 16 + 1,
                        2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1, 2 ** 40 + 2 ** 16 + 1, -1, 0, 1,
                        2 ** 63 - 1, -2 ** 63, 255, 256, -129)


def _convert_input(rng, dtype):
  if dtype == "bool":
    return random_array(rng, SHAPE, dtype)
  if jnp.issubdtype(dtype, jnp.floating):
    x = np.asarray(jnp.asarray(rng.uniform(-300, 300, size=SHAPE).astype(np.float32), dtype))
    specials = [v for v in FLOAT_CONVERT_SPECIALS
                if not np.isfinite(v) or abs(v) <= float(jnp.finfo(dtype).max)]
    return with_specials(x, specials)
  info = jnp.iinfo(dtype)
  x = full_range_ints(rng, SHAPE, dtype)
  return with_specials(x, [v for v in INT_CONVERT_SPECIALS if info.min <= v <= info.max])


@pytest.mark.parametrize("src", CONVERT_DTYPES)
def test_convert_element_type(rng, src):
  """To every other dtype: saturating float -> int with NaN -> 0 (XLA on CPU),
  narrowing float rounding, int -> 16-bit float through f32 as XLA does."""
  with jax.enable_x64(True):
    x = _convert_input(rng, src)
    fns = {f"{src} -> {dst}": (lambda v, dst=dst: lax.convert_element_type(v, jnp.dtype(dst)))
           for dst in CONVERT_DTYPES if dst != src}
    results = run_many(fns, x, compile_check=src in ("float32", "bfloat16", "int64", "bool"))
  assert_all_same(results)


def test_convert_float64(rng):
  with jax.enable_x64(True):
    # halfway between two float16 (bfloat16) values in float32, just above in
    # float64: rounded once they round up, rounded through float32 down
    ties = [1 + 2 ** -11 + 2 ** -40, -(1 + 2 ** -11 + 2 ** -40), 1 + 2 ** -8 + 2 ** -40,
            -(1 + 2 ** -8 + 2 ** -40), 3 + 2 ** -7 + 2 ** -40, 1000.25 + 2 ** -30]
    x = with_specials(rng.uniform(-1e5, 1e5, size=SHAPE),
                      [v for v in FLOAT_CONVERT_SPECIALS] + ties + [1e300])
    fns = {f"float64 -> {dst}": (lambda v, dst=dst: v.astype(dst)) for dst in CONVERT_DTYPES}
    # XLA rounds float64 -> 16-bit floats twice (through float32) in some JAX
    # versions and backends and once in others (compat.xla_rounds_f64_to_16bit_twice):
    # those two are checked against XLA on the device the kernel ran on, the rest
    # against XLA's CPU backend (the GPU's got other conversions wrong, see xla_on_cpu)
    low = [k for k in fns if k.endswith(("float16", "bfloat16"))]

    def refs(v):
      out = dict(zip(fns, xla_on_cpu(lambda w: [f(w) for f in fns.values()], v)))
      out.update(zip(low, jax.jit(lambda w: [fns[k](w) for k in low])(v)))
      return out
    assert_all_same(run_many(fns, x, compile_check=True, references=refs))
    ints = with_specials(full_range_ints(rng, SHAPE, jnp.int64), INT_CONVERT_SPECIALS)
    assert_all_same(run_many({"int64 -> float64": lambda v: v.astype(jnp.float64),
                              "int64 -> float32": lambda v: v.astype(jnp.float32)}, ints))


BITCAST_PAIRS = [("float32", "int32"), ("float32", "uint32"), ("int32", "float32"),
                 ("uint32", "float32"), ("float16", "int16"), ("int16", "float16"),
                 ("bfloat16", "int16"), ("int16", "bfloat16"), ("float16", "bfloat16"),
                 ("bfloat16", "float16"), ("int8", "uint8"), ("uint32", "int32"),
                 ("float64", "int64"), ("int64", "float64"), ("uint64", "int64")]


@pytest.mark.parametrize("src", sorted({s for s, _ in BITCAST_PAIRS}))
def test_bitcast_convert_type(rng, src):
  dsts = [d for s, d in BITCAST_PAIRS if s == src]
  with x64_for(src, *dsts):
    if jnp.issubdtype(src, jnp.floating):
      x = with_specials(random_array(rng, SHAPE, src), SPECIALS[1:])
    else:
      x = full_range_ints(rng, SHAPE, src)
    results = run_many({f"{src} -> {d}": (lambda v, d=d: lax.bitcast_convert_type(v, jnp.dtype(d)))
                        for d in dsts}, x,
                       compile_check=src in ("bfloat16", "float16", "int64"))
  for label, (out, ref) in results.items():
    if jnp.issubdtype(ref.dtype, jnp.floating):
      assert_same(out, ref, label)
    else:   # compare the exact bits (also of NaNs)
      np.testing.assert_array_equal(out, ref, err_msg=label)


def test_bitcast_of_different_width_names_the_line(rng):
  def kernel(x_ref, o_ref):
    o_ref[...] = lax.bitcast_convert_type(x_ref[...], jnp.int8)  # <- bitcast here
  x = random_array(rng, (8,), jnp.float32)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct((8, 4), jnp.int8))(x)
  err = info.value
  assert err.primitive == "bitcast_convert_type"
  assert f"{HERE}:{line_of(kernel, '<- bitcast here')}" in str(err)
  assert "different widths" in err.reason and err.hint


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_reduce_precision(rng, dtype):
  """XLA's bit-level rounding: to nearest even, overflow to inf, flush below normal."""
  with x64_for(dtype):
    x = with_specials(random_array(rng, SHAPE, dtype, low=-70000, high=70000),
                      SPECIALS + (1e-6, 3e-8, 1 + 2 ** -9, 65519.0, 65520.0, 1e-40, 3.3e38, 0.1))
    formats = {"e8m7": (8, 7), "e5m10": (5, 10), "e5m2": (5, 2), "e4m3": (4, 3), "e8m23": (8, 23)}
    fns = {k: (lambda v, e=e, m=m: lax.reduce_precision(v, e, m)) for k, (e, m) in formats.items()
           if e <= jnp.finfo(dtype).nexp}
    results = run_many(fns, x, compile_check=dtype != "float64")
  assert_all_same(results)


def test_identities(rng):
  """copy, stop_gradient and optimization_barrier pass values through."""
  x = with_specials(random_array(rng, SHAPE, jnp.bfloat16), SPECIALS)
  results = run_many({"copy": lambda v: jnp.array(v, copy=True) * 2,
                      "stop_gradient": lambda v: lax.stop_gradient(v) + 1,
                      "optimization_barrier": lambda v: lax.optimization_barrier(v) - 1}, x,
                     compile_check=True)
  assert_all_same(results)


# --- complex numbers and special functions: clear errors -----------------------------

def test_complex_values_raise_naming_the_line(rng):
  def kernel(x_ref, y_ref, o_ref):
    z = lax.complex(x_ref[...], y_ref[...])  # <- complex here
    o_ref[...] = lax.real(z * z)
  x, y = random_array(rng, (8,), jnp.float32), random_array(rng, (8,), jnp.float32)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct((8,), jnp.float32))(x, y)
  err = info.value
  assert err.primitive == "complex"
  assert f"{HERE}:{line_of(kernel, '<- complex here')}" in str(err)
  assert "complex" in err.reason and "imaginary" in err.hint


def test_conversion_to_complex_raises_naming_the_line(rng):
  def kernel(x_ref, o_ref):
    z = x_ref[...].astype(jnp.complex64)  # <- complex here
    o_ref[...] = jnp.real(jnp.conj(z))
  x = random_array(rng, (8,), jnp.float32)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct((8,), jnp.float32))(x)
  err = info.value
  assert f"{HERE}:{line_of(kernel, '<- complex here')}" in str(err)
  assert "complex64" in err.reason and "imaginary" in err.hint


@pytest.mark.parametrize("name", ["conj", "real", "imag"])
def test_complex_rules_refuse(name):
  """Any complex value fails where it is made (above); these rules refuse anyway."""
  from pallas_prof.backend.errors import Unsupported
  rule = RULES[getattr(lax, f"{name}_p")]
  with pytest.raises(Unsupported) as info:
    rule(None, None)
  assert "complex" in info.value.reason and "imaginary" in info.value.hint


def test_complex_literal_raises_naming_the_line(rng):
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.abs(x_ref[...] * 1j)  # <- complex literal here
  x = random_array(rng, (8,), jnp.float32)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct((8,), jnp.float32))(x)
  assert f"{HERE}:{line_of(kernel, '<- complex literal here')}" in str(info.value)
  assert "complex64" in str(info.value)


def test_complex_input_raises_naming_the_kernel(rng):
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.real(x_ref[...])
  x = jnp.asarray(random_array(rng, (8,), jnp.float32)).astype(jnp.complex64)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct((8,), jnp.float32))(x)
  assert "complex64" in str(info.value)
  assert f"{HERE}:{kernel.__code__.co_firstlineno}" in str(info.value)


UNSUPPORTED = {
    "digamma": lambda x: lax.digamma(x),
    "polygamma": lambda x: lax.polygamma(jnp.ones_like(x), x),
    "igamma_grad_a": lambda x: lax.igamma_grad_a(x, x),
    "zeta": lambda x: lax.zeta(x + 2, x),
    "bessel_i1e": lambda x: lax.bessel_i1e(x),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_special_functions_without_libdevice_raise(rng, name):
  def kernel(x_ref, o_ref):
    o_ref[...] = UNSUPPORTED[name](x_ref[...])
  x = random_array(rng, (8,), jnp.float32, low=0.5, high=4)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct((8,), jnp.float32))(x)
  err = info.value
  assert err.primitive == name
  assert f"{HERE}:{UNSUPPORTED[name].__code__.co_firstlineno}" in str(err)
  assert "libdevice" in err.reason and "outside the kernel" in err.hint


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_special_functions_from_lax(rng, dtype):
  """bessel_i0e, igamma, igammac, betainc: lowered through JAX's own lax
  implementation (the one XLA compiles), loops included."""
  with x64_for(dtype):
    x = random_array(rng, (2, 8), dtype, low=0.1, high=12)
    a = random_array(rng, (2, 8), dtype, low=0.5, high=6)
    p = random_array(rng, (2, 8), dtype, low=0.05, high=0.95)
    x = with_specials(x, (0.0, np.inf, np.nan))
    fns = {"bessel_i0e": lambda x, a, p: lax.bessel_i0e(x - 6),
           "igamma": lambda x, a, p: lax.igamma(a, x),
           "igammac": lambda x, a, p: lax.igammac(a, x),
           "regularized_incomplete_beta": lambda x, a, p: lax.betainc(a, x + 0.5, p)}
    results = run_many(fns, x, a, p, compile_check=dtype in ("float32", "float64"))
  for label, (out, ref) in results.items():
    # built from exp/log/lgamma, whose libdevice and XLA versions differ by ulps
    atol, rtol = {"float32": (1e-5, 2e-5), "float64": (1e-12, 1e-11)}.get(dtype, (None, None))
    assert_close(out, ref, dtype, atol=atol, rtol=rtol, err_msg=label)


# --- iota ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int32", "int8", "uint32", "float32", "bfloat16", "int64"])
def test_iota(dtype):
  layouts = [((8,), 0), ((5,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), 2), ((2, 3, 6), 1)]

  def kernel(*outs):
    for o_ref, (shape, dimension) in zip(outs, layouts):
      o_ref[...] = lax.broadcasted_iota(jnp.dtype(dtype), shape, dimension)
  with x64_for(dtype):
    kernel_registry.clear()
    outs = pallas(kernel, tuple(jax.ShapeDtypeStruct(s, dtype) for s, _ in layouts))()
    if dtype in ("int8", "bfloat16", "int64"):
      assert_compiles()
    for out, (shape, dimension) in zip(outs, layouts):
      ref = np.asarray(lax.broadcasted_iota(jnp.dtype(dtype), shape, dimension))
      assert_same(np.asarray(out), ref, f"iota {shape} along {dimension}")


# --- padded lanes, scalars -------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 5), (7,), (1, 3), (6, 9)])
def test_non_power_of_two_shapes(rng, shape):
  x = random_array(rng, shape, jnp.float32, low=0.1, high=4)
  y = random_array(rng, shape, jnp.float32, low=0.1, high=4)
  i = random_array(rng, shape, jnp.int32, low=-20, high=20, nonzero=True)
  results = run_many({
      "exp, mul, sqrt": lambda a, b, k: jnp.exp(a) * b - jnp.sqrt(b),
      "where, atan2, max": lambda a, b, k: jnp.where(a > b, lax.atan2(a, b), jnp.maximum(a, b)),
      "div, shift": lambda a, b, k: lax.div(k, k + 3) + lax.shift_left(k, 2),
      "convert": lambda a, b, k: (a * k).astype(jnp.bfloat16),
      "iota": lambda a, b, k: lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1) * k,
  }, x, y, i, compile_check=shape == (3, 5))
  for label, (out, ref) in results.items():
    assert_close(out, ref, err_msg=label)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint32", "int8"])
def test_scalars(rng, dtype):
  """0-d refs: scalar loads, scalar math, scalar stores."""
  x = random_array(rng, (), dtype, low=1, high=9)
  y = random_array(rng, (), dtype, low=1, high=9)
  if jnp.issubdtype(dtype, jnp.floating):
    cases = {"exp/": lambda a, b: jnp.exp(a) / b,
             "max-rsqrt": lambda a, b: jnp.maximum(a, b) - lax.rsqrt(b),
             "cmp": lambda a, b: (a > b).astype(a.dtype),
             "clamp": lambda a, b: lax.clamp(b, a, b + 1), "neg": lambda a, b: -a}
  else:
    cases = {"mul+": lambda a, b: a * b + 3, "div by 0": lambda a, b: lax.div(a, b - b),
             "shift": lambda a, b: a >> 1, "popcount": lambda a, b: lax.population_count(a),
             "cmp": lambda a, b: (a < b).astype(a.dtype)}
  results = run_many(cases, x, y, compile_check=True)
  for label, (out, ref) in results.items():
    assert out.shape == ()
    if label in ("exp/", "max-rsqrt"):
      # numpy's exp/rsqrt (the interpreter) and XLA's may round the last bit apart, and the
      # division or subtraction after it rounds once more: two ulps, at most 2 eps relative
      eps = float(jnp.finfo(dtype).eps)
      assert_close(out, ref, atol=0, rtol=2 * eps, err_msg=label)
    else:
      assert_same(out, ref, label)


def test_literal_operands(rng):
  """A literal on either side of the ops that look at bits (no .to() on a number)."""
  x = with_specials(random_array(rng, SHAPE, jnp.float32), SPECIALS)
  i = full_range_ints(rng, SHAPE, jnp.int32)
  s = rng.integers(0, 40, size=SHAPE).astype(np.int32)
  results = run_many({
      "nextafter(x, inf)": lambda v, k, a: jnp.nextafter(v, jnp.inf),
      "nextafter(1.5, x)": lambda v, k, a: jnp.nextafter(jnp.float32(1.5), v),
      "-1 >> a (logical)": lambda v, k, a: lax.shift_right_logical(jnp.int32(-1), a),
      "-8 >> a (arithmetic)": lambda v, k, a: lax.shift_right_arithmetic(jnp.int32(-8), a),
      "3 << a": lambda v, k, a: lax.shift_left(jnp.int32(3), a),
      "mulhi(k, 123456789)": lambda v, k, a: lax.mulhi(k, jnp.int32(123456789)),
      "mulhi(-7, k)": lambda v, k, a: lax.mulhi(jnp.int32(-7), k),
      "atan2(1, x)": lambda v, k, a: lax.atan2(jnp.float32(1), v),
      "pow(2, x)": lambda v, k, a: lax.pow(jnp.float32(2), v),
      "rem(7.5, x)": lambda v, k, a: lax.rem(jnp.float32(7.5), v),
  }, x, i, s, compile_check=True)

  def check(out, ref, label):
    if label.startswith(("atan2", "pow")):   # libdevice and XLA: each within an ulp
      assert_close(out, ref, err_msg=label)
    else:
      assert_same(out, ref, label)
  check_each(results, check)


def test_constant_operands_compute_in_their_dtype():
  """Operations on literals only are computed by the kernel in the literal's
  dtype (int32 wraps, float32 rounds), not by Python."""
  big = np.int32(2 ** 31 - 1)

  def kernel(o_i, o_f, o_h):
    o_i[...] = jnp.full((8,), lax.add(big, np.int32(1)))
    o_f[...] = jnp.full((8,), lax.add(np.float32(0.1), np.float32(0.2)))
    o_h[...] = jnp.full((8,), lax.mul(np.float16(300.0), np.float16(300.0)))
  kernel_registry.clear()
  out_i, out_f, out_h = pallas(kernel, (jax.ShapeDtypeStruct((8,), jnp.int32),
                                        jax.ShapeDtypeStruct((8,), jnp.float32),
                                        jax.ShapeDtypeStruct((8,), jnp.float16)))()
  assert_compiles()
  assert_same(out_i, np.full((8,), -2 ** 31, np.int32))
  assert_same(out_f, np.full((8,), np.float32(0.1) + np.float32(0.2), np.float32))
  assert_same(out_h, np.full((8,), np.inf, np.float16))


# --- primitives only newer JAX has (0.11: log2, one_minus_square) -----------------------

@pytest.mark.parametrize("name,reference", [("log2", np.log2),
                                            ("one_minus_square", lambda v: 1 - v * v)])
def test_primitives_of_newer_jax(rng, name, reference):
  primitive = getattr(lax, f"{name}_p", None)
  if primitive is None:
    pytest.skip(f"jax {jax.__version__} has no {name} primitive (jax 0.11 has)")
  low = 0.01 if name == "log2" else -4.0
  x = random_array(rng, SHAPE, "float32", low=low, high=4.0)
  out = elementwise_call(lambda v: primitive.bind(v), x)
  expected = reference(np.asarray(x, np.float64))
  np.testing.assert_allclose(np.asarray(out, np.float64), expected, rtol=2e-6, atol=1e-6)


# --- multiply-add and polynomials (jax 0.12.1) --------------------------------------------

def _primitive_of_newer_jax(name: str):
  primitive = getattr(lax, f"{name}_p", None)
  if primitive is None:
    pytest.skip(f"jax {jax.__version__} has no {name} primitive (jax 0.12.1 has)")
  return primitive


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_fmuladd_and_fma(rng, dtype):
  """lax.fmuladd and lax.fma: one rounding of a * b + c (float32 for narrower floats, as
  XLA does on the CPU and the GPU), in the result's dtype."""
  _primitive_of_newer_jax("fmuladd")
  narrow = dtype in ("bfloat16", "float16")

  def references(a, b, c):
    # XLA's CPU has no 16-bit fma ("UNIMPLEMENTED: Fma is not supported for element type
    # bf16"): its float32 one, rounded, as fmuladd does there
    wide = [x.astype(jnp.float32) if narrow else x for x in (a, b, c)]
    return {"fmuladd": lax.fmuladd(a, b, c), "fma": lax.fma(*wide).astype(dtype)}
  with x64_for(dtype):
    a, b, c = (random_array(rng, SHAPE, dtype, low=-3.0, high=3.0) for _ in range(3))
    results = run_many({"fmuladd": lax.fmuladd, "fma": lax.fma}, a, b, c,
                       compile_check=dtype == "float32", references=jax.jit(references))
  for label, (out, ref) in results.items():
    assert out.dtype == ref.dtype, label
    assert_close(out, ref, dtype, err_msg=label)


def test_fmuladd_rounds_once():
  """(1 + 2**-12)**2 - (1 + 2**-11) is 2**-24: a multiply and an add in float32 give 0."""
  _primitive_of_newer_jax("fmuladd")
  a = np.full(SHAPE, 1 + 2.0 ** -12, np.float32)
  c = np.full(SHAPE, -(1 + 2.0 ** -11), np.float32)
  out = elementwise_call(lambda x, z: lax.fmuladd(x, x, z), a, c)
  assert float(np.asarray(a * a + c)[0, 0]) == 0.0          # numpy's two roundings
  np.testing.assert_array_equal(np.asarray(out), np.float32(2.0 ** -24))


POLYNOMIALS = {
    # scalar coefficients, fewer than lax.polynomial's unroll threshold and more (its scan)
    "short": lambda x: lax.polynomial(x, [1.0, 5.0, 2.0]),
    "long": lambda x: lax.polynomial(x, [0.5, -1.0, 0.25, 0.125, -0.0625, 0.03, 0.02, -0.01,
                                         0.005, 0.004, -0.002, 0.001]),
    "unrolled": lambda x: lax.polynomial(x, [0.5, -1.0, 0.25, 0.125, -0.0625, 0.03, 0.02,
                                             -0.01, 0.005, 0.004], unroll=3),
    # coefficients that are arrays: a row of them, broadcast down the columns
    "array": lambda x: lax.polynomial(x, [x[:, :1] * 0.5, jnp.ones_like(x), x * 0.25]),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64", "int32"])
def test_polynomial(rng, dtype):
  _primitive_of_newer_jax("polynomial")
  with x64_for(dtype):
    if dtype == "int32":
      x = random_array(rng, SHAPE, dtype, low=-3, high=4)
      fns = {"ints": lambda v: lax.polynomial(v, [3, -2, 1, 5])}
    else:
      x = random_array(rng, SHAPE, dtype, low=-1.5, high=1.5)
      fns = POLYNOMIALS
    results = run_many(fns, x, compile_check=dtype == "float32")
  for label, (out, ref) in results.items():
    assert out.dtype == ref.dtype, label
    assert_close(out, ref, dtype, err_msg=label)
  # the work model's FLOPs: a multiply and an add per step, per element (floats only)
  (rec,) = kernel_registry.kernels()
  polys = [e for e in rec.generated.eqns if e.primitive == "polynomial"]
  steps = {"short": 2, "long": 11, "unrolled": 9, "array": 2, "ints": 3}
  assert len(polys) == len(fns)
  for e, label in zip(polys, fns):
    want = 2 * steps[label] * SHAPE[0] * SHAPE[1] if dtype != "int32" else 0
    assert e.elementwise_flops == want, (label, e.elementwise_flops)


def test_special_functions_jax_writes_as_polynomials(rng):
  """jax 0.12.1 writes erf, erfinv, lgamma, tanh and others with lax.polynomial and
  lax.fmuladd: they lower, and match XLA."""
  _primitive_of_newer_jax("polynomial")
  x = random_array(rng, SHAPE, "float32", low=-0.9, high=0.9)
  fns = {"erfinv": jax.scipy.special.erfinv, "erf": lax.erf, "erfc": lax.erfc,
         "lgamma": lambda v: lax.lgamma(v + 2.0), "i0e": lax.bessel_i0e,
         "ndtri": lambda v: jax.scipy.special.ndtri(v * 0.5 + 0.5)}
  for label, (out, ref) in run_many(fns, x).items():
    assert_close(out, ref, "float32", err_msg=label)


# --- on the GPU: XLA's bits ---------------------------------------------------------------

# Not exp2: XLA's GPU exp2 differs from libdevice's in the last bit for about a
# third of normal inputs (316 of 1024 on the H200, jax 0.11.2), and JAX's own
# backend differs from XLA there exactly as pallas-prof does
# (bench/results/archive/README.md, the bitwise probe).
GPU_BITWISE = {
    "exp": lax.exp, "log": lax.log, "log1p": lax.log1p, "sin": lax.sin,
    "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "logistic": lax.logistic, "reciprocal": lambda x: 1 / x,
    "div": lambda x: x / (x * x + 1), "abs": lax.abs, "neg": lax.neg,
}


@pytest.mark.gpu
def test_gpu_bits_match_xla(rng):
  """On the GPU the kernel gives XLA's bits for normal f32 values (JAX's own
  conformance tests compare these with tolerance 0): the same libdevice
  functions and the same f32 division (div.full) as XLA's GPU emitter."""
  x = jnp.asarray(rng.standard_normal((8, 128)).astype(np.float32))
  results = run_many({k: (lambda v, f=f: f(v)) for k, f in GPU_BITWISE.items()}, x)
  assert_all_same(results)


@pytest.mark.gpu
def test_gpu_keeps_denormals_like_xla(rng):
  """XLA compiles libdevice with ftz off: denormal inputs and results survive."""
  x = with_specials(rng.uniform(-100, -88, size=(8, 128)).astype(np.float32),
                    (1e-40, -1e-40, 1e-45, 2e-38, -3e-39))
  results = run_many({"exp": lax.exp, "log(|x|)": lambda v: lax.log(lax.abs(v)),
                      "sqrt(|x|)": lambda v: lax.sqrt(lax.abs(v)),
                      "rsqrt(|x|)": lambda v: lax.rsqrt(lax.abs(v)),
                      "x * 2**-10": lambda v: v * 2.0 ** -10}, x)
  assert_all_same(results)


# --- the table itself -------------------------------------------------------------------

# Each primitive registered by rules/elementwise.py and the test that covers it.
COVERED_BY = {
    **{p: "test_unary_float" for p in (
        "exp", "exp2", "expm1", "log", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan",
        "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
        "erf_inv", "lgamma", "floor", "ceil", "round", "logistic", "abs", "neg", "sign",
        "square", "reciprocal")},
    "is_finite": "test_is_finite", "integer_pow": "test_integer_pow_float",
    "not": "test_bitwise", "population_count": "test_bit_counts", "clz": "test_bit_counts",
    **{p: "test_binary_float" for p in ("add", "sub", "mul", "div", "rem", "max", "min", "pow",
                                         "atan2", "nextafter")},
    "add_any": "test_add_any", "mulhi": "test_mulhi",  # and test_literal_operands
    "log2": "test_primitives_of_newer_jax", "one_minus_square": "test_primitives_of_newer_jax",
    "fmuladd": "test_fmuladd_and_fma", "fma": "test_fmuladd_and_fma",
    "polynomial": "test_polynomial",
    "and": "test_bitwise", "or": "test_bitwise", "xor": "test_bitwise",
    "shift_left": "test_shifts", "shift_right_logical": "test_shifts",
    "shift_right_arithmetic": "test_shifts",
    **{p: "test_comparisons" for p in ("eq", "ne", "lt", "le", "gt", "ge")},
    **{p: "test_total_order_comparisons" for p in ("eq_to", "lt_to", "le_to")},
    "select_n": "test_select_n", "clamp": "test_clamp",
    "convert_element_type": "test_convert_element_type",
    "bitcast_convert_type": "test_bitcast_convert_type",
    "reduce_precision": "test_reduce_precision",
    "copy": "test_identities", "stop_gradient": "test_identities",
    "optimization_barrier": "test_identities",
    "complex": "test_complex_values_raise_naming_the_line",
    **{p: "test_complex_rules_refuse" for p in ("conj", "real", "imag")},
    **{p: "test_special_functions_without_libdevice_raise" for p in UNSUPPORTED},
    **{p: "test_special_functions_from_lax" for p in ("bessel_i0e", "igamma", "igammac",
                                                       "regularized_incomplete_beta")},
}


def test_every_elementwise_primitive_has_a_test():
  from pallas_prof.backend.lowering.rules import elementwise
  registered = {p.name for p, rule in RULES.items() if rule.__module__ == elementwise.__name__}
  missing = sorted(registered - set(COVERED_BY))
  assert not missing, f"elementwise primitives without a test: {missing}"
  for name, test in COVERED_BY.items():
    if name in registered:
      assert callable(globals().get(test)), (name, test)


def test_float64_to_16bit_rounding_follows_the_xla_of_the_platform_lowered_for(monkeypatch):
  """XLA's backends disagree on float64 -> bfloat16 (jaxlib 0.11.2: its CPU through
  float32, its GPU once): the conversion a kernel gets is decided by XLA on the
  platform it is lowered for, asked on a tie, and falls back by version where that
  platform has no XLA backend (here: no GPU)."""
  from pallas_prof.backend import compat
  compat.xla_numerics._xla_rounds_twice.cache_clear()
  cpu_twice = {}
  with jax.enable_x64(True):
    tie = {"float16": 1 + 2 ** -11 + 2 ** -40, "bfloat16": 1 + 2 ** -8 + 2 ** -40}
    for name, v in tie.items():
      got = xla_on_cpu(lambda w: w.astype(name), np.array([v]))
      cpu_twice[name] = float(np.asarray(got).astype(np.float64)[0]) == 1.0
  for name in ("float16", "bfloat16"):
    with compat.lowering_for("cpu"):
      assert compat.xla_rounds_f64_to_16bit_twice(name) == cpu_twice[name], name
  has_gpu = any(d.platform == "gpu" for d in jax.devices())
  with compat.lowering_for("cuda"):
    if not has_gpu:      # the fallback: a GPU's XLA rounds once
      assert not compat.xla_rounds_f64_to_16bit_twice("bfloat16")
      assert not compat.xla_rounds_f64_to_16bit_twice("float16")
  # and the generated source says so: the float32 step only where that XLA takes it
  from pallas_prof.backend.lowering import emit
  for platform in ("cpu", "cuda"):
    with compat.lowering_for(platform):
      twice = compat.xla_rounds_f64_to_16bit_twice("bfloat16")
      assert emit._through_float32(np.float64, jnp.bfloat16) == twice
  compat.xla_numerics._xla_rounds_twice.cache_clear()
