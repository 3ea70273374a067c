"""A pallas_call's out_shape is a pytree (one struct, a list, a tuple, a dict): the advice
reads its outputs in the order pallas_call flattens them (recipes.Recipe.outs), builds its
variants in the call's own structure, and writes the split's diff for a dict of outputs;
and where a part of the advice fails on a call it does not read right, that part is said
in the notes and the rest of the advice stands (engine._contained, api.for_report)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import api, engine, recipes
from pallas_prof.advice.split import source, variant
from pallas_prof.backend import kernel_registry
from pallas_prof.tune.choice import leaves, same_outputs
from testkit import patching


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


def _struct(n):
  return jax.ShapeDtypeStruct((n,), jnp.float32)


@pytest.mark.parametrize("out_shape, out_specs, want_specs", [
    (_struct(4), "S", ["S"]),
    ([_struct(4), _struct(5)], ["A", "B"], ["A", "B"]),
    ((_struct(4), _struct(5)), ["A", "B"], ["A", "B"]),       # a list of specs for a tuple
    ({"sum": _struct(4), "sq": _struct(5)}, {"sq": "Q", "sum": "S"}, ["Q", "S"]),
    ({"sum": _struct(4), "sq": _struct(5)}, None, [None, None]),
])
def test_a_recipes_outputs_in_pallas_calls_order(out_shape, out_specs, want_specs):
  r = recipes.Recipe(kernel=None, out_shape=out_shape, kwargs={"out_specs": out_specs},
                     call_file=None, call_line=None, original=None)
  # the dict's keys sorted, as jax flattens a dict
  assert [o.shape for o in r.outs] == [o.shape for o in jax.tree.leaves(out_shape)]
  assert r.out_specs() == want_specs
  assert r.outs_like(["x"] * len(r.outs)) == jax.tree.map(lambda _: "x", out_shape)
  again = r.out_specs_like(want_specs)
  assert again == (out_specs if out_specs is not None else want_specs)
  assert type(again) is type(out_specs if out_specs is not None else want_specs)


STATS = '''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl


def stats_kernel(x_ref, o):
  def body(i, c):
    x = x_ref[pl.ds(i * 8, 8), :]
    return c[0] + x.sum(axis=0), c[1] + (x * x).sum(axis=0)
  z = jnp.zeros((x_ref.shape[1],), jnp.float32)
  s, q = jax.lax.fori_loop(0, x_ref.shape[0] // 8, body, (z, z))
  o["sum"][...] = s
  o["sq"][...] = q


def stats(x):
  r, c = x.shape
  out = {"sum": jax.ShapeDtypeStruct((c,), jnp.float32),
         "sq": jax.ShapeDtypeStruct((c,), jnp.float32)}
  return pl.pallas_call(stats_kernel, grid=(c // 64,),
                        in_specs=[pl.BlockSpec((r, 64), lambda j: (0, j))],
                        out_specs={"sum": pl.BlockSpec((64,), lambda j: (j,)),
                                   "sq": pl.BlockSpec((64,), lambda j: (j,))},
                        out_shape=out)(x)
'''


@pytest.fixture
def dict_stats(tmp_path):
  path = tmp_path / "dict_stats.py"
  path.write_text(STATS)
  module = patching.load(path, "dict_stats")
  x = jax.random.normal(jax.random.key(2), (1000, 128), jnp.float32)
  recipes.clear()
  with recipes.capture():
    want = jax.block_until_ready(module.stats(x))
  return path, module, x, want, recipes.recipes()[-1]


def test_a_dict_of_outputs_splits_and_its_diff_applies(dict_stats):
  path, module, x, want, recipe = dict_stats
  k, p = variant.pattern_of(recipe)          # two outputs, no scratch refs
  assert k.n_out == 2 and p.trip == 125 and k.grid == (2,)
  split = variant.build(recipe, k, p, 5)
  assert set(split(x)) == {"sum", "sq"}
  assert variant.compare(recipe, split) is None
  diff = source.unified_diff(recipe, p, 5, len(k.grid))
  assert "for _k, _o in (out).items()}" in diff
  patched = patching.patched(path, diff)
  got = patched.stats(x)
  assert set(got) == {"sum", "sq"}
  assert same_outputs(leaves(got), leaves(want)) is None
  eqn = variant._find_call(jax.make_jaxpr(patched.stats)(x).jaxpr)
  assert tuple(eqn.params["grid_mapping"].grid) == (2, 5)


def _records():
  """The original call's records (a patched file's kernel has the same name, another grid)."""
  return [r for r in kernel_registry.kernels() if r.name == "stats_kernel"
          and tuple(r.generated.grid) == (2,)]


def test_a_dict_of_outputs_gets_its_whole_advice(dict_stats):
  """The split and the smaller blocks (kind c, the call traced again with its dict of
  specs) are offered and checked under the interpreter; no part of the advice failed."""
  *_, recipe = dict_stats
  recs = _records()
  (advice,) = pallas_prof.advise(recs[-1:], sample=False, progress=None)
  assert not [n for n in advice.notes if "failed" in n], advice.notes
  kinds = {a.kind for a in advice.actions}
  assert {"e", "c"} <= kinds, [a.title for a in advice.actions]
  for a in advice.actions:
    if a.kind in "ce":
      assert a.status.startswith("not measured: no GPU; outputs equal"), (a.title, a.status)


def test_a_part_of_the_advice_that_fails_is_said_and_the_rest_stands(dict_stats, monkeypatch):
  *_, recipe = dict_stats
  recs = _records()[-1:]

  def broken(*args, **kwargs):
    raise RuntimeError("a recipe it did not expect")
  monkeypatch.setattr(engine.blockshape, "resolve", broken)
  (advice,) = pallas_prof.advise(recs, sample=False, progress=None)
  assert any("its advice failed: RuntimeError: a recipe it did not expect" in n
             for n in advice.notes), advice.notes
  assert any(a.kind == "e" for a in advice.actions)      # the split still offered
  # a kernel whose whole diagnosis fails: said in its own advice, the others' kept
  monkeypatch.setattr(api, "diagnose", broken)
  (failed,) = pallas_prof.advise(recs, sample=False, progress=None)
  assert failed.label == recs[0].label and not failed.actions
  assert failed.notes == ["advice failed: RuntimeError: a recipe it did not expect"]
