"""The split's twin with its loop's row sums deferred (advice/split/defer.py): JAX's norms'
dw/db kernels and a hand-written column sum keep each sum carry as a tile of its rows, add
tiles in the loop and sum the rows once after it. The variant equals the original under the
interpreter, its generated loop holds no reduction, its diff applies to the user's file and
gives the original's outputs; what does not fit (another axis, a tile too large for a
program's registers) is not deferred, and a wrong deferral is caught by the comparison."""
from __future__ import annotations

import dataclasses
import inspect
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import recipes
from pallas_prof.advice.schema import Action
from pallas_prof.advice.split import defer, defer_source, source, trial, variant
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs
from pallas_prof import triton as plgpu
from testkit import column_sums, patching
from testkit.jax_ops import gpu_op

from .test_split_reduction import _column_recipe, _norm_recipe

pallas_prof.install()


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


def _loop_lines(src: str) -> list[str]:
  """The generated kernel's lines inside its (one) for loop."""
  lines = src.splitlines()
  start = next(i for i, x in enumerate(lines) if x.lstrip().startswith("for "))
  pad = len(lines[start]) - len(lines[start].lstrip())
  body = []
  for x in lines[start + 1:]:
    if x.strip() and len(x) - len(x.lstrip()) <= pad:
      break
    body.append(x)
  return body


def _lowered_source(fn, recipe) -> str:
  kernel_registry.clear()
  jax.jit(fn).lower(*[jax.ShapeDtypeStruct(s, d) for s, d in recipe.arg_shapes])
  (rec,) = [r for r in kernel_registry.kernels() if r.name == recipe.name]
  return rec.generated.source


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_the_norms_dw_db_sums_are_deferred_with_equal_outputs(op, dtype):
  recipe = _norm_recipe(op, dtype)
  k, p = variant.pattern_of(recipe)
  found = defer.deferrals(k.jaxpr, p)
  # dw and db: 16 rows of 16 columns each
  assert found == (defer.Deferral(0, 16, (16, 16)), defer.Deferral(1, 16, (16, 16)))
  for s in (3, 4):
    fn = variant.build(recipe, k, p, s, deferred=True)
    assert fn.deferred
    assert variant.compare(recipe, fn) is None
  args = variant.inputs(recipe)
  want = leaves(jax.jit(variant.original(recipe))(*args))
  got = leaves(jax.jit(variant.build(recipe, k, p, 3, deferred=True))(*args))
  if dtype == jnp.float32:            # the rows added last: a reassociation's rounding only
    for g, w in zip(got, want, strict=True):
      np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * np.abs(w).max())
  # the point of it: the split's loop sums its tile every iteration, the deferred one does not
  split_loop = _loop_lines(_lowered_source(variant.build(recipe, k, p, 3), recipe))
  deferred_src = _lowered_source(variant.build(recipe, k, p, 3, deferred=True), recipe)
  assert sum("tl.sum(" in x for x in split_loop) == 2
  assert not any("tl.sum(" in x for x in _loop_lines(deferred_src))
  assert deferred_src.count("tl.sum(") == 2       # once each, after the loop


def test_a_wrong_deferral_is_caught_by_the_comparison(monkeypatch):
  """The check can fail: a deferral that keeps one row of each tile differs."""
  recipe = _norm_recipe("rms_norm", jnp.float32)
  k, p = variant.pattern_of(recipe)
  monkeypatch.setattr(defer, "rows_summed", lambda sums, found: [
      x[0] if any(d.carry == i for d in found) else x for i, x in enumerate(sums)])
  differs = variant.compare(recipe, variant.build(recipe, k, p, 3, deferred=True))
  assert differs and "differ" in differs


def _by_row_position_kernel(x_ref, o_ref, *, block_rows=8):
  """Sums each iteration's rows over the columns (axis 1) into a carry of block_rows: a
  loop of sums, but not of row sums, so not deferred."""
  rows, cols = x_ref.shape

  def body(i, acc):
    row = i * block_rows + jnp.arange(block_rows)
    col = jnp.arange(cols)
    ok = (row < rows)[:, None] & (col < cols)[None, :]
    x = plgpu.load(x_ref.at[row[:, None], col[None, :]], mask=ok, other=0.0)
    return acc + x.astype(jnp.float32).sum(axis=1)

  acc = jax.lax.fori_loop(0, pl.cdiv(rows, block_rows), body, jnp.zeros(block_rows, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


def test_what_is_not_a_sum_over_rows_is_not_deferred():
  """A carry summed over the tile's other axis, or one whose tiles would not fit a program's
  registers (128 x 128 float32, two of them), is left as written."""
  recipe, _, _ = _column_recipe(jnp.float32)
  k, p = variant.pattern_of(recipe)
  assert defer.deferrals(k.jaxpr, p)           # the column sums, as written: deferred
  big, _, _ = _column_recipe(jnp.float32, rows=2048, cols=256)
  w = variant.Widening("block_cols", 16, 128, 0, 256)
  step = variant.Widening("block_rows", 8, 128, None, 0)
  shaped = variant.widened(variant.widened(big, w), step)
  kb, pb = variant.pattern_of(shaped)
  assert defer.deferrals(kb.jaxpr, pb) == ()   # 2 x 128 x 128 float32 elements: too many
  fn = variant.build(shaped, kb, pb, 2, deferred=True)
  assert not fn.deferred                       # the split as written, said so
  recipes.clear()
  with recipes.capture():
    jax.jit(pl.pallas_call(_by_row_position_kernel, jax.ShapeDtypeStruct((8,), jnp.float32),
                           grid=(1,), name="by_row_position")).lower(
        jax.ShapeDtypeStruct((203, 40), jnp.float32))
  other = recipes.recipes()[-1]
  ko, po = variant.pattern_of(other)            # a split reduction, as written
  assert po.trip == 26
  assert defer.deferrals(ko.jaxpr, po) == ()


def test_the_column_sums_deferred_diff_applies_and_gives_the_same_outputs(tmp_path):
  recipe, x, want = _column_recipe(jnp.bfloat16)
  k, p = variant.pattern_of(recipe)
  diff = defer_source.unified_diff(recipe, p, 3, len(k.grid), None, defer.deferrals(k.jaxpr, p))
  assert "+    return s + x, q + (x * x)" in diff
  assert "jnp.zeros((block_rows, block_cols), jnp.float32)" in diff   # the keyword, by name
  assert "+  s, q = s.sum(axis=0), q.sum(axis=0)" in diff
  module = patching.patched(tmp_path / "column_sums_deferred.py", diff, column_sums.__file__)
  assert same_outputs(leaves(module.column_sums(x)), leaves(want)) is None
  other = jax.random.normal(jax.random.key(4), (301, 57), jnp.bfloat16)   # another shape
  assert same_outputs(leaves(module.column_sums(other)),
                      leaves(column_sums.column_sums(other))) is None


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_jax_norms_deferred_diff_applies_to_a_copy_and_gives_its_gradients(tmp_path, op):
  """JAX's rms_norm.py (layer_norm.py) copied into the user's code (as the suite's advised
  column does): the diff for the split over 3 programs with block_n 16 -> 64 and the row
  sums deferred rewrites its dw/db kernel (`(dout * a_hat).sum(axis=0)` added unreduced,
  the init `jnp.zeros((block_m, block_n))`), and the patched module's gradients equal the
  copy's."""
  given = tmp_path / f"{op}_copy.py"
  shutil.copy(inspect.getsourcefile(gpu_op(op)), given)
  module = patching.load(given, f"{op}_copy")
  x = jax.random.normal(jax.random.key(0), (3, 200, 72), jnp.float32)
  w = jax.random.normal(jax.random.key(1), (72,), jnp.float32)
  b = jax.random.normal(jax.random.key(2), (72,), jnp.float32)
  grad = lambda m: jax.grad(lambda w, b: getattr(m, op)(x, w, b).sum(), argnums=(0, 1))  # noqa: E731
  recipes.clear()
  with recipes.capture():
    want = leaves(grad(module)(w, b))
  (recipe,) = [r for r in recipes.recipes() if r.name == "ln_backward_dw_db"]
  (wide,) = [x for x in variant.widenings(recipe) if x.new == 64]
  shaped = variant.widened(recipe, wide)
  k, p = variant.pattern_of(shaped)
  diff = defer_source.unified_diff(recipe, p, 3, len(k.grid), wide, defer.deferrals(k.jaxpr, p))
  assert "(dout * a_hat)" in diff and ".sum(axis=0), db_acc" not in diff.split("+    return")[-1]
  assert re.search(r"jnp\.zeros\(\(block_m, block_n\)\)", diff)
  assert "+  dw_acc, db_acc = dw_acc.sum(axis=0), db_acc.sum(axis=0)" in diff
  patched = patching.patched(tmp_path / f"{op}_deferred.py", diff, given)
  got = leaves(grad(patched)(w, b))
  assert same_outputs(got, want) is None


def test_on_a_gpu_the_twin_is_timed_beside_the_split_and_its_diff_kept_when_faster(monkeypatch):
  """trial.tried on a GPU hands fastest() the split and its deferred twin; where the twin is
  kept, the action's diff is the deferred one and its edit says so."""
  recipe, _, _ = _column_recipe(jnp.bfloat16)
  seen = []

  def fastest(a, recipe_, variants, budget_s, what):
    seen.append([(getattr(fn, "deferred", None), change) for fn, change, _ in variants])
    return dataclasses.replace(a, change={**a.change, **variants[1][1]}, status="measured")
  monkeypatch.setattr(trial, "fastest", fastest)
  a = Action("e", "split", "long_reduction", {"split": 3, "axis": 1})
  out = trial.tried(a, recipe, gpu=True, budget_s=5)
  # then each with its loop's loads copied ahead (tests/advice/test_split_staged.py)
  assert seen[0][:2] == [(False, {}), (True, {"deferred": True})]
  assert out.change["deferred"] is True
  assert "+    return s + x, q + (x * x)" in out.diff and trial.DEFERRED in out.edit
  k, p = variant.pattern_of(recipe)
  assert out.diff == defer_source.unified_diff(recipe, p, 3, 1, None, defer.deferrals(k.jaxpr, p))
  assert "_split_lo" in out.diff and source.HELPER in out.diff


def test_the_split_actions_say_a_gpu_also_times_the_deferred_twin():
  """On a CPU nothing is timed: the split's edit says that a GPU run also times its twin,
  where its sums can be deferred, and says nothing where they cannot."""
  from pallas_prof.advice.split import actions
  recipe, _, _ = _column_recipe(jnp.float32)
  k, p = variant.pattern_of(recipe)
  assert "row sums deferred to after the loop" in actions._deferral_words(k, p)
  big, _, _ = _column_recipe(jnp.float32, rows=2048, cols=256)
  shaped = variant.widened(variant.widened(big, variant.Widening("block_cols", 16, 128, 0, 256)),
                           variant.Widening("block_rows", 8, 128, None, 0))
  kb, pb = variant.pattern_of(shaped)
  assert actions._deferral_words(kb, pb) == ""


def test_the_row_sums_are_told_from_their_arrays_whatever_numpy_is_called():
  """x.sum(axis=0), x.sum(0) and a module's sum(x, axis=0) under any name are row sums of
  x; sums over axis 1 are not (a module named otherwise than jnp once passed for a method's
  receiver, and the diff would have put the module where the array was)."""
  import ast
  fn = ast.parse("def body(i, acc):\n  a = x.sum(axis=0); b = x.sum(0); c = J.sum(y, axis=0)\n"
                 "  d = jnp.sum(z, 0); e = x.sum(axis=1); f = J.sum(w, 1)\n"
                 "  g = (p * q).sum(axis=0)\n").body[0]
  assert [ast.unparse(v) for _, v in defer_source._row_sums(fn)] == ["x", "x", "y", "z", "p * q"]
