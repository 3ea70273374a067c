"""The advice's what-ifs on a GPU: actions of kinds a and c compiled, replayed, compared and
timed; PC sampling again while CUPTI drops samples; `pallas-prof advise` keeping what held.

    PYTHONPATH=$PWD python3 -m pytest -q tests/advice/test_advice_gpu.py     # on the H200
"""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import api, recipes
from pallas_prof.backend import kernel_registry

from .test_advise_cli import SCRIPT, _cli

pytestmark = pytest.mark.gpu

pallas_prof.install()


def _fresh():
  kernel_registry.clear()
  recipes.clear()


def _matmul_kernel(a_ref, b_ref, o_ref):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * 64, 64)]
    b = b_ref[pl.ds(k * 64, 64), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)
  acc = jax.lax.fori_loop(0, a_ref.shape[1] // 64, step, jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


def test_num_stages_is_tried_measured_and_compared():
  _fresh()
  n = 2048
  a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32).astype(jnp.bfloat16)
  with recipes.capture():
    pl.pallas_call(_matmul_kernel, grid=(n // 128, n // 128),
                   in_specs=[pl.BlockSpec((128, n), lambda i, j: (i, 0)),
                             pl.BlockSpec((n, 128), lambda i, j: (0, j))],
                   out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
                   out_shape=jax.ShapeDtypeStruct((n, n), jnp.bfloat16),
                   compiler_params=pallas_prof.CompilerParams(num_warps=4, num_stages=1))(a, a)
  (advice,) = api.advise(budget_s=60, progress=print)
  assert "unpipelined_loop" in [d.rule for d in advice.diagnoses]
  stages = advice.action("num_stages 1 -> 3")
  t = stages.trial
  assert stages.status == "measured" and t is not None and t.error is None, stages
  assert t.outputs_equal and t.before_s > 0 and t.after_s > 0 and t.noise_pct is not None
  assert abs(t.saving_pct - 100 * (t.before_s - t.after_s) / t.before_s) < 1e-9
  print(advice.summary)


def _add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def test_a_block_shape_variant_is_tried_with_equal_outputs():
  _fresh()
  n = 1 << 22
  x = jnp.arange(n, dtype=jnp.float32)
  spec = pl.BlockSpec((64,), lambda i: (i,))
  with recipes.capture():
    pl.pallas_call(_add_kernel, grid=(n // 64,), in_specs=[spec, spec], out_specs=spec,
                   out_shape=jax.ShapeDtypeStruct((n,), jnp.float32))(x, x)
  (advice,) = api.advise(budget_s=60, progress=print)
  variants = [a for a in advice.actions if a.kind == "c"]
  assert variants and all(a.trial is not None for a in variants)
  tried = [a for a in variants if a.trial.error is None]
  assert tried and all(a.trial.outputs_equal for a in tried)
  print(advice.summary)
  assert advice.actions[0].kind == "c" and advice.actions[0].trial.held, advice.actions[0]


def _copy_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 1.5 + 0.25


def test_a_short_kernel_is_sampled_until_cupti_keeps_its_samples():
  """The case of issue 29: a ~35 us streaming kernel whose first sampling round lost most
  of its samples (16384 x 2048 f32, a row a program)."""
  _fresh()
  x = jnp.ones((16384, 2048), jnp.float32)
  spec = pl.BlockSpec((1, 2048), lambda i: (i, 0))
  pl.pallas_call(_copy_kernel, grid=(16384,), in_specs=[spec], out_specs=spec,
                 out_shape=x)(x)
  report = pallas_prof.profile()
  att = report.kernels[0].attribution
  assert att.basis == "pc_sampling", report.kernels[0].errors
  rounds = att.sampling.rounds
  print(rounds, [(ln.user_line, ln.samples, ln.rank_note) for ln in att.lines])
  first = rounds[0]["dropped_samples"] / max(rounds[0]["total_samples"], 1)
  last = att.sampling.dropped_samples / max(att.sampling.total_samples, 1)
  if first >= 0.01:
    assert len(rounds) > 1 and rounds[-1]["period_log2"] > rounds[0]["period_log2"]
  # the samples kept are enough, or the report says which lines it cannot rank
  advice = api.for_report(kernel_registry.kernels(), report)[0]
  assert last < 0.01 or "sampling_gaps" in [d.rule for d in advice.diagnoses]


def test_advise_keeps_what_held_in_a_tuning_file(tmp_path):
  out, tuning = tmp_path / "run", tmp_path / "tuning.json"
  result = _cli("advise", "--out", str(out), "--tuning-file", str(tuning), SCRIPT)
  assert result.returncode == 0, result.stdout + result.stderr
  assert "no NVIDIA GPU" not in result.stderr
  with open(out / "report.json") as f:
    advice = {a["name"]: a for a in json.load(f)["advice"]}
  row = advice["row_kernel"]
  assert row["measured"] == "measured"
  warps = [a for a in row["actions"] if a["kind"] == "a" and a["trial"]]
  assert warps and all(a["trial"]["outputs_equal"] for a in warps if not a["trial"]["error"])
  top = row["actions"][0]
  if top["kind"] == "a" and top["trial"] and top["trial"]["saving_pct"] and \
      top["trial"]["saving_pct"] > max(top["trial"]["noise_pct"], 1.0):
    with open(tuning) as f:
      entries = json.load(f)["kernels"]
    entry = next(e for e in entries if e["kernel"] == "row_kernel")
    assert entry["best"][0] == top["change"]["num_warps"]
    # the tuning file applies it to the next run
    again = tmp_path / "again"
    env_result = _cli_env({"PALLAS_PROF_TUNED": str(tuning)}, "run", "--out", str(again), SCRIPT)
    assert env_result.returncode == 0, env_result.stderr
    with open(again / "report.json") as f:
      kernels = {k["name"]: k for k in json.load(f)["kernels"]}
    assert kernels["row_kernel"]["num_warps"] == top["change"]["num_warps"] or \
        kernels["row_kernel"]["resources"]["num_warps"] == top["change"]["num_warps"]


def _cli_env(extra, *args):
  import subprocess
  import sys
  from .test_advise_cli import ROOT
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             COLUMNS="160", **extra)
  return subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                        text=True, env=env, cwd=ROOT, timeout=900)
