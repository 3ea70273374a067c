"""The BlockSpec and grid checks refuse only what JAX refuses: every call its interpret
mode accepts runs here too, with its answer (tests/faults/test_bad_input.py has the
refused ones)."""
from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import compat
from pallas_prof.backend.errors import Unsupported
from pallas_prof.backend.lowering.blockspec import check_block_shapes
from testkit.helpers import assert_close, pallas

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _plus_one(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1


# name -> (block shape, grid, array shape, index map)
ACCEPTED = {
    # JAX makes a block size of int(2.5) = 2 before any backend sees it
    "float_block_size": ((2.5,), (8,), (16,), lambda i: (i,)),
    "numpy_int_block_size": ((np.int64(4),), (4,), (16,), lambda i: (i,)),
    "block_larger_than_the_array": ((32,), (1,), (16,), lambda i: (i,)),
    "ragged_last_block": ((5,), (4,), (16,), lambda i: (i,)),
    "squeezed": ((None, 8), (4,), (4, 8), lambda i: (i, 0)),
    "block_of_one": ((1,), (16,), (16,), lambda i: (i,)),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_jax_accepts_runs_with_its_answer(case):
  block, grid, shape, index_map = ACCEPTED[case]
  x = jnp.arange(int(np.prod(shape)), dtype=F32).reshape(shape)
  spec = pl.BlockSpec(block, index_map)
  kwargs = dict(out_shape=S(shape, F32), grid=grid, in_specs=[spec], out_specs=spec)
  expected = pl.pallas_call(_plus_one, interpret=True, **kwargs)(x)
  assert_close(pallas(_plus_one, **kwargs)(x), expected)


@pytest.mark.parametrize("grid", [(0, 0), (0, 4), (4, 0)])
def test_an_empty_grid_runs_no_program(grid):
  """JAX accepts a grid dimension of 0 (no program); the output keeps its start (zeros
  here; JAX's interpret mode leaves its own start, NaN), and the user is told."""
  spec = pl.BlockSpec((4, 4), lambda i, j: (i, j))
  with pytest.warns(pallas_prof.UncoveredOutputWarning, match="never written"):
    out = pallas(_plus_one, S((16, 16), F32), grid=grid, in_specs=[spec], out_specs=spec)(
        jnp.ones((16, 16), F32))
  assert out.shape == (16, 16) and not np.any(np.asarray(out) == 2)


def test_an_empty_array_in_blocks_of_one_or_more_runs():
  spec = pl.BlockSpec((4,), lambda i: (i,))
  out = pallas(_plus_one, S((0,), F32), grid=(0,), in_specs=[spec], out_specs=spec)(
      jnp.zeros((0,), F32))
  assert out.shape == (0,)


def _mapping(*block_shape):
  array = types.SimpleNamespace(shape=(16,) * len(block_shape))
  jaxpr = types.SimpleNamespace(debug_info=None)
  bm = types.SimpleNamespace(block_shape=block_shape, array_aval=array,
                             index_map_jaxpr=types.SimpleNamespace(jaxpr=jaxpr))
  return types.SimpleNamespace(block_mappings=(bm,), num_inputs=1)


def test_a_block_size_that_is_not_an_integer_is_refused():
  """A symbolic or float size can only come through JAX's internals (pl.Blocked(2.5) fails
  in JAX's own tracing of the kernel); the check still refuses it."""
  with pytest.raises(Unsupported, match="dimension 0 of the BlockSpec of x_ref .* is 2.5: "
                     "a block size must be a static integer"):
    check_block_shapes(_mapping(compat.Blocked(2.5)), ["x_ref"])
  check_block_shapes(_mapping(compat.Blocked(4), compat.Squeezed()), ["x_ref"])
