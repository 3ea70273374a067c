"""Issue 49, item 1: a float32 dot far from its matrix rate (pallas_prof/advice/dots/).

The dot_rate rule fires on a dot far from its rate and not on one at it; its block shapes
come with their own warps and stages (kind c), and each variant's outputs equal the
original's under the interpreter at M and N that are not powers of two (the kernel
masks); a dot at HIGHEST gets precision edits (kind e) lowered with the input_precision
they name; on a CPU no error is printed as if it were the GPU's."""
from __future__ import annotations

import inspect

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallas_prof
from pallas_prof.advice import blockshape, recipes
from pallas_prof.advice.dots import joint, precision
from pallas_prof.advice.rules.dots import dot_precision, dot_rate
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.artifacts import DotFacts
from pallas_prof.tune.choice import leaves, same_outputs
from testkit.precision_matmul import precision_matmul
from tests.advice.synthetic import synthetic_eq, synthetic_facts, synthetic_work

pallas_prof.install()


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  yield


# where the kernel's dot is written (precision edits name the user's file and line)
KERNEL_FILE = inspect.getsourcefile(precision_matmul)


def _matmul(a, b, bm, bn, bk, precision_=None, num_warps=4, num_stages=3):
  return precision_matmul(a, b, bm, bn, bk, precision_, num_warps, num_stages)


def _recipe(shape, bm, bn, bk, precision_=None, run=False):
  """The call's recipe (traced only, unless `run`) and its registry record."""
  m, n, k = shape
  recipes.clear()
  fn = jax.jit(lambda a, b: _matmul(a, b, bm, bn, bk, precision_))
  with recipes.capture():
    if run:
      fn(jnp.ones((m, k), jnp.float32), jnp.ones((k, n), jnp.float32))
    else:
      fn.lower(jax.ShapeDtypeStruct((m, k), jnp.float32), jax.ShapeDtypeStruct((k, n), jnp.float32))
  (recipe,) = recipes.recipes()
  rec = [r for r in kernel_registry.kernels() if r.name == "precision_matmul_kernel"
         and tuple(r.generated.grid) == tuple(recipe.kwargs["grid"])
         and tuple(r.in_avals[0].shape) == (m, k)][-1]
  return recipe, rec


# --- the rule, on given facts ------------------------------------------------------------------

def _dot_facts(median_s, precision_="tf32", flops=2 * 5120 * 3136 * 4096):
  dot = DotFacts(1, 128, 64, 32, "float32", precision_)
  eq = synthetic_eq(3, "dot_general", line=27, dot=dot, weight=0.8)
  work = synthetic_work(bytes=190 << 20, dot_flops=flops, flops=flops, dot_dtype=(
      "tf32" if precision_ == "tf32" else "f32"), programs=1960)
  return synthetic_facts([eq], grid=(40, 49), work=work, median_s=median_s)


def test_dot_rate_fires_far_from_the_rate_and_not_at_it():
  flops = 2 * 5120 * 3136 * 4096
  slow = _dot_facts(flops / 113e12)              # the suite's 113 TFLOP/s: 23 % of 495
  (found,) = dot_rate(slow)
  assert "23 % of the data sheet's tf32 rate" in found.diagnosis.text
  assert [a.change for a in found.actions] == [{"joint": True}]
  assert any("HIGHEST would multiply in float32" in e.text for e in found.diagnosis.evidence)
  assert dot_rate(_dot_facts(flops / 400e12)) == []      # 81 %: at its rate


def test_dot_rate_without_a_time_fires_only_where_the_dots_bound_the_kernel():
  (found,) = dot_rate(_dot_facts(None))
  assert "its rate not measured (no GPU)" in found.diagnosis.text
  # few FLOPs per byte (a matrix-vector product): the bytes bound it, not the dots
  assert dot_rate(_dot_facts(None, flops=2 * (190 << 20) // 4)) == []


def test_a_highest_dot_gets_the_precision_edits_and_a_tf32_dot_none():
  (found,) = dot_precision(_dot_facts(None, "ieee"))
  assert [a.change["precision"] for a in found.actions] == ["tf32", "bf16x3"]
  assert all(a.kind == "e" and a.user_line == 27 for a in found.actions)
  assert "precision=jax.lax.DotAlgorithmPreset.BF16_BF16_F32_X3" in found.actions[1].edit
  assert dot_precision(_dot_facts(None, "tf32")) == []


# --- the joint candidates, built ---------------------------------------------------------------

def test_advise_proposes_block_shapes_with_their_warps_and_stages_together():
  _, rec = _recipe((5120, 3136, 4096), 128, 64, 32)
  (advice,) = pallas_prof.advise([rec], sample=False, progress=None)
  joint_actions = [a for a in advice.actions if a.rule == "dot_rate"]
  assert 2 <= len(joint_actions) <= joint.MAX_CANDIDATES
  tiles = {tuple(a.change["tile"]) for a in joint_actions}
  assert (128, 256) in tiles and (128, 128) in tiles
  for a in joint_actions:
    assert a.kind == "c" and {"num_warps", "num_stages", "grid", "blocks"} <= set(a.change)
    assert "CompilerParams(num_warps=" in a.apply and a.compiled.endswith("B shared")
  big = next(a for a in joint_actions if a.change["tile"] == [128, 256])
  assert big.change["num_warps"] == 8              # the larger tile with its own warps


def test_each_candidate_equals_the_original_under_the_interpreter():
  shape = (200, 136, 64)                          # M, N not powers of two: masked edge tiles
  recipe, rec = _recipe(shape, 32, 32, 16, run=True)
  from pallas_prof.advice.facts import kernel_facts
  from pallas_prof.profiler import profile
  f = kernel_facts(profile([rec], sample=False).kernel(rec.label), rec.generated)
  f = __import__("dataclasses").replace(f, sms=1)        # any grid fills one SM
  dot = next(e.dot for e in f.equations.values() if e.dot is not None)
  changes, why = joint.candidates(recipe, dot, f)
  assert len(changes) >= 3, why
  rng = np.random.default_rng(0)
  a = jnp.asarray(rng.standard_normal((200, 64), np.float32))
  b = jnp.asarray(rng.standard_normal((64, 136), np.float32))
  want = leaves(jax.jit(lambda a, b: _matmul(a, b, 32, 32, 16))(a, b))
  for c in changes:
    got = leaves(jax.jit(blockshape.build(recipe, c))(a, b))
    assert same_outputs(got, want) is None, c["tile"]
    gk = precision.trace_variant(blockshape.build(recipe, c), recipe, "cpu")
    assert (gk.num_warps, gk.num_stages) == (c["num_warps"], c["num_stages"])


# --- the precision edits -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tf32", "bf16x3"])
def test_the_precision_variant_is_lowered_with_its_input_precision(name):
  hi = jax.lax.Precision.HIGHEST
  recipe, rec = _recipe((96, 80, 64), 32, 32, 16, precision_=hi)
  assert 'input_precision="ieee"' in rec.generated.source
  line = next(e for e in rec.generated.eqns if e.primitive == "dot_general").line
  gk = precision.trace_variant(precision.build(recipe, name, KERNEL_FILE, line), recipe, "cpu")
  dots = [ln for ln in gk.source.splitlines() if "tl.dot(" in ln]
  assert dots and all(f'input_precision="{name}"' in ln for ln in dots), dots


def test_a_line_without_a_float32_dot_is_refused():
  recipe, _ = _recipe((96, 80, 64), 32, 32, 16, precision_=jax.lax.Precision.HIGHEST)
  with pytest.raises(ValueError, match="no float32 dot at"):
    precision.build(recipe, "tf32", KERNEL_FILE, 1)


def test_advise_on_a_cpu_shows_the_edit_and_prints_no_cpu_error_as_the_gpus():
  recipe, rec = _recipe((96, 80, 64), 32, 32, 16, precision_=jax.lax.Precision.HIGHEST,
                        run=True)
  (advice,) = pallas_prof.advise([rec], sample=False, progress=None)
  edits = [a for a in advice.actions if a.rule == "dot_precision"]
  assert [a.change["precision"] for a in edits] == ["tf32", "bf16x3"], advice.actions
  for a in edits:
    assert a.accuracy == precision.NOT_ON_CPU and a.trial is None
    assert "error against float64" not in (a.status + a.accuracy)
    assert f'input_precision="{a.change["precision"]}"' in a.status
    assert "precision=" in a.apply


def test_the_accuracy_report_refuses_a_cpu_number():
  args = [np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)]
  recipe = recipes.Recipe(kernel=None, out_shape=jax.ShapeDtypeStruct((4, 3), jnp.float32),
                          kwargs={}, call_file=None, call_line=None, original=None,
                          arg_shapes=(((4, 8), jnp.float32), ((8, 3), jnp.float32)))
  out = np.full((4, 3), 8.0, np.float32)
  assert precision.measured_accuracy(recipe, out, out + 1e-3, args, gpu=False) == \
      precision.NOT_ON_CPU
  text = precision.measured_accuracy(recipe, out, out + 1e-3, args, gpu=True)
  assert text.startswith("error against float64: original 0 ") and "variant 0.001" in text
  wrong = precision.measured_accuracy(recipe, out * 2, out, args, gpu=True)
  assert wrong.startswith("accuracy not measured: the original differs")
