"""Timing whole calls, as the block-size tuner does (tune/blocks.py).

A call is timed in batches of back-to-back calls with one synchronisation at the
end, and the candidates take turns, one batch each per round, so that the GPU's
drift in clocks and temperature falls on all of them alike.

Two clocks:
  - "gpu": the GPU's own, where there is one. CUPTI's durations of every kernel the
    batch launched (CUPTI's activity records, through profiler/timing/insitu.py), summed, per call:
    the time the call's kernels take on the GPU, XLA's ones between them included,
    without the host's gaps. The wall clock cannot tell that apart from the host's
    dispatch, and for a short kernel the dispatch can be the longer part and differ
    between configs (jaxlib's custom call copies and hashes the kernel's whole PTX at
    every launch, and the PTX's size depends on the config): by the wall clock a config
    whose kernel is slower can win (bench/results/archive/README.md, the suite at 999b43d).
  - "wall": seconds per call of a batch (the GPU runs one call while the host
    dispatches the next, as in triton.testing.do_bench). Used without a GPU, and where
    CUPTI is taken (a jax.profiler trace, Nsight) or cupti-python is missing: `pick_clock` says why.
One tuning uses one clock for every candidate: where the GPU's fails part way (another
tool takes CUPTI), every candidate is timed again by the wall clock.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable, Sequence

from ..profiler.timing import insitu

BATCH_S = 2e-3        # a batch lasts about this long (one call, if a call is longer)
MAX_BATCH = 64        # calls in a batch at most


class ClockError(RuntimeError):
  """The GPU's clock failed (CUPTI taken, no cupti-python, nothing recorded), not the call."""


def gpu_seconds_per_call(call: Callable[[], Any], calls: int) -> float:
  """GPU seconds per call: CUPTI's kernel durations over `calls` back-to-back calls.
  Raises ClockError when the capture fails; what the call raises passes through."""
  kernels = gpu_kernels(call, calls)
  return sum(k.total_ns for k in kernels.values()) / 1e9 / calls


def gpu_kernels(call: Callable[[], Any], calls: int) -> dict:
  """Kernel name -> insitu.KernelTimes of every kernel `calls` back-to-back calls launched,
  as CUPTI recorded them. Raises ClockError when the capture fails or records nothing;
  what the call raises passes through."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax

  cap = insitu.capture(devices=1)
  try:
    cap.__enter__()
  except Exception as e:  # noqa: BLE001 - any failure to start is the clock's
    raise ClockError(f"{type(e).__name__}: {e}") from e
  try:
    out = None
    for _ in range(calls):
      out = call()
    jax.block_until_ready(out)
  except BaseException:
    cap.__exit__(*sys.exc_info())
    raise
  try:
    cap.__exit__(None, None, None)
  except Exception as e:  # noqa: BLE001
    raise ClockError(f"{type(e).__name__}: {e}") from e
  if not cap.result.kernels:
    raise ClockError("; ".join(cap.result.notes) or "CUPTI recorded no kernel")
  return cap.result.kernels


def pick_clock(call: Callable[[], Any]) -> tuple[str, str | None]:
  """("gpu", None) where the GPU's clock can time `call`, else ("wall", why not)."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  if jax.default_backend() != "gpu":
    return "wall", f"no GPU (JAX's backend is {jax.default_backend()})"
  try:
    gpu_seconds_per_call(call, 1)
  except Exception as e:  # noqa: BLE001 - CUPTI taken, no cupti-python: the wall clock stands in
    return "wall", f"the GPU's clock is unavailable ({type(e).__name__}: {str(e)[:200]})"
  return "gpu", None


class CallTimer:
  """One candidate's call: warmed up, then sampled a batch at a time."""

  def __init__(self, call: Callable[[], Any], warm_up: int = 2, clock: str = "wall"):
    # lazy: keeps jax out of this module's import (start-up time)
    import jax
    self.call = call
    self.clock = clock
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
    """Seconds per call of one batch of back-to-back calls, by the timer's clock."""
    # lazy: keeps jax out of this module's import (start-up time)
    import jax
    if self.clock == "gpu":
      seconds = gpu_seconds_per_call(self.call, self.per_batch)
    else:
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
  dropped (None; its `error` says why) and the others go on; a ClockError is the clock's,
  not the config's, and ends the timing (the caller changes clocks)."""
  start = time.perf_counter()
  rounds = 0
  running = list(timers)
  while running and rounds < max(repeats, 1) and (
      rounds < 3 or time.perf_counter() - start < max_seconds):
    for timer in list(running):
      try:
        timer.sample()
      except ClockError:
        raise
      except Exception as e:  # noqa: BLE001 - one config's failure is its own
        timer.error = f"{type(e).__name__} while timing: {str(e)[:300]}"
        running.remove(timer)
    rounds += 1
  return [t.median for t in timers]
