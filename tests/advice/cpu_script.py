"""Four kernels with one planted defect each, small enough for Triton's interpreter
(bench/advice/advice_known_answers.py has the GPU-sized ones): tiny blocks, one warp per row,
a transcendental the loop recomputes (which LLVM hoists), and transcendentals that are
most of a kernel's work whatever the compiler does."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

pallas_prof.install()
print("the script runs", file=sys.stderr, flush=True)


def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def row_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = x - jnp.max(x, axis=-1, keepdims=True)


def exp_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.sin(jnp.cos(jnp.exp(x)))       # three transcendentals an element


def loop_kernel(x_ref, o_ref):
  def body(i, acc):
    x = x_ref[...]                            # the same block, read again each iteration
    return acc * 0.5 + jnp.exp(x) * jnp.sin(x)   # exp(x), sin(x): the same every iteration

  o_ref[...] = jax.lax.fori_loop(0, 64, body, jnp.zeros(x_ref.shape, jnp.float32))


n = 1 << 16
x = jnp.linspace(-1, 1, n, dtype=jnp.float32)
y = jnp.ones(n, jnp.float32)
spec = pl.BlockSpec((64,), lambda i: (i,))
z = pl.pallas_call(add_kernel, grid=(n // 64,), in_specs=[spec, spec], out_specs=spec,
                   out_shape=jax.ShapeDtypeStruct((n,), jnp.float32))(x, y)
np.testing.assert_allclose(np.asarray(z), np.asarray(x + y))

rows = jnp.ones((256, 4096), jnp.float32)
rs = pl.BlockSpec((1, 4096), lambda i: (i, 0))
pl.pallas_call(row_kernel, grid=(256,), in_specs=[rs], out_specs=rs, out_shape=rows,
               compiler_params=pallas_prof.CompilerParams(num_warps=1))(rows)

xs = jnp.ones((2048, 128), jnp.float32)
ls = pl.BlockSpec((8, 128), lambda i: (i, 0))
pl.pallas_call(loop_kernel, grid=(256,), in_specs=[ls], out_specs=ls, out_shape=xs)(xs)

es = pl.BlockSpec((1024,), lambda i: (i,))
pl.pallas_call(exp_kernel, grid=(1024,), in_specs=[es], out_specs=es,
               out_shape=jax.ShapeDtypeStruct((1 << 20,), jnp.float32))(jnp.ones(1 << 20))
