"""dot_general: transposed operands, batches, vectors, small and odd dimensions,
dtypes, precisions and algorithm presets, run by Triton's interpreter.

Float results are compared with the exact product (float64) under an
elementwise bound: a few roundings of the output dtype, of the multiplication
precision (TF32 for DEFAULT on float32: the interpreter multiplies exactly,
the GPU does not), and K roundings of the float32 accumulator, all relative
to |a| @ |b|. Integer results must match XLA exactly (wrapping included).
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from testkit.helpers import random_array, run_on_values, xla_on_cpu

HIGHEST = lax.Precision.HIGHEST
Preset = lax.DotAlgorithmPreset
EPS = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 2.0**-53}
# TF32 keeps 10 mantissa bits; tensor cores may truncate the other 13: 2**-10 per input
TF32_EPS = 2.0**-10
SIZES = [(16, 16, 16), (8, 5, 3), (1, 2, 1), (2, 8, 1), (32, 24, 16), (5, 7, 9), (1, 16, 32)]


def run(fn, *arrays, name="dot"):
  return run_on_values(fn, *arrays, name=name)


def exact(fn, *arrays):
  """fn evaluated in float64 numpy (products and sums exact enough), and the
  same on magnitudes (|a| @ |b|), which bounds every rounding error."""
  as64 = [np.asarray(a, np.float64) for a in arrays]
  with jax.enable_x64(True):
    value = xla_on_cpu(fn, *as64)
    magnitude = xla_on_cpu(fn, *[np.abs(a) for a in as64])
  return jax.tree.map(np.asarray, value), jax.tree.map(np.asarray, magnitude)


def check_float(fn, *arrays, precision_eps=0.0, name="dot"):
  """Every output within a few roundings of the exact result."""
  out = run(fn, *arrays, name=name)
  expected = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays])
  value, magnitude = exact(fn, *arrays)
  for key in expected:
    assert out[key].dtype == expected[key].dtype, key
    assert out[key].shape == expected[key].shape, key
    k = _contraction_size(key, arrays)
    eps_out = EPS[np.dtype(out[key].dtype).name]
    bound = 2 * (eps_out + precision_eps + k * 2.0**-24) * magnitude[key] + 1e-30
    err = np.abs(np.asarray(out[key], np.float64) - value[key])
    assert not np.any(np.isnan(np.asarray(out[key], np.float64))), key
    assert np.all(err <= bound), (key, float(err.max()), float((err / bound).max()))
  return out


def _contraction_size(key, arrays):
  return max(max(a.shape) for a in arrays)     # an upper bound on K


def check_exact(fn, *arrays, name="dot"):
  out = run(fn, *arrays, name=name)
  ref = xla_on_cpu(fn, *arrays)
  for key in ref:
    assert out[key].dtype == ref[key].dtype, key
    np.testing.assert_array_equal(np.asarray(out[key]), np.asarray(ref[key]), err_msg=key)
  return out


def compiles_for_sm90(name):
  ck = compile_kernel(kernel_registry.find(name)[-1].generated)
  assert ".target sm_90" in ck.ptx


@pytest.mark.parametrize("mkn", SIZES)
def test_transposed_operands_and_vectors(rng, mkn):
  m, k, n = mkn
  a, b = random_array(rng, (m, k), "float32"), random_array(rng, (k, n), "float32")
  at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
  dot = lambda x, y: jnp.dot(x, y, precision=HIGHEST)
  check_float(lambda a, b, at, bt: {
      "a@b": dot(a, b), "aT@b": dot(at.T, b), "a@bT": dot(a, bt.T), "aT@bT": dot(at.T, bt.T),
      "(a@b)T": lax.dot_general(b, a, (((0,), (1,)), ((), ())), precision=HIGHEST),
      "matrix@vector": dot(a, b[:, 0]), "vector@matrix": dot(a[0], b),
      "vector@vector": dot(a[0], b[:, 0]).reshape(1),
  }, a, b, at, bt, name="dot_transposes")
  assert dot_precisions("dot_transposes") == ["ieee"] * 8


@pytest.mark.parametrize("mkn", SIZES)
def test_float_dtypes(rng, mkn):
  m, k, n = mkn
  a, b = random_array(rng, (m, k), "float32"), random_array(rng, (k, n), "float32")
  h, g = a.astype(jnp.float16), b.astype(jnp.float16)
  x, y = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
  check_float(lambda h, g, x, y, b: {
      "f16": jnp.dot(h, g), "f16->f32": jnp.dot(h, g, preferred_element_type=jnp.float32),
      "bf16": jnp.dot(x, y), "bf16->f32": jnp.dot(x, y, preferred_element_type=jnp.float32),
      "bf16xf32": jnp.dot(x, b, precision=HIGHEST),
      "f16xbf16": jnp.dot(h, y, precision=HIGHEST),
      "bf16T": jnp.dot(x.T.T, y),
  }, h, g, x, y, b)


@pytest.mark.parametrize("mkn", SIZES)
def test_default_precision_float32_within_tf32(rng, mkn):
  m, k, n = mkn
  a, b = random_array(rng, (m, k), "float32"), random_array(rng, (k, n), "float32")
  check_float(lambda a, b: {"default": jnp.dot(a, b), "high": jnp.dot(a, b, precision="high"),
                            "default_T": jnp.dot(a, b.T.T)},
              a, b, precision_eps=TF32_EPS, name="dot_default")
  # the interpreter multiplies exactly whatever the precision: check what the GPU gets
  assert dot_precisions("dot_default") == ["tf32"] * 3


def dot_precisions(name):
  source = kernel_registry.find(name)[-1].generated.source
  return re.findall(r'tl\.dot\([^#]*?input_precision="(\w+)"', source)


@pytest.mark.parametrize("mkn", SIZES)
def test_integer_dots(rng, mkn):
  m, k, n = mkn
  a, b = random_array(rng, (m, k), "int8"), random_array(rng, (k, n), "int8")
  f = random_array(rng, (k, n), "float32")
  i32 = lambda v, scale: v.astype(jnp.int32) * scale
  out = check_exact(lambda a, b: {
      "int8->int32": jnp.dot(a, b, preferred_element_type=jnp.int32),
      "int8 (wraps)": jnp.dot(a, b),
      "int8T": jnp.dot(a.T.T, b, preferred_element_type=jnp.int32),
      "int16": jnp.dot(a.astype(jnp.int16), b.astype(jnp.int16)),
      "int16->int32": jnp.dot(a.astype(jnp.int16) * 300, b.astype(jnp.int16) * 100,
                              preferred_element_type=jnp.int32),
      "int32 (wraps)": jnp.dot(i32(a, 70000), i32(b, 30000)),
      "bool": jnp.dot(a > 0, b > 0),
  }, a, b)
  assert out["int8->int32"].dtype == np.int32
  check_float(lambda a, f: {"int8xf32": jnp.dot(a, f, precision=HIGHEST,
                                                 preferred_element_type=jnp.float32)}, a, f)


@pytest.mark.parametrize("bmkn", [(2, 16, 16, 16), (3, 5, 7, 2), (2, 1, 3, 1)])
def test_batched(rng, bmkn):
  bsz, m, k, n = bmkn
  a, b = random_array(rng, (bsz, m, k), "float32"), random_array(rng, (bsz, k, n), "float32")
  at, bt = np.ascontiguousarray(np.swapaxes(a, 1, 2)), np.ascontiguousarray(np.swapaxes(b, 1, 2))
  einsum = lambda spec, x, y: jnp.einsum(spec, x, y, precision=HIGHEST)
  check_float(lambda a, b, at, bt, x, y: {
      "bmk,bkn": einsum("bmk,bkn->bmn", a, b), "bkm,bkn": einsum("bkm,bkn->bmn", at, b),
      "bmk,bnk": einsum("bmk,bnk->bmn", a, bt), "bkm,bnk": einsum("bkm,bnk->bmn", at, bt),
      "bf16": jnp.einsum("bmk,bkn->bmn", x, y),
  }, a, b, at, bt, a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))
  ai, bi = (a * 10).astype(np.int32), (b * 10).astype(np.int32)
  check_exact(lambda ai, bi: {"int32": jnp.einsum("bmk,bkn->bmn", ai, bi),
                              "int8": jnp.einsum("bmk,bkn->bmn", ai.astype(jnp.int8),
                                                 bi.astype(jnp.int8),
                                                 preferred_element_type=jnp.int32)}, ai, bi)


PRESETS = {  # preset -> error of one multiplication, relative
    Preset.DEFAULT: TF32_EPS, Preset.F32_F32_F32: 0.0, Preset.TF32_TF32_F32: TF32_EPS,
    Preset.TF32_TF32_F32_X3: TF32_EPS, Preset.BF16_BF16_F32: 2.0**-7,
    Preset.BF16_BF16_F32_X3: 2.0**-7, Preset.BF16_BF16_F32_X6: 2.0**-7,
    Preset.BF16_BF16_F32_X9: 2.0**-7, Preset.F16_F16_F32: 2.0**-10,
    Preset.BF16_BF16_BF16: 2.0**-7, Preset.F16_F16_F16: 2.0**-10 * 16,
}


def test_algorithm_presets_and_compile_for_sm90(rng):
  a, b = random_array(rng, (16, 24), "float32"), random_array(rng, (24, 8), "float32")
  fns = {p.name: (lambda a, b, p=p: jnp.dot(a, b, precision=p)) for p in PRESETS}
  fns["BF16_BF16_F32_preferred_f32"] = lambda a, b: jnp.dot(
      a, b, precision=Preset.BF16_BF16_F32, preferred_element_type=jnp.float32)
  # each preset with its own bound, all in one kernel (one sm_90 compile)
  out = run(lambda a, b: {k: f(a, b) for k, f in fns.items()}, a, b, name="dot_presets")
  value, magnitude = exact(lambda a, b: jnp.dot(a, b), a, b)
  for preset, eps in PRESETS.items():
    got = np.asarray(out[preset.name], np.float64)
    bound = 2 * (EPS[str(out[preset.name].dtype)] + eps + 24 * 2.0**-24) * magnitude
    assert np.all(np.abs(got - value) <= bound), preset.name
  assert set(dot_precisions("dot_presets")) == {"tf32", "tf32x3", "ieee", "bf16x3", "bf16x6"}
  compiles_for_sm90("dot_presets")


def test_small_and_integer_dots_compile_for_sm90(rng):
  """K < 16 (< 32 for int8), M or N of 1, vectors, integer dots without tensor
  cores: Triton's compiler checks all of these, the interpreter none."""
  a, b = random_array(rng, (2, 5), "float32"), random_array(rng, (5, 1), "float32")
  c, d = random_array(rng, (8, 24), "int8"), random_array(rng, (24, 3), "int8")
  z, w = random_array(rng, (2, 3, 7), "float32"), random_array(rng, (2, 7, 1), "float32")
  out = run(lambda a, b, c, d, z, w: {
      "f32": jnp.dot(a, b, precision=HIGHEST),
      "bf16": jnp.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)),
      "tf32": jnp.dot(a, b), "int8": jnp.dot(c, d, preferred_element_type=jnp.int32),
      "int32": jnp.dot(c.astype(jnp.int32), d.astype(jnp.int32)), "vec": jnp.dot(a[0], b),
      "batched": jnp.einsum("bmk,bkn->bmn", z, w, precision=HIGHEST),
      "f16_out": jnp.dot(a.astype(jnp.float16), b.astype(jnp.float16)),
  }, a, b, c, d, z, w, name="dot_small_sm90")
  np.testing.assert_array_equal(out["int8"], jnp.dot(c, d, preferred_element_type=jnp.int32))
  np.testing.assert_allclose(out["f32"], np.asarray(a, np.float64) @ b, rtol=1e-5, atol=1e-5)
  compiles_for_sm90("dot_small_sm90")


def test_unsupported_dots_raise_lowering_errors(rng):
  a, b = random_array(rng, (16, 16), "float32"), random_array(rng, (16, 16), "float32")
  with pytest.raises(pallas_prof.LoweringError, match="ANY_F8_ANY_F8_F32") as info:
    run(lambda a, b: {"f8": jnp.dot(a, b, precision=Preset.ANY_F8_ANY_F8_F32,
                                    preferred_element_type=jnp.float32)}, a, b)
  assert info.value.primitive == "dot_general" and "hint:" in str(info.value)
  x, y = random_array(rng, (4, 4, 8), "float32"), random_array(rng, (4, 4, 8), "float32")
  with pytest.raises(pallas_prof.LoweringError, match="contracting several") as info:
    run(lambda x, y: {"two": lax.dot_general(x, y, (((1, 2), (1, 2)), ((), ())))}, x, y)
  assert info.value.eqn.file == __file__.replace(".pyc", ".py")


def test_64_bit_and_unsigned_dots_compile_for_sm90(rng):
  """float64 tiles are grown to 16 (Triton's MMAv2 needs it); int64 and unsigned
  dots multiply in registers."""
  with jax.enable_x64(True):
    a, b = rng.uniform(-4, 4, size=(5, 7)), rng.uniform(-4, 4, size=(7, 3))
    i, j = rng.integers(-2**20, 2**20, size=(5, 7)), rng.integers(-2**20, 2**20, size=(7, 3))
    u, v = rng.integers(0, 255, size=(5, 7)).astype(np.uint8), rng.integers(
        0, 255, size=(7, 3)).astype(np.uint8)
    out = run(lambda a, b, i, j, u, v: {"f64": jnp.dot(a, b), "i64": jnp.dot(i, j),
                                        "u8 (wraps)": jnp.dot(u, v)},
              a, b, i, j, u, v, name="dot_64_bit")
    assert out["f64"].dtype == np.float64 and out["i64"].dtype == np.int64
    np.testing.assert_allclose(out["f64"], a @ b, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(out["i64"], i @ j)
    np.testing.assert_array_equal(out["u8 (wraps)"], jnp.dot(u, v))
  compiles_for_sm90("dot_64_bit")
