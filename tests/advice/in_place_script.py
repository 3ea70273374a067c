"""A script for tests/advice/test_advise_cli.py: column sums accumulated in the output ref
over a loop of row blocks, three programs for the whole GPU (advise splits the loop)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def colsum_kernel(x_ref, o_ref, *, rows):
  o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)

  def body(i, _):
    o_ref[...] += x_ref[pl.ds(i * rows, rows), :].sum(axis=0)
  jax.lax.fori_loop(0, x_ref.shape[0] // rows, body, None)


@jax.jit
def colsum(x):
  n, d = x.shape
  bd = 32
  return pl.pallas_call(functools.partial(colsum_kernel, rows=16), grid=(d // bd,),
                        in_specs=[pl.BlockSpec((n, bd), lambda j: (0, j))],
                        out_specs=pl.BlockSpec((bd,), lambda j: (j,)),
                        out_shape=jax.ShapeDtypeStruct((d,), jnp.float32))(x)


x = jnp.asarray(np.random.default_rng(0).standard_normal((1008, 96), np.float32))
print("sums", np.asarray(colsum(x)).round(3).tolist())
