"""Issue 49, item 1: a TF32 dot whose B block is N-contiguous, given B stored K-major
(pallas_prof/advice/dots/layout.py, layout_source.py).

The operand is found in the kernel's jaxpr (the input a float32 dot reads as its right
operand, through the fori_loop's body) and refused where B is already K-major or comes from
no input; the variant (B passed transposed, its BlockSpec reversed, each read transposed
back) equals the original under the interpreter at M, N and K that are not powers of two;
the diff advise writes applies with `patch` and the patched file gives the original's
outputs; advise offers it on a dot-bound float32 matmul and not on a bfloat16 one."""
from __future__ import annotations

import dataclasses
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import recipes
from pallas_prof.advice.variants import INTERPRETED_MOST, INTERPRETED_STEP_BYTES, \
    interpreted_steps
from pallas_prof.advice.dots import layout
from pallas_prof.advice.dots.layout_source import SourceRefused, unified_diff
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import patching
from testkit.precision_matmul import precision_matmul

pallas_prof.install()

KERNEL_FILE = inspect.getsourcefile(precision_matmul)


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


def _capture(fn, *structs):
  recipes.clear()
  with recipes.capture():
    jax.jit(fn).lower(*structs)
  (recipe,) = recipes.recipes()
  return recipe


def _structs(m, n, k, dtype=jnp.float32):
  return jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype)


def _dot_line(recipe) -> int:
  from pallas_prof.advice.dots.precision import _kernel_jaxpr
  from pallas_prof.backend import compat
  jaxpr, _ = _kernel_jaxpr(recipe)
  found = []
  layout._dots_on_refs(jaxpr, {}, found)
  return compat.frame_in(found[0][0].source_info, KERNEL_FILE).start_line


def test_the_operand_is_the_input_the_dot_reads_as_b():
  recipe = _capture(lambda a, b: precision_matmul(a, b, 32, 32, 16), *_structs(72, 40, 48))
  assert layout.find_operand(recipe) == 1
  assert layout.find_operand(recipe, KERNEL_FILE, _dot_line(recipe)) == 1
  with pytest.raises(layout.NotApplicable, match="no float32 dot at its line"):
    layout.find_operand(recipe, KERNEL_FILE, 1)


def _kmajor_kernel(a_ref, bt_ref, o_ref):
  o_ref[...] = jax.lax.dot_general(a_ref[...], bt_ref[...], (((1,), (1,)), ((), ())),
                                   preferred_element_type=jnp.float32)


def _scaled_kernel(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...] * 2.0, preferred_element_type=jnp.float32)


@pytest.mark.parametrize("kernel, b_shape, why", [
    (_kmajor_kernel, (40, 48), "already read K-major"),
    (_scaled_kernel, (48, 40), "not read straight from an input's block"),
])
def test_a_b_already_k_major_or_computed_is_refused(kernel, b_shape, why):
  call = lambda a, b: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((72, 40),
                                                                           jnp.float32))(a, b)
  recipe = _capture(call, jax.ShapeDtypeStruct((72, 48), jnp.float32),
                    jax.ShapeDtypeStruct(b_shape, jnp.float32))
  with pytest.raises(layout.NotApplicable, match=why):
    layout.find_operand(recipe)


@pytest.mark.parametrize("shape, tile", [((72, 40, 48), (32, 32, 16)),
                                         ((50, 33, 96), (16, 32, 32))])
def test_the_variant_equals_the_original_under_the_interpreter(shape, tile):
  m, n, k = shape
  recipe = _capture(lambda a, b: precision_matmul(a, b, *tile), *_structs(m, n, k))
  rng = np.random.default_rng(3)
  a = jnp.asarray(rng.standard_normal((m, k), np.float32))
  b = jnp.asarray(rng.standard_normal((k, n), np.float32))
  want = leaves(jax.jit(lambda a, b: precision_matmul(a, b, *tile))(a, b))
  variant = layout.build(recipe, 1)
  got = leaves(jax.jit(variant)(a, b))
  assert same_outputs(got, want) is None
  np.testing.assert_allclose(np.asarray(got[0]), np.asarray(a) @ np.asarray(b), rtol=1e-4,
                             atol=1e-3)
  gk = layout.trace_variant(variant, recipe, "cpu")
  assert "tl.trans" in gk.source or ".T" in gk.source or "permute" in gk.source, gk.source


def test_the_diff_applies_and_the_patched_file_gives_the_same_outputs(tmp_path):
  recipe = _capture(lambda a, b: precision_matmul(a, b, 32, 32, 16), *_structs(72, 40, 48))
  diff = unified_diff(recipe, 1)
  assert "+  )(a, b.T)" in diff
  assert "pl.BlockSpec((bn, k), lambda i, j: (j, 0))" in diff
  assert "b = b_ref[:, pl.ds(k * block_k, block_k)].T" in diff
  module = patching.patched(tmp_path / "precision_matmul_kmajor.py", diff, KERNEL_FILE)
  rng = np.random.default_rng(5)
  for m, n, k, tile in ((72, 40, 48, (32, 32, 16)), (33, 70, 64, (16, 32, 32))):
    a = jnp.asarray(rng.standard_normal((m, k), np.float32))
    b = jnp.asarray(rng.standard_normal((k, n), np.float32))
    want = leaves(precision_matmul(a, b, *tile))
    assert same_outputs(leaves(module.precision_matmul(a, b, *tile)), want) is None


def _whole(ref):
  return ref[...]


def _loads_b(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], _whole(b_ref), preferred_element_type=jnp.float32)


def test_a_kernel_that_passes_its_b_ref_on_gets_no_diff():
  call = lambda a, b: pl.pallas_call(_loads_b, out_shape=jax.ShapeDtypeStruct((64, 32),
                                                                             jnp.float32))(a, b)
  recipe = _capture(call, *_structs(64, 32, 48))
  with pytest.raises(SourceRefused, match="other than by indexing it"):
    unified_diff(recipe, 1)


def _advice(shape, dtype):
  m, n, k = shape
  fn = functools.partial(precision_matmul, bm=128, bn=64, bk=32)
  recipes.clear()
  with recipes.capture():
    jax.jit(fn).lower(*_structs(m, n, k, dtype))
  rec = [r for r in kernel_registry.kernels() if r.name == "precision_matmul_kernel"
         and tuple(r.in_avals[0].shape) == (m, k) and r.in_avals[0].dtype == jnp.dtype(dtype)][-1]
  (advice,) = pallas_prof.advise([rec], sample=False, progress=None)
  return advice


def test_advise_offers_it_on_a_dot_bound_float32_matmul_and_checks_it_on_a_cpu():
  advice = _advice((2048, 1000, 1024), jnp.float32)
  (action,) = [a for a in advice.actions if a.rule == layout.RULE]
  assert action.kind == "e" and action.change["operand"] == 1
  assert any(d.rule == layout.RULE for d in advice.diagnoses)
  assert "b.T" in action.diff and action.compiled.endswith("B shared")
  # too large for the interpreter (its loads): built, lowered and compiled for sm_90, not run
  assert action.status.startswith("not measured: no GPU; built and lowered"), action.status


def test_a_small_variant_is_run_under_the_interpreter_and_a_large_one_is_not():
  small = _capture(lambda a, b: precision_matmul(a, b, 32, 32, 16), *_structs(72, 40, 48))
  gk = layout.trace_variant(layout.build(small, 1), small, "cpu")
  # 3 iterations; A's 32x16 and B's 16x32 float32 blocks (2 KiB each) in each
  assert interpreted_steps(gk) == 3 + (3 * 4096) // INTERPRETED_STEP_BYTES
  large = _capture(lambda a, b: precision_matmul(a, b, 128, 64, 32), *_structs(2048, 1000, 1024))
  gk = layout.trace_variant(layout.build(large, 1), large, "cpu")
  assert 16 * 32 * interpreted_steps(gk) > INTERPRETED_MOST


def test_a_bfloat16_matmul_gets_no_layout_action():
  advice = _advice((2048, 1000, 1024), jnp.bfloat16)
  assert not [a for a in advice.actions if a.rule == layout.RULE]


# --- the K-major B at the dot's other tiles -------------------------------------------------

def _tile_action(recipe, bm, bn, warps=2, stages=2):
  from pallas_prof.advice import blockshape
  from pallas_prof.advice.dots import joint
  from pallas_prof.advice.schema import Action
  change = joint.change_of(recipe, blockshape.plan(recipe, 0), bm, blockshape.plan(recipe, 1),
                           bn, warps, stages)
  return Action("c", f"tile 32x32 -> {bm}x{bn}, num_warps 4 -> {warps}", "dot_rate", change,
                edit=f"at here: bm={bm}, bn={bn}")


def test_the_variant_at_another_tile_equals_the_original_under_the_interpreter():
  m, n, k = 50, 70, 48
  recipe = _capture(lambda a, b: precision_matmul(a, b, 32, 32, 16), *_structs(m, n, k))
  rng = np.random.default_rng(11)
  a = jnp.asarray(rng.standard_normal((m, k), np.float32))
  b = jnp.asarray(rng.standard_normal((k, n), np.float32))
  want = leaves(jax.jit(lambda a, b: precision_matmul(a, b, 32, 32, 16))(a, b))
  ((fn, change, words),) = layout.with_tiles(recipe, 1, [_tile_action(recipe, 16, 64)])
  assert change["tile"] == [16, 64] and change["grid"] == [4, 2] and "16x64" in words
  # a loop's step (loop_steps.py's kind c change): the kernel's block_k rebound with it
  from pallas_prof.advice.schema import Action
  step = Action("c", "block_k=16 -> 24", "loop_step", {"keyword": "block_k", "from": 16,
                                                       "to": 24}, edit="rebind it")
  ((fn_step, change_step, _),) = layout.with_tiles(recipe, 1, [step])
  assert change_step["rebind"] == {"block_k": 24}
  assert change_step["tile_edit"] == "rebind block_k=16 -> 24 at the call"
  assert same_outputs(leaves(jax.jit(fn_step)(a, b)), want) is None
  from pallas_prof.advice import blockshape
  tiled = blockshape.changed(recipe, change)
  assert tiled.kwargs["in_specs"][1].block_shape == (48, 64)     # B's (K, bn) at the new tile
  assert layout._transposed_spec(tiled.kwargs["in_specs"][1]).block_shape == (64, 48)
  got = leaves(jax.jit(fn)(a, b))
  assert same_outputs(got, want) is None
  np.testing.assert_allclose(np.asarray(got[0]), np.asarray(a) @ np.asarray(b), rtol=1e-4,
                             atol=1e-3)


def _fake_tune(times):
  """tune/blocks.tune's Tuning with these seconds per config (None: its outputs differed)."""
  import types

  def tune(fn, configs, args, kwargs, **_):
    assert len(configs) == len(times)
    return types.SimpleNamespace(tuning_seconds=1.0, candidates=[
        types.SimpleNamespace(seconds=t, error=None if t else "outputs differ: output 0")
        for t in times])
  return tune


def test_on_a_gpu_the_fastest_tile_is_kept_with_its_edit(monkeypatch):
  from pallas_prof.advice.schema import Action
  from pallas_prof.advice.split import trial
  recipe = _capture(lambda a, b: precision_matmul(a, b, 32, 32, 16), *_structs(50, 70, 48))
  tiles = [_tile_action(recipe, 16, 64), _tile_action(recipe, 64, 16, 4, 3)]
  act = Action("e", "B (argument 1) stored K-major", layout.RULE,
               {"layout": "k_major", "operand": 1}, edit="apply the diff", diff="--- x")
  # timings: the original, K-major as given, at 16x64, at 64x16 (whose outputs differed)
  monkeypatch.setattr(trial, "tune", _fake_tune([1.0, 0.8, 0.5, None]))
  out = layout.tried(act, recipe, gpu=True, budget_s=5.0, tiles=tiles)
  assert out.trial.held and out.trial.after_s == 0.5 and out.trial.saving_pct == 50.0
  assert out.change["tile"] == [16, 64] and out.change["num_warps"] == 2
  assert out.title.endswith("tile 32x32 -> 16x64, num_warps 4 -> 2")
  assert out.apply == out.edit == "apply the diff; and change the blocks: at here: bm=16, bn=64"
  assert [v["after_s"] for v in out.change["variants"]] == [0.8, 0.5, None]
  assert "differ" in out.change["variants"][2]["error"]
  # where K-major as given is the fastest, no tile is named
  monkeypatch.setattr(trial, "tune", _fake_tune([1.0, 0.4, 0.5, 0.6]))
  out = layout.tried(act, recipe, gpu=True, budget_s=5.0, tiles=tiles)
  assert "tile" not in out.change and out.apply is None and out.trial.after_s == 0.4


def test_the_tiles_tried_with_it_are_the_timed_ones_fastest_first():
  from pallas_prof.advice.schema import Action, Trial
  from pallas_prof.advice.trials import _tiles
  t = lambda after, error=None: Trial(1.0, after, None, 1.0, after is not None, error)
  acts = [Action("c", "slow", "r", {"tile": [1, 1], "blocks": []}, trial=t(0.9)),
          Action("c", "not lowered", "r", {"tile": [2, 2], "blocks": []},
                 trial=t(None, "does not lower: x")),
          Action("c", "untimed", "r", {"tile": [3, 3], "blocks": []}),
          Action("c", "fast", "r", {"tile": [4, 4], "blocks": []}, trial=t(0.5)),
          Action("c", "block_q", "r", {"blocks": [], "rebind": {"block_q": 128}}, trial=t(0.7)),
          Action("c", "a loop's step", "r", {"keyword": "block_k"}, trial=t(0.6)),
          Action("a", "warps", "r", {"num_warps": 8}, trial=t(0.1))]
  assert [a.title for a in _tiles(acts)] == ["fast", "a loop's step", "block_q", "slow",
                                             "untimed"]


# --- a B of more than two dimensions, read by Triton's masked load --------------------------

def _attention_run(attention, shape, block_k, seed):
  """JAX's mha (of `attention`, the module or a copy of it) on fresh inputs with its
  pallas_call recorded: (the recipe, the inputs, the outputs, the call)."""
  bs = attention.BlockSizes(block_q=32, block_k=block_k, block_q_dkv=block_k,
                            block_kv_dkv=block_k, block_q_dq=block_k, block_kv_dq=block_k)
  fn = functools.partial(attention.mha, segment_ids=None, block_sizes=bs)
  args = tuple(jax.random.normal(x, shape, jnp.float32) for x in jax.random.split(
      jax.random.key(seed), 3))
  recipes.clear()
  with recipes.capture():
    want = leaves(jax.jit(fn)(*args))
  (recipe,) = recipes.recipes()
  return recipe, args, want, fn


def test_attentions_v_is_given_k_major_and_the_variant_equals_the_original():
  """JAX's attention (ops/gpu/attention.py) reads V, (batch, seq, heads, dim) in blocks
  (None, seq, None, dim), with `plgpu.load(v_ref.at[k_slice, :], mask=head_mask)` for its
  p @ v; its q @ k.T reads K K-major already. The variant swaps V's seq and dim axes and
  its outputs are the original's under the interpreter, at a head_dim (40) its block pads."""
  attention = pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")
  recipe, args, want, _ = _attention_run(attention, (1, 96, 2, 40), 32, 4)
  assert layout.find_operand(recipe) == 2 and layout.block_axes(recipe, 2) == (1, 3)
  got = leaves(jax.jit(layout.build(recipe, 2))(*args))
  assert same_outputs(got, want) is None


def test_attentions_diff_swaps_vs_axes_and_the_patched_file_gives_the_same_outputs(tmp_path):
  """The diff for JAX's attention, written against a copy of its file (a user copies the
  op out of site-packages to edit it): V passed as v.swapaxes(1, 3), its spec's block and
  index map swapped likewise through in_specs (a name there, not a list), its masked load
  transposed with its mask; applied with `patch`, the copy's mha gives the original's
  outputs."""
  attention = pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")
  import shutil
  given = tmp_path / "attention_given.py"
  shutil.copy(inspect.getsourcefile(attention), given)
  module = patching.load(given, "attention_given")
  recipe, args, want, fn = _attention_run(module, (1, 96, 2, 24), 16, 9)
  diff = unified_diff(recipe, 2, layout.block_axes(recipe, 2))
  assert "v.swapaxes(1, 3)" in diff
  assert "plgpu.load(v_ref.at[:, curr_k_slice], mask=head_mask.T).T" in diff
  # in_specs=in_specs: V's spec edited in the list it is given in (K's left as it was)
  assert "+      pl.BlockSpec((None, head_dim_padded, None, kv_seq_len)," in diff
  changed = [x for x in diff.splitlines() if x[:1] in "+-" and "BlockSpec((None" in x]
  assert len(changed) == 2 and changed[0] == \
      "-      pl.BlockSpec((None, kv_seq_len, None, head_dim_padded),"
  patched = patching.patched(tmp_path / "attention_kmajor.py", diff, given)
  got = leaves(jax.jit(functools.partial(patched.mha, **fn.keywords))(*args))
  assert same_outputs(got, want) is None


def _masked_3d_kernel(a_ref, b_ref, o_ref, *, rows, mask_rank):
  """o = a @ b[1] for a (2, K, N) b in (None, K, N) blocks, read through plgpu.load with a
  mask on N: a (1, N) row (attention's head_mask) or the whole (K, N), the masked columns
  filled with 0. (A 1-D mask is refused by both backends' lowering.)"""
  from jax.experimental.pallas import triton as plgpu
  n = b_ref.shape[1]
  cols = jnp.arange(n) < rows
  mask = cols[None, :] if mask_rank == 1 else jnp.broadcast_to(cols[None, :], b_ref.shape)
  b = plgpu.load(b_ref.at[:, :], mask=mask, other=0.0)
  o_ref[...] = jnp.dot(a_ref[...], b, preferred_element_type=jnp.float32)


@pytest.mark.parametrize("mask_rank", [1, 2])
def test_a_masked_load_of_a_squeezed_block_is_transposed_with_its_mask(mask_rank):
  pytest.importorskip("jax.experimental.pallas.triton")
  m, k, n = 24, 40, 48
  kernel = functools.partial(_masked_3d_kernel, rows=37, mask_rank=mask_rank)
  call = lambda a, b: pl.pallas_call(
      kernel, grid=(1,),
      in_specs=[pl.BlockSpec((m, k), lambda i: (0, 0)),
                pl.BlockSpec((None, k, n), lambda i: (1, 0, 0))],
      out_specs=pl.BlockSpec((m, n), lambda i: (0, 0)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32))(a, b)
  rng = np.random.default_rng(8)
  a = jnp.asarray(rng.standard_normal((m, k), np.float32))
  b = jnp.asarray(rng.standard_normal((2, k, n), np.float32))
  recipes.clear()
  with recipes.capture():
    want = leaves(jax.jit(call)(a, b))
  (recipe,) = recipes.recipes()
  assert layout.find_operand(recipe) == 1 and layout.block_axes(recipe, 1) == (1, 2)
  got = leaves(jax.jit(layout.build(recipe, 1))(a, b))
  assert same_outputs(got, want) is None
  expect = np.asarray(a) @ np.where(np.arange(n) < 37, np.asarray(b)[1], 0.0)
  np.testing.assert_allclose(np.asarray(got[0]), expect, rtol=1e-4, atol=1e-3)
  # three dimensions kept of a 3-D block: not a matrix
  whole = dataclasses.replace(recipe.kwargs["in_specs"][1], block_shape=(2, k, n))
  wide = dataclasses.replace(recipe, kwargs=dict(recipe.kwargs, in_specs=[
      recipe.kwargs["in_specs"][0], whole]))
  with pytest.raises(layout.NotApplicable, match="3 dimensions"):
    layout.block_axes(wide, 1)


@pytest.mark.parametrize("body, found", [
    ("specs = [a, b]\n  specs.append(c)", True),
    ("specs = [a, b]\n  specs.insert(0, c)", False),      # the positions move: not in order
    ("if x:\n    specs = [a, b]\n  else:\n    specs = [b, a]", False),
    ("specs = [a, b]\n  specs = [b, a]", False),
    ("specs = make()", False),
])
def test_in_specs_given_by_name_is_edited_in_its_list_only_where_plain(body, found):
  import ast
  from pallas_prof.advice.dots.layout_source import _list_of
  tree = ast.parse(f"def f():\n  {body}\n  return pl.pallas_call(k, in_specs=specs)(a, b)\n")
  call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and
              getattr(n.func, "attr", "") == "pallas_call")
  got = _list_of(tree, "specs", call)
  assert (got is not None) == found
  if found:
    assert [e.id for e in got.elts] == ["a", "b"]


@pytest.mark.parametrize("block, index, axes, want_block, want_index", [
    ((8, 16), lambda i: (i, i + 1), (0, 1), (16, 8), (4, 3)),
    ((None, 8, 16), lambda i: (i, 0, 1), (1, 2), (None, 16, 8), (3, 1, 0)),
])
def test_the_spec_written_otherwise_is_wrapped_in_an_expression_that_swaps_it(
    block, index, axes, want_block, want_index):
  """The diff's fallback where B's spec is not a literal BlockSpec with a lambda: the
  expression it writes, evaluated, swaps the block shape and the index map's results."""
  from pallas_prof.advice.dots.layout_source import _wrapped_spec
  spec = pl.BlockSpec(block, index)
  swapped = eval(_wrapped_spec("pl", "spec", axes, len(block)))   # noqa: S307 - our own text
  assert tuple(swapped.block_shape) == want_block
  assert tuple(swapped.index_map(3)) == want_index


# --- a backward kernel: several dots, each with a B of its own ------------------------------

def _attention_backward(attention, shape, block, seed):
  """JAX's mha's gradient (of `attention`, the module or a copy) on fresh inputs, with its
  backward pallas_call recorded: (its recipe, the inputs, the gradients, the function)."""
  bs = attention.BlockSizes(block_q=block, block_k=block, block_q_dkv=block,
                            block_kv_dkv=block, block_q_dq=block, block_kv_dq=block)
  loss = lambda q, k, v: attention.mha(q, k, v, segment_ids=None, block_sizes=bs).sum()
  grad = jax.grad(loss, argnums=(0, 1, 2))
  args = tuple(jax.random.normal(x, shape, jnp.float32) for x in jax.random.split(
      jax.random.key(seed), 3))
  recipes.clear()
  with recipes.capture():
    want = leaves(jax.jit(grad)(*args))
  (recipe,) = [r for r in recipes.recipes() if r.name == "mha_backward"]
  return recipe, args, want, grad


def test_a_backward_kernels_dots_are_told_apart_by_their_order_and_stored_k_major_together(
    tmp_path):
  """JAX's attention backward (one kernel: dk and dv, then dq) has all its dots at the
  user's one line; three read an N-contiguous B from an input (dv's from dO, dk's from Q,
  dq's from K). Their line cannot tell them apart (all the dots together read several
  inputs); their order in the lowering can. The variant with all three stored K-major
  gives the original's outputs under the interpreter, and the diff that stores them,
  applied with `patch` to a copy of attention.py (in_specs there is a list with an insert:
  the wrapped form, one expression for the three), gives the original's gradients."""
  attention = pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")
  recipe, _, _, _ = _attention_backward(attention, (1, 48, 2, 24), 16, 3)
  found = layout.dots_of(recipe)
  inputs = set()
  for k in range(len(found)):
    try:
      inputs.add(layout.find_operand(recipe, dot=(k, len(found))))
    except layout.NotApplicable as e:
      # q @ k.T and do @ v.T: their B is a transpose, K-major already
      assert "K-major already" in str(e) or "not read straight" in str(e)
  q, k, do = 0, 1, 4               # the call's arrays: q, k, v, out, do, lse, delta
  assert inputs == {q, k, do}
  # all the kernel's dots together (as at a user's one line, where a library makes them)
  with pytest.raises(layout.NotApplicable, match="several inputs"):
    layout.find_operand(recipe)
  rng = np.random.default_rng(5)
  inputs = [jnp.asarray(rng.standard_normal(s, np.float32)) for s, _ in recipe.arg_shapes]
  original = recipe.original(recipe.kernel, recipe.out_shape, **recipe.kwargs)
  assert same_outputs(leaves(jax.jit(layout.build(recipe, (q, k, do)))(*inputs)),
                      leaves(jax.jit(original)(*inputs))) is None
  import shutil
  given = tmp_path / "attention_bwd.py"
  shutil.copy(inspect.getsourcefile(attention), given)
  module = patching.load(given, "attention_bwd")
  recipe, _, want, _ = _attention_backward(module, (1, 48, 2, 24), 16, 3)
  diff = unified_diff(recipe, {i: layout.block_axes(recipe, i) for i in (q, k, do)})
  assert "(q.swapaxes(1, 3), k.swapaxes(1, 3), v, segment_ids, out, do.swapaxes(1, 3)" in diff
  patched = patching.patched(tmp_path / "attention_bwd_kmajor.py", diff, given)
  _, _, got, _ = _attention_backward(patched, (1, 48, 2, 24), 16, 3)
  assert same_outputs(got, want) is None


def test_advise_offers_each_b_of_a_backward_kernel_and_all_of_them_together(monkeypatch):
  """On JAX's attention backward, advise's K-major actions: all three Bs together first
  (argument 0, 1 and 4: Q, K and dO), then each alone (the hottest dot's first), each checked under the interpreter.
  (The dots' rate is taken as far off: at a size the interpreter runs in seconds the work
  model would not call them dot-bound.)"""
  attention = pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")
  monkeypatch.setattr(layout, "_far_from_rate", lambda f: (True, "taken as far off (test)"))
  shape = (1, 32, 2, 24)              # a shape of its own: the other test's records differ
  _attention_backward(attention, shape, 16, 3)
  rec = [r for r in kernel_registry.kernels() if r.name == "mha_backward" and
         tuple(r.in_avals[0].shape) == shape][-1]
  (advice,) = pallas_prof.advise([rec], sample=False, progress=None)
  acts = [a for a in advice.actions if a.rule == layout.RULE]
  got = [a.change["operands"] for a in acts]
  assert got[0] == [0, 1, 4] and sorted(got[1:]) == [[0], [1], [4]], [a.title for a in acts]
  for a in acts:
    assert "outputs equal under the interpreter" in a.status, (a.title, a.status)
