"""The replay's timing policy and inputs: how many input sets, how many launches,
when a timed window may stop, and the random values the inputs are filled with.
Pure functions of numbers (no GPU), tested on their own."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..driver import ProfilerError
from ..launchspec import is_floating, is_integer

POISONS = (0xFF, 0x5A)
MAX_LAUNCHES = 200_000
BATCH = 2048
MODES = ("cold", "sustained", "both")
MAX_SECONDS = 2.0            # per mode: once min_launches are in, stop after this much wall time
CHECK_INTERVAL_S = 0.003     # cold: wall time of a batch between two throttle checks


def random_values(rng: np.random.Generator, n: int, dtype) -> np.ndarray:
  """n fresh random values of `dtype`: floats uniform in [-2, 2), integers in
  [0, 64) (small and non-negative: an int input may be an index), bools a coin flip."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.random(n, dtype=np.float32) < 0.5
  if is_floating(dtype):
    x = rng.random(n, dtype=np.float32) * np.float32(4.0) - np.float32(2.0)
    return x.astype(dtype)
  if is_integer(dtype):
    return rng.integers(0, _integer_bound(dtype), size=n).astype(dtype)
  if dtype.kind == "c":
    return (rng.random(n) + 1j * rng.random(n)).astype(dtype)
  raise ProfilerError(f"no random input for dtype {dtype}")


def random_range_text(dtype) -> str | None:
  """What random_values draws for an integer or bool dtype, in words ("random in [0, 64)",
  "a coin flip"); None for the others."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return "a coin flip"
  if is_integer(dtype):
    return f"random in [0, {_integer_bound(dtype)})"
  return None


def _integer_bound(dtype) -> int:
  """random_values' integers lie in [0, this): small, an int input may be an index."""
  # lazy: keeps ml_dtypes out of this module's import (start-up time)
  import ml_dtypes
  return min(64, int(ml_dtypes.iinfo(dtype).max) + 1)


def plan_sets(set_bytes: int, l2_bytes: int, free_bytes: int,
              memory_fraction: float = 0.5) -> int:
  """How many input/output sets to rotate through: enough that together they
  exceed twice the L2 cache, at least 2, within `memory_fraction` of free memory."""
  if set_bytes <= 0:
    return 1
  budget = int(free_bytes * memory_fraction)
  if set_bytes > budget:
    raise ProfilerError(
        f"one set of the kernel's inputs and outputs needs {set_bytes / 2**20:.1f} MiB but only "
        f"{free_bytes / 2**20:.1f} MiB of device memory are free (JAX preallocates 75% of it: "
        "set XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_PYTHON_CLIENT_MEM_FRACTION)")
  wanted = max(2, math.ceil(2 * l2_bytes / set_bytes) + 1)
  return max(1, min(wanted, budget // set_bytes))


def launch_plan(estimate_s: float, min_launches: int, min_seconds: float,
                max_launches: int = MAX_LAUNCHES) -> int:
  """Timed launches: at least min_launches and enough to fill min_seconds."""
  if estimate_s <= 0:
    return max(min_launches, 1)
  return int(min(max_launches, max(min_launches, math.ceil(min_seconds / estimate_s))))


def enough(kept: int, kept_s: float, wanted: int, min_launches: int, min_seconds: float,
           elapsed_s: float, max_seconds: float = MAX_SECONDS) -> bool:
  """Whether a timed window may stop: `wanted` launches and min_seconds of kernel
  time, or, once min_launches are in, max_seconds of wall time (cold launches
  cost a flush and a check each: a tiny kernel would otherwise take many seconds)."""
  if kept >= MAX_LAUNCHES:
    return True
  if kept < min_launches:
    return False
  return elapsed_s >= max_seconds or (kept >= wanted and kept_s >= min_seconds)


def check_batch(wall_per_launch_s: float, interval_s: float = CHECK_INTERVAL_S) -> int:
  """Cold launches per throttle check: about interval_s of wall time, 1..BATCH. A
  throttled batch is thrown away whole, so batches stay short."""
  if wall_per_launch_s <= 0:
    return BATCH
  return int(min(BATCH, max(1, round(interval_s / wall_per_launch_s))))


def pacing_gap(kernel_s: float) -> float:
  """Idle time before each cold launch once the GPU has throttled: the launches are
  then isolated, as ncu's are. Back-to-back launches of an 8192^3 bf16 matmul kept
  an H200 power-capped even with recovery sleeps between batches (cold median over
  ncu's, while its p10 matched ncu): the power controller reacts within a few
  launches. Ten kernel times of idle, within the bounds below."""
  return min(0.02, max(0.002, 10 * kernel_s))


def check_mode(mode: str) -> tuple[str, ...]:
  """The modes to time, in order: cold first, on a GPU not yet heated by the
  sustained launches."""
  if mode not in MODES:
    raise ProfilerError(f"timing mode {mode!r}: expected one of {', '.join(MODES)}")
  return ("cold", "sustained") if mode == "both" else (mode,)


def summarize(times_s: Sequence[float]) -> dict[str, float]:
  t = np.asarray(times_s, dtype=np.float64)
  return {"median_s": float(np.median(t)), "p10_s": float(np.percentile(t, 10)),
          "p90_s": float(np.percentile(t, 90)), "min_s": float(t.min()),
          "mean_s": float(t.mean())}


def unwritten_elements(first: np.ndarray, second: np.ndarray, poisons=POISONS) -> int:
  """Elements whose bytes still equal the poison after both poisoned launches."""
  itemsize = first.dtype.itemsize
  a = np.ascontiguousarray(first).view(np.uint8).reshape(-1, itemsize)
  b = np.ascontiguousarray(second).view(np.uint8).reshape(-1, itemsize)
  return int(np.count_nonzero(np.all(a == poisons[0], axis=1) & np.all(b == poisons[1], axis=1)))


