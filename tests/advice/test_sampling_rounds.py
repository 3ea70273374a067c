"""Sampling again at a longer period while CUPTI drops samples (profiler/sampling_rounds.py).
The sampling child is replaced by a SYNTHETIC one whose drops follow the period, so the
loop's logic is checked on a CPU; the GPU check is tests/advice/test_advice_gpu.py."""
from __future__ import annotations

from pallas_prof.profiler import pcsampling, sampling_rounds


def _child(start: int, keeps_up: int):
  """A fake pcsampling.sample: period 2^start unless given; drops what a buffer that
  keeps up with one sample per 2^keeps_up cycles cannot take (synthetic)."""
  calls = []

  def sample(ck=None, *, period=None, **kwargs):
    n = start if period is None else period
    total = 400_000
    kept = min(1.0, 2.0 ** (n - keeps_up))
    calls.append(n)
    return {"period_log2": n, "launches": 3, "total_samples": total,
            "dropped_samples": int(total * (1 - kept))}
  return sample, calls


def test_a_short_period_that_drops_is_sampled_again_longer():
  sample, calls = _child(start=5, keeps_up=7)        # 75 % dropped at 2^5
  data, rounds = sampling_rounds.sample_until_kept(sample, ck="k", device=0)
  assert calls == [5, 8]                             # kept 1/4: 2 steps, and one for margin
  assert data["dropped_samples"] == 0 and len(rounds) == 2
  assert sampling_rounds.rounds_text(rounds) == (
      "sampled 2 times (2^5 cycles, 3 launches: dropped 75.0 %; 2^8 cycles, 3 launches: "
      "dropped 0.0 %)")


def test_no_drops_one_round_and_the_rounds_stop():
  sample, calls = _child(start=9, keeps_up=7)
  sampling_rounds.sample_until_kept(sample)
  assert calls == [9]
  sample, calls = _child(start=5, keeps_up=40)       # never keeps up: at most MAX_ROUNDS
  data, rounds = sampling_rounds.sample_until_kept(sample)
  assert len(calls) <= sampling_rounds.MAX_ROUNDS and calls[-1] <= 24
  assert sampling_rounds.dropped_share(data) > 0.01


def test_an_overridden_period_takes_more_launches_for_the_same_samples():
  clock, sms, kernel_s = 1.98e9, 132, 35e-6
  n, launches = pcsampling.sampling_plan(kernel_s, clock, sms, ctas=16384)
  longer, more = pcsampling.sampling_plan(kernel_s, clock, sms, ctas=16384, period=n + 3)
  assert longer == n + 3 and more > launches
  per_launch = kernel_s * clock * sms / 2 ** longer
  assert abs(more * per_launch - pcsampling.SAMPLES_WANTED) <= per_launch
  assert pcsampling.command("spec", "out", 0, 1e-5, period=9)[-2:] == ["--period-log2", "9"]
