"""A pallas-prof kernel on every GPU of the host: under jax.shard_map (rows split
across devices) and with explicit device placement, checked on each device.

    python examples/multi_gpu.py            # uses all visible devices (1 on a CPU machine)
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import pallas_prof

pallas_prof.install()


def rms_kernel(x_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  o_ref[...] = (x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)).astype(o_ref.dtype)


def rms_norm(x):
  rows, cols = x.shape
  spec = pl.BlockSpec((1, cols), lambda i: (i, 0))
  return pl.pallas_call(rms_kernel, grid=(rows,), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def reference(x):
  x32 = x.astype(jnp.float32)
  return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6)).astype(x.dtype)


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  devices = jax.devices()
  n = len(devices)
  rows, cols = (4096 * n, 4096) if jax.default_backend() == "gpu" else (8 * n, 256)
  x = jax.random.normal(jax.random.PRNGKey(seed), (rows, cols), jnp.float32)
  mesh = Mesh(np.array(devices), ("d",))
  sharded = jax.device_put(x, NamedSharding(mesh, P("d", None)))
  f = jax.jit(jax.shard_map(rms_norm, mesh=mesh, in_specs=P("d", None), out_specs=P("d", None),
                            check_vma=False))
  out = f(sharded)
  ok = True
  for shard in out.addressable_shards:
    piece = np.asarray(shard.data)
    ref = np.asarray(reference(x[shard.index]))
    err = float(np.max(np.abs(piece - ref)))
    ok &= err < 1e-5
    rows_of = shard.index[0]
    print(f"shard_map on {shard.device}: rows {rows_of.start or 0}..{rows_of.stop or rows}: "
          f"max |error| = {err:.3g}")
  # explicit placement: the same jitted kernel, once per device
  g = jax.jit(rms_norm)
  for d in devices:
    xd = jax.device_put(x[: rows // n], d)
    err = float(jnp.max(jnp.abs(g(xd) - reference(xd))))
    ok &= err < 1e-5
    print(f"device_put on {d}: max |error| = {err:.3g}")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
