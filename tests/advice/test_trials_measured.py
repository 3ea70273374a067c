"""The advice's trials keep what they measured, on any machine: the GPU replay
(tune.params.replay_candidate) is stood in for by fixed times, everything else (the
variants lowered, compiled for sm_90, measured, ranked) runs as on the H200.

The H200 run of 2026-12-03 (bench/advice/advice_known_answers.py at ebee4de) timed every
variant and showed none: the trials were filed under a copy of each action (made when its
compile was recorded), so every action kept `trial: None` and "not measured"."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import api, recipes, trials
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.artifacts import DEFAULT_TARGET
from pallas_prof.backend.compiling.failures.workarounds import compile_working_around

pallas_prof.install()

# the GPU test's K loop (test_advice_gpu.py times the same kernel on the H200)
from .test_advice_gpu import _matmul_kernel  # noqa: E402


@pytest.fixture
def planted():
  """A bf16 K loop compiled with num_stages=1, lowered (not run: the interpreter would
  take minutes at a size the advice calls unpipelined), its advice from static facts."""
  kernel_registry.clear()
  recipes.clear()
  n = 2048
  fn = pl.pallas_call(_matmul_kernel, grid=(n // 128, n // 128),
                      in_specs=[pl.BlockSpec((128, n), lambda i, j: (i, 0)),
                                pl.BlockSpec((n, 128), lambda i, j: (0, j))],
                      out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
                      out_shape=jax.ShapeDtypeStruct((n, n), jnp.bfloat16),
                      compiler_params=pallas_prof.CompilerParams(num_warps=4, num_stages=1))
  with recipes.capture():
    jax.jit(fn).lower(*[jax.ShapeDtypeStruct((n, n), jnp.bfloat16)] * 2)
  (rec,) = kernel_registry.kernels()
  # what a GPU run leaves on the record: the kernel compiled for the GPU
  rec.compiled = compile_working_around(rec.generated, DEFAULT_TARGET, rec.relower)
  (advice,) = api.advise([rec], trials=False, progress=None)
  return rec, advice


def _fake_replay(monkeypatch, seconds_of):
  """replay_candidate's stand-in: the original's times, or the variant's (by its
  num_stages), outputs always equal."""
  calls = []

  def replay(ck, reference, aliases, zeroed, device, min_launches, min_seconds):
    calls.append(ck.generated.num_stages)
    t = seconds_of(ck.generated.num_stages)
    return object(), [t * f for f in (0.99, 1.0, 1.01, 1.0, 1.0)], None
  monkeypatch.setattr("pallas_prof.tune.params.replay_candidate", replay)
  monkeypatch.setattr("pallas_prof.backend.compiling.compile.assemble_cubin", lambda ck: ck)
  return calls


def test_each_tried_action_keeps_its_measured_trial(planted, monkeypatch):
  rec, advice = planted
  assert "unpipelined_loop" in [d.rule for d in advice.diagnoses]
  calls = _fake_replay(monkeypatch, lambda stages: 100e-6 if stages == 1 else 60e-6)
  out = trials.try_actions(advice, rec, recipes.find(rec, recipes.recipes()), gpu=True,
                           budget_s=120, progress=None)
  tried = [a for a in out.actions if a.kind in "ac" and not a.status.startswith("not tried")]
  assert len(tried) >= 3 and len(calls) == len(tried) + 2    # each variant, the original twice
  for a in tried:
    assert a.status == "measured" and a.trial is not None and a.trial.error is None, a
  stages = out.action("num_stages 1 -> 3")
  t = stages.trial
  assert t.before_s == pytest.approx(100e-6) and t.after_s == pytest.approx(60e-6)
  assert t.saving_pct == pytest.approx(40.0) and t.outputs_equal and t.held
  assert out.kept is not None and "num_stages=" in out.kept
  assert "-40 %" in out.summary, out.summary


def test_a_variant_no_faster_than_its_noise_does_not_hold(planted, monkeypatch):
  rec, advice = planted
  _fake_replay(monkeypatch, lambda stages: 100e-6)
  out = trials.try_actions(advice, rec, recipes.find(rec, recipes.recipes()), gpu=True,
                           budget_s=120, progress=None)
  measured = [a for a in out.actions if a.trial is not None and a.trial.error is None]
  assert measured and not any(a.trial.held for a in measured)
  assert out.kept is None


def test_the_best_ranked_action_is_tried_when_compiling_spent_the_budget(planted, monkeypatch):
  """The H200 run at d875290: the spills case's variants took its whole share to
  compile, and none was timed ("the advice's -2 s budget was spent")."""
  rec, advice = planted
  _fake_replay(monkeypatch, lambda stages: 100e-6 if stages == 1 else 60e-6)
  out = trials.try_actions(advice, rec, recipes.find(rec, recipes.recipes()), gpu=True,
                           budget_s=-2, progress=None)
  tried = [a for a in out.actions if a.kind in "ac" and a.trial is not None]
  measured = [a for a in tried if a.trial.error is None]
  spent = [a for a in tried if a.trial.error is not None]
  assert len(measured) == 1 and measured[0].status == "measured", measured
  assert measured[0].title == advice.actions[0].title      # the best ranked before trials
  assert spent and all("budget was spent" in a.trial.error for a in spent)
