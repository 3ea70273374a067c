"""Issue 49, item 1: the split reduction advise builds itself (pallas_prof/advice/split/).

JAX's own layer_norm and rms_norm backward dw/db kernels and a hand-written kernel of the
same pattern get a variant whose outputs equal the original's under the interpreter, at
shapes that are not powers of two, in float32 and bfloat16; kernels that do not fit are
refused with the reason; the diff applies with `patch` to a copy of the hand-written
kernel's file, which then runs and gives the same outputs."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import recipes, variants
from pallas_prof.advice.split import source, trial, variant
from pallas_prof.advice.split.pattern import NotSplittable
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import column_sums, patching
from testkit.jax_ops import gpu_op

pallas_prof.install()


@pytest.fixture(autouse=True)
def _installed():
  """Installed for each test, not only at import: a module collected after this one into the
  same pytest-xdist worker may uninstall pallas-prof at its import (conftest's
  _install_state_kept then restores what each test found)."""
  pallas_prof.install()
  yield


ROWS, COLS = (3, 200), 72          # 600 rows (38 loop iterations of 16), 72 columns: 5 programs


def _norm_recipe(op, dtype):
  recipes.clear()
  x = jax.random.normal(jax.random.key(0), (*ROWS, COLS), dtype)
  w = jax.random.normal(jax.random.key(1), (COLS,), dtype)
  b = jax.random.normal(jax.random.key(2), (COLS,), dtype)
  fn = getattr(gpu_op(op), op)
  with recipes.capture():
    jax.grad(lambda w, b: fn(x, w, b).astype(jnp.float32).sum(), argnums=(0, 1))(w, b)
  (recipe,) = [r for r in recipes.recipes() if r.name == "ln_backward_dw_db"]
  return recipe


def _grid_of(fn, recipe) -> tuple:
  structs = [jax.ShapeDtypeStruct(s, d) for s, d in recipe.arg_shapes]
  eqn = variant._find_call(jax.make_jaxpr(fn)(*structs).jaxpr)
  return tuple(eqn.params["grid_mapping"].grid)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_the_norms_dw_db_kernels_split_with_equal_outputs(op, dtype):
  recipe = _norm_recipe(op, dtype)
  k, p = variant.pattern_of(recipe)
  assert (p.form, p.lo, p.trip) == ("scan", 0, 38) and k.grid == (5,)
  # the sums stay float32 in the partials; the outputs keep the weights' dtype
  assert [(s.partial_dtype, s.dtype) for s in p.stores] == \
      [("float32", jnp.dtype(dtype).name)] * 2
  assert (p.file or "").endswith(f"{op}.py")
  sizes = variant.splits(int(np.prod(k.grid)), p.trip, 132)
  assert sizes == [4]                   # 38 iterations: at most 4 chunks of 8 or more
  # the suite's shapes on the H200: rms_norm 8x2048x3136's 196 programs of 1,024
  # iterations, layer_norm 1x8192x8192's 512 of 512; a grid of 4 programs an SM, none
  assert variant.splits(196, 1024, 132) == [3, 12]        # 1,024 in chunks of 342 and 86
  assert variant.splits(512, 512, 132) == [2, 8]
  assert variant.splits(528, 512, 132) == []
  for s in (3, 4):                      # 38 = 13 + 13 + 12, and 10 + 10 + 10 + 8
    fn = variant.build(recipe, k, p, s)
    assert _grid_of(fn, recipe) == (5, s)
    assert variant.compare(recipe, fn) is None
  args = variant.inputs(recipe)
  want = leaves(jax.jit(variant.original(recipe))(*args))
  got = leaves(jax.jit(variant.build(recipe, k, p, 3))(*args))
  assert [g.dtype for g in got] == [jnp.dtype(dtype)] * 2
  if dtype == jnp.float32:              # reassociated float32 sums: far inside the tolerance
    for g, w in zip(got, want, strict=True):
      np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * np.abs(w).max())
  # wider column blocks beside the split: block_n (the grid's cdiv(72, 16) = 5) is the
  # output block's parameter; block_m, also 16 and also giving cdiv(72, 16), is the loop's
  # step and leaves the sums' size as it is, so it is not taken for it
  ws = variant.widenings(recipe)
  assert [(w.name, w.new, w.axis, w.extent) for w in ws] == \
      [("block_n", 64, 0, 72), ("block_n", 128, 0, 72)]
  for w in ws:
    shaped = variant.widened(recipe, w)
    kw, pw = variant.pattern_of(shaped)
    assert kw.grid == (-(-72 // w.new),) and pw.trip == 38
    for s in (2, 3):
      fn = variant.build(shaped, kw, pw, s)
      assert _grid_of(fn, recipe) == (kw.grid[0], s)
      assert variant.compare(recipe, fn) is None


def test_a_wrong_split_is_caught_by_the_comparison():
  """The check can fail: a variant that drops the loop's last iteration differs."""
  recipe = _norm_recipe("rms_norm", jnp.float32)
  k, p = variant.pattern_of(recipe)
  short = dataclasses.replace(p, trip=p.trip - 1)
  differs = variant.compare(recipe, variant.build(recipe, k, short, 4))
  assert differs and "differ" in differs


def _column_recipe(dtype, rows=203, cols=40):
  recipes.clear()
  x = jax.random.normal(jax.random.key(3), (rows, cols), dtype)
  with recipes.capture():
    want = column_sums.column_sums(x)
  return recipes.recipes()[-1], x, want


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_a_hand_written_kernel_of_the_pattern_splits(dtype):
  recipe, _, _ = _column_recipe(dtype)
  k, p = variant.pattern_of(recipe)
  assert p.trip == 26 and k.grid == (3,) and p.lineno is not None
  for s in variant.splits(3, p.trip, 132):
    assert variant.compare(recipe, variant.build(recipe, k, p, s)) is None


def test_the_diff_applies_and_the_patched_file_gives_the_same_outputs(tmp_path):
  recipe, x, want = _column_recipe(jnp.bfloat16)
  k, p = variant.pattern_of(recipe)
  diff = source.unified_diff(recipe, p, 3, len(k.grid))
  assert "+  _split_lo = pl.program_id(1) * _split_chunk" in diff
  assert "jax.lax.fori_loop(_split_lo, jax.lax.min(_split_lo + _split_chunk" in diff
  assert "grid=(pl.cdiv(cols, BLOCK_COLS), 3)" in diff
  module = patching.patched(tmp_path / "column_sums_split.py", diff, column_sums.__file__)
  assert "_pallas_prof_split_sum" in open(module.__file__).read()
  got = module.column_sums(x)
  assert same_outputs(leaves(got), leaves(want)) is None
  # the patched file is the variant: its pallas_call has the grid's new axis of 3
  eqn = variant._find_call(jax.make_jaxpr(module.column_sums)(x).jaxpr)
  assert tuple(eqn.params["grid_mapping"].grid) == (3, 3)


def test_the_wider_blocks_diff_applies_and_gives_the_same_outputs(tmp_path):
  """The split with block_cols 16 -> 64: the diff rebinds the parameter at the call and
  divides the grid's axis by 4 (cdiv of cdiv: right at any shape); the patched file runs
  on grid (1, 3) and gives the original's outputs, at the recorded shape and another."""
  recipe, x, want = _column_recipe(jnp.bfloat16)
  (w,) = [w for w in variant.widenings(recipe) if w.new == 64]
  kw, pw = variant.pattern_of(variant.widened(recipe, w))
  diff = source.unified_diff(recipe, pw, 3, len(kw.grid), w)
  assert "functools.partial(kernel, block_cols=64)" in diff
  assert "grid=(pl.cdiv(pl.cdiv(cols, BLOCK_COLS), 4), 3)" in diff
  module = patching.patched(tmp_path / "column_sums_wide.py", diff, column_sums.__file__)
  assert same_outputs(leaves(module.column_sums(x)), leaves(want)) is None
  eqn = variant._find_call(jax.make_jaxpr(module.column_sums)(x).jaxpr)
  assert tuple(eqn.params["grid_mapping"].grid) == (1, 3)
  other = jax.random.normal(jax.random.key(9), (77, 150), jnp.bfloat16)   # 150 columns
  assert same_outputs(leaves(module.column_sums(other)),
                      leaves(column_sums.column_sums(other))) is None


def test_the_split_with_wider_blocks_and_a_larger_step_together_is_checked_and_applies(tmp_path):
  """1088 rows of 40 columns: the split with block_cols 16 -> 64 (one column block) AND
  block_rows 8 -> 64 (17 iterations), the two that were each offered alone. advise offers
  it and checks it under the interpreter; its diff rebinds both keywords at the call in one
  functools.partial and divides the grid's column axis; the patched file gives the
  original's outputs at the recorded shape and at one neither block divides."""
  recipe, x, want = _column_recipe(jnp.bfloat16, rows=1088)
  recs = [r for r in kernel_registry.kernels() if r.name == "column_sums"
          and tuple(r.generated.grid) == (3,) and r.in_avals[0].shape == (1088, 40)]
  (advice,) = pallas_prof.advise(recs[-1:], sample=False, progress=None)
  both = [a for a in advice.actions if a.kind == "e" and isinstance(a.change.get("widen"), list)]
  # block_cols at most 64 (40 columns' next power of two), block_rows at the largest step
  (wide,) = both
  assert [(w["name"], w["new"]) for w in wide.change["widen"]] == [("block_cols", 64),
                                                                     ("block_rows", 64)]
  assert "with block_cols=16 -> 64 and block_rows=8 -> 64" in wide.title
  assert wide.status == trial.CPU_EQUAL, wide.status
  assert "functools.partial(kernel, block_cols=64, block_rows=64)" in wide.diff
  assert f"grid=(pl.cdiv(pl.cdiv(cols, BLOCK_COLS), 4), {wide.change['split']})" in wide.diff
  module = patching.patched(tmp_path / "column_sums_both.py", wide.diff, column_sums.__file__)
  assert same_outputs(leaves(module.column_sums(x)), leaves(want)) is None
  eqn = variant._find_call(jax.make_jaxpr(module.column_sums)(x).jaxpr)
  assert tuple(eqn.params["grid_mapping"].grid) == (1, wide.change["split"])
  other = jax.random.normal(jax.random.key(9), (1001, 150), jnp.bfloat16)
  assert same_outputs(leaves(module.column_sums(other)),
                      leaves(column_sums.column_sums(other))) is None


def test_the_diff_is_refused_for_an_installed_package():
  recipe = _norm_recipe("rms_norm", jnp.bfloat16)
  k, p = variant.pattern_of(recipe)
  with pytest.raises(source.SourceRefused, match="installed package"):
    source.unified_diff(recipe, p, 3, 1)
  change = source.jaxpr_change(recipe, k, p, 3)
  assert "grid (5,) -> (5, 3)" in change and "program_id(1) * 13" in change


# --- kernels that do not fit -------------------------------------------------------------

def _refused(kernel, *args, out=None):
  recipes.clear()
  out = out or jax.ShapeDtypeStruct((16,), jnp.float32)
  with recipes.capture():
    pl.pallas_call(kernel, out, grid=(2,))(*args)
  with pytest.raises(NotSplittable) as e:
    variant.pattern_of(recipes.recipes()[-1])
  return str(e.value)


X = jnp.arange(64 * 16, dtype=jnp.float32).reshape(64, 16) / 100


def max_kernel(x_ref, o_ref):
  def body(i, acc):
    return jnp.maximum(acc, x_ref[pl.ds(i * 8, 8), :].max(axis=0))
  o_ref[...] = jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32))


def reread_kernel(x_ref, o_ref):
  def body(i, acc):      # the carry also scales what is added: not a plain sum
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0) * acc.mean()
  o_ref[...] = jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32))


def data_trip_kernel(n_ref, x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, n_ref[0], body, jnp.zeros(16, jnp.float32))


def after_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  o_ref[...] = jnp.sqrt(jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32)))


def nonzero_start_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, 8, body, jnp.ones(16, jnp.float32))


def test_a_max_carry_is_refused():
  assert "combined by `max`, not summed" in _refused(max_kernel, X)


def test_a_carry_read_inside_the_loop_is_refused():
  assert "read inside the loop for something other than its sum" in _refused(reread_kernel, X)


def test_a_trip_count_read_from_data_is_refused():
  why = _refused(data_trip_kernel, jnp.array([8], jnp.int32), X)
  assert "read from a ref (it depends on data)" in why


def test_a_sum_transformed_before_its_store_is_refused():
  assert "goes to `sqrt` after the loop" in _refused(after_kernel, X)


def test_a_sum_that_does_not_start_at_zero_is_refused():
  assert "does not start at zero" in _refused(nonzero_start_kernel, X)


def test_a_loop_that_writes_a_ref_is_refused():
  _norm_recipe("rms_norm", jnp.float32)
  dx = next(r for r in recipes.recipes() if r.name == "ln_backward_dx")
  with pytest.raises(NotSplittable, match="2 loops"):
    variant.pattern_of(dx)

  def writes_kernel(x_ref, o_ref):
    def body(i, acc):
      o_ref[...] = x_ref[i, :]              # a write once per iteration, not per partial
      return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
    o_ref[...] = jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32))
  assert "it writes a ref" in _refused(writes_kernel, X)


# --- sums that reach their outputs through linear steps ----------------------------------
# A mean, a sum over the rows of a tile accumulated in the loop, a scale by a loaded weight,
# a masked select against zero, a difference of two sums: each program applies the step to
# its partial and the second pass adds them, which is the step applied to the whole sum.

W = jnp.linspace(-2.0, 3.0, 16, dtype=jnp.float32)


def mean_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  o_ref[...] = (jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32)) / 64.0).astype(
      o_ref.dtype)


def tile_rows_kernel(x_ref, o_ref):
  def body(i, acc):          # a (8, 16) tile accumulated, its rows summed after the loop
    x = x_ref[pl.ds(i * 8, 8), :]
    return acc + x * x
  acc = jax.lax.fori_loop(0, 8, body, jnp.zeros((8, 16), jnp.float32))
  o_ref[...] = jnp.sum(acc, axis=0).astype(o_ref.dtype)


def weighted_kernel(x_ref, w_ref, o_ref, p_ref):
  def body(i, carry):
    s, q = carry
    x = x_ref[pl.ds(i * 8, 8), :]
    return s + x.sum(axis=0), q + (x * x).sum(axis=0)
  s, q = jax.lax.fori_loop(0, 8, body, (jnp.zeros(16, jnp.float32), jnp.zeros(16, jnp.float32)))
  w = w_ref[...]
  o_ref[...] = (s * w - q).astype(o_ref.dtype)      # a scale by a loaded weight, minus a sum
  p_ref[...] = jnp.where(w > 0, q, 0.0).astype(p_ref.dtype)


LINEAR = {
    "mean": (mean_kernel, (X,), jax.ShapeDtypeStruct((16,), jnp.float32)),
    "mean_bf16": (mean_kernel, (X.astype(jnp.bfloat16),), jax.ShapeDtypeStruct((16,), jnp.bfloat16)),
    "tile_rows": (tile_rows_kernel, (X,), jax.ShapeDtypeStruct((16,), jnp.float32)),
    "weighted": (weighted_kernel, (X, W), [jax.ShapeDtypeStruct((16,), jnp.float32),
                                          jax.ShapeDtypeStruct((16,), jnp.bfloat16)]),
}


@pytest.mark.parametrize("name", list(LINEAR))
def test_a_sum_through_linear_steps_splits_with_equal_outputs(name):
  kernel, args, out = LINEAR[name]
  recipes.clear()
  with recipes.capture():
    pl.pallas_call(kernel, out, grid=(2,))(*args)
  recipe = recipes.recipes()[-1]
  k, p = variant.pattern_of(recipe)
  assert p.trip == 8
  for s in (2, 3, 4):
    v = variant.build(recipe, k, p, s)
    assert variant.compare(recipe, v) is None, (name, s)
    assert variant.compare(recipe, v, seed=7) is None, (name, s)
  # the partials keep float32 where the kernel cast its result down before storing
  assert [st.partial_dtype for st in p.stores] == ["float32"] * len(p.stores)


def test_a_wrong_linear_step_would_be_caught():
  """The comparison the linear steps rely on is not vacuous: a variant whose second pass
  drops one partial differs."""
  kernel, args, out = LINEAR["mean"]
  recipes.clear()
  with recipes.capture():
    pl.pallas_call(kernel, out, grid=(2,))(*args)
  recipe = recipes.recipes()[-1]
  k, p = variant.pattern_of(recipe)
  v = variant.build(recipe, k, p, 4)
  broken = lambda *a: v.call(*a)[0][1:].sum(0)        # noqa: E731
  assert variant.compare(recipe, broken) is not None


COLMEAN = """\
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS, COLS, BR, BC = 592, 40, 16, 8


def colmean_kernel(x_ref, w_ref, o_ref, *, block_rows):
  rows = x_ref.shape[0]
  def body(i, acc):
    return acc + x_ref[pl.ds(i * block_rows, block_rows), :].astype(jnp.float32)
  acc = jax.lax.fori_loop(0, rows // block_rows, body,
                          jnp.zeros((block_rows, x_ref.shape[1]), jnp.float32))
  o_ref[...] = (jnp.sum(acc, axis=0) * w_ref[...].astype(jnp.float32) / rows).astype(o_ref.dtype)


def colmean(x, w):
  kernel = functools.partial(colmean_kernel, block_rows=BR)
  return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((COLS,), x.dtype),
                        grid=(COLS // BC,),
                        in_specs=[pl.BlockSpec((ROWS, BC), lambda j: (0, j)),
                                  pl.BlockSpec((BC,), lambda j: (j,))],
                        out_specs=pl.BlockSpec((BC,), lambda j: (j,)))(x, w)
"""


def test_a_mean_kernels_diff_applies_and_gives_the_same_outputs(tmp_path):
  """A held-out shape of the pattern: a (16, 8) tile accumulated over 37 iterations, its rows
  summed after the loop, scaled by a loaded weight and divided by the row count, cast to
  bfloat16: the diff advise writes applies, and the patched file's outputs equal the
  original's."""
  path = tmp_path / "colmean_split_test.py"
  path.write_text(COLMEAN)
  module = patching.load(path, "colmean_split_test")
  x = jax.random.normal(jax.random.key(4), (592, 40), jnp.bfloat16)
  w = jax.random.normal(jax.random.key(5), (40,), jnp.bfloat16)
  recipes.clear()
  with recipes.capture():
    want = module.colmean(x, w)
  recipe = recipes.recipes()[-1]
  k, p = variant.pattern_of(recipe)
  assert p.trip == 37 and k.grid == (5,)
  assert variant.compare(recipe, variant.build(recipe, k, p, 5)) is None
  diff = source.unified_diff(recipe, p, 5, len(k.grid))
  got = patching.patched(path, diff).colmean(x, w)
  assert same_outputs(leaves(got), leaves(want)) is None
  reference = (x.astype(jnp.float32).mean(0) * w.astype(jnp.float32)).astype(jnp.bfloat16)
  assert same_outputs(leaves(got), leaves(reference)) is None


def offset_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32)) + 1.0


def product_kernel(x_ref, o_ref):
  def body(i, carry):
    s, q = carry
    x = x_ref[pl.ds(i * 8, 8), :]
    return s + x.sum(axis=0), q + x.max(axis=0)
  s, q = jax.lax.fori_loop(0, 8, body, (jnp.zeros(16, jnp.float32), jnp.zeros(16, jnp.float32)))
  o_ref[...] = s * q


def int_mean_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  o_ref[...] = jax.lax.div(jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.int32)), 3)


def rounded_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8), :].sum(axis=0)
  s = jax.lax.fori_loop(0, 8, body, jnp.zeros(16, jnp.float32))
  o_ref[...] = s.astype(jnp.int32).astype(jnp.float32)


def test_a_sum_plus_a_constant_is_refused():
  assert "adds a value that does not come from a sum" in _refused(offset_kernel, X)


def test_two_sums_multiplied_are_refused():
  assert "multiplies two sums together" in _refused(product_kernel, X)


def test_an_integer_mean_is_refused():
  xi = jnp.arange(64 * 16, dtype=jnp.int32).reshape(64, 16)
  why = _refused(int_mean_kernel, xi, out=jax.ShapeDtypeStruct((16,), jnp.int32))
  assert "integer `div` rounds" in why


def test_a_sum_rounded_to_an_integer_before_the_end_is_refused():
  assert "cast to an integer is rounded" in _refused(rounded_kernel, X)


# --- through advise ----------------------------------------------------------------------

def test_advise_offers_the_split_checked_under_the_interpreter():
  _column_recipe(jnp.bfloat16)
  # this kernel as the recipe traced it: the registry also holds the patched copy's column_sums
  # (grid (3, 3), already split) and the float32 one, whichever test of the file ran before
  recs = [r for r in kernel_registry.kernels() if r.name == "column_sums"
          and tuple(r.generated.grid) == (3,) and str(r.in_avals[0].dtype) == "bfloat16"
          and tuple(r.in_avals[0].shape) == (203, 40)]
  assert len(recs) == 1, recs
  (advice,) = pallas_prof.advise(recs, sample=False, progress=None)
  (d,) = [d for d in advice.diagnoses if d.rule == "long_reduction"]
  assert "each sum all 26 iterations" in d.text
  split = [a for a in advice.actions if a.kind == "e"]
  (a,) = [a for a in split if "widen" not in a.change]
  assert a.change == {"split": 3, "axis": 1}
  # and with wider column blocks (block_cols 16 -> 64: the grid's one program, split 3 ways),
  # checked under the interpreter against the original
  (wide,) = [a for a in split if "widen" in a.change]
  assert wide.change["widen"] == {"name": "block_cols", "value": 16, "new": 64, "axis": 0,
                                  "extent": 40}
  assert wide.change["split"] == 3 and wide.status == trial.CPU_EQUAL, wide.status
  assert "rebinds block_cols at the call" in wide.edit and wide.diff
  assert a.status == trial.CPU_EQUAL and a.trial is None
  assert a.compiled.endswith("B shared"), a.compiled          # compiled for sm_90 too
  assert a.diff and a.diff.startswith("--- a/") and "apply the diff" in a.apply


def test_a_call_over_large_arrays_is_not_run_under_the_interpreter(monkeypatch):
  """Few loop iterations do not make a quick interpreter run where the arrays are large
  (the interpreter's loads slow with them): the variant is built and lowered, not run."""
  from pallas_prof.advice.schema import Action
  recipe, _, _ = _column_recipe(jnp.float32)             # 203 x 40: 8,120 elements
  a = Action("e", "split 3", "long_reduction", {"split": 3, "axis": 1})
  monkeypatch.setattr(variants, "INTERPRETED_MOST_ELEMENTS", 8_000)
  got = trial.tried(a, recipe, gpu=False, budget_s=5.0)
  assert got.trial is None and got.compiled.endswith("B shared"), got
  assert got.status.startswith("not measured: no GPU; built and lowered, not run: the "
                               "interpreter would run loops over arguments of 8,120 elements"), \
      got.status
  monkeypatch.setattr(variants, "INTERPRETED_MOST_ELEMENTS", 8_120)
  assert trial.tried(a, recipe, gpu=False, budget_s=5.0).status == trial.CPU_EQUAL


def test_advise_says_why_a_loop_kernel_is_not_split():
  _refused(max_kernel, X)
  recs = [r for r in kernel_registry.kernels() if r.name == "max_kernel"]
  (advice,) = pallas_prof.advise(recs[-1:], sample=False, progress=None)
  assert not [a for a in advice.actions if a.kind == "e"]
  assert any("no split reduction" in n and "max" in n for n in advice.notes), advice.notes


def test_the_split_diagnosis_has_its_place_before_the_grid_it_explains():
  from pallas_prof.advice.engine import ORDER
  assert ORDER.index("long_reduction") == ORDER.index("few_programs") - 1


def test_the_split_with_a_larger_loop_step_is_checked_and_its_diff_applies(tmp_path):
  """1088 rows in steps of 8 (136 iterations of 256 bytes): the split is offered again with
  the loop's step at the largest value advise tries (block_rows 8 -> 64: 17 iterations, two
  programs per column block), the grid's column axis kept. Checked under the interpreter
  against the original; its diff rebinds block_rows alone, and the patched file gives the
  original's outputs at the recorded shape and at one the step does not divide."""
  recipe, x, want = _column_recipe(jnp.bfloat16, rows=1088)
  recs = [r for r in kernel_registry.kernels() if r.name == "column_sums"
          and tuple(r.generated.grid) == (3,) and r.in_avals[0].shape == (1088, 40)]
  (advice,) = pallas_prof.advise(recs[-1:], sample=False, progress=None)
  (stepped,) = [a for a in advice.actions if a.kind == "e" and isinstance(
      a.change.get("widen"), dict) and a.change["widen"]["axis"] is None]
  assert stepped.change == {"split": 2, "axis": 1, "widen": {
      "name": "block_rows", "value": 8, "new": 64, "axis": None, "extent": 0}}
  assert "with block_rows=8 -> 64: grid 3x2 (3x2), 9 iterations each" in stepped.title
  assert stepped.status == trial.CPU_EQUAL, stepped.status
  assert "functools.partial(kernel, block_rows=64)" in stepped.diff
  assert "BLOCK_COLS), 2)" in stepped.diff          # the column axis as it was, S appended
  module = patching.patched(tmp_path / "column_sums_step.py", stepped.diff,
                            column_sums.__file__)
  assert same_outputs(leaves(module.column_sums(x)), leaves(want)) is None
  other = jax.random.normal(jax.random.key(9), (1001, 150), jnp.bfloat16)
  assert same_outputs(leaves(module.column_sums(other)),
                      leaves(column_sums.column_sums(other))) is None
