"""The canonical suite (bench/suite/suite.py) on the CPU: every op's case built small, run
through pallas-prof (Triton's interpreter) and XLA, checked against the float32
reference, so that the one GPU run does not die on a Python error; and the
record's headline keys computed from what was measured, null where nothing was.

`python bench/suite/suite.py --dry-run` runs all three shapes of every op the same way.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallas_prof
from bench.suite import suite
from bench.suite.suite_cases import CASES, ordered


@pytest.fixture(autouse=True)
def installed():
  pallas_prof.install()
  yield
  pallas_prof.uninstall()


# Run through the interpreter: one case of each builder the other CPU tests do not
# run as the suite builds them (tests/test_jax_kernels.py runs every op's lowering).
INTERPRETED = {"softmax", "layer_norm fwd+bwd", "mha fwd causal", "decode_attention",
               "paged_attention", "matmul", "vector_add"}


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in ordered(CASES, quick=True) if c.op in INTERPRETED],
                         ids=lambda c: c.op)
def test_case_runs_and_is_right_through_the_interpreter(case, rng):
  result = suite.run_case(case, small=True, window_s=0.0, on_gpu=False,
                          seed=int(rng.integers(2**31)))
  assert "error" not in result, result.get("error")
  cols = result["columns"]
  for column in ("ours_default", "xla"):
    entry = cols[column]
    assert "error" not in entry, f"{column}: {entry.get('error')}"
    assert entry["correct"], f"{column}: {entry.get('why')}"
    assert entry["wall_s"] > 0
  assert cols["ours_default"]["kernels"], "pallas-prof lowered no kernel for this case"
  tuned = cols["ours_tuned"]
  if case.tune:
    assert "error" not in tuned, tuned.get("error")
    assert tuned["correct"], tuned.get("why")
    assert [c["config"] for c in tuned["candidates"]] == [{}] + [dict(c) for c in case.tune]
    assert tuned["config"] in [c["config"] for c in tuned["candidates"] if c["median_s"]]
  else:
    assert "same_as_default" in tuned
  assert "not_run" in cols["builtin"]
  assert "default_over_builtin_gpu" not in result


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label(small=True))
def test_every_case_lowers_through_pallas_prof_and_xla_matches_the_reference(case, rng):
  """All 39 cases at their small size: pallas-prof lowers the Pallas version (no
  kernel run: that is the dry run's and the test above's work), and XLA's version
  agrees with the float32 reference within the case's tolerance."""
  import jax
  from pallas_prof.backend import kernel_registry
  built = case.make(jax.random.PRNGKey(int(rng.integers(2**31))), small=True)
  kernel_registry.clear()
  jax.clear_caches()
  jax.jit(built.pallas).lower(*built.args)
  assert kernel_registry.kernels(), "the Pallas version reached no pallas-prof lowering"
  # compiled with the GPU run's options (XLA checks their names on any backend)
  reference = suite.reference_outputs(built, on_gpu=True)
  xla = suite.check(jax.jit(built.xla), built.args, reference, built.tol)
  assert xla["correct"], xla.get("why")
  assert built.bytes > 0


def test_every_op_has_three_shapes_with_both_dtypes_and_widths_not_powers_of_two():
  by_op = {}
  for c in CASES:
    by_op.setdefault(c.op, []).append(c)
  assert len(by_op) == 13
  for op, cases in by_op.items():
    assert len(cases) == 3, op
    assert {jnp.dtype(c.dtype) for c in cases} == {jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32)}, op
  not_pow2 = [c for c in CASES if any(d & (d - 1) for d in c.shape)]
  assert {c.op for c in not_pow2} >= {"softmax", "layer_norm fwd", "rms_norm fwd+bwd", "matmul",
                                     "vector_add", "decode_attention", "paged_attention"}
  # the first round of the ordered list covers every op once, so a cut run still does
  first = ordered(CASES)[:len(by_op)]
  assert sorted(c.op for c in first) == sorted(by_op)


def test_check_catches_unwritten_elements_and_wrong_values():
  ref = [np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)]
  good = suite.check(lambda x: x, (jnp.asarray(ref[0]),), ref, 0.0)
  assert good["correct"] and good["rel_errors"] == [0.0]
  poisoned = ref[0].copy()
  poisoned[1, 2] = np.nan
  bad = suite.check(lambda x: x, (jnp.asarray(poisoned),), ref, 1.0)
  assert not bad["correct"] and "non-finite" in bad["why"]
  off = suite.check(lambda x: x * 1.01, (jnp.asarray(ref[0]),), ref, 1e-3)
  assert not off["correct"] and "relative error" in off["why"]


def _case(name, op, shape, ours, builtin):
  r = {"name": name, "op": op, "shape": shape, "flops": 2 * 8192 ** 3,
       "columns": {"ours_default": ours, "builtin": builtin}}
  if ours.get("correct") and builtin.get("correct"):
    r["default_over_builtin_gpu"] = ours["gpu_s"] / builtin["gpu_s"]
  return r


def test_summary_keys_come_from_measured_cases_only():
  record = {"cases": [
      _case("a", "softmax", [8], {"correct": True, "gpu_s": 1.0}, {"correct": True, "gpu_s": 2.0}),
      _case("b", "softmax", [8], {"correct": True, "gpu_s": 2.0}, {"correct": True, "gpu_s": 1.0}),
      # wrong results are not ratios
      _case("c", "softmax", [8], {"correct": False, "gpu_s": 9.0}, {"correct": True, "gpu_s": 1.0}),
      _case("d", "matmul", [8192] * 3, {"correct": True, "gpu_s": 1e-3, "wall_s": 2e-3},
            {"error": "boom"}),
      {"name": "e", "op": "softmax", "shape": [8], "skipped": "the time budget was spent"}]}
  suite.summarize(record)
  assert record["geomean_default_over_builtin"] == pytest.approx(1.0)
  assert record["worst_default_over_builtin"] == 2.0
  assert record["worst_default_over_builtin_case"] == "b"
  assert record["geomean_tuned_over_builtin"] is None          # no case had a tuned ratio
  assert record["matmul_tflops"] == pytest.approx(2 * 8192 ** 3 / 1e-3 / 1e12)
  assert "GPU time" in record["matmul_tflops_basis"]
  assert "2 of 5" in record["ratios_basis"] and "CUPTI" in record["ratios_basis"]


def test_summary_tuned_keys():
  record = {"cases": [
      {"name": "a", "op": "softmax", "shape": [8], "default_over_builtin_gpu": 1.0,
       "tuned_over_builtin_gpu": 0.5, "tuned_over_default_gpu": 0.5, "columns": {}},
      {"name": "b", "op": "softmax", "shape": [8], "default_over_builtin_gpu": 1.0,
       "tuned_over_builtin_gpu": 2.0, "tuned_over_default_gpu": 1.1, "columns": {}}]}
  suite.summarize(record)
  assert record["geomean_tuned_over_builtin"] == pytest.approx(1.0)
  assert record["tuned_slower_than_default"] == ["b: 1.100"]


def test_summary_falls_back_to_wall_clock_when_cupti_measured_nothing():
  record = {"cases": [{"name": "a", "op": "add", "shape": [8], "default_over_builtin_wall": 1.5,
                       "columns": {}}]}
  suite.summarize(record)
  assert record["worst_default_over_builtin"] == 1.5
  assert record["ratios_basis"].startswith("wall clock")
  assert record["matmul_tflops"] is None


@pytest.mark.no_gpu
def test_replay_column_on_a_cpu_says_there_is_no_gpu(rng):
  """The replay runner's column goes through pallas_prof.profile(); without a GPU it
  reports no runtime, and the suite records why instead of a figure."""
  import jax
  from jax.experimental.pallas.ops.gpu import softmax
  from pallas_prof.backend import kernel_registry
  kernel_registry.clear()
  jax.clear_caches()
  softmax.softmax(jnp.asarray(rng.standard_normal((4, 100)), jnp.float32))
  records = kernel_registry.kernels()
  assert records
  out = suite.replay_ours(records, 0.01)
  assert "replay_s" not in out and out["replay_kernels_s"] == {}
  assert "no NVIDIA GPU" in out["replay_error"]


@pytest.mark.no_gpu
def test_no_gpu_means_a_clear_refusal_not_a_crash():
  with pytest.raises(SystemExit, match="--dry-run"):
    suite.main(["--quick"])


def test_a_tuner_that_kept_the_default_is_the_default_column(monkeypatch, rng):
  """The same kernel measured twice differs by noise: when the tuner keeps the default,
  the tuned ratios are the default column's, and its own figures stay in the record."""
  case = next(c for c in CASES if c.tune)
  figures = {"ours_default": {"correct": True, "gpu_s": 1.000, "wall_s": 1.1},
             "ours_tuned": {"config": {}, "correct": True, "gpu_s": 1.026, "wall_s": 1.1},
             "builtin": {"correct": True, "gpu_s": 1.02, "wall_s": 1.1},
             "xla": {"correct": True, "gpu_s": 1.5, "wall_s": 1.6}}
  monkeypatch.setattr(suite, "run_column", lambda column, *a, **k: dict(figures[column]))
  result = suite.run_case(case, small=True, window_s=0.0, on_gpu=False,
                          seed=int(rng.integers(2**31)))
  tuned = result["columns"]["ours_tuned"]
  assert "same_as_default" in tuned and tuned["gpu_s"] == 1.026
  assert result["tuned_over_default_gpu"] == 1.0
  assert result["tuned_over_builtin_gpu"] == pytest.approx(1.0 / 1.02)
  figures["ours_tuned"]["config"] = {"num_warps": 8}       # a real choice is measured
  result = suite.run_case(case, small=True, window_s=0.0, on_gpu=False,
                          seed=int(rng.integers(2**31)))
  assert result["tuned_over_default_gpu"] == pytest.approx(1.026)


def test_the_window_spreads_what_is_left_over_the_cases_left():
  """Each case costs its fixed part (learned from the cases so far) plus its windows; the
  window is what is left over their number, within bounds, so that the budget reaches the
  last case instead of running out two thirds through."""
  import types
  plain, tuned = types.SimpleNamespace(tune=()), types.SimpleNamespace(tune=({"bm": 64},))
  assert suite.windows_of(plain) == 6 and suite.windows_of(tuned) == 33
  assert suite.windows_of(plain, replay=True) == 7 and suite.windows_of(tuned, replay=True) == 34
  cases = [plain, tuned, plain]
  # 100 s left, 10 s fixed a case: 70 s over 6 + 33 + 6 = 45 windows (48 with replay)
  assert suite.window_for(100.0, cases, [10.0, 10.0]) == suite.WINDOW_S[1]   # 1.56 s: capped
  assert suite.window_for(40.0, cases, [10.0]) == pytest.approx(10.0 / 45)
  assert suite.window_for(40.0, cases, [10.0], replay=True) == pytest.approx(10.0 / 48)
  assert suite.window_for(20.0, cases, [10.0]) == suite.WINDOW_S[0]        # over budget: shortest
  assert suite.window_for(1e4, cases, []) == suite.WINDOW_S[1]             # plenty: longest
  before = suite.window_for(300.0, cases * 10, [])
  assert suite.window_for(300.0, cases * 10, [2.0]) > before                # cheaper cases: longer


def test_an_op_without_parameters_has_its_kernels_tuned_on_a_gpu(monkeypatch):
  """The norms and the vector add have no parameters: on a GPU their tuned column runs with
  PALLAS_PROF_AUTOTUNE=1 in force for the timed call's first call (where the kernels are
  compiled, so tuned), the environment given back after; the record has each kernel's
  choice, and {} (the default column's figures) where every kernel kept its default."""
  import os
  from bench.suite import kernel_tuning
  from pallas_prof.backend.options import TunedSettings
  from pallas_prof.tune import params
  case = next(c for c in CASES if not c.tune and c.op == "rms_norm fwd+bwd")
  seen = {}

  def timed(column, fn, entry, *a):
    seen["env"] = os.environ.get(params.ENV), os.environ.get(params.BUDGET_ENV)
    return {"correct": True, "gpu_s": 1.0, "wall_s": 1.0}
  default, eight = TunedSettings(num_warps=4, num_stages=3), TunedSettings(num_warps=8)
  tunings = [params.KernelTuning("ln_backward_dw_db", default, eight,
                                 (params.Candidate(default, 2e-3), params.Candidate(eight, 1e-3)),
                                 1.5),
             params.KernelTuning("rms_forward", default, default,
                                 (params.Candidate(default, 1e-3),), 0.5)]
  monkeypatch.setattr(suite, "_timed", timed)
  monkeypatch.setattr(params, "results", lambda: list(tunings))
  monkeypatch.delenv(params.ENV, raising=False)
  built = case.make(jax.random.PRNGKey(0), small=True)
  out = suite.run_column("ours_tuned", built, None, 0.0, True, case, small=True)
  assert seen["env"] == ("1", str(kernel_tuning.BUDGET_S))
  assert params.ENV not in os.environ                       # given back
  assert out["config"] == {"ln_backward_dw_db": eight.label}
  (dw, fwd) = out["kernel_tuning"]
  assert dw["speedup"] == pytest.approx(2.0) and dw["best"] == eight.label
  assert [c["median_s"] for c in dw["candidates"]] == [2e-3, 1e-3]
  tunings[0] = params.KernelTuning("ln_backward_dw_db", default, default,
                                   (params.Candidate(default, 2e-3),), 1.5)
  assert suite.run_column("ours_tuned", built, None, 0.0, True, case, small=True)["config"] == {}
  # without a GPU nothing is tuned: the default column stands for it
  assert "same_as_default" in suite.run_column("ours_tuned", built, None, 0.0, False, case,
                                               small=True)
