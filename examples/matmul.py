"""Blocked matmul: each program owns a (BM, BN) tile and walks K with lax.fori_loop,
accumulating jnp.dot of (BM, BK) x (BK, BN) blocks in float32.

Any M and N: the grid rounds up (pl.cdiv), and the tiles at the edges are partial (their
rows and columns past the arrays are neither read nor written). K must be a multiple of
BK: the loop reads whole (BM, BK) and (BK, BN) blocks of the inputs.

    python examples/matmul.py            # small, quick on CPU
    python examples/matmul.py --large    # 8192^3 bfloat16, for a GPU
"""
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof


def matmul_kernel(a_ref, b_ref, o_ref, *, block_k):
  k_steps = a_ref.shape[1] // block_k

  def step(k, acc):
    a = a_ref[:, pl.ds(k * block_k, block_k)]
    b = b_ref[pl.ds(k * block_k, block_k), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, k_steps, step, jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=["bm", "bn", "bk", "num_warps", "num_stages"])
def matmul(a, b, bm=128, bn=128, bk=64, num_warps=4, num_stages=3):
  m, k = a.shape
  _, n = b.shape
  if k % bk:
    raise ValueError(f"matmul: K={k} is not a multiple of bk={bk}; pick a bk that divides K")
  return pl.pallas_call(
      functools.partial(matmul_kernel, block_k=bk),
      grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),     # every output tile, partial ones included
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=num_warps, num_stages=num_stages),
  )(a, b)


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  large = "--large" in argv
  m = n = k = 8192 if large else 256
  dtype = jnp.bfloat16
  ka, kb = jax.random.split(jax.random.PRNGKey(seed))
  a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
  b = jax.random.normal(kb, (k, n), jnp.float32).astype(dtype)
  params = dict(bm=128, bn=256, bk=64, num_warps=8, num_stages=3) if large else \
      dict(bm=64, bn=64, bk=32)
  out = matmul(a, b, **params)
  ref = jnp.dot(a, b, preferred_element_type=jnp.float32)
  rel = float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))
  print(f"matmul {m}x{k}x{n} {jnp.dtype(dtype).name}: relative error = {rel:.3g}")
  return 0 if rel < 1e-2 else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
