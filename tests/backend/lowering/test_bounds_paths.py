"""The bounds-checked mode covers every access the lowering emits: get and
pl.load (masked), swap and pl.store (masked), scatters through an index
array, addupdate, the atomics (atomic_add/max/xchg...) and int4's packed
reads and writes. Each violation is a BoundsError naming the primitive, the
user's line, the ref with its shape, the access (reads/writes/updates) and
the offending index range; lanes the user's mask turns off are not
violations; valid accesses compute what they compute without the mode
(atomic_cas included)."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from pallas_prof import triton as plgpu

from pallas_prof.backend.running.bounds_errors import BoundsError
from testkit.helpers import pallas, random_array

try:   # where JAX keeps ref_addupdate (as tests/backend/lowering/rules/test_memory.py finds it)
  from jax._src.state import primitives as state_primitives   # noqa: tests only
except ImportError:   # pragma: no cover
  state_primitives = None

S = jax.ShapeDtypeStruct
HERE = __file__.rsplit("/", 1)[-1]
I32 = jnp.int32


# the fixture, for every test
from tests.backend.lowering.test_bounds import check_mode  # noqa: E402,F401

pytestmark = pytest.mark.usefixtures("check_mode")


def _line(fn, marker="# CHECKED") -> int:
  lines, first = inspect.getsourcelines(fn)
  return first + next(i for i, text in enumerate(lines) if marker in text)


def _violation(call, *args) -> str:
  with pytest.raises(BoundsError) as info:    # itself, not a JaxRuntimeError
    jax.block_until_ready(call(*args))
  return str(info.value)


def _masked_load(s_ref, x_ref, o_ref):
  lanes = jnp.arange(16)
  o_ref[...] = plgpu.load(x_ref.at[pl.ds(s_ref[0], 16)], mask=lanes < s_ref[1], other=-1.0)  # CHECKED


def test_masked_load_checks_only_the_lanes_it_reads(rng):
  x = random_array(rng, (128,), "float32")
  call = pallas(_masked_load, S((16,), jnp.float32), name="masked_read")
  # lanes 120..127 read, 128..135 masked off: no violation, the masked lanes are `other`
  out = np.asarray(call(np.array([120, 8], np.int32), x))
  np.testing.assert_array_equal(out, np.concatenate([x[120:], np.full(8, -1.0, np.float32)]))
  text = _violation(call, np.array([120, 11], np.int32), x)
  assert f"`masked_load` in kernel `masked_read` at " in text and f"{HERE}:{_line(_masked_load)} " in text, text
  assert "reads x_ref (shape (128,), float32) at index [128:131]: 3 lane(s)" in text, text


def _masked_store(s_ref, x_ref, o_ref):
  o_ref[...] = jnp.zeros((40,), I32)
  lanes = jnp.arange(8)
  plgpu.store(o_ref.at[pl.ds(s_ref[0], 8)], x_ref[...], mask=lanes >= s_ref[1])   # CHECKED


def test_masked_store_names_the_lanes_it_would_write(rng):
  x = random_array(rng, (8,), "int32")
  call = pallas(_masked_store, S((40,), I32), name="masked_write")
  out = np.asarray(call(np.array([-3, 3], np.int32), x))     # lanes 0..2 (index -3..-1) off
  np.testing.assert_array_equal(out[:5], x[3:])
  text = _violation(call, np.array([36, 0], np.int32), x)
  assert f"`masked_swap` in kernel `masked_write` at " in text and f"{HERE}:{_line(_masked_store)} " in text, text
  assert "writes o_ref (shape (40,), int32) at index [40:44]: 4 lane(s)" in text, text


def _scatter(i_ref, x_ref, o_ref):
  o_ref[...] = jnp.zeros((10,), jnp.float32)
  o_ref[i_ref[...]] = x_ref[...]          # CHECKED


def test_a_scatter_through_an_index_array_names_the_indices(rng):
  x = random_array(rng, (4,), "float32")
  call = pallas(_scatter, S((10,), jnp.float32), name="scatter")
  np.testing.assert_array_equal(np.asarray(call(np.array([9, 0, 4, 2], np.int32), x))[[9, 0, 4, 2]], x)
  text = _violation(call, np.array([9, -2, 4, 10], np.int32), x)
  assert f"`swap` in kernel `scatter` at " in text and f"{HERE}:{_line(_scatter)} " in text, text
  assert "writes o_ref (shape (10,), float32) at index [-2:11]: 2 lane(s)" in text, text


def _atomic_add(s_ref, v_ref, o_in_ref, o_ref):
  plgpu.atomic_add(o_ref, (pl.ds(s_ref[0], 4), slice(None)), v_ref[...])   # CHECKED


def _atomic_xchg(s_ref, v_ref, o_in_ref, o_ref):
  plgpu.atomic_xchg(o_ref, (s_ref[0], pl.ds(s_ref[1], 3)), v_ref[0, :3])   # CHECKED


def _atomic_max(s_ref, v_ref, o_in_ref, o_ref):
  plgpu.atomic_max(o_ref, (pl.ds(s_ref[0], 4), slice(None)), v_ref[...],    # CHECKED
                   mask=jnp.arange(4)[:, None] < s_ref[1])


@pytest.mark.parametrize("kernel,good,bad,expected", [
    # rows 6..9 of 8
    (_atomic_add, (2, 0), (6, 0), "at index [8:10, 0:5]: 10 lane(s)"),
    # row 3, columns 3..5 of 5
    (_atomic_xchg, (2, 1), (3, 3), "at index [3, 5]: 1 lane(s)"),
    # rows 6..9, the mask keeps 6..8: only row 8 is outside
    (_atomic_max, (2, 4), (6, 3), "at index [8, 0:5]: 5 lane(s)"),
], ids=["atomic_add", "atomic_xchg", "atomic_max_masked"])
def test_atomics_are_checked(rng, kernel, good, bad, expected):
  v = random_array(rng, (4, 5), "int32")
  o = random_array(rng, (8, 5), "int32")
  call = pallas(kernel, S((8, 5), I32), name=kernel.__name__, input_output_aliases={2: 0})
  assert np.asarray(call(np.array(good, np.int32), v, o)).shape == (8, 5)
  text = _violation(call, np.array(bad, np.int32), v, o)
  assert f"`atomic_rmw` in kernel `{kernel.__name__}` at " in text and f"{HERE}:{_line(kernel)} " in text, text
  assert f"updates o_ref (shape (8, 5), int32) {expected}" in text, text


@pytest.mark.skipif(state_primitives is None, reason="this JAX has no ref_addupdate")
def test_addupdate_is_checked_as_an_update(rng):
  def kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]
    state_primitives.ref_addupdate(o_ref, (pl.ds(s_ref[0], 3), slice(None)), x_ref[0:3])  # CHECKED

  x = random_array(rng, (8, 16), "float32")
  call = pallas(kernel, S((8, 16), jnp.float32), name="addupdate")
  np.testing.assert_allclose(np.asarray(call(np.array([5], np.int32), x)),
                             np.asarray(jnp.asarray(x).at[5:8].add(x[0:3])), rtol=1e-6)
  text = _violation(call, np.array([7], np.int32), x)
  assert f"`addupdate` in kernel `addupdate` at " in text and f"{HERE}:{_line(kernel)} " in text, text
  assert "updates o_ref (shape (8, 16), float32) at index [8:10, 0:16]: 32 lane(s)" in text, text


def test_int4_windows_are_checked_in_elements(rng):
  def kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[:, pl.ds(s_ref[0], 16)]      # CHECKED

  x = jnp.asarray(rng.integers(-8, 8, (4, 64)), jnp.int4)
  call = pallas(kernel, S((4, 16), jnp.int4), name="int4_window")
  np.testing.assert_array_equal(np.asarray(call(np.array([48], np.int32), x)).astype(np.int8),
                                np.asarray(x[:, 48:]).astype(np.int8))
  text = _violation(call, np.array([52], np.int32), x)
  assert f"`get` in kernel `int4_window` at " in text and f"{HERE}:{_line(kernel)} " in text, text
  assert "reads x_ref (shape (4, 64), int4) at index [0:4, 64:68]: 16 lane(s)" in text, text


def test_atomic_cas_in_check_mode_computes_as_without(rng):
  """tl.atomic_cas takes no mask; JAX's atomic_cas takes a whole ref (its block),
  which is in bounds by construction, so nothing is checked at run time and the
  counter comes out as without the mode."""
  step = np.asarray(rng.integers(1, 9, (6,)), np.int32)

  def kernel(s_ref, start_ref, o_ref):
    i = pl.program_id(0)

    def retry(state):
      old = o_ref[...]
      got = plgpu.atomic_cas(o_ref, old, old + s_ref[i])
      return got, got == old

    jax.lax.while_loop(lambda s: ~s[1], retry, (jnp.int32(0), False))

  call = pallas(kernel, S((), I32), grid=(6,), input_output_aliases={1: 0}, name="cas_counter")
  assert int(call(step, np.int32(5))) == 5 + int(step.sum())
