"""int4/uint4 arrays: two elements per byte in memory (XLA's layout), held as
8-bit values in registers; conversions as XLA does them."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel

FOUR_BIT = (jnp.int4, jnp.uint4)
OTHERS = (jnp.int8, jnp.int32, jnp.uint32, jnp.float32, jnp.bfloat16, jnp.float16, jnp.bool_)


def _values(rng, dtype, shape):
  if dtype == jnp.int4:
    return jnp.asarray(rng.integers(-8, 8, shape), dtype)
  if dtype == jnp.uint4:
    return jnp.asarray(rng.integers(0, 16, shape), dtype)
  if dtype == jnp.bool_:
    return jnp.asarray(rng.random(shape) < 0.5)
  if jnp.issubdtype(dtype, jnp.floating):
    x = rng.uniform(-20, 20, shape)
    x[0, :4] = [np.nan, 7.5, -8.5, 15.9]
    return jnp.asarray(x, dtype)
  return jnp.asarray(rng.integers(-100, 100, shape), dtype)


def _cast(x, to):
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].astype(to)
  call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, to),
                        compiler_params=pallas_prof.CompilerParams())
  return call(x)


@pytest.mark.parametrize("four", FOUR_BIT)
@pytest.mark.parametrize("other", OTHERS + FOUR_BIT)
def test_casts_from_and_to_4bit(rng, four, other):
  shape = (8, 128)
  for frm, to in ((four, other), (other, four)):
    x = _values(rng, frm, shape)
    got = np.asarray(_cast(x, to)).astype(np.float32)
    want = np.asarray(x.astype(to)).astype(np.float32)
    np.testing.assert_array_equal(got, want, err_msg=f"{jnp.dtype(frm).name} -> {jnp.dtype(to).name}")


def test_4bit_blocks_and_slices(rng):
  x = _values(rng, jnp.int4, (16, 64))

  def kernel(x_ref, o_ref):
    o_ref[:, 0:32] = x_ref[:, 32:64]          # slices of even length at even offsets
    o_ref[:, 32:64] = x_ref[:, 0:32] + jnp.int4(1)

  spec = pl.BlockSpec((8, 64), lambda i: (i, 0))
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int4), grid=(2,),
                       in_specs=[spec], out_specs=spec,
                       compiler_params=pallas_prof.CompilerParams())(x)
  want = jnp.concatenate([x[:, 32:], (x[:, :32].astype(jnp.int8) + 1).astype(jnp.int4)], axis=1)
  np.testing.assert_array_equal(np.asarray(out, np.int8), np.asarray(want, np.int8))


def test_4bit_kernels_compile_for_sm90(rng):
  kernel_registry.clear()
  _cast(_values(rng, jnp.uint4, (8, 128)), jnp.int4)
  (rec,) = kernel_registry.kernels()
  ck = compile_kernel(rec.generated, ("cuda", 90))
  assert "ld.global" in ck.ptx and "st.global" in ck.ptx


def test_odd_4bit_writes_are_refused_with_a_reason(rng):
  x = _values(rng, jnp.int4, (8, 64))

  def kernel(x_ref, o_ref):
    o_ref[:, 1:4] = x_ref[:, 1:4]

  with pytest.raises(pallas_prof.LoweringError, match="pairs of contiguous"):
    pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int4),
                   compiler_params=pallas_prof.CompilerParams())(x)
