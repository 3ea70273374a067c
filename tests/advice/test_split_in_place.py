"""Issue 49: the split reduction of a kernel that accumulates in its output refs
(`o_ref[...] += v` in the loop, the outputs zeroed before it: advice/split/inplace.py).

Recognized, the variant gives the original's outputs under the interpreter (float32 and
bfloat16 outputs, one and two outputs, shapes that are not powers of two), the diff advise
writes applies with `patch` and the patched file gives the same outputs; and what would
not split is refused with the reason: an output read for something other than its sum, one
that does not start at zero, one touched after the loop, another ref written in the loop."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import recipes
from pallas_prof.advice.split import source, variant
from pallas_prof.advice.split.pattern import NotSplittable
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import patching


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


# The module the diff is made against and applied to: written to a file of its own, so that
# `patch` edits a copy, as a user's file.
MODULE = '''
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def stats_kernel(x_ref, s_ref, q_ref, *, rows):
  s_ref[...] = jnp.zeros(s_ref.shape, s_ref.dtype)
  q_ref[...] = jnp.zeros_like(q_ref)

  def body(i, _):
    x = x_ref[pl.ds(i * rows, rows), :].astype(jnp.float32)
    s_ref[...] += x.sum(axis=0).astype(s_ref.dtype)
    q_ref[...] = q_ref[...] + (x * x).sum(axis=0).astype(q_ref.dtype)
  jax.lax.fori_loop(0, x_ref.shape[0] // rows, body, None)


def column_stats(x, out_dtype, block_cols=32, rows=8):
  n, d = x.shape
  out = jax.ShapeDtypeStruct((d,), out_dtype)
  return pl.pallas_call(functools.partial(stats_kernel, rows=rows), grid=(d // block_cols,),
                        in_specs=[pl.BlockSpec((n, block_cols), lambda j: (0, j))],
                        out_specs=[pl.BlockSpec((block_cols,), lambda j: (j,))] * 2,
                        out_shape=[out, out])(x)
'''


def _recorded(module, x, out_dtype):
  recipes.clear()
  with recipes.capture():
    want = module.column_stats(x, out_dtype)
  return recipes.recipes()[-1], want


@pytest.mark.parametrize("out_dtype", [jnp.float32, jnp.bfloat16])
def test_outputs_accumulated_in_place_split_and_the_diff_gives_the_same_outputs(tmp_path, out_dtype):
  path = tmp_path / "column_stats_in_place.py"
  path.write_text(MODULE)
  module = patching.load(path, "column_stats_in_place")
  x = jax.random.normal(jax.random.key(11), (37 * 8, 96), jnp.float32)
  recipe, want = _recorded(module, x, out_dtype)
  k, p = variant.pattern_of(recipe)
  assert p.in_place and p.trip == 37 and k.grid == (3,)
  assert [(s.output, s.convert, s.partial_dtype) for s in p.stores] == [
      (0, None, jnp.dtype(out_dtype).name), (1, None, jnp.dtype(out_dtype).name)]
  for s in (3, 5):
    assert variant.compare(recipe, variant.build(recipe, k, p, s)) is None, s
  diff = source.unified_diff(recipe, p, 5, len(k.grid))
  got = patching.patched(path, diff).column_stats(x, out_dtype)
  assert same_outputs(leaves(got), leaves(want)) is None
  reference = [x.sum(0).astype(out_dtype), (x * x).sum(0).astype(out_dtype)]
  assert same_outputs(leaves(got), leaves(reference)) is None


X = jax.random.normal(jax.random.key(12), (64, 16), jnp.float32)


def _refused(kernel) -> str:
  recipes.clear()
  with recipes.capture():
    pl.pallas_call(kernel, jax.ShapeDtypeStruct((16,), jnp.float32), grid=(1,))(X)
  with pytest.raises(NotSplittable) as e:
    variant.pattern_of(recipes.recipes()[-1])
  return str(e.value)


def scaled_kernel(x_ref, o_ref):
  o_ref[...] = jnp.zeros_like(o_ref)

  def body(i, _):            # the running sum halved each step: not a sum of the rows
    o_ref[...] = o_ref[...] * 0.5 + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  jax.lax.fori_loop(0, 8, body, None)


def ones_kernel(x_ref, o_ref):
  o_ref[...] = jnp.ones_like(o_ref)

  def body(i, _):
    o_ref[...] += x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  jax.lax.fori_loop(0, 8, body, None)


def after_kernel(x_ref, o_ref):
  o_ref[...] = jnp.zeros_like(o_ref)

  def body(i, _):
    o_ref[...] += x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  jax.lax.fori_loop(0, 8, body, None)
  o_ref[...] = jnp.sqrt(o_ref[...])


def overwrite_kernel(x_ref, o_ref):
  o_ref[...] = jnp.zeros_like(o_ref)

  def body(i, _):            # the last block's sum, not the total
    o_ref[...] = x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  jax.lax.fori_loop(0, 8, body, None)


def test_an_output_read_for_more_than_its_sum_is_refused():
  assert "read for something other than its sum" in _refused(scaled_kernel)


def test_an_output_that_does_not_start_at_zero_is_refused():
  assert "does not start at zero" in _refused(ones_kernel)


def test_an_output_touched_after_the_loop_is_refused():
  assert "used outside the loop other than by one store before it" in _refused(after_kernel)


def test_an_output_overwritten_in_the_loop_is_refused():
  assert "used in the loop by swap" in _refused(overwrite_kernel)
