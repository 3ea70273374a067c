"""A blocked matmul (examples/matmul.py's) whose dot asks for a precision: the dot rules'
kernel (tests/advice/test_dots.py on a CPU, bench/advice/dots_gpu.py at
precision=HIGHEST on a GPU). The precision is the one thing it adds to the example."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallas_prof


def precision_matmul_kernel(a_ref, b_ref, o_ref, *, block_k, precision=None):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * block_k, block_k)]
    b = b_ref[pl.ds(k * block_k, block_k), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32, precision=precision)
  acc = jax.lax.fori_loop(0, a_ref.shape[1] // block_k, step, jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


def precision_matmul(a, b, bm, bn, bk, precision=None, num_warps=4, num_stages=3):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      functools.partial(precision_matmul_kernel, block_k=bk, precision=precision),
      grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=num_warps, num_stages=num_stages),
  )(a, b)
