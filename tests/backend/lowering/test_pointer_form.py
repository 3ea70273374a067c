"""The form of a load's or store's pointer (rules/addressing.pointer):
`ref + (scalars) + (tensors the innermost loop does not change) + (tensors it does)`,
a dynamic slice start a scalar term of its own. Grouping the terms cannot change an
address (integer addition; index_dtype_for keeps every partial sum in its type), so a
wrong grouping costs speed only and the fuzzer cannot see it: these tests pin the form
and check the results as well (what varies with a loop: test_loop_variance.py).
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
from pallas_prof.backend.lowering.access.addressing import Offset, pointer
from testkit.helpers import random_array


@pytest.fixture(autouse=True)
def installed():
  pallas_prof.install()
  yield


def _source(name):
  return kernel_registry.find(name)[-1].generated.source


def _load_line(src: str, ref: str) -> str:
  return next(line for line in src.splitlines() if f"tl.load({ref} +" in line)


def test_a_block_read_in_a_loop_adds_its_start_as_a_scalar_and_its_lanes_hoistable(rng):
  """Rows i*8 .. i*8+7 of a (40, 48) array, summed over i: the start changes every
  iteration, the lanes never; the lanes' tensor comes after the scalar group, alone."""
  x = random_array(rng, (40, 48), jnp.float32)

  def kernel(x_ref, o_ref):
    def body(i, acc):
      return acc + x_ref[pl.ds(i * 8, 8), :]
    o_ref[...] = jax.lax.fori_loop(0, 5, body, jnp.zeros((8, 48), jnp.float32))

  out = jax.jit(lambda a: pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((8, 48), jnp.float32), name="rows_in_loop")(a))(x)
  np.testing.assert_allclose(np.asarray(out), np.asarray(x).reshape(5, 8, 48).sum(0),
                             rtol=1e-5, atol=1e-5)
  src = _source("rows_in_loop")
  assert re.search(r"^\s+for \w+ in range\(0, 5\):", src, re.M), src     # a loop (5 > 4 trips)
  line = _load_line(src, "x_ref")
  # x_ref + <the start times 48, a scalar> + (<lanes8>[:, None] * 48 + <lanes64>[None, :])
  m = re.search(r"tl\.load\(x_ref \+ (\w+) \* 48 \+ \((lanes8\w*)\[:, None\] \* 48 \+ "
                r"(lanes64\w*|x_ref_ax1)\[None, :\]\)", line)
  assert m, line


def test_a_tensor_the_loop_changes_goes_last(rng):
  """A gather whose indices are loaded inside the loop varies with it: it is the last
  group, after the tensors that stay the same."""
  x = random_array(rng, (16, 32), jnp.float32)
  idx = jnp.asarray(rng.integers(0, 16, (6, 8)), jnp.int32)   # 6 trips: a loop, not unrolled

  def kernel(idx_ref, x_ref, o_ref):
    def body(i, acc):
      rows = idx_ref[i, :]
      return acc + x_ref[rows, :]
    o_ref[...] = jax.lax.fori_loop(0, 6, body, jnp.zeros((8, 32), jnp.float32))

  out = jax.jit(lambda j, a: pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((8, 32), jnp.float32), name="gather_in_loop")(j, a)
      )(idx, x)
  want = sum(np.asarray(x)[np.asarray(idx)[i]] for i in range(6))
  np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
  line = _load_line(_source("gather_in_loop"), "x_ref")
  rows_var = re.search(r"(\w+) = tl\.load\(idx_ref", _source("gather_in_loop")).group(1)
  body = line.split("tl.load(x_ref + ", 1)[1]
  assert rows_var in body, line
  fixed, moving = body.rsplit(" + ", 1)[0], body.rsplit(" + ", 1)[1]
  assert rows_var not in fixed and rows_var in moving, line


def test_pointer_groups_scalars_then_fixed_then_moving():
  ref = type("Ref", (), {"name": "x_ref"})()
  off = Offset.of(["s * 64", "a[:, None] * 64", "b[None, :]", "c[None, :]"], {"s * 64"},
                  moving={"c[None, :]"})
  assert pointer(ref, off) == "x_ref + s * 64 + (a[:, None] * 64 + b[None, :]) + c[None, :]"
  assert str(off) == "s * 64 + a[:, None] * 64 + b[None, :] + c[None, :]"
  assert pointer(ref, Offset.of([], set(), set())) == "x_ref"
  assert pointer(ref, "i - 1") == "x_ref + (i - 1)"       # a plain offset: one term
