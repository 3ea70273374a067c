"""Sampling again at a longer period while CUPTI drops samples
(profiler/sampling/sampling_rounds.py). The sampling child is replaced by a SYNTHETIC one
whose drops follow the period, so the loop's logic is checked on a CPU, and the profiler's
use of it on PC samples recorded on the H200 whose dropped counts are made up; the GPU
check is tests/advice/test_advice_gpu.py."""
from __future__ import annotations

from pallas_prof.profiler.options import ProfileOptions
from pallas_prof.profiler.sampling import pcsampling, sampling_rounds


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


def _recorded_target(name="softmax_kernel-dc90ff"):
  """A kernel and its PC samples recorded on the H200 (tests/profiler/fixtures/pcsampling),
  as profile() holds them: a target and a KernelProfile with its replay's median."""
  import json
  import os

  from pallas_prof.cli import run_directory
  from pallas_prof.profiler.api import _Target
  from pallas_prof.profiler.schema import KernelProfile, RuntimeStats, TimingStats
  d = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "profiler",
                   "fixtures", "pcsampling", name)
  gk, ck = run_directory.load_kernel(d)
  with open(os.path.join(d, "samples.json")) as f:
    data = json.load(f)
  with open(os.path.join(d, "meta.json")) as f:
    median = json.load(f)["replay_median_s"]
  cold = TimingStats("cold", 10, 3, median, median, median, median, median, 0.0)
  rt = RuntimeStats(device_index=0, input_sets=2, set_bytes=1, l2_bytes=1,
                    outputs_written=True, unwritten_elements=[0], mode="cold", cold=cold)
  target = _Target(gk.name, "softmax_kernel#dc90ff", (), (), (), None, gk, ck)
  return target, KernelProfile(target.label, gk.name, [], [], None, None, runtime=rt), data


def _dropping(data, drops):
  """The sampling child replaced: round i returns the recorded samples with `drops[i]` of
  its count said to be dropped (SYNTHETIC drops on recorded samples)."""
  calls = []

  def sample(ck=None, *, period=None, **kwargs):
    n = len(calls)
    calls.append(period)
    out = dict(data, period_log2=(data["period_log2"] if period is None else period),
               dropped_samples=int(drops[min(n, len(drops) - 1)] * data["total_samples"]))
    return out
  return sample, calls


def test_the_profiler_samples_again_and_keeps_the_last_round(monkeypatch):
  from pallas_prof.profiler import api
  target, kp, data = _recorded_target()
  sample, calls = _dropping(data, [0.75, 0.0])
  monkeypatch.setattr(pcsampling, "sample", sample)
  api._attribute(target, kp, ProfileOptions(device=0))
  assert kp.weight_basis == "pc_sampling", kp.errors
  assert calls == [None, data["period_log2"] + 3]        # kept 1/4: two steps, one for margin
  att = kp.attribution
  assert [r["dropped_samples"] for r in att.sampling.rounds] == [
      int(0.75 * data["total_samples"]), 0]
  assert att.sampling.dropped_samples == 0
  assert any(n.startswith("sampled 2 times (2^") for n in att.notes), att.notes
  assert all(ln.rank_note is None for ln in att.lines if ln.samples >= 20)


def test_lines_the_kept_samples_cannot_rank_are_named_in_the_advice(monkeypatch):
  """CUPTI keeps dropping (most of every round lost, until no longer period is left): the
  profile keeps the last round, each line it cannot tell from its neighbour gets a note,
  and the advice says which lines it cannot rank, with their sample counts."""
  from pallas_prof.advice import diagnose
  from pallas_prof.profiler import api
  target, kp, data = _recorded_target()
  sample, calls = _dropping(data, [0.9, 0.9, 0.9])
  monkeypatch.setattr(pcsampling, "sample", sample)
  api._attribute(target, kp, ProfileOptions(device=0))
  # recorded at 2^15 cycles: 90 % lost asks for 2^20, then 2^25, past the longest (2^24)
  assert calls == [None, 20]
  att = kp.attribution
  noted = [ln for ln in att.lines if ln.rank_note]
  assert noted, [(ln.user_line, ln.samples) for ln in att.lines]
  advice = diagnose(kp, target.generated)
  gaps = next(d for d in advice.diagnoses if d.rule == "sampling_gaps")
  assert gaps.text.startswith("CUPTI dropped 90.0 % of the samples: ")
  assert gaps.text.endswith(f"{len(noted)} line(s) cannot be ranked")
  named = [e.text for e in gaps.evidence if e.what == "line"]
  assert named and all("samples): " in t for t in named)
  assert named[0].startswith(f"softmax.py:{noted[0].user_line} ({noted[0].samples:,.0f} samples)")
