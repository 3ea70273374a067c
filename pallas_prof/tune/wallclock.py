"""Timing whole calls by the wall clock, as the block-size tuner does (tune/blocks.py).

Two sources of error in timing one call at a time, each synchronised: the host's
dispatch and the synchronisation are in every sample (tens of microseconds, as much
as a short kernel), and candidates timed one after the other meet the GPU at
different clocks and temperatures. So a call is timed in batches of back-to-back
calls with one synchronisation at the end (the GPU runs one call while the host
dispatches the next, and the batch's time per call is the GPU's where it is the
bottleneck, as in triton.testing.do_bench), and candidates take turns, one batch
each per round, so that drift falls on all of them alike. Batching assumes the call
is pure and the GPU's work is its cost: where the host's dispatch of a call takes
longer than its GPU work, the batch measures the dispatch, alike for every config.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

BATCH_S = 2e-3        # a batch lasts about this long (one call, if a call is longer)
MAX_BATCH = 64        # calls in a batch at most


class CallTimer:
  """One candidate's call: warmed up, then sampled a batch at a time."""

  def __init__(self, call: Callable[[], Any], warm_up: int = 2):
    import jax
    self.call = call
    for _ in range(max(warm_up, 1)):
      jax.block_until_ready(call())
    t0 = time.perf_counter()
    jax.block_until_ready(call())
    single = time.perf_counter() - t0
    self.per_batch = max(1, min(MAX_BATCH, int(BATCH_S / max(single, 1e-7))))
    self.samples: list[float] = []
    self.error: str | None = None       # why a batch failed; the timer is then dropped
    self.end_ns = time.time_ns()        # when its last batch ended

  def sample(self) -> float:
    """Seconds per call of one batch of back-to-back calls."""
    import jax
    out = None
    t0 = time.perf_counter()
    for _ in range(self.per_batch):
      out = self.call()
    jax.block_until_ready(out)
    seconds = (time.perf_counter() - t0) / self.per_batch
    self.samples.append(seconds)
    self.end_ns = time.time_ns()
    return seconds

  @property
  def median(self) -> float | None:
    return statistics.median(self.samples) if self.error is None and self.samples else None


def time_in_turns(timers: Sequence[CallTimer], repeats: int,
                  max_seconds: float) -> list[float | None]:
  """Median seconds per call of each timer: rounds in which each takes one batch, until
  `repeats` rounds or `max_seconds` (at least 3 rounds). A timer whose batch raises is
  dropped (None; its `error` says why) and the others go on."""
  start = time.perf_counter()
  rounds = 0
  running = list(timers)
  while running and rounds < max(repeats, 1) and (
      rounds < 3 or time.perf_counter() - start < max_seconds):
    for timer in list(running):
      try:
        timer.sample()
      except Exception as e:  # noqa: BLE001 - one config's failure is its own
        timer.error = f"{type(e).__name__} while timing: {str(e)[:300]}"
        running.remove(timer)
    rounds += 1
  return [t.median for t in timers]
