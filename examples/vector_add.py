"""Vector add: the smallest Pallas kernel, on a size that is not a multiple of the block.

    python examples/vector_add.py            # small, quick on CPU (Triton's interpreter)
    python examples/vector_add.py --large    # 2**26 elements, for a GPU
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

pallas_prof.install()

BLOCK = 1024


def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


@jax.jit
def add(x, y):
  n = x.shape[0]
  spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
  return pl.pallas_call(
      add_kernel,
      grid=(pl.cdiv(n, BLOCK),),
      in_specs=[spec, spec],
      out_specs=spec,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
  )(x, y)


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  n = 2**26 if "--large" in argv else 100_003
  kx, ky = jax.random.split(jax.random.PRNGKey(seed))
  x = jax.random.normal(kx, (n,), jnp.float32)
  y = jax.random.normal(ky, (n,), jnp.float32)
  out = add(x, y)
  err = float(jnp.max(jnp.abs(out - (x + y))))
  print(f"vector_add n={n}: max |error| = {err:.3g}")
  return 0 if err == 0.0 else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
