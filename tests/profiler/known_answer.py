"""Kernels whose time is known before they run, to check measured attribution.

    pallas-prof run tests/profiler/known_answer.py --large     # on a GPU
    python tests/profiler/known_answer.py                      # small, CPU interpreter

  ka_copy     memory-bound copy with light math: the time is the load and the store
  ka_loop     one fori_loop of 64 rounds of sin/cos on the block, then an add and a
              store: the loop is nearly all of it
  ka_two      two loops of the same short body over the same block, 16 and 48 rounds:
              their shares are 1:3. Where the warps stand says otherwise: most
              samples queue at the first loop's special-function instructions
              ("not selected", "queue full"); charged to the instructions that were
              issuing (profiler/sampling/contention.py) they split 1:3
  ka_matmul   bf16 matmul walking K: the dot and the loads that feed it
Each kernel checks its result against jax.numpy; the script exits 1 if one differs.
"""
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof

pallas_prof.install()

ROUNDS = 64
SHORT, LONG = 16, 48


def _rows(shape, block_rows, kernel, *args, warps=4):
  rows, cols = shape
  return pl.pallas_call(
      kernel, grid=(rows // block_rows,),
      in_specs=[pl.BlockSpec((block_rows, cols), lambda i: (i, 0))] * len(args),
      out_specs=pl.BlockSpec((block_rows, cols), lambda i: (i, 0)),
      out_shape=jax.ShapeDtypeStruct(shape, args[0].dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=warps))(*args)


def ka_copy_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 1.5 + 0.25


def _round(i, v):
  return jnp.sin(v) * 0.75 + jnp.cos(v) * 0.25


def ka_loop_kernel(x_ref, o_ref):
  x = x_ref[...]
  y = jax.lax.fori_loop(0, ROUNDS, _round, x)
  o_ref[...] = y + x


def _short_round(i, v):
  return jnp.exp(-v * v) * 0.5 + v * 0.5


def ka_two_kernel(x_ref, o_ref):
  x = x_ref[...]
  short = jax.lax.fori_loop(0, SHORT, _short_round, x)
  long = jax.lax.fori_loop(0, LONG, _short_round, x)
  o_ref[...] = short + long


def ka_matmul_kernel(a_ref, b_ref, o_ref, *, block_k):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * block_k, block_k)]
    b = b_ref[pl.ds(k * block_k, block_k), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  acc = jax.lax.fori_loop(0, a_ref.shape[1] // block_k, step,
                          jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=["bm", "bn", "bk", "warps"])
def matmul(a, b, bm, bn, bk, warps):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      functools.partial(ka_matmul_kernel, block_k=bk), grid=(m // bm, n // bn),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=warps, num_stages=3))(a, b)


def _loop_ref(x, rounds, body=_round):
  return jax.lax.fori_loop(0, rounds, body, x)


def main(argv):
  large = "--large" in argv
  seed = np.random.randint(2**31)
  print(f"known_answer: seed {seed}")
  keys = jax.random.split(jax.random.PRNGKey(seed), 4)
  failures = []

  def check(name, out, ref, tol):
    err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref.astype(jnp.float32))))
    print(f"{name}: max |error| {err:.3g}")
    if not err <= tol:
      failures.append(name)

  copy_shape = (8192, 8192) if large else (16, 300)
  x = jax.random.normal(keys[0], copy_shape, jnp.float32)
  check("ka_copy", jax.jit(lambda x: _rows(copy_shape, 8 if large else 2, ka_copy_kernel, x,
                                           warps=8))(x), x * 1.5 + 0.25, 1e-6)
  # one row of 1024 per program, 8 values per thread: no register spills
  math_shape = (8192, 1024) if large else (4, 256)
  y = jax.random.normal(keys[1], math_shape, jnp.float32)
  check("ka_loop", jax.jit(lambda y: _rows(math_shape, 1, ka_loop_kernel, y))(y),
        _loop_ref(y, ROUNDS) + y, 1e-4)
  check("ka_two", jax.jit(lambda y: _rows(math_shape, 1, ka_two_kernel, y))(y),
        _loop_ref(y, SHORT, _short_round) + _loop_ref(y, LONG, _short_round), 1e-4)
  n = 4096 if large else 128
  a = jax.random.normal(keys[2], (n, n), jnp.float32).astype(jnp.bfloat16)
  b = jax.random.normal(keys[3], (n, n), jnp.float32).astype(jnp.bfloat16)
  params = dict(bm=128, bn=128, bk=64, warps=4) if large else dict(bm=32, bn=32, bk=32, warps=4)
  out = matmul(a, b, **params)
  ref = jnp.dot(a, b, preferred_element_type=jnp.float32)
  rel = float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))
  print(f"ka_matmul: relative error {rel:.3g}")
  if not rel < 1e-2:
    failures.append("ka_matmul")
  if failures:
    print("DIFFER:", ", ".join(failures))
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
