"""The median wall time of a jitted call, once compiled: what bench/advice's scripts compare
(every timing of a comparison in one process, one after the other, as METHOD.md asks)."""
from __future__ import annotations

import statistics
import time


def wall_median(fn, args, n: int = 20) -> float:
  import jax
  jax.block_until_ready(fn(*args))           # compiled and warm before the first timing
  times = []
  for _ in range(n):
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t)
  return statistics.median(times)
