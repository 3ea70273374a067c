"""Constant folding computes exactly what XLA computes: the numpy fast path is
checked against JAX (XLA on the CPU) value by value, bit for bit."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pallas_prof.backend.lowering import folding
from pallas_prof.backend.lowering.codegen import Value

BINARY = ["add", "sub", "mul", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"]
BITWISE = ["and", "or", "xor"]


def _eqn(fn, *args):
  (eqn,) = jax.make_jaxpr(fn)(*args).jaxpr.eqns
  return eqn


def _values(rng, dtype, n=64):
  dtype = np.dtype(dtype)
  if dtype.kind == "f":
    v = (rng.standard_normal(n) * 1e3).astype(dtype)
    v[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, np.finfo(dtype).max]
    return v
  if dtype.kind == "b":
    return rng.integers(0, 2, n).astype(bool)
  info = np.iinfo(dtype)
  v = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
  v[:2] = [info.min, info.max]
  return v


def _both(eqn, args):
  fast = folding._numpy_fold(eqn, args)
  with jax.default_device(jax.devices("cpu")[0]):
    slow = np.asarray(eqn.primitive.bind(*args, **eqn.params))
  return fast, slow


def _same(a, b):
  a, b = np.asarray(a), np.asarray(b)
  assert a.dtype == b.dtype
  if a.dtype.kind == "f":
    return np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")) or \
        (np.isnan(a) and np.isnan(b))
  return np.array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8", "int32", "uint32",
                                   "int64", "bool"])
def test_numpy_folds_are_bit_for_bit_xla(rng, dtype):
  jax.config.update("jax_enable_x64", True)
  try:
    xs, ys = _values(rng, dtype), _values(rng, dtype)
    names = (BINARY + BITWISE) if dtype in ("bool",) or dtype.startswith(("int", "uint")) else BINARY
    if dtype == "bool":
      names = ["eq", "ne", "and", "or", "xor", "max", "min"]
    for name in names:
      fn = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "max": lax.max, "min": lax.min,
            "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge,
            "and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor}[name]
      for x, y in zip(xs, ys):
        eqn = _eqn(fn, x, y)
        fast, slow = _both(eqn, [np.asarray(x), np.asarray(y)])
        assert fast is not None, name
        assert _same(fast, slow), (name, x, y, fast, slow)
  finally:
    jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("src, dst", [("int32", "int8"), ("int32", "float32"), ("uint32", "float16"),
                                      ("float64", "float32"), ("float32", "float16"),
                                      ("int8", "uint32"), ("bool", "int32"), ("int32", "bool")])
def test_numpy_conversions_are_bit_for_bit_xla(rng, src, dst):
  jax.config.update("jax_enable_x64", True)
  try:
    for x in _values(rng, src):
      eqn = _eqn(lambda v: lax.convert_element_type(v, jnp.dtype(dst)), x)
      fast, slow = _both(eqn, [np.asarray(x)])
      assert fast is not None and _same(fast, slow), (x, fast, slow)
  finally:
    jax.config.update("jax_enable_x64", False)


def test_what_numpy_does_not_define_like_xla_goes_through_jax():
  for fn, args in [(lambda v: lax.convert_element_type(v, jnp.int32), (np.float32(3e9),)),
                   (lax.div, (np.int32(-7), np.int32(2))),
                   (jnp.exp, (np.float32(1.5),)),
                   (lax.add, (jnp.bfloat16(1.5), jnp.bfloat16(2.25)))]:
    eqn = _eqn(fn, *args)
    assert folding._numpy_fold(eqn, [np.asarray(a) for a in args]) is None, eqn
    value = folding.try_fold(eqn, [Value("c", np.asarray(a).dtype, (), const=np.asarray(a))
                                   for a in args])
    assert value is not None          # still folded, by JAX


def test_select_n_picks_by_index():
  eqn = _eqn(lambda p, a, b: lax.select_n(p, a, b), np.bool_(True), np.float32(1), np.float32(2))
  fast, slow = _both(eqn, [np.asarray(True), np.asarray(np.float32(1)), np.asarray(np.float32(2))])
  assert fast == slow == np.float32(2)
