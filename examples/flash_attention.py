"""Flash attention forward: online softmax over key blocks with lax.fori_loop,
one program per (query block, batch, head); optional causal masking.

    python examples/flash_attention.py            # small, quick on CPU
    python examples/flash_attention.py --large    # batch 4, seq 4096, 16 heads, dim 64, float16
"""
import functools
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

pallas_prof.install()


def flash_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k, causal, scale):
  block_q, head_dim = q_ref.shape
  seq_len = k_ref.shape[0]
  q_start = pl.program_id(0) * block_q
  q = q_ref[...]
  q_pos = q_start + jnp.arange(block_q)

  def body(j, carry):
    acc, m, l = carry
    k = k_ref[pl.ds(j * block_k, block_k), :]
    v = v_ref[pl.ds(j * block_k, block_k), :]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * scale
    if causal:
      k_pos = j * block_k + jnp.arange(block_k)
      s = jnp.where(q_pos[:, None] >= k_pos[None, :], s, -jnp.inf)
    m_new = jnp.maximum(m, jnp.max(s, axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    l_new = alpha * l + jnp.sum(p, axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return acc, m_new, l_new

  n_blocks = pl.cdiv(q_start + block_q, block_k) if causal else seq_len // block_k
  init = (jnp.zeros((block_q, head_dim), jnp.float32),
          jnp.full((block_q,), -jnp.inf, jnp.float32),
          jnp.zeros((block_q,), jnp.float32))
  acc, m, l = jax.lax.fori_loop(0, n_blocks, body, init)
  o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=["causal", "block_q", "block_k", "num_warps", "num_stages"])
def flash_attention(q, k, v, causal=False, block_q=64, block_k=64, num_warps=4, num_stages=2):
  batch, seq, heads, dim = q.shape
  if seq % block_q or seq % block_k:
    # the key loop reads whole blocks, and each program owns a whole block of queries
    raise ValueError(f"flash_attention: seq={seq} is not a multiple of block_q={block_q} "
                     f"and block_k={block_k}")
  kernel = functools.partial(flash_kernel, block_k=block_k, causal=causal,
                             scale=1.0 / math.sqrt(dim))
  q_spec = pl.BlockSpec((None, block_q, None, dim), lambda i, b, h: (b, i, h, 0))
  kv_spec = pl.BlockSpec((None, seq, None, dim), lambda i, b, h: (b, 0, h, 0))
  return pl.pallas_call(
      kernel,
      grid=(pl.cdiv(seq, block_q), batch, heads),
      in_specs=[q_spec, kv_spec, kv_spec],
      out_specs=q_spec,
      out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=num_warps, num_stages=num_stages),
  )(q, k, v)


def reference(q, k, v, causal):
  scale = 1.0 / math.sqrt(q.shape[-1])
  s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
  if causal:
    n = q.shape[1]
    s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
  p = jax.nn.softmax(s, axis=-1)
  return jnp.einsum("bhqk,bkhd->bqhd", p, v.astype(jnp.float32))


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  large = "--large" in argv
  causal = "--causal" in argv or not large
  shape = (4, 4096, 16, 64) if large else (1, 256, 2, 64)
  kq, kk, kv = jax.random.split(jax.random.PRNGKey(seed), 3)
  q, k, v = (jax.random.normal(key, shape, jnp.float32).astype(jnp.float16) for key in (kq, kk, kv))
  params = dict(block_q=128, block_k=64, num_warps=4, num_stages=3) if large else {}
  out = flash_attention(q, k, v, causal=causal, **params)
  ref = reference(q, k, v, causal)
  err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref)))
  print(f"flash_attention {shape} causal={causal}: max |error| = {err:.3g}")
  return 0 if err < 2e-2 else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
