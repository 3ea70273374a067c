"""A hand-written kernel of the split reduction's pattern: one program per block of columns
sums its columns over every row in a fori loop, then stores the sums once; small enough for
Triton's interpreter, its shapes not powers of two. tests/advice/test_split_reduction.py
patches a copy of this file with the diff advise writes and runs it; the suite's "advised"
column (bench/suite/advised.py, probe_diff_path) applies that diff with its own applier on
a CPU, where advise keeps nothing."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_prof import triton as plgpu

BLOCK_ROWS = 8
BLOCK_COLS = 16


def column_sums_kernel(x_ref, sums_ref, squares_ref, *, block_rows, block_cols):
  rows, cols = x_ref.shape
  j = pl.program_id(0)
  col = j * block_cols + jnp.arange(block_cols)
  col_ok = col < cols

  def body(i, acc):
    row = i * block_rows + jnp.arange(block_rows)
    ok = (row < rows)[:, None] & col_ok[None, :]
    x = plgpu.load(x_ref.at[row[:, None], col[None, :]], mask=ok, other=0.0).astype(jnp.float32)
    s, q = acc
    return s + x.sum(axis=0), q + (x * x).sum(axis=0)

  s, q = jax.lax.fori_loop(0, pl.cdiv(rows, block_rows), body,
                           (jnp.zeros(block_cols, jnp.float32),
                            jnp.zeros(block_cols, jnp.float32)))
  plgpu.store(sums_ref.at[col], s.astype(sums_ref.dtype), mask=col_ok)
  plgpu.store(squares_ref.at[col], q.astype(squares_ref.dtype), mask=col_ok)


def column_sums(x):
  rows, cols = x.shape
  kernel = functools.partial(column_sums_kernel, block_rows=BLOCK_ROWS, block_cols=BLOCK_COLS)
  out_shape = [jax.ShapeDtypeStruct((cols,), x.dtype), jax.ShapeDtypeStruct((cols,), x.dtype)]
  call = pl.pallas_call(kernel, out_shape, grid=(pl.cdiv(cols, BLOCK_COLS),),
                        name="column_sums")
  return call(x)
