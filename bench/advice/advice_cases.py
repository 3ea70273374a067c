"""The known-answer kernels of bench/advice/advice_known_answers.py: one planted defect each, and
the fix a person would apply by hand. Each build() gives the planted and the fixed
function (jitted) and the arguments' shapes (jax.ShapeDtypeStruct): a GPU runs them on
random inputs, a CPU only lowers and compiles them at full size (their static facts).

    case            planted                                    hand fix              expected
    no_pipelining   bf16 matmul 4096^3, K loop, num_stages=1   num_stages=3          unpipelined_loop, a
    too_few_warps   2048 x 16384 f32 row kernel, num_warps=1   num_warps=4           too_few_warps, a
                    (512 values a thread: spilled)
    spills          mean-centred rows, (16, 8192) f32 blocks,  (2, 8192) blocks      spills, c
                    4 warps
    tiny_blocks     add of 2^24 f32 in 64-element blocks       4096-element blocks   small_programs, c
    uncoalesced     x * 2 on 4096 x 4096 f32 in (512, 1)       (512, 32) blocks      uncoalesced, c
                    column blocks
    transcendental  a loop re-reading x and recomputing        exp/sin hoisted       loop_invariant, d
                    exp(x) * sin(x) in each of 64 iterations   before the loop
    narrow_         column sums of 32768 x 2048 bf16, one      the loop split over   long_reduction, e
    reduction       program per 16 columns (32-byte rows),     16 programs a block,
                    128 programs each looping all the rows     128-column blocks
    loop_step       causal attention, 16 heads x 4096 x 64     block_k=64            loop_step, c
                    bf16, its K loop stepping 16 rows
                    (block_k=16: half a tensor-core tile's
                    worth of work an iteration)
    at_roof         add of 2^26 f32 in 4096-element blocks     none: nothing wrong   at_roof, no action
                    (48 KiB a program: streams at its roof)

The at_roof case has no planted defect and no fix (build() gives None for the fixed
function): on a GPU its advice must be "at its roof" with no actions. The loop_step case's
hand fix is a step of 64 rows, as wide as the head: four times the planted one, among the
steps advise tries (loop_steps.larger).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallas_prof


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  defect: str
  rule: str                   # the diagnosis the advice must give
  fix_kind: str | None        # the kind of the hand fix (a, c or d); None: nothing to fix
  build: Callable             # build() -> (planted fn, fixed fn or None, argument shapes)


def _cp(**kw):
  return pallas_prof.CompilerParams(**kw)


# --- no pipelining: a K loop compiled with num_stages=1 ---------------------------------

def matmul_kernel(a_ref, b_ref, o_ref, *, bk):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * bk, bk)]
    b = b_ref[pl.ds(k * bk, bk), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)
  acc = jax.lax.fori_loop(0, a_ref.shape[1] // bk, step, jnp.zeros(o_ref.shape, jnp.float32))
  o_ref[...] = acc.astype(o_ref.dtype)


def _matmul(a, b, stages, bm=128, bn=128, bk=64):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      functools.partial(matmul_kernel, bk=bk), grid=(m // bm, n // bn),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
      compiler_params=_cp(num_warps=4, num_stages=stages))(a, b)


def _spec(*shape, dtype=jnp.float32):
  return jax.ShapeDtypeStruct(shape, dtype)


def no_pipelining():
  return (jax.jit(functools.partial(_matmul, stages=1)),
          jax.jit(functools.partial(_matmul, stages=3)),
          (_spec(4096, 4096, dtype=jnp.bfloat16), _spec(4096, 4096, dtype=jnp.bfloat16)))


# --- too few warps: one warp per row of 16384 floats ------------------------------------
# Rows of 16384: one warp holds 512 values a thread and spills them. Rows of 4096 would not
# do: one warp holding 128 a thread streams at its roof on the H200 with Triton 3.6
# (bench/advice/too_few_warps_probe.py measures both).

def row_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def _rows(x, warps):
  spec = pl.BlockSpec((1, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(row_kernel, grid=(x.shape[0],), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        compiler_params=_cp(num_warps=warps))(x)


def too_few_warps():
  return (jax.jit(functools.partial(_rows, warps=1)), jax.jit(functools.partial(_rows, warps=4)),
          (_spec(2048, 16384),))


# --- spills: 512 values per thread ------------------------------------------------------

def centre_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = (x - jnp.mean(x, axis=1, keepdims=True)) * 2.0


def _centre(x, rows, warps):
  spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(centre_kernel, grid=(x.shape[0] // rows,), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        compiler_params=_cp(num_warps=warps))(x)


def spills():
  return (jax.jit(functools.partial(_centre, rows=16, warps=4)),
          jax.jit(functools.partial(_centre, rows=2, warps=4)), (_spec(8192, 8192),))


# --- tiny blocks: 64 floats a program ---------------------------------------------------

def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def _add(x, y, block):
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(add_kernel, grid=(x.shape[0] // block,), in_specs=[spec, spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def tiny_blocks():
  return (jax.jit(functools.partial(_add, block=64)), jax.jit(functools.partial(_add, block=4096)),
          (_spec(1 << 24), _spec(1 << 24)))


# --- uncoalesced: column blocks of a row-major array ------------------------------------

def scale_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def _scale(x, cols):
  spec = pl.BlockSpec((512, cols), lambda i, j: (i, j))
  return pl.pallas_call(scale_kernel, grid=(x.shape[0] // 512, x.shape[1] // cols),
                        in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def uncoalesced():
  return (jax.jit(functools.partial(_scale, cols=1)), jax.jit(functools.partial(_scale, cols=32)),
          (_spec(4096, 4096),))


# --- a transcendental-bound loop that recomputes what does not change -------------------

ROUNDS = 64


def recompute_kernel(x_ref, o_ref):
  def body(i, acc):
    x = x_ref[...]                          # the same block in every iteration
    acc = acc * 0.5 + jnp.exp(x) * jnp.sin(x)
    o_ref[...] = acc                        # the partial result, as a streaming kernel would
    return acc
  jax.lax.fori_loop(0, ROUNDS, body, jnp.zeros(x_ref.shape, jnp.float32))


def hoisted_kernel(x_ref, o_ref):
  x = x_ref[...]
  t = jnp.exp(x) * jnp.sin(x)

  def body(i, acc):
    acc = acc * 0.5 + t
    o_ref[...] = acc
    return acc
  jax.lax.fori_loop(0, ROUNDS, body, jnp.zeros(x_ref.shape, jnp.float32))


def _loop(x, kernel):
  spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
  return pl.pallas_call(kernel, grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def transcendental():
  return (jax.jit(functools.partial(_loop, kernel=recompute_kernel)),
          jax.jit(functools.partial(_loop, kernel=hoisted_kernel)), (_spec(8192, 1024),))


# --- a long reduction done by too few, too narrow programs -------------------------------
# As JAX's norms' dw/db kernels: no BlockSpecs, a functools.partial whose block_n the grid
# is computed from, a loop down all the rows summing a 16-column strip (32-byte rows of
# bf16). The hand fix is what a person writes: wider strips, the rows cut into chunks run by
# more programs, the partial sums added after the call.

SUM_ROWS = 32            # the loop's step: rows a program sums an iteration


def column_sums_kernel(x_ref, o_ref, *, block_n):
  j = pl.program_id(0)
  cols = pl.ds(j * block_n, block_n)

  def body(i, acc):
    return acc + x_ref[pl.ds(i * SUM_ROWS, SUM_ROWS), cols].astype(jnp.float32).sum(axis=0)
  o_ref[cols] = jax.lax.fori_loop(0, x_ref.shape[0] // SUM_ROWS, body,
                                  jnp.zeros(block_n, jnp.float32))


def _column_sums(x, block_n):
  return pl.pallas_call(functools.partial(column_sums_kernel, block_n=block_n),
                        grid=(pl.cdiv(x.shape[1], block_n),),
                        out_shape=jax.ShapeDtypeStruct(x.shape[1:], jnp.float32))(x)


def column_partials_kernel(x_ref, o_ref, *, block_n, chunk):
  j, s = pl.program_id(0), pl.program_id(1)
  cols = pl.ds(j * block_n, block_n)

  def body(i, acc):
    return acc + x_ref[pl.ds(i * SUM_ROWS, SUM_ROWS), cols].astype(jnp.float32).sum(axis=0)
  o_ref[s, cols] = jax.lax.fori_loop(s * chunk, (s + 1) * chunk, body,
                                     jnp.zeros(block_n, jnp.float32))


def _column_sums_split(x, block_n=128, splits=16):
  chunk = x.shape[0] // SUM_ROWS // splits
  partials = pl.pallas_call(
      functools.partial(column_partials_kernel, block_n=block_n, chunk=chunk),
      grid=(pl.cdiv(x.shape[1], block_n), splits),
      out_shape=jax.ShapeDtypeStruct((splits, x.shape[1]), jnp.float32))(x)
  return partials.sum(axis=0)


def narrow_reduction():
  return (jax.jit(functools.partial(_column_sums, block_n=16)), jax.jit(_column_sums_split),
          (_spec(32768, 2048, dtype=jnp.bfloat16),))


# --- a loop stepping too few rows: causal attention's block_k -----------------------------
# As JAX's flash attention: k and v whole in each program, the K loop's bound growing with
# the query block's program id (causal), the step a keyword of a functools.partial.

ATTENTION_BLOCK_Q = 64


def causal_attention_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k):
  block_q, _ = q_ref.shape
  first_row = pl.program_id(1) * block_q
  q = q_ref[...]
  rows = first_row + jax.lax.broadcasted_iota(jnp.int32, (block_q, block_k), 0)

  def body(i, carry):
    m, l, acc = carry
    keys = pl.ds(i * block_k, block_k)
    s = jax.lax.dot_general(q, k_ref[keys, :], (((1,), (1,)), ((), ())),
                            preferred_element_type=jnp.float32)
    cols = i * block_k + jax.lax.broadcasted_iota(jnp.int32, (block_q, block_k), 1)
    s = jnp.where(cols <= rows, s, -jnp.inf)
    m_new = jnp.maximum(m, s.max(axis=1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    acc = acc * alpha[:, None] + jnp.dot(p.astype(v_ref.dtype), v_ref[keys, :],
                                         preferred_element_type=jnp.float32)
    return m_new, l * alpha + p.sum(axis=1), acc

  init = (jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32),
          jnp.zeros(q_ref.shape, jnp.float32))
  _, l, acc = jax.lax.fori_loop(0, (first_row + block_q) // block_k, body, init)
  o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)


def _causal_attention(q, k, v, block_k):
  heads, seq, dim = q.shape
  q_spec = pl.BlockSpec((None, ATTENTION_BLOCK_Q, dim), lambda h, i: (h, i, 0))
  kv_spec = pl.BlockSpec((None, seq, dim), lambda h, i: (h, 0, 0))
  return pl.pallas_call(functools.partial(causal_attention_kernel, block_k=block_k),
                        grid=(heads, seq // ATTENTION_BLOCK_Q),
                        in_specs=[q_spec, kv_spec, kv_spec], out_specs=q_spec,
                        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype))(q, k, v)


def loop_step():
  spec = _spec(16, 4096, 64, dtype=jnp.bfloat16)
  return (jax.jit(functools.partial(_causal_attention, block_k=16)),
          jax.jit(functools.partial(_causal_attention, block_k=64)), (spec, spec, spec))


# --- at its roof: the same add in blocks large enough to stream -------------------------

def at_roof():
  return jax.jit(functools.partial(_add, block=4096)), None, (_spec(1 << 26), _spec(1 << 26))


CASES = [
    Case("no_pipelining", "bf16 matmul 4096^3 whose K loop is compiled with num_stages=1",
         "unpipelined_loop", "a", no_pipelining),
    Case("too_few_warps", "2048 x 16384 f32 row kernel with num_warps=1", "too_few_warps", "a",
         too_few_warps),
    Case("spills", "mean-centred rows in (16, 8192) f32 blocks over 4 warps: 1024 values a "
         "thread", "spills", "c", spills),
    Case("tiny_blocks", "add of 2^24 f32 in 64-element blocks", "small_programs", "c",
         tiny_blocks),
    Case("uncoalesced", "x * 2 on 4096 x 4096 f32 in (512, 1) column blocks", "uncoalesced", "c",
         uncoalesced),
    Case("transcendental", "a loop that re-reads x and recomputes exp(x) * sin(x) in each of "
         "its 64 iterations", "loop_invariant", "d", transcendental),
    Case("narrow_reduction", "column sums of 32768 x 2048 bf16 by 128 programs, each "
         "looping all the rows of a 16-column strip", "long_reduction", "e", narrow_reduction),
    Case("loop_step", "causal attention (16 heads x 4096 x 64 bf16) whose K loop steps 16 "
         "rows (block_k=16)", "loop_step", "c", loop_step),
    Case("at_roof", "add of 2^26 f32 in 4096-element blocks (nothing planted)", "at_roof",
         None, at_roof),
]
