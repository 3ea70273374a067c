"""A block that overhangs the end of a 1-D array whose length is not a whole number of
16-byte vectors: its reads and writes are emitted twice, unmasked for the programs whose
block lies inside and masked for the one at the edge (addressing._splits_at_edge).
With the bound mask alone Triton cannot prove the mask constant over a vector and loads
every element on its own: on the H200 (suite at fe6e174) a 41943047-element bf16 add
took 0.167 ms, 2.8x the built-in backend's (which does not mask the overhang at all).
Checked here: the results at every program (the edge one included) under Triton's
interpreter, where the split applies and where it does not, and the sm_90 compile.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from testkit.helpers import random_array


@pytest.fixture(autouse=True)
def installed():
  pallas_prof.install()
  yield


def _add(x, y, block, name):
  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + y_ref[...]
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(kernel, grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec, spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        name=name)(x, y)


def _source(name):
  return kernel_registry.find(name)[-1].generated.source


@pytest.mark.parametrize("n, dtype", [(5003, jnp.bfloat16), (3001, jnp.float32),
                                      (2 * 256 + 5, jnp.int8), (257, jnp.float16)])
def test_odd_lengths_split_and_every_element_is_right(rng, n, dtype):
  x, y = random_array(rng, (n,), dtype), random_array(rng, (n,), dtype)
  name = f"edge_{n}"
  out = jax.jit(lambda a, b: _add(a, b, 256, name))(x, y)
  want = (np.asarray(x, np.float64) * 2 + np.asarray(y, np.float64)).astype(np.dtype(dtype))
  if jnp.issubdtype(dtype, jnp.integer):
    want = (np.asarray(x).astype(np.int64) * 2 + np.asarray(y)).astype(np.int8)   # wraps
    np.testing.assert_array_equal(np.asarray(out), want)
  else:
    np.testing.assert_allclose(np.asarray(out, np.float32), want.astype(np.float32),
                               rtol=1e-2, atol=1e-2)
  src = _source(name)
  # the offset: the block's start (a scalar) and its lanes (addressing.pointer)
  offset = r"{0}_start0 \+ lanes\w+"
  assert re.search(r"if x_ref_inside0:[^\n]*\n\s+x = tl.load\(x_ref \+ "
                   + offset.format("x_ref") + r"\)\s+#", src), src
  assert re.search(r"if o_ref_inside0:[^\n]*\n\s+tl.store\(o_ref \+ "
                   + offset.format("o_ref") + r", \w+\)\s+#", src), src
  assert f"x_ref_ax0 < {n}" in src        # the edge program keeps its mask


@pytest.mark.parametrize("n, dtype, why", [
    (4096 + 8, jnp.bfloat16, "a whole number of vectors: the mask is constant over each"),
    (1024, jnp.float32, "no overhang"),
])
def test_no_split_where_the_mask_does_not_stop_vectorisation(rng, n, dtype, why):
  x, y = random_array(rng, (n,), dtype), random_array(rng, (n,), dtype)
  name = f"plain_{n}"
  out = jax.jit(lambda a, b: _add(a, b, 256, name))(x, y)
  np.testing.assert_allclose(np.asarray(out, np.float32),
                             np.asarray(x, np.float32) * 2 + np.asarray(y, np.float32),
                             rtol=1e-2, atol=1e-2)
  assert "inside" not in _source(name), why


def test_rows_of_an_odd_width_do_not_split(rng):
  """A 2-D block: its rows start at odd offsets, so no vector would be aligned inside."""
  x = random_array(rng, (5, 1003), jnp.float32)

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0
  spec = pl.BlockSpec((2, 256), lambda i, j: (i, j))
  out = jax.jit(pl.pallas_call(kernel, grid=(3, 4), in_specs=[spec], out_specs=spec,
                               out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                               name="rows_odd"))(x)
  np.testing.assert_allclose(np.asarray(out), np.asarray(x) + 1.0, rtol=1e-6)
  assert "inside" not in _source("rows_odd")


def test_the_inside_programs_load_and_store_whole_vectors_on_sm90(rng):
  """The sm_90 compile: 16-byte loads and stores where the mask alone gave 2-byte ones."""
  x = jax.ShapeDtypeStruct((41943047,), jnp.bfloat16)
  kernel_registry.clear()
  jax.jit(lambda a, b: _add(a, b, 1024, "edge_sm90")).lower(x, x)
  ptx = compile_kernel(kernel_registry.find("edge_sm90")[-1].generated, ("cuda", 90)).ptx
  assert len(re.findall(r"ld\.global\.v4\.b32", ptx)) == 2       # x and y, 8 bf16 a thread each
  assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 1
  assert re.search(r"ld\.global\.b16", ptx)                     # the edge program, masked
