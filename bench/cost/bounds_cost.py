"""What the bounds-checked debug mode costs: the examples' kernels timed with
PALLAS_PROF_CHECK=bounds off and on (same inputs, same results).

    python3 bench/cost/bounds_cost.py [--out bench/results/bounds_cost_<gpu>.json]

On a GPU this is the compiled kernel (through jaxlib's custom call) plus the
host callback that reads the flag buffer back; on the CPU the interpreter.
Median of --reps calls of the jitted function, each waited for.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]


def _cases(gpu: bool):
  import jax
  import jax.numpy as jnp
  import layer_norm
  import matmul
  import softmax
  import vector_add
  k = iter(jax.random.split(jax.random.PRNGKey(0), 8))
  n = 4096 if gpu else 64
  x = jax.random.normal(next(k), (n, n), jnp.float32)
  w, b = jax.random.normal(next(k), (n,)), jax.random.normal(next(k), (n,))
  m = 2048 if gpu else 128   # the example's blocks are 128 x 128
  a = jax.random.normal(next(k), (m, m), jnp.float32).astype(jnp.bfloat16)
  c = jax.random.normal(next(k), (m, m), jnp.float32).astype(jnp.bfloat16)
  v = jax.random.normal(next(k), ((1 << 24) + 3 if gpu else 5000,), jnp.float32)
  return [("vector_add", lambda: jax.jit(vector_add.add.__wrapped__), (v, v)),
          ("softmax", lambda: jax.jit(softmax.softmax.__wrapped__), (x,)),
          ("layer_norm", lambda: jax.jit(layer_norm.layer_norm.__wrapped__), (x, w, b)),
          ("matmul", lambda: jax.jit(matmul.matmul), (a, c))]


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--reps", type=int, default=30)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  import jax
  import numpy as np
  import pallas_prof
  from pallas_prof.backend.lowering.features import bounds
  pallas_prof.install()
  gpu = jax.default_backend() == "gpu"
  rows = []
  for name, make, inputs in _cases(gpu):
    times, outs = {}, {}
    for mode in (False, True):
      bounds.set_check_bounds(mode)
      f = make()
      outs[mode] = np.asarray(jax.block_until_ready(f(*inputs)), dtype=np.float32)
      samples = []
      for _ in range(args.reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*inputs))
        samples.append(time.perf_counter() - t0)
      times[mode] = statistics.median(samples)
    bounds.set_check_bounds(None)
    same = bool(np.array_equal(outs[False], outs[True], equal_nan=True))
    rows.append({"kernel": name, "off_ms": times[False] * 1e3, "on_ms": times[True] * 1e3,
                 "ratio": times[True] / times[False], "same_results": same})
    print(f"{name:12s} off {times[False] * 1e3:9.3f} ms  on {times[True] * 1e3:9.3f} ms  "
          f"x{times[True] / times[False]:.2f}  same results: {same}", flush=True)
  if args.out:
    import subprocess
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    with open(args.out, "w") as f:
      json.dump({"command": "python3 bench/cost/bounds_cost.py " + " ".join(sys.argv[1:]),
                 "commit": commit, "backend": jax.default_backend(),
                 "devices": [d.device_kind for d in jax.devices()], "rows": rows}, f, indent=1)


if __name__ == "__main__":
  main()
