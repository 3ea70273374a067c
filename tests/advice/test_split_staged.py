"""Issue 49: the split reduction with its loop's loads copied ahead (advice/split/staged.py).

A GPU trial times, beside the split and its deferred twin, each of them with pallas-prof's
CompilerParams(loop_stages=3) and the warps cut until each thread loads 4 bytes or more;
kept, the diff also sets the call's compiler_params (and imports pallas_prof). Checked here
on a CPU: which twins are built, their settings, that the twin's kernel does stage its loop,
and that the kept diff applies to a copy of the user's file (a hand-written column sum, and
JAX's own layer_norm) and gives the original's outputs under the interpreter."""
from __future__ import annotations

import dataclasses
import inspect
import shutil

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from pallas_prof.advice import recipes, variants
from pallas_prof.advice.schema import Action
from pallas_prof.advice.split import staged, trial
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import column_sums, patching
from testkit.jax_ops import gpu_op

from .test_split_reduction import _column_recipe

pallas_prof.install()


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


def _kept(monkeypatch, recipe, pick):
  """trial.tried on a "GPU" whose fastest() keeps the twin `pick` chooses; the twins seen."""
  seen = []

  def fastest(a, recipe_, twins, budget_s, what):
    seen.extend(twins)
    (_, change, words) = next(t for t in twins if pick(t[1]))
    return dataclasses.replace(a, change={**a.change, **change}, status="measured",
                               title=f"{a.title}; {words}")
  monkeypatch.setattr(trial, "fastest", fastest)
  a = Action("e", "split", "long_reduction", {"split": 3, "axis": 1})
  return trial.tried(a, recipe, gpu=True, budget_s=5), seen


def test_each_twin_is_also_timed_with_its_loop_staged_at_warps_that_copy_ahead(monkeypatch):
  """203x40 bfloat16 column sums, 8x16 tiles (256 bytes a load) at the default 4 warps: 2
  bytes a thread, so the staged twins run 2 warps (4 bytes); their kernels stage the loop."""
  recipe, _, _ = _column_recipe(jnp.bfloat16)
  _, seen = _kept(monkeypatch, recipe, lambda c: not c)
  changes = [c for _, c, _ in seen]
  settings = {"num_warps": 2, "num_stages": 3, "loop_stages": 3}
  assert changes == [{}, {"deferred": True}, {"staged": settings},
                     {"deferred": True, "staged": settings}]
  for fn, change, words in seen[2:]:
    gk = variants.trace_variant(fn, recipe)
    assert gk.loop_stages == 3 and gk.num_warps == 2, (change, gk.loop_stages, gk.num_warps)
    assert "tl.range(" in gk.source and "num_stages=3" in gk.source
    assert "loop_stages=3, num_warps=2" in words
  # the split as written stages nothing
  assert variants.trace_variant(seen[0][0], recipe).loop_stages == 0


def test_the_kept_staged_twins_diff_sets_pallas_profs_compiler_params_and_applies(
    monkeypatch, tmp_path):
  """Kept (the split with its loop staged, rows not deferred): the diff imports pallas_prof
  and gives the call compiler_params=pallas_prof.CompilerParams(...); the patched copy runs
  the staged kernel (its record's loop_stages 3, at 2 warps) and gives the original's outputs,
  at the recorded shape and at another."""
  recipe, x, want = _column_recipe(jnp.bfloat16)
  out, _ = _kept(monkeypatch, recipe, lambda c: c.get("staged") and not c.get("deferred"))
  params = "compiler_params=pallas_prof.CompilerParams(num_warps=2, num_stages=3, loop_stages=3)"
  assert "+import pallas_prof\n" in out.diff and params in out.diff
  assert "_split_lo" in out.diff and params in out.edit and "loop_stages=3" in out.title
  module = patching.patched(tmp_path / "column_sums_staged.py", out.diff, column_sums.__file__)
  kernel_registry.clear()
  assert same_outputs(leaves(module.column_sums(x)), leaves(want)) is None
  (rec,) = [r for r in kernel_registry.kernels() if r.name == "column_sums"]
  assert rec.generated.loop_stages == 3 and rec.generated.num_warps == 2
  assert tuple(rec.generated.grid) == (3, 3)
  other = jax.random.normal(jax.random.key(9), (77, 150), jnp.bfloat16)
  assert same_outputs(leaves(module.column_sums(other)),
                      leaves(column_sums.column_sums(other))) is None


def test_jax_layer_norms_staged_and_deferred_diff_replaces_its_own_compiler_params(
    monkeypatch, tmp_path):
  """JAX's layer_norm (a copy of its file): the dw/db call's `plgpu.CompilerParams(num_warps=
  num_warps)` becomes pallas-prof's with the twin's settings, the other calls' are left as
  they are, and the patched file's gradients equal the original's."""
  given = tmp_path / "layer_norm_given.py"
  shutil.copy(inspect.getsourcefile(gpu_op("layer_norm")), given)
  module = patching.load(given, "layer_norm_staged_copy")
  x = jax.random.normal(jax.random.key(0), (3, 200, 72), jnp.float32)
  w = jax.random.normal(jax.random.key(1), (72,), jnp.float32)
  b = jax.random.normal(jax.random.key(2), (72,), jnp.float32)
  grad = lambda m: jax.grad(lambda w, b: m.layer_norm(x, w, b).sum(), argnums=(0, 1))  # noqa: E731
  recipes.clear()
  with recipes.capture():
    want = leaves(grad(module)(w, b))
  (recipe,) = [r for r in recipes.recipes() if r.name == "ln_backward_dw_db"]
  out, seen = _kept(monkeypatch, recipe, lambda c: c.get("staged") and c.get("deferred"))
  # 16x16 float32 tiles (1 KiB a load) at JAX's 8 warps: 4 bytes a thread, enough
  assert out.change["staged"] == {"num_warps": 8, "num_stages": 3, "loop_stages": 3}
  diff = out.diff
  assert diff.count("pallas_prof.CompilerParams(num_warps=8, num_stages=3, loop_stages=3)") == 1
  assert diff.count("-      compiler_params=plgpu.CompilerParams(num_warps=num_warps),") == 1
  patched = patching.patched(tmp_path / "layer_norm_staged.py", diff, str(given))
  assert "plgpu.CompilerParams(num_warps=num_warps)" in open(patched.__file__).read()
  assert same_outputs(leaves(grad(patched)(w, b)), want) is None


def test_staging_keeps_the_warps_where_each_thread_already_copies_four_bytes():
  """16x128 bfloat16 tiles (4 KiB a load) at 8 warps: 16 bytes a thread, the warps kept; a
  kernel whose loops load nothing has no twin."""
  def gk(nbytes, warps):
    eqn = type("E", (), {"parent": 0 if nbytes else None, "bytes_read": nbytes})
    return type("G", (), {"eqns": [eqn], "num_warps": warps, "num_stages": 2})
  assert staged.staging(gk(4096, 8)) == staged.Staging(8, 2, 3)
  assert staged.staging(gk(256, 8)) == staged.Staging(2, 2, 3)
  assert staged.staging(gk(2, 4)) == staged.Staging(1, 2, 3)
  assert staged.staging(gk(0, 4)) is None


def _call_file(tmp_path, text):
  from pallas_prof.advice.split.source_file import SourceFile
  path = tmp_path / f"k{len(list(tmp_path.iterdir()))}.py"    # a new name: linecache keeps old
  path.write_text(text)
  recipe = type("R", (), {"call_line": text.splitlines().index(
      next(x for x in text.splitlines() if "pallas_call(" in x)) + 1, "location": "k.py:?"})
  return SourceFile.read(str(path)), recipe


def test_the_settings_edit_adds_compiler_params_where_the_call_has_none_and_refuses_star_kwargs(
    tmp_path):
  """A call without compiler_params gets one (after its last argument, comma or not) and the
  file `import pallas_prof`; a file that imports it under another name is written with that
  name; a call passing **keywords is refused (a second compiler_params would be a TypeError
  at the call)."""
  from pallas_prof.advice.split.source_file import SourceRefused, diff_of
  s = staged.Staging(2, 3)
  f, r = _call_file(tmp_path, "import jax\nfrom jax.experimental import pallas as pl\n\n"
                    "def f(k, o, x):\n  return pl.pallas_call(k, o, grid=(3,),)(x)\n")
  staged.settings_edit(f, r, s)
  new = f.edited()
  assert "import jax\nfrom jax.experimental import pallas as pl\nimport pallas_prof\n" in new
  assert ("pl.pallas_call(k, o, grid=(3,), compiler_params=pallas_prof.CompilerParams("
          "num_warps=2, num_stages=3, loop_stages=3))(x)") in new
  assert diff_of([f]).startswith("--- a/")
  f, r = _call_file(tmp_path, "import pallas_prof as pp\nfrom jax.experimental import pallas "
                    "as pl\ndef f(k, o, x):\n  return pl.pallas_call(k, o, compiler_params="
                    "None)(x)\n")
  staged.settings_edit(f, r, s)
  assert "compiler_params=pp.CompilerParams(num_warps=2" in f.edited()
  assert f.edited().count("import pallas_prof") == 1
  f, r = _call_file(tmp_path, "import jax\nfrom jax.experimental import pallas as pl\n"
                    "def f(k, o, x, **kw):\n  return pl.pallas_call(k, o, **kw)(x)\n")
  with pytest.raises(SourceRefused, match=r"\*\*keywords"):
    staged.settings_edit(f, r, s)
