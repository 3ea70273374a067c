"""The GPU half of the gate, on stand-ins for the profiler's report: the noise model, the
repeats, and a slowdown that must exceed the measured noise. No GPU ran these: the
profile() they feed on is a stand-in returning the profiler's own dataclasses."""
from __future__ import annotations

import types

from pallas_prof.gate import compare, timing
from pallas_prof.gate.figures import EquationFigures, KernelFigures, Runtime
from pallas_prof.profiler.schema import (KernelProfile, ProfileReport, RuntimeStats,
                                         TimingStats)


def _stats(median_us: float, p10_us: float, p90_us: float) -> RuntimeStats:
  cold = TimingStats("cold", 10, 2, median_us * 1e-6, p10_us * 1e-6, p90_us * 1e-6,
                     p10_us * 1e-6, median_us * 1e-6, 1e-3)
  return RuntimeStats(0, 2, 1024, 1 << 20, True, [None], "cold", cold=cold)


def test_noise_is_the_spread_between_repeats_or_within_one_whichever_is_larger():
  assert timing.noise_us([10.0, 10.5, 11.0], [0.4, 0.4, 0.4]) == 1.0
  assert timing.noise_us([10.0, 10.0], [3.0, 5.0]) == 2.0
  runtime = timing.runtime_of([KernelProfile("k#1", "k", [], [], None, None,
                                             runtime=_stats(m, m - 1, m + 1))
                               for m in (12.0, 10.0, 11.0)])
  assert (runtime.median_us, runtime.noise_us, runtime.repeats) == (11.0, 2.0, 3)


def test_measure_repeats_the_replay_on_a_gpu_and_keeps_the_median_of_medians():
  medians = iter([20.0, 22.0, 21.0])
  calls = []

  def fake_profile(records, **kwargs):
    calls.append(kwargs)
    m = next(medians)
    kp = KernelProfile("k#1", "k", ["f32[8]"], ["f32[8]"], None, None,
                       runtime=_stats(m, m - 0.5, m + 0.5))
    return ProfileReport(gpu_present=True, message="replayed", device=None, ceilings=None,
                         kernels=[kp], notes=[], created=0.0)

  record = types.SimpleNamespace(name="k", label="k#1", in_avals=("f32[8]",),
                                 generated=types.SimpleNamespace(source_info=None, grid=(1,)))
  [figures], untimed = timing.measure([record], repeats=3, launches=50, profile=fake_profile)
  assert untimed is None and len(calls) == 3
  assert all(c["min_launches"] == 50 and c["replay"] for c in calls)
  assert calls[0].get("sample", True) and not calls[1]["sample"]   # sampled once, for shares
  assert figures.runtime.median_us == 21.0 and figures.runtime.noise_us == 2.0


def _kernel(median_us: float, noise_us: float, shares: dict[str, float]) -> KernelFigures:
  eqs = [EquationFigures(key, i, key.split()[0], f"k.py:{10 + i}", key, 10, share)
         for i, (key, share) in enumerate(shares.items())]
  return KernelFigures("k", "k#1", "(f32[8])", "k.py:9", "cuda:90", [1], "sass", 20, 32, 0,
                       0, None, None, None, eqs,
                       Runtime(3, 100, median_us, noise_us, [median_us] * 3))


def test_a_slowdown_within_the_noise_passes_and_one_past_it_names_the_equation():
  before = _kernel(100.0, 4.0, {"exp a": 0.5, "dot b": 0.5})
  within = _kernel(107.0, 4.0, {"exp a": 0.5, "dot b": 0.5})
  assert compare.time_regression(before, within, tolerance_pct=5) is None
  slower = _kernel(130.0, 4.0, {"exp a": 0.3, "dot b": 0.7})
  said = compare.time_regression(before, slower, tolerance_pct=5)
  assert said.startswith("SLOWER 100.00 -> 130.00 µs (+30.00 µs, more than the noise 8.00 µs")
  assert said.endswith("most of it at [1] dot at k.py:11 `dot b` (+41.00 µs)")
  # noisy runs: the same slowdown is not a regression
  assert compare.time_regression(_kernel(100.0, 20.0, {}), _kernel(130.0, 20.0, {}), 5) is None


def test_a_time_budget_is_checked_where_timed_and_said_not_checked_where_not():
  verdict = compare.Verdict()
  timed = _kernel(130.0, 4.0, {})
  untimed = _kernel(130.0, 4.0, {})
  untimed.runtime = None
  compare.against_budgets({"max_time_us": 100}, {"timed": timed, "untimed": untimed},
                          "no GPU", verdict)
  assert verdict.over_budget == ["kernel k (k.py:9) takes 130.00 µs (noise 4.00 µs); the budget "
                              "is max_time_us=100"]
  assert verdict.unchecked == ["max_time_us on untimed: no GPU"]
