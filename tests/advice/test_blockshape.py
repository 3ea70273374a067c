"""Recorded pallas_calls (recipes.py) and the block-shape variants made of them
(blockshape.py): which grid axes walk every BlockSpec in block units, and a variant's
outputs equal to the original's (run here by Triton's interpreter)."""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import blockshape, recipes
from pallas_prof.advice.schema import Action
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.equation_text import Aval

from .synthetic import synthetic_eq, synthetic_facts, synthetic_work

pallas_prof.install()


@pytest.fixture(autouse=True)
def _installed():
  """The install at import is undone after the first test of another file in the same
  process (the suite restores each test's state): each test installs."""
  pallas_prof.install()


def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + y_ref[...]


def _add(n=1000, block=40):
  x = jnp.arange(n, dtype=jnp.float32)
  y = jnp.ones(n, jnp.float32) * 0.5
  spec = pl.BlockSpec((block,), lambda i: (i,))
  with recipes.capture():
    out = pl.pallas_call(add_kernel, grid=(pl.cdiv(n, block),), in_specs=[spec, spec],
                         out_specs=spec, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32))(x, y)
  return (x, y), out


def test_a_call_is_recorded_with_its_shapes_and_line():
  recipes.clear()
  kernel_registry.clear()
  _add()
  (recipe,) = recipes.recipes()
  assert recipe.name == "add_kernel" and recipe.in_avals == (Aval((1000,), "float32"),) * 2
  assert recipe.call_file == __file__ and recipe.location.startswith("test_blockshape.py:")
  (rec,) = kernel_registry.kernels()
  assert recipes.find(rec) is recipe
  # the name is given back once the capture ends
  assert not getattr(pl.pallas_call, "_pallas_prof_capture", False)


def scaled_kernel(x_ref, o_ref, *, scale, chunk):
  for i in range(x_ref.shape[0] // chunk):
    o_ref[pl.ds(i * chunk, chunk)] = x_ref[pl.ds(i * chunk, chunk)] * scale


def test_two_calls_of_one_kernel_with_other_keywords_each_find_their_own():
  """One kernel function at one grid and block, called with two keyword sets (a loop step
  of 8 and of 16): each lowered kernel's recipe is the call that made it, not the last
  call (the advice on the first would otherwise be built from the second's keywords)."""
  recipes.clear()
  kernel_registry.clear()
  x = jnp.arange(64, dtype=jnp.float32)
  with recipes.capture():
    for chunk in (8, 16):
      pl.pallas_call(functools.partial(scaled_kernel, scale=2.0, chunk=chunk),
                     out_shape=jax.ShapeDtypeStruct((64,), jnp.float32))(x)
  by_chunk = {r.kernel.keywords["chunk"]: r for r in recipes.recipes()}
  records = kernel_registry.kernels()
  assert len(records) == 2 and set(by_chunk) == {8, 16}
  found = {recipes.find(rec).kernel.keywords["chunk"] for rec in records}
  assert found == {8, 16}
  for rec in records:          # the recipe found traces to the kernel the record lowered
    assert recipes._traced_text(recipes.find(rec)) == rec.generated.jaxpr_text
  # a record whose jaxpr neither call traces to is given no recipe, not the last one
  odd = dataclasses.replace(records[0], generated=dataclasses.replace(
      records[0].generated, jaxpr_text="{ lambda ; a. let  in () }"))
  assert recipes.find(odd) is None


@pytest.mark.parametrize("new_block", [200, 128, 8])      # ragged edges: 1000 is not a multiple
def test_a_block_variant_computes_the_same(new_block):
  recipes.clear()
  args, want = _add()
  recipe = recipes.recipes()[-1]
  p = blockshape.plan(recipe, 0)
  assert p.ties == (0, 0, 0) and p.block == 40 and p.extent == 1000
  change = blockshape.change_for(recipe, p, new_block)
  assert change["grid"] == [-(-1000 // new_block)] and change["blocks"] == [[new_block]] * 3
  got = blockshape.build(recipe, change)(*args)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def maybe_bias_kernel(x_ref, bias_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + (0.0 if bias_ref is None else bias_ref[...])


@pytest.mark.parametrize("new_block", [96, 24])
def test_a_call_given_none_among_its_operands_gets_block_variants(new_block):
  """An optional operand given as None (attention's segment_ids): its BlockSpec, None, is
  set aside with it; the plan covers the arrays, and the variant gives the kernel None
  again in its place, outputs equal to the original's (1000 rows: ragged edges)."""
  recipes.clear()
  x = jax.random.normal(jax.random.key(4), (1000, 8), jnp.float32)
  spec = pl.BlockSpec((48, 8), lambda i: (i, 0))
  with recipes.capture():
    want = pl.pallas_call(maybe_bias_kernel, grid=(pl.cdiv(1000, 48),), in_specs=[spec, None],
                          out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(
                              x, None)
  recipe = recipes.recipes()[-1]
  assert recipe.absent == (1,) and len(recipe.arg_shapes) == 1
  p = blockshape.plan(recipe, 0)
  assert p is not None and p.ties == (0, 0) and p.block == 48 and p.extent == 1000
  change = blockshape.change_for(recipe, p, new_block)
  assert change["blocks"] == [[new_block, 8]] * 2
  got = blockshape.build(recipe, change)(x)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_index_maps_that_are_not_in_block_units_make_no_plan():
  recipes.clear()
  n = 64
  x = jnp.ones((8, n), jnp.float32)
  w = jnp.ones((8,), jnp.float32)

  def scale_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...][:, None]

  with recipes.capture():
    pl.pallas_call(scale_kernel, grid=(n // 16,),
                   in_specs=[pl.BlockSpec((8, 16), lambda j: (0, j)),
                             pl.BlockSpec((8,), lambda j: (0,))],     # does not walk the grid
                   out_specs=pl.BlockSpec((8, 16), lambda j: (0, j)),
                   out_shape=x)(x, w)
    (recipe,) = recipes.recipes()
    p = blockshape.plan(recipe, 0)
    assert p.ties == (1, None, 1) and p.block == 16
    with pytest.warns(pallas_prof.UncoveredOutputWarning):
      pl.pallas_call(scale_kernel, grid=(n // 32,),
                     in_specs=[pl.BlockSpec((8, 16), lambda j: (0, 2 * j)),  # every other
                               pl.BlockSpec((8,), lambda j: (0,))],
                     out_specs=pl.BlockSpec((8, 16), lambda j: (0, 2 * j)),
                     out_shape=x)(x, w)
  assert blockshape.plan(recipes.recipes()[-1], 0) is None


def test_specs_that_do_not_pair_with_the_arrays_make_no_plan():
  """One BlockSpec per array (inputs, then outputs) or no plan: a recipe whose in_specs
  list is shorter than its arguments made a plan of the pairs zip kept (two ties for three
  arrays), and with zip(strict=True) alone it would raise ValueError deep in the advice."""
  recipes.clear()
  _add()
  recipe = recipes.recipes()[-1]
  (spec,) = {id(s): s for s in recipe.kwargs["in_specs"]}.values()
  short = dataclasses.replace(recipe, kwargs=dict(recipe.kwargs, in_specs=[spec]))
  assert blockshape.plan(recipe, 0) is not None
  assert blockshape.plan(short, 0) is None


def _intent(goal, factor):
  return Action("c", f"{goal} blocks", "small_programs", {"block": goal, "factor": factor})


def test_an_intent_becomes_variants_or_an_edit():
  recipes.clear()
  _add(n=1 << 16, block=16)
  recipe = recipes.recipes()[-1]
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(16,), dtype="float32")],
                      grid=(4096,))
  variants = blockshape.resolve(_intent("larger", 8), f, recipe)
  assert [a.kind for a in variants] == ["c", "c"]
  assert [a.change["to_block"] for a in variants] == [64, 128]
  # in the variable the BlockSpec is written with (`block`); the grid follows it
  assert variants[0].edit.endswith(": block=16 -> 64"), variants[0].edit
  # not so large that the grid leaves SMs idle: 65,536 elements in blocks of 256 are 256
  # programs for 132 SMs, in blocks of 512 only 128
  (capped,) = blockshape.resolve(_intent("larger", 256), f, recipe)
  assert capped.change["to_block"] == 256
  # facts that say the kernel reads its program id are checked against the kernel traced at
  # the new blocks (blockshape.why_not_in_block_units): add_kernel reads none, so the variants stand
  pid = dataclasses.replace(f, equations={0: synthetic_eq(0, "program_id")})
  assert [a.kind for a in blockshape.resolve(_intent("larger", 8), pid, recipe)] == ["c", "c"]
  (edit,) = blockshape.resolve(_intent("smaller", 2), f, None)
  assert edit.kind == "d" and "was not recorded" in edit.edit


def _add_written_with(block_expr: str, grid_expr: str):
  """_add's call written with other expressions for the block and the grid (bm=16)."""
  source = f"""
def add(x, y, n, bm):
  spec = pl.BlockSpec(({block_expr},), lambda i: (i,))
  with recipes.capture():
    return pl.pallas_call(add_kernel, grid=({grid_expr},), in_specs=[spec, spec],
                          out_specs=spec, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32))(x, y)
"""
  import linecache
  name = f"<advice-test-{abs(hash(source))}>"
  linecache.cache[name] = (len(source), None, source.splitlines(True), name)
  scope = dict(pl=pl, recipes=recipes, add_kernel=add_kernel, jax=jax, jnp=jnp)
  exec(compile(source, name, "exec"), scope)
  n = 1 << 16
  recipes.clear()
  scope["add"](jnp.ones(n, jnp.float32), jnp.ones(n, jnp.float32), n, 16)
  return recipes.recipes()[-1]


@pytest.mark.parametrize("block_expr, grid_expr, said", [
    # issue 48, item 17: the change in the user's own variable, not the traced numbers
    ("bm", "pl.cdiv(n, bm)", ": bm=16 -> 64"),
    ("bm", "4096", ": bm=16 -> 64; grid=(4096,) -> grid=(1024,)"),   # a grid it does not follow
    ("16", "pl.cdiv(n, 16)", ": grid=(4096,) -> grid=(1024,); BlockSpec((16,), ...) -> "
                             "BlockSpec((64,), ...)"),            # no variable: the numbers
])
def test_a_block_change_is_said_in_the_users_variable(block_expr, grid_expr, said):
  recipe = _add_written_with(block_expr, grid_expr)
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(16,), dtype="float32")],
                      grid=(4096,))
  variants = blockshape.resolve(_intent("larger", 8), f, recipe)
  assert variants[0].kind == "c" and variants[0].edit.endswith(said), variants[0].edit


def test_smaller_blocks_go_below_16_only_in_a_kernel_without_dots():
  recipes.clear()
  _add(n=1 << 16, block=16)
  recipe = recipes.recipes()[-1]
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(16,), dtype="float32")],
                      grid=(4096,))
  (variant,) = blockshape.resolve(_intent("smaller", 8), f, recipe)
  # 16 -> 8 float32: rows of a memory sector (32 bytes) along the array's last dimension,
  # not the 2 the intent's factor of 8 would give
  assert variant.kind == "c" and variant.change["to_block"] == 8
  assert variant.change["grid"] == [1 << 13]
  # a kernel with a dot keeps 16 along a split dimension: blocks of 16 do not split, and the
  # action is left out with a note rather than ranked at a factor nobody can apply
  dot = dataclasses.replace(f, equations={0: synthetic_eq(0, "dot_general")})
  notes = []
  assert blockshape.resolve(_intent("smaller", 8), dot, recipe, notes=notes) == []
  (note,) = notes
  assert "cannot be made smaller" in note and "16 or more" in note


def test_a_halving_that_still_overflows_a_cta_says_so():
  """Blocks of 4096x40 float32 (163,840 elements): halved along the columns they still hold
  81,920, over a CTA's 65,536; the note says that, not that the block does not split."""
  _column_sums(jnp.float32, block_cols=40, cols=200, rows=4096)
  recipe = recipes.recipes()[-1]
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(4096, 40), dtype="float32")],
                      grid=(5,))
  notes = []
  assert blockshape.resolve(_intent("smaller", 2), f, recipe, notes=notes) == []
  (note,) = notes
  assert "at 20 a block would still hold 81,920 elements" in note, note
  assert "does not split in two" not in note
  # by 4 it fits, and is offered
  (variant,) = blockshape.resolve(_intent("smaller", 4), f, recipe)
  assert variant.change["to_block"] == 10 and variant.change["grid"] == [20]


def _rows_call(kernel, block_rows=8, rows=64, dot=False):
  """A row kernel (blocks of `block_rows` x 128 on a grid down the rows), or with `dot` an
  8x8 dot on a grid of one program whose index maps read no grid index."""
  recipes.clear()
  with recipes.capture():
    if dot:
      x = jnp.ones((8, 8), jnp.float32)
      spec = pl.BlockSpec((8, 8), lambda i: (0, 0))
      pl.pallas_call(kernel, grid=(1,), in_specs=[spec, spec], out_specs=spec,
                     out_shape=x)(x, x)
    else:
      x = jnp.ones((rows, 128), jnp.float32)
      spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
      pl.pallas_call(kernel, grid=(rows // block_rows,), in_specs=[spec], out_specs=spec,
                     out_shape=x)(x)
  return recipes.recipes()[-1]


def double_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def pid_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + pl.program_id(0).astype(jnp.float32)


def dot_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], y_ref[...])


def _few_programs_intent(grid):
  from pallas_prof.advice.rules import RULES
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(8, 128), dtype="float32")],
                      grid=grid)
  (finding,) = RULES["few_programs"](f)
  (intent,) = finding.actions
  return intent, f


def test_smaller_blocks_state_the_factor_their_blocks_allow():
  """Issue 39: 8 programs of 8-row blocks were told "smaller blocks (64x), estimate -94 %",
  then "(not tried: its blocks (8 along grid axis 0) cannot be made smaller by 64x here)".
  The action is the 8x that fits, its estimate the one for 8x."""
  recipe = _rows_call(double_kernel)
  intent, f = _few_programs_intent((8,))
  # the rule asks 64x (twice the SMs' programs); 1,024 elements a program keep one for each
  # of 128 threads at 8x
  assert intent.change["factor"] == 8
  (variant,) = blockshape.resolve(intent, f, recipe)
  assert variant.kind == "c" and (variant.change["from_block"], variant.change["to_block"]) \
      == (8, 1) and variant.change["grid"] == [64]
  # 64 programs on 132 SMs: one wave of programs with an eighth of the work (8 MiB, 512
  # memory floors), each keeping its start
  assert variant.estimate_pct == pytest.approx(100 * (1 - (1 + 512 / 8) / 513))
  assert "split 8x" in variant.estimate_basis and "64x" not in variant.estimate_basis


def test_a_kernel_that_reads_its_program_id_gets_the_edit_that_fits():
  recipe = _rows_call(pid_kernel, rows=32)
  intent, f = _few_programs_intent((4,))
  pid = dataclasses.replace(f, equations={**f.equations, 1: synthetic_eq(1, "program_id")})
  (edit,) = blockshape.resolve(intent, pid, recipe)
  assert edit.kind == "d" and edit.title == "smaller blocks (8x): edit the pallas_call"
  assert edit.change == {"block": "smaller", "factor": 8}
  # said in the call's variable; its grid (rows // block_rows) follows it
  assert ": block_rows=8 -> 1 (not tried" in edit.edit, edit.edit
  assert "reads its program id" in edit.edit
  assert edit.estimate_pct == pytest.approx(100 * (1 - (1 + 1024 / 8) / 1025))  # 16 MiB a program


def test_blocks_that_cannot_shrink_leave_the_action_out_with_a_note():
  """The issue's 8x8 dot on a grid of one program: its blocks do not walk the grid and a dot
  keeps 16 along a split dimension; no smaller-blocks action, a note saying why."""
  recipe = _rows_call(dot_kernel, dot=True)
  intent, f = _few_programs_intent((1,))
  dot = dataclasses.replace(f, equations={0: synthetic_eq(0, "get", block_shape=(8, 8)),
                                          1: synthetic_eq(1, "dot_general",
                                                          block_shape=(8, 8))})
  notes = []
  assert blockshape.resolve(intent, dot, recipe, notes=notes) == []
  (note,) = notes
  assert note.startswith("no smaller-blocks action for few programs") and "8x8" in note


def test_larger_blocks_that_would_idle_sms_are_left_out():
  recipe = _rows_call(double_kernel, block_rows=1, rows=200)    # 200 programs, 132 SMs
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(1, 128), dtype="float32")],
                      grid=(200,))
  notes = []
  assert blockshape.resolve(_intent("larger", 4), f, recipe, notes=notes) == []
  assert "cannot be made larger" in notes[0] and "132 SMs" in notes[0]
  # without the recorded call the same limit holds for the edit
  assert blockshape.resolve(_intent("larger", 4), f, None, notes=notes) == []
  assert len(notes) == 2 and "was not recorded" in notes[1]


def squeezed_double_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def test_blocks_with_a_squeezed_dimension_get_variants():
  """JAX's mha backward on the H200: BlockSpec((None, 128, None, 64), ...) made `pallas-prof
  run` say "advice failed: TypeError" (a None multiplied into the block's elements), and
  every kernel of the run lost its advice. A squeezed dimension holds one element."""
  x = jnp.ones((2, 256, 3, 64), jnp.float32)
  spec = pl.BlockSpec((None, 128, None, 64), lambda b, i, h: (b, i, h, 0))
  recipes.clear()
  with recipes.capture():
    pl.pallas_call(squeezed_double_kernel, grid=(2, 2, 3), in_specs=[spec], out_specs=spec,
                   out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  recipe = recipes.recipes()[-1]
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(128, 64), dtype="float32")],
                      grid=(2, 2, 3))
  (variant,) = blockshape.resolve(_intent("smaller", 2), f, recipe)
  assert variant.kind == "c" and variant.change["blocks"][0] == [None, 64, None, 64]
  assert blockshape.block_elements((None, 64, None, 64)) == 64 * 64


def _column_sums(dtype, block_cols=128, cols=384, rows=64, split_rows=False):
  """A column sum (blocks of all rows x `block_cols` columns, a grid along the columns:
  the split dimension is the arrays' last), or with `split_rows` a row kernel whose grid
  walks the rows (blocks of 64 x `block_cols`, the split dimension not the last)."""
  recipes.clear()
  x = jnp.ones((rows * (4 if split_rows else 1), cols), dtype)
  with recipes.capture():
    if split_rows:
      spec = pl.BlockSpec((rows, cols), lambda i: (i, 0))
      pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2), grid=(4,),
                     in_specs=[spec], out_specs=spec, out_shape=x)(x)
    else:
      pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., jnp.sum(x_ref[...], axis=0)),
                     grid=(cols // block_cols,),
                     in_specs=[pl.BlockSpec((rows, block_cols), lambda j: (0, j))],
                     out_specs=pl.BlockSpec((block_cols,), lambda j: (j,)),
                     out_shape=jax.ShapeDtypeStruct((cols,), dtype))(x)
  return recipes.recipes()[-1]


@pytest.mark.parametrize("dtype, least", [(jnp.float32, 8), (jnp.bfloat16, 16), (jnp.int8, 32)])
def test_blocks_along_the_last_dimension_keep_a_memory_sector_a_row(dtype, least):
  """A column sum of 3 programs was told to split its 128 float32 columns into blocks of 4:
  16 bytes a row, half of every 32-byte sector each program fetches left unused."""
  recipe = _column_sums(dtype)
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(64, 128), dtype=str(jnp.dtype(dtype)))],
                      grid=(3,))
  (variant,) = blockshape.resolve(_intent("smaller", 32), f, recipe)
  assert variant.change["to_block"] == least, variant.change
  assert variant.change["grid"] == [384 // least]


def test_blocks_along_another_dimension_split_as_asked():
  recipe = _column_sums(jnp.float32, split_rows=True)
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(64, 384), dtype="float32")],
                      grid=(4,))
  (variant,) = blockshape.resolve(_intent("smaller", 32), f, recipe)
  assert variant.change["to_block"] == 2 and variant.change["axis"] == 0, variant.change


def test_rows_of_a_sector_already_do_not_split_and_the_note_says_why():
  recipe = _column_sums(jnp.float32, block_cols=8, cols=24)
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(64, 8), dtype="float32")],
                      grid=(3,))
  notes = []
  assert blockshape.resolve(_intent("smaller", 32), f, recipe, notes=notes) == []
  (note,) = notes
  assert "rows of 32 bytes or more" in note, note


def test_without_a_recorded_call_the_split_keeps_a_sector_a_row_too():
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(1, 16), dtype="float32")],
                      grid=(3,))
  (action,) = blockshape.resolve(_intent("smaller", 32), f, None)
  assert action.kind == "d" and "2x more programs" in action.edit, action.edit
  notes = []
  g = synthetic_facts([synthetic_eq(0, "get", block_shape=(1, 8), dtype="float32")], grid=(3,))
  assert blockshape.resolve(_intent("smaller", 32), g, None, notes=notes) == []
  assert "32 bytes or more" in notes[0], notes


# --- a kernel that reads its program id (blockshape.why_not_in_block_units) ----------------
# Its block variant is tried (kind c) where the id along the rescaled axis only becomes an
# offset, times the block size the kernel reads from its ref; a block size of its own (a
# keyword) or any other use of the id keeps the edit (kind d), and the variant it would
# make is shown to compute something else.

def offset_rows_kernel(x_ref, o_ref):
  """Adds each row's index: the first row of the block from the id times the block's rows."""
  rows = x_ref.shape[0]
  first = pl.program_id(0) * rows
  o_ref[...] = x_ref[...] + (first + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)
                             ).astype(jnp.float32)


def keyword_rows_kernel(x_ref, o_ref, *, rows):
  first = pl.program_id(0) * rows          # the call's block size, not the ref's
  o_ref[...] = x_ref[...] + (first + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)
                             ).astype(jnp.float32)


def shifted_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + (pl.program_id(0) + 1).astype(jnp.float32)   # the id, not an offset


def _pid_intent(recipe, grid):
  intent, f = _few_programs_intent(grid)
  return intent, dataclasses.replace(
      f, equations={**f.equations, 1: synthetic_eq(1, "program_id")})


def _rows_of(kernel, rows=40, block_rows=8):
  recipes.clear()
  x = jax.random.normal(jax.random.key(2), (rows, 128), jnp.float32)
  spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
  with recipes.capture():
    want = pl.pallas_call(kernel, grid=(rows // block_rows,), in_specs=[spec], out_specs=spec,
                          out_shape=x)(x)
  return recipes.recipes()[-1], x, want


def test_a_program_id_times_the_refs_block_size_is_tried_and_computes_the_same():
  recipe, x, want = _rows_of(offset_rows_kernel)
  intent, f = _pid_intent(recipe, (5,))
  variants = blockshape.resolve(intent, f, recipe)
  assert variants and all(v.kind == "c" for v in variants)
  for v in variants:
    got = blockshape.build(recipe, v.change)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=0)
  np.testing.assert_allclose(np.asarray(want)[:, 0] - np.asarray(x)[:, 0], np.arange(40.0))


def test_a_program_id_times_a_keyword_is_tried_with_the_keyword_rebound():
  """The kernel's own block size (a functools.partial keyword, as JAX's attention's block_q)
  multiplies its program id: the variant rebinds it with the blocks (kind c), computes the
  same, and says so; without the rebinding it would compute something else."""
  import functools
  recipe, x, want = _rows_of(functools.partial(keyword_rows_kernel, rows=8))
  intent, f = _pid_intent(recipe, (5,))
  variants = blockshape.resolve(intent, f, recipe)
  assert variants and all(v.kind == "c" for v in variants)
  for v in variants:
    assert v.change["rebind"] == {"rows": v.change["to_block"]}
    assert f"the kernel's rows=8 -> {v.change['to_block']}" in v.title
    assert f"the kernel's keyword rows=8 -> {v.change['to_block']}" in v.edit
    got = blockshape.build(recipe, v.change)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=0)
  # what the rebinding is for: at 4-row blocks without it, program p adds p * 8, not p * 4
  change = blockshape.change_for(recipe, blockshape.plan(recipe, 0), 4)
  got = blockshape.build(recipe, change)(x)
  assert not np.allclose(np.asarray(got), np.asarray(want))


def test_a_program_id_used_otherwise_keeps_the_edit_and_says_how():
  recipe, _, _ = _rows_of(shifted_kernel)
  intent, f = _pid_intent(recipe, (5,))
  (edit,) = blockshape.resolve(intent, f, recipe)
  assert edit.kind == "d"
  from pallas_prof.advice.split.variant import _structs
  change = blockshape.change_for(recipe, blockshape.plan(recipe, 0), 4)
  kernel = blockshape.variant_kernel(blockshape.build(recipe, change), _structs(recipe))
  assert "computes `convert_element_type` from its program id" in blockshape.why_not_in_block_units(kernel, 0, 4)


@pytest.mark.parametrize("causal", [True, False])
def test_the_example_flash_attentions_query_blocks_are_tried_and_compute_the_same(causal):
  """examples/flash_attention.py reads its first query row as the id times q_ref's rows: at
  other query blocks (the grid rescaled) the causal mask and the loop's bound follow."""
  from testkit.examples import load_example
  fa = load_example("flash_attention")
  q, k, v = (jax.random.normal(jax.random.key(i), (1, 192, 2, 32), jnp.float32)
             for i in range(3))
  recipes.clear()
  with recipes.capture():
    want = fa.flash_attention(q, k, v, causal=causal, block_q=64, block_k=32)
  (recipe,) = [r for r in recipes.recipes() if r.name == "flash_kernel"]
  intent, f = _pid_intent(recipe, (3, 1, 2))
  variants = blockshape.resolve(intent, f, recipe)
  assert variants and all(a.kind == "c" and a.change["axis"] == 0 for a in variants)
  for a in variants:
    got = blockshape.build(recipe, a.change)(q, k, v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def nested_loops_kernel(x_ref, o_ref):
  def outer(i, acc):
    return jax.lax.fori_loop(0, 5, lambda j, a: a + x_ref[...] * 0.5, acc)
  o_ref[...] = jax.lax.fori_loop(0, 3, outer, jnp.zeros(x_ref.shape, jnp.float32))


def test_a_block_variants_interpreter_cost_counts_each_programs_loop_trips():
  """A block variant keeps the kernel's loops: checking it under the interpreter costs the
  grid's programs times each program's iterations (3 x 5 nested here), which is what the
  20,000-iteration bound is held against (a 2,048-program grid of a 64-step loop once ran
  minutes under the interpreter, counted as 2,048)."""
  from pallas_prof.advice import trials
  kernel_registry.clear()
  x = jnp.ones((64, 8), jnp.float32)
  spec = pl.BlockSpec((8, 8), lambda i: (i, 0))
  pl.pallas_call(nested_loops_kernel, grid=(8,), in_specs=[spec], out_specs=spec,
                 out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  (rec,) = [r for r in kernel_registry.kernels() if r.name == "nested_loops_kernel"]
  assert trials.program_trips(rec) == 15
  kernel_registry.clear()
  _add()
  (flat,) = kernel_registry.kernels()
  assert trials.program_trips(flat) == 1            # no loop: a program is one pass


@pytest.mark.parametrize("causal", [False, True])
def test_jax_attentions_query_blocks_are_offered_larger_for_its_rereads_and_compute_the_same(
    causal):
  """JAX's mha forward: every program reads all of K and V (the launch_order rule's
  re-reads), and its query block is a keyword of the kernel (block_q) that sizes its values
  and, causal, multiplies its program id (`start_q * block_q`, and `block_q * (start_q + 1)`
  for the loop's bound). Larger query blocks are offered as a variant with block_q rebound
  (kind c), whose outputs equal the original's under the interpreter."""
  attention = pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")
  from pallas_prof.advice.rules import RULES
  shape = (2, 320, 4, 16)
  q, k, v = (jax.random.normal(jax.random.key(i), shape, jnp.float32) for i in range(3))
  bs = attention.BlockSizes(block_q=16, block_k=16, block_q_dkv=16, block_kv_dkv=16,
                            block_q_dq=16, block_kv_dq=16)
  fn = functools.partial(attention.mha, segment_ids=None, causal=causal, block_sizes=bs)
  recipes.clear()
  kernel_registry.clear()
  with recipes.capture():
    want = jax.jit(fn)(q, k, v)
  (recipe,) = [r for r in recipes.recipes() if r.name == "mha_forward"]
  (rec,) = [r for r in kernel_registry.kernels() if r.name == "mha_forward"]
  # the causal kernel reads its program id (start_q); the full one traces it away unused
  pid = [e for e in rec.generated.eqns if e.primitive == "program_id"]
  assert bool(pid) == causal
  grid = tuple(recipe.kwargs["grid"])
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(16, 16), dtype="float32")] +
                      [synthetic_eq(1, "program_id")] * bool(pid),
                      grid=grid, work=synthetic_work(bytes=1 << 20, block_bytes=20 << 20,
                                                     dot_flops=1 << 30, flops=1 << 30,
                                                     dot_dtype="float32",
                                                     programs=math.prod(grid)))
  f = dataclasses.replace(f, sms=40)            # half the programs still fill 40 SMs
  (finding,) = RULES["launch_order"](f)
  (intent,) = [a for a in finding.actions if a.change.get("block") == "larger"]
  (variant,) = blockshape.resolve(intent, f, recipe)
  assert variant.kind == "c" and variant.change["rebind"] == {"block_q": 32}
  assert variant.change["axis"] == 0 and variant.change["grid"][0] == 10
  got = jax.tree_util.tree_leaves(jax.jit(blockshape.build(recipe, variant.change))(q, k, v))[0]
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
  # what the rebinding is for: the same blocks with block_q left at 16 do not trace
  plain = {key: val for key, val in variant.change.items() if key != "rebind"}
  with pytest.raises(Exception):
    jax.jit(blockshape.build(recipe, plain))(q, k, v)


def test_without_a_recorded_call_the_split_is_of_the_block_a_program_stores():
  """A column sum's program loads 8x32 rows in a loop and stores its 32 sums after it: the
  edit splits the stored block (more programs, each fewer columns), never the loaded rows,
  which the loop sums (told "dimension 0 of its 8x32 blocks" before)."""
  from pallas_prof.advice.rules import RULES
  f = synthetic_facts([synthetic_eq(0, "scan", trips=125),
                       synthetic_eq(1, "get", parent=0, block_shape=(8, 32), dtype="bfloat16"),
                       synthetic_eq(2, "reduce_sum", parent=0, block_shape=(32,),
                                    dtype="float32"),
                       synthetic_eq(3, "swap", block_shape=(32,), dtype="float32")], grid=(3,))
  (finding,) = RULES["few_programs"](f)
  (intent,) = finding.actions
  (edit,) = blockshape.resolve(intent, f, None)
  assert edit.kind == "d", edit
  assert "along dimension 0 of its 32 output blocks; the grid" in edit.edit, edit.edit
  assert "8x32" not in edit.edit and "reduce" not in edit.edit
  # a kernel that stores nothing outside a loop: its largest block, with the caveat
  f = synthetic_facts([synthetic_eq(0, "get", block_shape=(8, 128), dtype="float32")],
                      grid=(8,))
  (finding,) = RULES["few_programs"](f)
  (edit,) = blockshape.resolve(finding.actions[0], f, None)
  assert "of its 8x128 blocks, if the kernel does not reduce over it" in edit.edit, edit.edit
