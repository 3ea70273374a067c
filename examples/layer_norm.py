"""Layer norm forward: mean and variance per row in float32, then scale and shift.

    python examples/layer_norm.py            # small, quick on CPU
    python examples/layer_norm.py --large    # 8192 x 8192 bfloat16, for a GPU
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

pallas_prof.install()

EPS = 1e-5


def layer_norm_kernel(x_ref, w_ref, b_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  mean = jnp.mean(x, axis=-1, keepdims=True)
  centered = x - mean
  var = jnp.mean(centered * centered, axis=-1, keepdims=True)
  y = centered * jax.lax.rsqrt(var + EPS)
  y = y * w_ref[...].astype(jnp.float32) + b_ref[...].astype(jnp.float32)
  o_ref[...] = y.astype(o_ref.dtype)


@jax.jit
def layer_norm(x, w, b):
  rows, cols = x.shape
  row_spec = pl.BlockSpec((1, cols), lambda i: (i, 0))
  vec_spec = pl.BlockSpec((1, cols), lambda i: (0, 0))
  return pl.pallas_call(
      layer_norm_kernel,
      grid=(rows,),
      in_specs=[row_spec, vec_spec, vec_spec],
      out_specs=row_spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=8 if cols >= 4096 else 4),
  )(x, w.reshape(1, cols), b.reshape(1, cols))


def reference(x, w, b):
  x32 = x.astype(jnp.float32)
  mean = x32.mean(-1, keepdims=True)
  var = ((x32 - mean) ** 2).mean(-1, keepdims=True)
  return ((x32 - mean) * jax.lax.rsqrt(var + EPS) * w + b).astype(x.dtype)


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  large = "--large" in argv
  shape = (8192, 8192) if large else (48, 768)
  dtype = jnp.bfloat16 if large else jnp.float32
  k = jax.random.split(jax.random.PRNGKey(seed), 3)
  x = (jax.random.normal(k[0], shape) * 2 + 0.5).astype(dtype)
  w = jax.random.normal(k[1], shape[1:], jnp.float32)
  b = jax.random.normal(k[2], shape[1:], jnp.float32)
  out = layer_norm(x, w, b)
  ref = reference(x, w, b)
  err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref.astype(jnp.float32))))
  tol = 5e-2 if dtype == jnp.bfloat16 else 1e-4
  print(f"layer_norm {shape} {jnp.dtype(dtype).name}: max |error| = {err:.3g}")
  return 0 if err < tol else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
