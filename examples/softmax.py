"""Row softmax: one program per block of rows, a whole row per program.

    python examples/softmax.py            # small, quick on CPU
    python examples/softmax.py --large    # 8192 x 8192 float32, for a GPU
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

pallas_prof.install()


def softmax_kernel(x_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  x = x - jnp.max(x, axis=1, keepdims=True)
  e = jnp.exp(x)
  o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)


@jax.jit
def softmax(x):
  rows, cols = x.shape
  block_rows = 1
  return pl.pallas_call(
      softmax_kernel,
      grid=(pl.cdiv(rows, block_rows),),
      in_specs=[pl.BlockSpec((block_rows, cols), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((block_rows, cols), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=8 if cols >= 4096 else 4),
  )(x)


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  shape = (8192, 8192) if "--large" in argv else (64, 1000)
  x = jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32) * 3
  out = softmax(x)
  ref = jax.nn.softmax(x, axis=-1)
  err = float(jnp.max(jnp.abs(out - ref)))
  print(f"softmax {shape}: max |error| = {err:.3g}")
  return 0 if err < 1e-6 else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
