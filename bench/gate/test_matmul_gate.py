"""The planted regression of issue 41's GPU proof: a blocked bfloat16 matmul whose
num_stages comes from GATE_NUM_STAGES (3 in the baseline; 1 is the regression: the K
loop is no longer software-pipelined, so each block's loads wait in full).

Run by bench/gate/gpu_proof.sh, not by the project's test suite (it is not under tests/).
"""
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

# GATE_SIZE: the square size (4096 on the GPU; small to try the script on a CPU)
M = N = K = int(os.environ.get("GATE_SIZE", "4096"))


def matmul_kernel(a_ref, b_ref, o_ref, *, block_k):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * block_k, block_k)]
    b = b_ref[pl.ds(k * block_k, block_k), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, a_ref.shape[1] // block_k, step,
                          jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


def matmul(a, b, num_stages, bm=128, bn=128, bk=64):
  return pl.pallas_call(
      functools.partial(matmul_kernel, block_k=bk),
      grid=(pl.cdiv(M, bm), pl.cdiv(N, bn)),
      in_specs=[pl.BlockSpec((bm, K), lambda i, j: (i, 0)),
                pl.BlockSpec((K, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=4, num_stages=num_stages),
  )(a, b)


def test_matmul():
  stages = int(os.environ.get("GATE_NUM_STAGES", "3"))
  ka, kb = jax.random.split(jax.random.PRNGKey(0))
  a = jax.random.normal(ka, (M, K), jnp.float32).astype(jnp.bfloat16)
  b = jax.random.normal(kb, (K, N), jnp.float32).astype(jnp.bfloat16)
  out = jax.jit(functools.partial(matmul, num_stages=stages))(a, b)
  ref = jnp.dot(a, b, preferred_element_type=jnp.float32)
  rel = float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))
  assert rel < 1e-2, rel
