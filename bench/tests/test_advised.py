"""The suite's "advised" column (issue 49, item 3: bench/suite/advised.py) on the CPU: the
strict diff applier, the import of a patched copy of a split-reduction kernel's file (its
outputs those of the original and of the variant advise builds), a kept split applied as
the GPU run applies it, and the dry run's record with the column."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallas_prof
from testkit import column_sums
from bench.suite import advised, suite, unified_diff
from bench.suite.suite_cases import Built
from pallas_prof.advice import recipes
from pallas_prof.advice.schema import Trial
from pallas_prof.advice.split import variant
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs


@pytest.fixture(autouse=True)
def installed():
  pallas_prof.install()
  yield


TEXT = "".join(f"line {i}\n" for i in range(1, 21))


def _diff(old: str, new: str, n: int = 3) -> str:
  return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                      "a/m.py", "b/m.py", n=n))


# --- the applier --------------------------------------------------------------------------------

def test_the_applier_applies_hunks_at_their_lines():
  new = TEXT.replace("line 3\n", "line 3\ninserted\n").replace("line 15\n", "") \
      .replace("line 20\n", "last\n")
  for n in (0, 1, 3):
    (patch,) = unified_diff.parse(_diff(TEXT, new, n))
    assert patch.path(1) == "m.py"
    assert patch.apply(TEXT) == new
  # files without their last newline (diff -u's marker), an insertion at the very top
  diff = ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,4 @@\n+top\n a\n-b\n"
          "\\ No newline at end of file\n+b\n+c\n\\ No newline at end of file\n")
  assert unified_diff.parse(diff)[0].apply("a\nb") == "top\na\nb\nc"


def test_the_applier_refuses_a_hunk_that_does_not_match_and_says_where():
  diff = _diff(TEXT, TEXT.replace("line 10\n", "ten\n"))
  edited = TEXT.replace("line 9\n", "line nine\n")     # a context line of the hunk changed
  (patch,) = unified_diff.parse(diff)
  with pytest.raises(unified_diff.DiffDoesNotApply) as e:
    patch.apply(edited)
  why = str(e.value)
  assert "a/m.py, hunk 1 (@@ -7,7 +7,7 @@) does not match the file at line 9" in why
  assert "'line 9\\n'" in why and "'line nine\\n'" in why
  # no offset either: the same hunk two lines lower in the file is not looked for
  with pytest.raises(unified_diff.DiffDoesNotApply, match="does not match the file at line 7"):
    patch.apply("x\ny\n" + TEXT)
  with pytest.raises(unified_diff.DiffDoesNotApply, match="the file has 5"):
    patch.apply("".join(TEXT.splitlines(True)[:5]))


def test_the_applier_refuses_a_malformed_diff():
  diff = _diff(TEXT, TEXT.replace("line 10\n", "ten\n"))
  short = diff.replace("@@ -7,7 +7,7 @@", "@@ -7,8 +7,7 @@")
  with pytest.raises(unified_diff.DiffDoesNotApply, match="counts 8 old and 7 new lines, its "
                     "body has 7 and 7"):
    unified_diff.parse(short)
  with pytest.raises(unified_diff.DiffDoesNotApply, match="no file in the diff"):
    unified_diff.parse("just words\n")
  with pytest.raises(unified_diff.DiffDoesNotApply, match="is not a context, removed or added"):
    unified_diff.parse(diff.replace(" line 8\n", "?line 8\n"))


# --- the patched copy of a split-reduction kernel ----------------------------------------------

def _probe():
  x = jax.random.normal(jax.random.key(5), (203, 40), jnp.bfloat16)
  kernel_registry.clear()
  recipes.clear()
  with recipes.capture():
    want = jax.block_until_ready(column_sums.column_sums(x))
  return x, want, recipes.recipes()[-1]


def test_the_patched_copy_gives_the_originals_and_the_variants_outputs(tmp_path):
  from pallas_prof.advice.split import source
  x, want, recipe = _probe()
  k, p = variant.pattern_of(recipe)
  diff = source.unified_diff(recipe, p, 3, len(k.grid))       # the diff advise writes
  module = advised.patched_copy(inspect.getsourcefile(column_sums), [diff], str(tmp_path))
  assert module.__file__ == str(tmp_path / "column_sums.py")   # the file's own name
  assert "_pallas_prof_split_sum" in (tmp_path / "column_sums.py").read_text()
  kernel_registry.clear()
  got = leaves(jax.block_until_ready(module.column_sums(x)))
  assert [tuple(r.generated.grid) for r in kernel_registry.kernels()] == [(3, 3)]
  assert same_outputs(got, leaves(want)) is None
  # the patched file computes what advise's variant computes, bit for bit
  built = leaves(jax.jit(variant.build(recipe, k, p, 3))(x))
  for g, b in zip(got, built, strict=True):
    np.testing.assert_array_equal(g, b)
  # and the original module is untouched
  assert "_pallas_prof_split_sum" not in open(column_sums.__file__).read()


def test_a_diff_of_another_file_or_a_stale_file_is_refused(tmp_path):
  from pallas_prof.advice.split import source
  _, _, recipe = _probe()
  k, p = variant.pattern_of(recipe)
  diff = source.unified_diff(recipe, p, 3, len(k.grid))
  other = tmp_path / "other.py"
  other.write_text(open(column_sums.__file__).read())
  with pytest.raises(unified_diff.DiffDoesNotApply, match="not .*other.py: the suite patches"):
    advised.patched_copy(str(other), [diff], str(tmp_path / "out"))
  # the same diff twice: both edit the same lines of the file as given
  with pytest.raises(unified_diff.DiffDoesNotApply, match="diffs 1 and 2 edit overlapping"):
    advised.patched_copy(column_sums.__file__, [diff, diff], str(tmp_path / "twice"))


SECOND_CALL = '''

def column_sums_again_kernel(x_ref, sums_ref, *, block_rows):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * block_rows, block_rows), :].astype(jnp.float32).sum(axis=0)
  sums_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // block_rows, body, jnp.zeros(
      x_ref.shape[1], jnp.float32)).astype(sums_ref.dtype)


def column_sums_again(x):
  return pl.pallas_call(
      functools.partial(column_sums_again_kernel, block_rows=BLOCK_ROWS),
      jax.ShapeDtypeStruct(x.shape[1:], x.dtype), name="column_sums_again")(x)
'''


def test_two_kernels_diffs_of_one_file_apply_in_any_order(tmp_path):
  """A module with two pallas_calls, each kernel's diff made against the file as given (a
  split for the first, a loop step for the second, below it): given top-down, the second
  would find its lines moved by the first's; the copy applies them bottom-up, each at the
  lines its header names, and both functions give their original outputs."""
  from pallas_prof.advice import loop_steps
  from pallas_prof.advice.split import source
  from testkit import patching
  path = tmp_path / "two_calls.py"
  path.write_text(open(column_sums.__file__).read() + SECOND_CALL)
  module = patching.load(path, "two_calls_given")
  x = jax.random.normal(jax.random.key(2), (208, 40), jnp.float32)
  recipes.clear()
  with recipes.capture():
    want = [leaves(module.column_sums(x)), leaves(module.column_sums_again(x))]
  first, second = recipes.recipes()[-2:]
  k, p = variant.pattern_of(first)
  split = source.unified_diff(first, p, 3, len(k.grid))
  step = loop_steps.keyword_diff(second, "block_rows", 16)
  assert "block_rows=16" in step and "_pallas_prof_split_sum" in split
  for order in ([split, step], [step, split]):
    patched = advised.patched_copy(str(path), order, str(tmp_path / f"out{len(order[0])}"))
    got = [leaves(patched.column_sums(x)), leaves(patched.column_sums_again(x))]
    for g, w in zip(got, want, strict=True):
      assert same_outputs(g, w) is None


def test_a_kept_split_is_applied_as_the_gpu_run_applies_it(tmp_path, monkeypatch):
  """What the GPU run does with a held kind e action, on the CPU: advise's own advice for
  the probe kernel with its split marked as held (a GPU would have timed it), applied by
  advise_case to a copy of the module, whose function the column then times."""
  x = jax.random.normal(jax.random.key(6), (203, 40), jnp.float32)
  want = leaves(column_sums.column_sums(x))
  real = pallas_prof.advise

  def advise_with_a_held_split(records, **kw):
    out = []
    for a in real(records, **kw):
      actions = [dataclasses.replace(x, trial=Trial(2e-3, 1e-3, 50.0, 2.0, True),
                                     change={**x.change, "variants": twins})
                 if x.kind == "e" else x for x in a.actions]
      out.append(dataclasses.replace(a, actions=actions))
    return out
  # what a GPU trial records of each twin it timed (split/trial.fastest)
  twins = [{"variant": "as given", "after_s": 1e-3, "error": None},
           {"variant": "the loop's loads copied 3 iterations ahead", "after_s": 1.2e-3,
            "error": None}]
  monkeypatch.setattr(pallas_prof, "advise", advise_with_a_held_split)
  built = Built((x,), None, None, None, 0.0, 0, module=column_sums,
                from_module=lambda m: m.column_sums)
  got = advised.advise_case(built, advised.Options(5.0, False, str(tmp_path)), on_gpu=False,
                            say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["kind"] == "e" and kept["saving_pct"] == 50.0
  assert kept["variants"] == twins        # the record says what each twin gave
  assert kept["applied"] == "its diff, to a copy of the module"
  assert got.entry["advised"]["diffs_applied"] == 1 and got.tuning_file is None
  kernel_registry.clear()
  out = leaves(jax.block_until_ready(jax.jit(got.fn)(x)))
  assert [tuple(r.generated.grid) for r in kernel_registry.kernels()] == [(3, 3)]
  assert same_outputs(out, want) is None
  assert (tmp_path / "patched" / "column_sums.py").exists()


def test_a_kept_dot_tile_is_applied_through_the_ops_parameters(tmp_path, monkeypatch):
  """A held kind c action of dot_rate (a tile with its warps and stages: advice/dots/joint.py's
  change) is applied as the matmul's user applies it, through bm, bn, num_warps and
  num_stages (Built.with_tile): the timed function's kernel has the new tile's grid, and its
  outputs are the default's."""
  from bench.suite import suite_cases
  from pallas_prof.advice.schema import Action
  key = jax.random.key(11)
  built = suite_cases.matmul((48, 40, 64), jnp.float32, key, bm=16, bn=8, bk=16, num_warps=4,
                             num_stages=3)
  want = leaves(jax.jit(built.pallas)(*built.args))
  real = pallas_prof.advise
  change = {"tile": [24, 20], "num_warps": 2, "num_stages": 2, "from_tile": [16, 8],
            "axes": [0, 1], "grid": [2, 2], "blocks": []}

  def advise_with_a_held_tile(records, **kw):
    return [dataclasses.replace(a, actions=[Action(
        "c", "tile 16x8 -> 24x20, num_warps 4 -> 2, num_stages 3 -> 2", "dot_rate", change,
        trial=Trial(2e-3, 1e-3, 50.0, 2.0, True))] + list(a.actions))
        for a in real(records, **kw)]
  monkeypatch.setattr(pallas_prof, "advise", advise_with_a_held_tile)
  got = advised.advise_case(built, advised.Options(5.0, False, str(tmp_path)), on_gpu=False,
                            say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["kind"] == "c" and kept["applied"].startswith("the op's own parameters")
  assert got.entry["advised"]["tile_applied"] == {"tile": [24, 20], "num_warps": 2,
                                                  "num_stages": 2}
  kernel_registry.clear()
  out = leaves(jax.block_until_ready(jax.jit(got.fn)(*built.args)))
  (record,) = kernel_registry.kernels()
  assert tuple(record.generated.grid) == (2, 2)           # ceil(48/24) x ceil(40/20)
  assert same_outputs(out, want) is None

  # a case that cannot take a tile records it as kept and not applied
  plain = dataclasses.replace(built, with_tile=None)
  got = advised.advise_case(plain, advised.Options(5.0, False, str(tmp_path / "plain")),
                            on_gpu=False, say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["applied"].startswith("not applied: a kind c action")
  assert "tile_applied" not in got.entry["advised"]


def _with_a_held_k_major_b(operand: int, title: str, change: dict):
  """pallas_prof.advise with a K-major B action first in each kernel's advice, its diff the
  one advise writes for the recorded call, marked held (as a GPU's trial would)."""
  from pallas_prof.advice.dots import layout
  from pallas_prof.advice.dots.layout_source import unified_diff as layout_diff
  from pallas_prof.advice.schema import Action
  real = pallas_prof.advise

  def advise(records, **kw):
    recipe = recipes.find(records[0])
    held = Action("e", title, "dot_layout", change,
                  diff=layout_diff(recipe, operand, layout.block_axes(recipe, operand)),
                  trial=Trial(2e-3, 1e-3, 50.0, 2.0, True))
    return [dataclasses.replace(a, actions=[held] + list(a.actions))
            for a in real(records, **kw)]
  return advise


def test_a_kept_k_major_b_at_a_tile_is_applied_as_its_diff_and_the_ops_parameters(
    tmp_path, monkeypatch):
  """A held kind e K-major B kept at another tile (advice/dots/layout.py's trial at the
  dot's tiles) is applied both ways: its diff to a copy of examples/matmul.py and its tile
  through the op's parameters. The timed kernel reads B transposed at the new tile's grid
  and gives the default's outputs."""
  from bench.suite import suite_cases
  key = jax.random.key(12)
  built = suite_cases.matmul((48, 40, 64), jnp.float32, key, bm=16, bn=8, bk=16, num_warps=4,
                             num_stages=3)
  want = leaves(jax.jit(built.pallas)(*built.args))
  change = {"layout": "k_major", "operand": 1, "tile": [24, 20], "num_warps": 2,
            "num_stages": 2, "from_tile": [16, 8], "axes": [0, 1], "grid": [2, 2],
            "blocks": []}
  monkeypatch.setattr(pallas_prof, "advise", _with_a_held_k_major_b(
      1, "B (argument 1) stored K-major; tile 16x8 -> 24x20", change))
  got = advised.advise_case(built, advised.Options(5.0, False, str(tmp_path)), on_gpu=False,
                            say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["kind"] == "e"
  assert kept["applied"] == ("its diff, to a copy of the module; its tile, through the op's "
                             "parameters (Built.with_tile)")
  assert got.entry["advised"]["diffs_applied"] == 1
  assert got.entry["advised"]["tile_applied"]["tile"] == [24, 20]
  kernel_registry.clear()
  out = leaves(jax.block_until_ready(jax.jit(got.fn)(*built.args)))
  (record,) = kernel_registry.kernels()
  assert tuple(record.generated.grid) == (2, 2)
  assert tuple(record.in_avals[1].shape) == (40, 64)      # B given transposed: (N, K)
  assert same_outputs(out, want) is None


def test_a_kept_rebound_block_size_is_applied_through_the_ops_parameters(tmp_path, monkeypatch):
  """A held kind c block change that rebinds the kernel's own block size (blockshape.py's
  "rebind": attention's block_q) is applied as the op's user applies it, through the op's
  parameter of that name (Built.with_params): the timed kernel has the new grid and the
  default's outputs. A backward case, whose kernels' keywords of that name are other
  parameters, records it as kept and not applied."""
  from bench.suite import suite_cases
  from pallas_prof.advice.schema import Action
  built = suite_cases.mha(False, False, (1, 96, 2, 32), jnp.float32, jax.random.key(3),
                          block=32)
  want = leaves(jax.jit(built.pallas)(*built.args))
  real = pallas_prof.advise
  change = {"block": "larger", "axis": 0, "from_block": 32, "to_block": 96, "grid": [1, 1, 2],
            "blocks": [], "rebind": {"block_q": 96}}

  def advise_with_a_held_block(records, **kw):
    return [dataclasses.replace(a, actions=[Action(
        "c", "block 32 -> 96 along grid axis 0, grid 1x1x2, the kernel's block_q=32 -> 96",
        "rereads", change, trial=Trial(2e-3, 1e-3, 50.0, 2.0, True))] + list(a.actions))
        for a in real(records, **kw)]
  monkeypatch.setattr(pallas_prof, "advise", advise_with_a_held_block)
  got = advised.advise_case(built, advised.Options(5.0, False, str(tmp_path)), on_gpu=False,
                            say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["applied"] == "the op's own parameters: block_q=96 (Built.with_params)"
  assert got.entry["advised"]["params_applied"] == {"block_q": 96}
  kernel_registry.clear()
  out = leaves(jax.block_until_ready(jax.jit(got.fn)(*built.args)))
  (record,) = kernel_registry.kernels()
  assert tuple(record.generated.grid) == (1, 1, 2)         # 96 query rows in one block
  assert same_outputs(out, want) is None

  plain = dataclasses.replace(built, with_params=None)
  got = advised.advise_case(plain, advised.Options(5.0, False, str(tmp_path / "plain")),
                            on_gpu=False, say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["applied"].startswith("not applied: a kind c action")
  assert "params_applied" not in got.entry["advised"]
  assert suite_cases.mha(False, True, (1, 96, 2, 32), jnp.float32, jax.random.key(3),
                         block=32).with_params is None


def test_attentions_k_major_v_at_a_larger_block_q_is_applied_as_diff_and_parameter(
    tmp_path, monkeypatch):
  """A held kind e K-major V kept at a block_q change (layout.py's trial at the kernel's
  block changes): its diff applied to the copy of JAX's attention.py (V passed with its
  seq and dim axes swapped) and block_q through the op's parameter. The timed kernel reads
  V swapped, has the new grid, and gives the default's outputs."""
  pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")
  from bench.suite import suite_cases
  built = suite_cases.mha(False, False, (1, 96, 2, 32), jnp.float32, jax.random.key(5),
                          block=32)
  want = leaves(jax.jit(built.pallas)(*built.args))
  change = {"layout": "k_major", "operand": 2, "axis": 0, "from_block": 32, "to_block": 96,
            "grid": [1, 1, 2], "blocks": [], "rebind": {"block_q": 96}}
  monkeypatch.setattr(pallas_prof, "advise", _with_a_held_k_major_b(
      2, "B (argument 2) stored K-major; block 32 -> 96", change))
  got = advised.advise_case(built, advised.Options(5.0, False, str(tmp_path)), on_gpu=False,
                            say=lambda text: None)
  (kept,) = got.entry["kept"]
  assert kept["applied"] == ("its diff, to a copy of the module; its blocks, through the op's "
                             "parameters: block_q=96 (Built.with_params)")
  assert got.entry["advised"]["params_applied"] == {"block_q": 96}
  kernel_registry.clear()
  out = leaves(jax.block_until_ready(jax.jit(got.fn)(*built.args)))
  (record,) = kernel_registry.kernels()
  assert tuple(record.generated.grid) == (1, 1, 2)
  assert tuple(record.in_avals[2].shape) == (1, 32, 2, 96)   # V's seq and dim swapped
  assert same_outputs(out, want) is None


# --- the suite's dry run with the column -------------------------------------------------------

@pytest.mark.slow
def test_the_dry_run_with_advised_records_the_column_and_the_default_run_has_none(tmp_path):
  out = tmp_path / "suite.json"
  record = suite.main(["--dry-run", "--advised", "--only", "rms_norm fwd+bwd 2x2x136",
                       "--out", str(out)])
  assert json.loads(out.read_text())["columns"] == record["columns"]
  assert record["columns"] == [*suite.COLUMNS, "advised"]
  (case,) = record["cases"]
  entry = case["columns"]["advised"]
  assert "error" not in entry, entry.get("error")
  assert entry["correct"] and entry["wall_s"] > 0
  assert entry["kept"] == []
  assert entry["nothing_measured"].startswith("no GPU: advise timed nothing")
  assert [k["kernel"].split("#")[0] for k in entry["nothing_kept"]] == \
      ["rms_forward", "ln_backward_dx", "ln_backward_dw_db"]
  assert all(k["why"].startswith("not measured: no GPU") for k in entry["nothing_kept"])
  assert entry["advised"]["module"] == "rms_norm.py"
  assert case["advised_over_xla_wall"] > 0
  assert record["advised_outside_goal"] is None          # a dry run judges no goal
  assert "nothing was measured" in record["advised_basis"]
  probe = record["advised_diff_path"]
  assert "error" not in probe, probe
  assert probe["outputs_equal"] and probe["patched_grid"] == [3, 3]
  assert probe["kept_by_advise"] is None and probe["diff_lines"] > 10

  # and the default run stays as it was: no advised column, no advise
  plain = suite.main(["--dry-run", "--only", "vector_add 3007", "--out",
                      str(tmp_path / "plain.json")])
  assert plain["columns"] == list(suite.COLUMNS)
  assert "advised" not in plain["cases"][0]["columns"] and "advised" not in plain
  assert "geomean_advised_over_xla" not in plain
