"""Reductions and cumulative scans, run by Triton's interpreter against jax.numpy/lax.

Inputs are shifted so that a padded lane leaking into a result changes it:
padded lanes of a non-power-of-two block read 0, so maxima are taken over
negative values, minima over positive ones, sums over values + 1, products
over values far from 0.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from testkit.helpers import assert_close, random_array, run_on_values, xla_on_cpu

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "int32", "uint32")    # int64: test_64_bit_reductions
SHAPES_AXES = [((5, 7), (0,)), ((5, 7), (1,)), ((5, 7), (0, 1)), ((4, 8), (1,)),
               ((3, 5, 6), (0, 2)), ((3, 5, 6), (1,))]


def run(fn, *arrays, name="reduce"):
  return run_on_values(fn, *arrays, name=name)


def check(fn, *arrays, name="reduce", **tolerances):
  out = run(fn, *arrays, name=name)
  ref = xla_on_cpu(fn, *arrays)    # one XLA compile, not one per eager op
  for key in ref:
    assert out[key].dtype == ref[key].dtype, key
    assert_close(out[key], ref[key], err_msg=key, **tolerances)
  return out


def compiles_for_sm90(name):
  gk = kernel_registry.find(name)[-1].generated
  ck = compile_kernel(gk)
  assert ".target sm_90" in ck.ptx


def magnitudes(rng, shape, dtype, low, high):
  """Random values with |x| in [low, high] and random signs."""
  x = rng.uniform(low, high, size=shape) * rng.choice([-1.0, 1.0], size=shape)
  return x.astype(np.float32).astype(dtype)


def with_nans(rng, x, count=3):
  x = np.array(x)
  x.reshape(-1)[rng.choice(x.size, count, replace=False)] = np.nan
  return x


@pytest.mark.parametrize("shape,axes", SHAPES_AXES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_reductions(rng, dtype, shape, axes):
  x = random_array(rng, shape, dtype, low=1.0, high=4.0)      # positive
  p = magnitudes(rng, shape, dtype, 0.8, 1.25)                  # products stay finite
  check(lambda x, p: {
      "sum": jnp.sum(x + 1, axis=axes),
      "max": jnp.max(-x, axis=axes),
      "min": jnp.min(x, axis=axes),
      "prod": jnp.prod(p, axis=axes),
      "max_keepdims": jnp.max(-x, axis=axes, keepdims=True),
      "sum_keepdims": jnp.sum(x + 1, axis=axes, keepdims=True),
      "mean": jnp.mean(x, axis=axes),
  }, x, p)


@pytest.mark.parametrize("shape,axes", SHAPES_AXES[:5])
@pytest.mark.parametrize("dtype", INTS)
def test_integer_reductions(rng, dtype, shape, axes):
  signed = jnp.issubdtype(dtype, jnp.signedinteger)
  x = random_array(rng, shape, dtype, low=1, high=100)
  wide = random_array(rng, shape, dtype)                         # sums and products wrap
  bits = rng.integers(0, 2**31 if dtype != "int8" else 127, size=shape).astype(dtype)
  bits = np.where(bits == 0, 1, bits).astype(dtype)
  neg = (lambda v: -v) if signed else (lambda v: v - jnp.asarray(100, dtype))
  check(lambda x, wide, bits: {
      "sum": jnp.sum(x + 1, axis=axes, dtype=dtype),
      "sum_wrap": jnp.sum(wide, axis=axes, dtype=dtype),
      "max": jnp.max(neg(x), axis=axes),
      "min": jnp.min(x, axis=axes),
      "prod": jnp.prod(wide, axis=axes, dtype=dtype),
      "and": lax.reduce_and(bits, axes),
      "or": lax.reduce_or(bits, axes),
      "xor": lax.reduce_xor(bits, axes),
      # narrow results must keep their type: + 100 wraps in int8
      "max_plus": jnp.max(x, axis=axes) + jnp.asarray(100, dtype),
  }, x, wide, bits)


@pytest.mark.parametrize("shape,axes", SHAPES_AXES[:5])
def test_bool_reductions(rng, shape, axes):
  x = random_array(rng, shape, jnp.bool_)
  mostly_true = rng.random(shape) < 0.9
  check(lambda x, t: {
      "all": jnp.all(t, axis=axes),
      "any": jnp.any(x & ~t, axis=axes),
      "max": lax.reduce_max(x, axes),
      "min": lax.reduce_min(t, axes),
      "xor": lax.reduce_xor(x, axes),
      "count": jnp.sum(x, axis=axes),
  }, x, mostly_true)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_min_propagate_nan(rng, dtype):
  x = with_nans(rng, random_array(rng, (6, 7), dtype), count=3)
  out = check(lambda x: {"max0": jnp.max(x, axis=0), "max1": jnp.max(x, axis=1),
                         "min0": jnp.min(x, axis=0), "min1": jnp.min(x, axis=1),
                         "all": jnp.max(x)}, x)
  assert np.isnan(np.asarray(out["all"], np.float32))


@pytest.mark.parametrize("shape", [(5, 7), (4, 8), (3, 5, 6)])
@pytest.mark.parametrize("dtype", FLOATS + ("int8", "int32", "uint32", "bool"))
def test_argmax_argmin(rng, dtype, shape):
  if dtype == "bool":
    x = random_array(rng, shape, dtype)
  else:
    # few distinct values: ties everywhere, first index must win
    x = rng.integers(1, 5, size=shape).astype(dtype)
  fns = {}
  for axis in range(len(shape)):
    fns[f"argmax{axis}"] = lambda x, axis=axis: jnp.argmax(x, axis=axis)
    fns[f"argmin{axis}"] = lambda x, axis=axis: jnp.argmin(x, axis=axis)
    fns[f"argmax_neg{axis}"] = lambda x, axis=axis: jnp.argmax(x.astype(jnp.int32) - 10,
                                                               axis=axis)
    fns[f"argmin_keep{axis}"] = (lambda x, axis=axis: jnp.argmin(x, axis=axis, keepdims=True))
  check(lambda x: {k: f(x) for k, f in fns.items()}, x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_argmax_argmin_nan_is_extreme(rng, dtype):
  x = rng.integers(-3, 3, size=(6, 7)).astype(dtype)
  x = with_nans(rng, x, count=4)
  x[2, :] = np.nan   # a row of NaN: index 0
  check(lambda x: {"argmax0": jnp.argmax(x, axis=0), "argmax1": jnp.argmax(x, axis=1),
                   "argmin0": jnp.argmin(x, axis=0), "argmin1": jnp.argmin(x, axis=1)}, x)


CUMULATIVE = {"cumsum": lax.cumsum, "cumprod": lax.cumprod, "cummax": lax.cummax,
              "cummin": lax.cummin}


@pytest.mark.parametrize("shape,axis", [((5, 7), 0), ((5, 7), 1), ((4, 8), 1), ((3, 5, 6), 1)])
@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "int8", "int32"))
def test_cumulative(rng, dtype, shape, axis):
  if jnp.issubdtype(dtype, jnp.floating):
    x = magnitudes(rng, shape, dtype, 0.5, 2.0)
  else:
    x = random_array(rng, shape, dtype, low=-5, high=5, nonzero=True)
  fns = {}
  for name, op in CUMULATIVE.items():
    for reverse in (False, True):
      fns[f"{name}{'_rev' if reverse else ''}"] = (
          lambda x, op=op, reverse=reverse: op(x + jnp.asarray(1, x.dtype), axis=axis,
                                              reverse=reverse))
  out = run(lambda x: {k: f(x) for k, f in fns.items()}, x)
  ref = jax.jit(lambda x: {k: f(x) for k, f in fns.items()})(x)
  for key in ref:
    assert out[key].dtype == ref[key].dtype, key
    if dtype == "bfloat16" and key.startswith(("cumsum", "cumprod")):
      # XLA rounds each step to bf16, we round once: allow two bf16 ulps of
      # the running sum (product) of magnitudes per step
      mags = np.abs(np.asarray(x, np.float32)) + 1
      scan = np.cumsum if key.startswith("cumsum") else np.cumprod
      if "rev" in key:
        running = np.flip(scan(np.flip(mags, axis), axis=axis), axis)
      else:
        running = scan(mags, axis=axis)
      atol = running * (shape[axis] + 1) * 2.0**-7
      err = np.abs(np.asarray(out[key], np.float32) - np.asarray(ref[key], np.float32))
      assert np.all(err <= atol), (key, err.max())
    else:
      assert_close(out[key], ref[key], err_msg=key)


def test_cumulative_nan(rng):
  x = with_nans(rng, random_array(rng, (5, 6), "float32"), count=2)
  check(lambda x: {"cummax": lax.cummax(x, axis=1),
                   "cummin_rev": lax.cummin(x, axis=0, reverse=True),
                   "cumsum": lax.cumsum(x, axis=1)}, x)


def test_64_bit_reductions(rng):
  with jax.enable_x64(True):
    x = rng.integers(-2**40, 2**40, size=(5, 7)).astype(np.int64)
    f = rng.uniform(-4, 4, size=(5, 7))
    out = check(lambda x, f: {
        "sum": jnp.sum(x, axis=0), "max": jnp.max(x - 2**50, axis=1),
        "min": jnp.min(x + 2**50, axis=0), "argmax": jnp.argmax(x, axis=1),
        "cumsum": lax.cumsum(x, axis=1, reverse=True), "xor": lax.reduce_xor(x, (0,)),
        "prod": jnp.prod(x, axis=0), "fsum": jnp.sum(f + 1, axis=1),
        "fmax": jnp.max(-f - 5, axis=0),
        "fargmin": jnp.argmin(f, axis=0), "fcummax": lax.cummax(f, axis=1, reverse=True),
    }, x, f)
  assert out["prod"].dtype == np.int64 and out["fsum"].dtype == np.float64
  assert out["argmax"].dtype == np.int64


def test_reductions_compile_for_sm90(rng):
  """The interpreter is lenient; the compiler checks types and shapes."""
  x = random_array(rng, (5, 7), "float16")
  xi = random_array(rng, (5, 7), "int8")
  b = random_array(rng, (5, 7), jnp.bool_)
  check(lambda x, xi, b: {
      "fsum": jnp.sum(x, axis=0), "fmax": jnp.max(x, axis=1), "fmin": jnp.min(x, axis=(0, 1)),
      "fprod": jnp.prod(x * 0 + 1, axis=0), "argmax": jnp.argmax(x, axis=1),
      "argmin": jnp.argmin(xi, axis=0), "imax": jnp.max(xi, axis=1) + jnp.int8(1),
      "imin": jnp.min(xi, axis=0), "iprod": jnp.prod(xi, axis=1, dtype=jnp.int8),
      "ixor": lax.reduce_xor(xi, (1,)), "iand": lax.reduce_and(xi, (0,)),
      "all": jnp.all(b, axis=1), "any": jnp.any(b, axis=0), "bargmax": jnp.argmax(b, axis=1),
      "cumsum": lax.cumsum(x, axis=1, reverse=True), "cummax": lax.cummax(xi, axis=0),
      "cummin": lax.cummin(x, axis=1), "cumprod": lax.cumprod(xi, axis=0, reverse=True),
  }, x, xi, b, name="reductions_sm90", atol=2e-2, rtol=2e-2)
  compiles_for_sm90("reductions_sm90")


@pytest.mark.parametrize("shape,axis", [((5, 7), 0), ((5, 7), 1), ((3, 5, 6), 2), ((19,), 0)])
@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "float16"))
def test_cumlogsumexp(rng, dtype, shape, axis):
  x = random_array(rng, shape, dtype, low=-30, high=30)
  out = check(lambda x: {"fwd": lax.cumlogsumexp(x, axis=axis),
                         "rev": lax.cumlogsumexp(x, axis=axis, reverse=True)}, x,
              name=f"cumlogsumexp_{dtype}_{len(shape)}_{axis}",
              **({} if dtype == "float32" else {"atol": 0.1, "rtol": 2e-2}))
  assert out["fwd"].dtype == np.dtype(x.dtype)


def test_cumlogsumexp_of_infinities_and_nan(rng):
  x = np.array(random_array(rng, (5, 7), "float32", low=-30, high=30))
  x[1, 2] = -np.inf
  x[3, :] = -np.inf           # log(0 + 0 + ...) stays -inf
  x[4, 4] = np.inf            # and inf stays inf, inf + inf too
  x[4, 5] = np.inf
  x[0, 6] = np.nan
  check(lambda x: {"fwd": lax.cumlogsumexp(x, axis=1),
                   "rev": lax.cumlogsumexp(x, axis=0, reverse=True)}, x)


def test_cumlogsumexp_compiles_for_sm90(rng):
  x = random_array(rng, (6, 10), "float16", low=-8, high=8)
  check(lambda x: {"fwd": lax.cumlogsumexp(x, axis=1),
                   "rev": lax.cumlogsumexp(x.astype(jnp.float32), axis=0, reverse=True)},
        x, name="cumlogsumexp_sm90", atol=2e-2, rtol=2e-2)
  compiles_for_sm90("cumlogsumexp_sm90")
