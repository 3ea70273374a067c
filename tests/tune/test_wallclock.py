"""tune/wallclock.py: whole calls timed in batches, candidates in turns."""
import time

import pytest

from pallas_prof.tune import wallclock


class _Call:
  """A call of a scripted cost: `seconds` of host time each; counts its calls."""

  def __init__(self, seconds):
    self.seconds, self.calls = seconds, 0

  def __call__(self):
    self.calls += 1
    end = time.perf_counter() + self.seconds
    while time.perf_counter() < end:
      pass
    return self.calls


def test_a_short_call_is_timed_in_batches_and_a_long_one_alone():
  short, long = wallclock.CallTimer(_Call(1e-5)), wallclock.CallTimer(_Call(5e-3))
  assert short.per_batch > 1        # several calls a batch (at most MAX_BATCH)
  assert short.per_batch <= wallclock.MAX_BATCH
  assert long.per_batch == 1
  before = short.call.calls
  seconds = short.sample()
  assert short.call.calls - before == short.per_batch
  assert 0.5e-5 < seconds < 1e-3


def test_candidates_take_turns_and_each_gets_its_median():
  order = []

  class _Timer:
    def __init__(self, name, seconds):
      self.name, self.samples, self.seconds = name, [], seconds

    def sample(self):
      order.append(self.name)
      self.samples.append(self.seconds)
      return self.seconds

    @property
    def median(self):
      return sorted(self.samples)[len(self.samples) // 2]

  timers = [_Timer("a", 2.0), _Timer("b", 1.0)]
  assert wallclock.time_in_turns(timers, repeats=4, max_seconds=10.0) == [2.0, 1.0]
  assert order == ["a", "b"] * 4
  order.clear()
  wallclock.time_in_turns(timers, repeats=50, max_seconds=0.0)     # at least 3 rounds
  assert order == ["a", "b"] * 3


def test_time_in_turns_of_no_timers_is_empty():
  assert wallclock.time_in_turns([], repeats=5, max_seconds=1.0) == []


def test_a_config_that_fails_while_timed_is_dropped_and_the_others_go_on():
  class _Flaky(_Call):
    def __call__(self):
      if self.calls >= 5:
        raise RuntimeError("out of memory")
      return super().__call__()

  good, flaky = wallclock.CallTimer(_Call(1e-4)), wallclock.CallTimer(_Flaky(1e-4))
  got = wallclock.time_in_turns([good, flaky], repeats=4, max_seconds=10.0)
  assert got[0] is not None and got[1] is None
  assert "out of memory" in flaky.error and len(good.samples) == 4
