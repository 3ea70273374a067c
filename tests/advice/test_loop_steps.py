"""Issue 49: a loop's step given to the kernel as a keyword (attention's block_k), tried by
advise at half and twice its value (pallas_prof/advice/loop_steps.py, kind c).

JAX's own attention forward and a hand-written column sum are told to have a loop step (and
which keyword it is: not block_q, the BlockSpecs', nor head_dim, nor the norms' block_n,
the grid's); each variant gives the original's outputs under the interpreter at shapes
that are not powers of two; a keyword whose rebinding changes the answer is caught by the
comparison the trial makes; the diff applies with `patch` and gives the same outputs; a
call given None among its operands (attention's segment_ids) is recorded and varied."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import loop_steps, recipes
from pallas_prof.advice import variants as variants_mod
from pallas_prof.advice.split import variant
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import column_sums, patching
from testkit.jax_ops import gpu_op


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


def _attention_recipe(seq=384, heads=3, head_dim=64, block=64, causal=False):
  att = gpu_op("attention")
  q, k, v = (jax.random.normal(jax.random.key(i), (1, seq, heads, head_dim), jnp.float32)
             for i in range(3))
  sizes = att.BlockSizes(block_q=block, block_k=block, block_q_dkv=block, block_kv_dkv=block,
                         block_q_dq=block, block_kv_dq=block)
  recipes.clear()
  with recipes.capture():
    jax.block_until_ready(att.mha(q, k, v, None, causal=causal, block_sizes=sizes))
  (recipe,) = [r for r in recipes.recipes() if r.name == "mha_forward"]
  return recipe


def test_attention_steps_by_block_k_and_each_neighbour_gives_its_outputs():
  recipe = _attention_recipe()
  assert recipe.absent == (3,) and len(recipe.arg_shapes) == 3    # segment_ids=None
  found = loop_steps.steps(recipe)
  assert [(s.name, s.value, s.new, s.trips) for s in found] == [
      ("block_k", 64, 32, (6, 12)), ("block_k", 64, 128, (6, 3))]
  for s in found:
    fn = loop_steps.build(recipe, {"keyword": s.name, "to": s.new})
    assert variant.compare(recipe, fn) is None, s


def test_a_causal_loop_whose_bound_grows_with_the_program_id_steps_by_block_k():
  """The causal kernel's loop bound is computed from the program id (the query block): it
  is evaluated at the first, middle and last programs, the step told from the one that runs
  the most (384 rows: the last of 6 query blocks runs 6 steps of 64), and each neighbour's
  outputs equal the original's."""
  recipe = _attention_recipe(seq=384, block=64, causal=True)
  assert recipe.kernel.keywords["block_k"] == 64 and recipe.kernel.keywords["causal"]
  found = loop_steps.steps(recipe)
  assert [(s.name, s.new, s.trips, s.by_program) for s in found] == [
      ("block_k", 32, (6, 12), True), ("block_k", 128, (6, 3), True)]
  assert "in the program that runs the most" in found[1].iterations
  for s in found:
    fn = loop_steps.build(recipe, {"keyword": s.name, "to": s.new})
    assert variant.compare(recipe, fn) is None, s


def test_a_step_that_would_read_past_the_array_is_not_offered():
  """At 320 rows, block_k 128 takes the last query block's loop to row 384: JAX's kernel
  masks only the head dimension, so those rows are read past k's end (the interpreter's
  bounds check says so; on a GPU, an illegal address). Only the half step is offered."""
  recipe = _attention_recipe(seq=320, block=64, causal=True)
  assert [(s.new, s.trips) for s in loop_steps.steps(recipe)] == [(32, (5, 10))]
  with pytest.raises(pallas_prof.BoundsError, match="outside k_ref"):
    variant.compare(recipe, loop_steps.build(recipe, {"keyword": "block_k", "to": 128}))


def test_a_bound_read_from_data_is_not_evaluated():
  """A loop whose trip count is loaded from a ref is not told a step: each program's bound
  is data, which advise does not guess."""
  recipes.clear()
  n = jnp.array([37], jnp.int32)
  x = jax.random.normal(jax.random.key(4), (64, 32), jnp.float32)
  with recipes.capture():
    jax.block_until_ready(data_bound_sums(n, x))
  recipe = recipes.recipes()[-1]
  assert loop_steps._trips(recipe) == [None]
  assert loop_steps.steps(recipe) == []


def data_bound_kernel(n_ref, x_ref, o_ref, *, step):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * step, step), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, n_ref[0] // step, body, jnp.zeros((32,), jnp.float32))


@jax.jit
def data_bound_sums(n, x):
  return pl.pallas_call(functools.partial(data_bound_kernel, step=8),
                        out_shape=jax.ShapeDtypeStruct((32,), jnp.float32))(n, x)


def test_a_hand_written_kernels_row_step_is_told_from_its_grid_block():
  recipes.clear()
  x = jax.random.normal(jax.random.key(3), (203, 40), jnp.float32)
  with recipes.capture():
    column_sums.column_sums(x)
  recipe = recipes.recipes()[-1]
  # block_cols is the grid's (the split's wider blocks), block_rows the loop's: 26 iterations
  assert [(s.name, s.new, s.trips) for s in loop_steps.steps(recipe)] == [
      ("block_rows", 16, (26, 13))]
  fn = loop_steps.build(recipe, {"keyword": "block_rows", "to": 16})
  assert variant.compare(recipe, fn) is None


def scaled_sum_kernel(x_ref, o_ref, *, step):
  """Sums the rows in steps of `step`, then multiplies by the step: rebinding it changes the
  answer, as a keyword with a meaning beyond the loop's step would."""
  def body(i, acc):
    return acc + x_ref[pl.ds(i * step, step), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // step, body,
                                 jnp.zeros(x_ref.shape[1], jnp.float32)) * step


def fixed_trip_kernel(x_ref, o_ref, *, step, width):
  """Four iterations whatever `step` is; `width` a keyword the loop never sees."""
  def body(i, acc):
    return acc + x_ref[pl.ds(i * step, step), :width].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, 4, body, jnp.zeros(width, jnp.float32))


def _recipe(kernel, out_cols, **keywords):
  recipes.clear()
  x = jax.random.normal(jax.random.key(7), (96, 24), jnp.float32)
  with recipes.capture():
    pl.pallas_call(functools.partial(kernel, **keywords),
                   out_shape=jax.ShapeDtypeStruct((out_cols,), jnp.float32))(x)
  return recipes.recipes()[-1]


def test_a_step_whose_rebinding_changes_the_answer_is_caught_by_the_comparison():
  recipe = _recipe(scaled_sum_kernel, 24, step=16)
  (s, *_) = loop_steps.steps(recipe)
  assert s.name == "step"
  differs = variant.compare(recipe, loop_steps.build(recipe, {"keyword": "step", "to": s.new}))
  assert differs, "the comparison the trial makes must catch a changed answer"


def test_keywords_that_do_not_move_a_loops_trip_count_are_not_steps():
  assert loop_steps.steps(_recipe(fixed_trip_kernel, 16, step=16, width=16)) == []


def test_the_diff_applies_and_the_patched_file_gives_the_same_outputs(tmp_path):
  recipes.clear()
  # 56 columns: a grid of 4, not the (3,) test_split_reduction looks its bf16 kernel up by
  x = jax.random.normal(jax.random.key(3), (203, 56), jnp.bfloat16)
  with recipes.capture():
    want = column_sums.column_sums(x)
  recipe = recipes.recipes()[-1]
  diff = loop_steps.keyword_diff(recipe, "block_rows", 16)
  assert "functools.partial(kernel, block_rows=16)" in diff, diff
  module = patching.patched(tmp_path / "column_sums_step.py", diff, column_sums.__file__)
  got = module.column_sums(x)
  assert same_outputs(leaves(got), leaves(want)) is None
  # the patched call is the variant: its loop runs 13 iterations of 16 rows
  recipes.clear()
  with recipes.capture():
    module.column_sums(x)
  patched_recipe = recipes.recipes()[-1]
  assert patched_recipe.kernel.keywords["block_rows"] == 16


def test_advise_offers_the_steps_lowered_and_compiled():
  recipes.clear()
  x = jax.random.normal(jax.random.key(3), (203, 40), jnp.float32)
  with recipes.capture():
    jax.block_until_ready(column_sums.column_sums(x))
  recs = [r for r in kernel_registry.kernels() if r.name == "column_sums"
          and tuple(r.generated.grid) == (3,) and str(r.in_avals[0].dtype) == "float32"]
  (advice,) = pallas_prof.advise(recs[-1:], sample=False, progress=None)
  (d,) = [d for d in advice.diagnoses if d.rule == "loop_step"]
  assert "steps by block_rows=8" in d.text and d.location.startswith("column_sums.py:")
  (a,) = [a for a in advice.actions if a.rule == "loop_step"]
  assert a.kind == "c" and a.change == {"keyword": "block_rows", "from": 8, "to": 16,
                                        "iterations": 13}
  assert a.title.startswith("block_rows=8 -> 16 (the step of the loop at column_sums.py:")
  assert a.status == variants_mod.CPU_EQUAL and a.compiled.endswith("B shared"), \
      (a.status, a.compiled)          # checked under the interpreter: a small call
  assert a.diff and "apply the diff" in a.apply


def test_a_keyword_given_at_the_call_has_its_value_replaced(tmp_path):
  """examples/matmul.py writes `functools.partial(matmul_kernel, block_k=bk)` in the call:
  the diff sets that keyword (no partial of a partial), and the patched file's product is
  the original's, at a shape that is not a power of two (K = 96: 3 steps of 32, 6 of 16)."""
  import os
  example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))), "examples", "matmul.py")
  original = patching.load(example, "matmul_example_for_steps")
  a = jax.random.normal(jax.random.key(1), (40, 96), jnp.float32)
  b = jax.random.normal(jax.random.key(2), (96, 24), jnp.float32)
  recipes.clear()
  with recipes.capture():
    want = original.matmul(a, b, bm=16, bn=16, bk=32)
  recipe = recipes.recipes()[-1]
  assert [(s.name, s.new, s.trips) for s in loop_steps.steps(recipe)] == [
      ("block_k", 16, (3, 6))]   # 64: `k // block_k` is 1, a third of K left out: not offered
  diff = loop_steps.keyword_diff(recipe, "block_k", 16)
  assert "+      functools.partial(matmul_kernel, block_k=16)," in diff, diff
  assert "partial(functools.partial" not in diff
  module = patching.patched(tmp_path / "matmul_step.py", diff, example)
  got = module.matmul(a, b, bm=16, bn=16, bk=32)
  assert same_outputs(leaves(got), leaves(want)) is None


def test_on_a_cpu_a_step_that_changes_the_answer_is_said_and_an_equal_one_checked():
  recipe = _recipe(scaled_sum_kernel, 24, step=16)
  from pallas_prof.advice.schema import Action
  a = Action("c", "step=16 -> 8", "loop_step", {"keyword": "step", "from": 16, "to": 8,
                                                     "iterations": 12})
  got = loop_steps.checked_on_cpu(a, recipe)
  assert got.trial is not None and got.trial.outputs_equal is False, got
  assert got.trial.error.startswith("outputs differ"), got.trial
  recipes.clear()
  x = jax.random.normal(jax.random.key(3), (203, 40), jnp.float32)
  with recipes.capture():
    column_sums.column_sums(x)
  sums = recipes.recipes()[-1]
  ok = loop_steps.checked_on_cpu(
      Action("c", "block_rows=8 -> 16", "loop_step",
             {"keyword": "block_rows", "from": 8, "to": 16, "iterations": 13}), sums)
  assert ok.trial is None and ok.status == variants_mod.CPU_EQUAL, ok


def row_sum_kernel(x_ref, o_ref, *, step):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * step, step), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // step, body,
                                 jnp.zeros(x_ref.shape[1], jnp.float32))


def test_the_ladder_of_larger_steps_follows_what_an_iteration_loads():
  assert loop_steps.larger(None) == (2,)                  # unknown: twice alone
  assert loop_steps.larger(1024) == (2, 4, 8)             # the norms' dw/db: 1 KiB a step
  assert loop_steps.larger(4096) == (2, 4)
  assert loop_steps.larger(loop_steps.LADDER_BYTES) == (2,)


def test_a_loop_that_loads_little_is_tried_at_four_and_eight_times_its_step():
  """96 rows of 24 float32 in steps of 8: an iteration loads 768 bytes, so the steps 16 and
  32 are offered (64 would leave 32 rows out: 96 // 64 is 1), each checked under the
  interpreter with outputs equal to the original's."""
  recipes.clear()
  kernel_registry.clear()
  x = jax.random.normal(jax.random.key(7), (96, 24), jnp.float32)
  with recipes.capture():
    jax.block_until_ready(pl.pallas_call(
        functools.partial(row_sum_kernel, step=8),
        out_shape=jax.ShapeDtypeStruct((24,), jnp.float32))(x))
  (rec,) = [r for r in kernel_registry.kernels() if r.name == "row_sum_kernel"]
  (advice,) = pallas_prof.advise([rec], sample=False, progress=None)
  found = [a for a in advice.actions if a.rule == "loop_step"]
  assert [(a.change["to"], a.change["iterations"]) for a in found] == [(16, 6), (32, 3)]
  assert all(a.status == variants_mod.CPU_EQUAL for a in found), [a.status for a in found]


def row_step_kernel(x_ref, o_ref, *, step):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * step, step), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // step, body,
                                 jnp.zeros((x_ref.shape[1],), jnp.float32))


@pytest.mark.parametrize("rows, offered, equal", [
    (1200, [(16, (50, 75)), (32, (50, 37))], [True, False]),
    (960, [(16, (40, 60)), (32, (40, 30))], [True, True])])
def test_a_step_that_is_not_a_power_of_two_is_tried_at_the_powers_beside_it(rows, offered,
                                                                            equal):
  """24 rows a step load as 32 lanes, 8 masked off: the steps tried are 16 and 32 (none
  wastes a lane). At 960 rows each gives the original's sums; at 1200, the kernel's
  `rows // step` makes 37 steps of 32, 16 rows short, and the comparison every trial makes
  says the outputs differ. The diagnosis says the padding."""
  recipes.clear()
  x = jax.random.normal(jax.random.key(5), (rows, 40), jnp.float32)
  with recipes.capture():
    pl.pallas_call(functools.partial(row_step_kernel, step=24),
                   out_shape=jax.ShapeDtypeStruct((40,), jnp.float32))(x)
  recipe = recipes.recipes()[-1]
  record = kernel_registry.kernels()[-1]      # the call's own (the variants lower others)
  found = loop_steps.steps(recipe)
  assert [(s.new, s.trips) for s in found] == offered
  for s, same in zip(found, equal, strict=True):
    differs = variant.compare(recipe, loop_steps.build(recipe, {"keyword": "step",
                                                                "to": s.new}))
    assert (differs is None) == same, (s, differs)
  assert record.name == "row_step_kernel" and record.in_avals[0].shape == (rows, 40)
  (advice,) = pallas_prof.advise([record], sample=False, progress=None)
  (d,) = [d for d in advice.diagnoses if d.rule == loop_steps.RULE]
  (pad,) = [e for e in d.evidence if e.what == "padding"]
  assert pad.text.startswith("step=24 is not a power of two: each iteration's block takes "
                             "32 lanes along it, 8 of them masked off"), pad.text
  assert {a.change["to"] for a in advice.actions if a.rule == loop_steps.RULE} == \
      {n for n, _ in offered}
