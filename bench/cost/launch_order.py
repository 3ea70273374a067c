"""Plain against grouped launch order (CompilerParams(launch_group=G)) and persistent
programs (CompilerParams(persistent=P)) on a GPU.

    python bench/cost/launch_order.py [--out launch_order.json]     # one GPU, ~30 s

The matmul example at 8192³ bf16 (blocks 128 x 256 x 64, 8 warps, 3 stages, as
bench/suite/ops_vs_builtin.py runs it) and at 4096³, plain, with launch groups of
4 and 8, and with groups of 8 run by one and two persistent programs per SM (the SM
count read from the driver): milliseconds per call (wall clock, median of batches of
10 jitted calls) and TFLOP/s, and whether each result equals the plain one bit for bit
(it must: each program computes the same block).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))


def matmul(a, b, *, bm, bn, bk, num_warps, num_stages, group, persistent=0):
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  import pallas_prof
  import matmul as example
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      functools.partial(example.matmul_kernel, block_k=bk), grid=(m // bm, n // bn),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=num_warps, num_stages=num_stages,
                                                 launch_group=group,
                                                 persistent=persistent))(a, b)


def per_call(fn, args, batches=20, calls=10) -> float:
  import jax
  from bench.suite.dispatch_gap import wall_per_call   # the timing loop the other benches use
  for _ in range(3):
    jax.block_until_ready(fn(*args))
  return wall_per_call(fn, args, calls, repeats=batches)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out")
  ap.add_argument("--sizes", default="8192,4096")
  args = ap.parse_args(argv)
  import jax
  import jax.numpy as jnp
  import numpy as np
  import pallas_prof
  from pallas_prof.profiler.driver import device_info
  pallas_prof.install()
  sms = device_info(0).sm_count
  orders = [(0, 0), (4, 0), (8, 0), (8, sms), (8, 2 * sms)]
  rows = []
  for size in map(int, args.sizes.split(",")):
    ka, kb = jax.random.split(jax.random.PRNGKey(size))
    a = jax.random.normal(ka, (size, size), jnp.float32).astype(jnp.bfloat16)
    b = jax.random.normal(kb, (size, size), jnp.float32).astype(jnp.bfloat16)
    plain = None
    for group, persistent in orders:
      fn = jax.jit(functools.partial(matmul, bm=128, bn=256, bk=64, num_warps=8, num_stages=3,
                                     group=group, persistent=persistent))
      out = np.asarray(jax.block_until_ready(fn(a, b)).astype(jnp.float32))
      plain = out if plain is None else plain
      seconds = per_call(fn, (a, b))
      row = {"size": size, "launch_group": group, "persistent": persistent, "ms": seconds * 1e3,
             "tflops": 2 * size ** 3 / seconds / 1e12,
             "equal_to_plain": bool(np.array_equal(out, plain))}
      rows.append(row)
      print(json.dumps(row), flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"rows": rows}, f, indent=1)
  return 0 if all(r["equal_to_plain"] for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
