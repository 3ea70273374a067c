"""The split's diff for loops written as `@pl.loop` (with and without its step), and its
out_shape named once (advice/split/source._named_shapes):
`_split_out_shape = ...` on a line of its own before the statement that makes the call,
where moving it cannot change what it means, and the literal left in place where it could
(the call inside a comprehension, whose variable the literal reads). Each diff applies
with `patch`, and the patched file gives the original's outputs."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from pallas_prof.advice import recipes
from pallas_prof.advice.split import source, variant
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import patching


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


# two outputs of two dtypes, out_shape a literal tuple across the call's lines
COLSTATS = '''
import functools
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl


def colstats_kernel(x_ref, mean_ref, msq_ref, *, block_r, block_c, rows):
  j = pl.program_id(0)
  def body(i, carry):
    s, sq = carry
    x = x_ref[pl.ds(i * block_r, block_r), pl.ds(j * block_c, block_c)].astype(jnp.float32)
    return s + x.sum(axis=0), sq + (x * x).sum(axis=0)
  z = jnp.zeros((block_c,), jnp.float32)
  s, sq = jax.lax.fori_loop(0, rows // block_r, body, (z, z))
  mean_ref[pl.ds(j * block_c, block_c)] = (s / rows).astype(mean_ref.dtype)
  msq_ref[pl.ds(j * block_c, block_c)] = sq / rows


def colstats(x, block_r=8, block_c=24):
  rows, cols = x.shape
  kern = functools.partial(colstats_kernel, block_r=block_r, block_c=block_c, rows=rows)
  return pl.pallas_call(kern, grid=(pl.cdiv(cols, block_c),),
      out_shape=(jax.ShapeDtypeStruct((cols,), jnp.bfloat16),
                 jax.ShapeDtypeStruct((cols,), jnp.float32)))(x)


def colsums(xs, block_c=24):
  kern = functools.partial(colstats_kernel, block_r=8, block_c=block_c, rows=xs[0].shape[0])
  return [pl.pallas_call(kern, grid=(pl.cdiv(x.shape[1], block_c),),
                         out_shape=(jax.ShapeDtypeStruct((x.shape[1],), jnp.bfloat16),
                                    jax.ShapeDtypeStruct((x.shape[1],), jnp.float32)))(x)
          for x in xs]
'''


def _split_diff(tmp_path, call):
  path = tmp_path / f"colstats_{call}.py"
  path.write_text(COLSTATS)
  module = patching.load(path, f"colstats_{call}")
  x = jax.random.normal(jax.random.key(3), (456, 72), jnp.float32).astype(jnp.bfloat16)
  recipes.clear()
  with recipes.capture():
    want = module.colstats(x) if call == "colstats" else module.colsums([x])[0]
  recipe = recipes.recipes()[-1]
  k, p = variant.pattern_of(recipe)
  assert p.trip == 57 and k.grid == (3,)
  return path, x, want, source.unified_diff(recipe, p, 6, len(k.grid))


def test_a_literal_out_shape_is_named_once_before_the_call(tmp_path):
  path, x, want, diff = _split_diff(tmp_path, "colstats")
  added = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
  (bound,) = [ln for ln in added if "_split_out_shape =" in ln]
  assert bound == "  _split_out_shape = (jax.ShapeDtypeStruct((cols,), jnp.bfloat16),"
  # the literal is written once in the patched file, the three uses name it
  module = patching.patched(path, diff)
  text = open(module.__file__).read()
  assert text.count("jax.ShapeDtypeStruct((cols,), jnp.bfloat16)") == 1
  assert text.count("for o in _split_out_shape") == 2 and "_split_out_shape)(x)" in text
  # the keywords the split adds start lines of their own, at the call's indentation
  assert "\n      out_specs=[pl.BlockSpec((pl.squeezed, *o.shape)" in text
  got = module.colstats(x)
  assert same_outputs(leaves(got), leaves(want)) is None
  eqn = variant._find_call(jax.make_jaxpr(module.colstats)(x).jaxpr)
  assert tuple(eqn.params["grid_mapping"].grid) == (3, 6)


def test_an_out_shape_that_reads_a_comprehensions_variable_stays_in_place(tmp_path):
  path, x, want, diff = _split_diff(tmp_path, "colsums")
  assert "_split_out_shape" not in diff
  module = patching.patched(path, diff)
  (got,) = module.colsums([x])
  assert same_outputs(leaves(got), leaves(want)) is None


# a @pl.loop over row blocks by index (steps of one) and over rows by a step of 8 (its index
# is the row), the outputs the accumulators; one whose carries (init_carry) are the sums; and
# a fori_loop whose bounds are keywords
PL_LOOP = '''
import functools
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl


def by_block_kernel(dy_ref, x_ref, dg_ref, db_ref, *, step):
  dg_ref[...] = jnp.zeros_like(dg_ref)
  db_ref[...] = jnp.zeros_like(db_ref)
  @pl.loop(0, dy_ref.shape[0] // step)
  def _(i):
    dy = dy_ref[pl.ds(i * step, step), :].astype(jnp.float32)
    dg_ref[...] += jnp.sum(dy * x_ref[pl.ds(i * step, step), :].astype(jnp.float32), axis=0)
    db_ref[...] += jnp.sum(dy, axis=0)


def by_row_kernel(dy_ref, x_ref, dg_ref, db_ref, *, step):
  dg_ref[...] = jnp.zeros_like(dg_ref)
  db_ref[...] = jnp.zeros_like(db_ref)
  @pl.loop(0, dy_ref.shape[0], step=step)
  def _(r):
    dy = dy_ref[pl.ds(r, step), :].astype(jnp.float32)
    dg_ref[...] += jnp.sum(dy * x_ref[pl.ds(r, step), :].astype(jnp.float32), axis=0)
    db_ref[...] += jnp.sum(dy, axis=0)


def carry_kernel(dy_ref, x_ref, dg_ref, db_ref, *, step):
  z = jnp.zeros((dy_ref.shape[1],), jnp.float32)
  @pl.loop(0, dy_ref.shape[0] // step, init_carry=(z, z))
  def sums(i, acc):
    dy = dy_ref[pl.ds(i * step, step), :].astype(jnp.float32)
    x = x_ref[pl.ds(i * step, step), :].astype(jnp.float32)
    return acc[0] + jnp.sum(dy * x, axis=0), acc[1] + jnp.sum(dy, axis=0)
  dg_ref[...] = sums[0]
  db_ref[...] = sums[1]


def keyword_kernel(dy_ref, x_ref, dg_ref, db_ref, *, step):
  def body(i, acc):
    dy = dy_ref[pl.ds(i * step, step), :].astype(jnp.float32)
    x = x_ref[pl.ds(i * step, step), :].astype(jnp.float32)
    return acc[0] + jnp.sum(dy * x, axis=0), acc[1] + jnp.sum(dy, axis=0)
  z = jnp.zeros((dy_ref.shape[1],), jnp.float32)
  dg, db = jax.lax.fori_loop(lower=0, upper=dy_ref.shape[0] // step, body_fun=body,
                             init_val=(z, z))
  dg_ref[...] = dg
  db_ref[...] = db


def dgb(kernel, dy, x, step=8, bc=40):
  r, c = dy.shape
  spec = pl.BlockSpec((r, bc), lambda j: (0, j))
  ospec = pl.BlockSpec((bc,), lambda j: (j,))
  return pl.pallas_call(functools.partial(kernel, step=step), grid=(c // bc,),
                        in_specs=[spec, spec], out_specs=[ospec, ospec],
                        out_shape=[jax.ShapeDtypeStruct((c,), jnp.float32)] * 2)(dy, x)
'''


@pytest.mark.parametrize("kernel", ["by_block_kernel", "by_row_kernel", "carry_kernel",
                                    "keyword_kernel"])
def test_a_pl_loop_splits_and_its_diff_applies(tmp_path, kernel):
  path = tmp_path / f"pl_loop_{kernel}.py"
  path.write_text(PL_LOOP)
  module = patching.load(path, f"pl_loop_{kernel}")
  dy, x = (jax.random.normal(jax.random.key(i), (1000, 120), jnp.float32).astype(jnp.bfloat16)
           for i in (5, 6))
  recipes.clear()
  with recipes.capture():
    want = module.dgb(getattr(module, kernel), dy, x)
  recipe = recipes.recipes()[-1]
  k, p = variant.pattern_of(recipe)
  assert p.trip == 125 and k.grid == (3,)
  assert variant.compare(recipe, variant.build(recipe, k, p, 6)) is None
  diff = source.unified_diff(recipe, p, 6, len(k.grid))
  # 125 iterations in chunks of 21 (the last 20): of rows by 8, 168 rows a chunk
  chunk = ("pl.cdiv(pl.cdiv(dy_ref.shape[0], step), 6) * (step)" if kernel == "by_row_kernel"
           else "pl.cdiv(dy_ref.shape[0] // step, 6)")
  assert f"+  _split_chunk = {chunk}" in diff
  bounds = "_split_lo, jax.lax.min(_split_lo + _split_chunk, dy_ref.shape[0]"
  if kernel == "keyword_kernel":       # fori_loop's bounds given as lower=, upper=
    bounds = bounds.replace("_split_lo, ", "lower=_split_lo, upper=")
    assert f"jax.lax.fori_loop({bounds}" in diff
  else:
    assert f"+  @pl.loop({bounds}" in diff
  patched = patching.patched(path, diff)
  got = patched.dgb(getattr(patched, kernel), dy, x)
  assert same_outputs(leaves(got), leaves(want)) is None
  eqn = variant._find_call(jax.make_jaxpr(
      lambda a, b: patched.dgb(getattr(patched, kernel), a, b))(dy, x).jaxpr)
  assert tuple(eqn.params["grid_mapping"].grid) == (3, 6)
  # at a row count the chunks do not divide, the patched kernel is still the original's sums
  dy2, x2 = dy[:936], x[:936]
  assert same_outputs(leaves(patched.dgb(getattr(patched, kernel), dy2, x2)),
                      leaves(module.dgb(getattr(module, kernel), dy2, x2))) is None
