"""One process of a two-process jax.distributed program with a pallas_call in each.

    python3 -m pallas_prof run --out runs/p0 tools/distributed_two_processes.py localhost:PORT 0 &
    python3 -m pallas_prof run --out runs/p1 tools/distributed_two_processes.py localhost:PORT 1
    python3 -m pallas_prof report runs            # one row per kernel per device per process

On a GPU host give each process its own GPU (CUDA_VISIBLE_DEVICES=0 / 1).
tests/cli/test_processes.py runs it on a CPU.
"""
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

jax.distributed.initialize(coordinator_address=sys.argv[1], num_processes=2,
                           process_id=int(sys.argv[2]))


def scale_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + 1.0


x = jnp.arange(1000, dtype=jnp.float32) + jax.process_index()
y = pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
assert float(y.sum()) == float((x * 2.0 + 1.0).sum())
print("process", jax.process_index(), "of", jax.process_count(), "on", jax.local_devices())
