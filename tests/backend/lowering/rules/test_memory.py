"""Ref reads and writes: indexing, gathers/scatters, masked loads/stores, swap,
addupdate and atomics, checked on the CPU interpreter against jax.numpy and
compiled for sm_90.

Each case is a builder `case(rng) -> (fn, args, expected)`: `fn(*args)` runs
the kernel through pallas-prof and must match `expected`. The same builders
feed `test_compiles_for_sm90`, so every family also compiles for the GPU.
"""
from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from pallas_prof import triton as plgpu
from jax._src.pallas import primitives as pallas_primitives
from jax._src.state import primitives as state_primitives

import pallas_prof
from pallas_prof.backend import compat
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend.lowering import lower
from pallas_prof.backend.options import LoweringOptions
from testkit.helpers import (JAX_TRITON_GONE, assert_close, check_lowering_error, jax_plgpu,
                           pallas, random_array)

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# --- helpers shared with test_grid.py ------------------------------------------------

def pallas_call_eqns(fn, *args):
  """The pallas_call equations of fn's jaxpr (traced on shapes only)."""
  specs = [S(np.shape(a), a.dtype) if not isinstance(a, S) else a for a in args]
  closed = jax.make_jaxpr(fn)(*specs)
  found = []

  def visit(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == "pallas_call":
        found.append(eqn)
      for param in eqn.params.values():
        for sub in param if isinstance(param, (tuple, list)) else (param,):
          if isinstance(sub, compat.JAXPR_TYPES):
            visit(compat.open_jaxpr(sub)[0])

  visit(closed.jaxpr)
  return found


def generated_kernel(fn, *args) -> lower.GeneratedKernel:
  """Lowers the (single) pallas_call inside fn without running it."""
  [eqn] = pallas_call_eqns(fn, *args)
  return lower.lower_kernel(eqn.params["jaxpr"], eqn.params["grid_mapping"],
                               LoweringOptions(num_warps=4, num_stages=3, compute_capability=90),
                               input_output_aliases=tuple(eqn.params["input_output_aliases"]))


def compiles_for_sm90(fn, *args) -> backend_compile.CompiledKernel:
  gk = generated_kernel(fn, *args)
  ck = backend_compile.compile_kernel(gk, ("cuda", 90))
  assert ck.ptx.startswith("//") and ".target sm_90" in ck.ptx
  assert ck.cubin
  return ck


def check_case(case, rng):
  fn, args, expected = case(rng)
  out = fn(*args)
  if callable(expected):            # a property, where the exact values depend on the schedule
    expected(out)
  elif isinstance(expected, (tuple, list)):
    assert isinstance(out, (tuple, list)) and len(out) == len(expected)
    for o, e in zip(out, expected):
      assert_close(o, e)
  else:
    assert_close(out, expected)


CASES: dict = {}


def case(name):
  def register(builder):
    CASES[name] = builder
    return builder
  return register


def rand(rng, shape, dtype=F32, **kw):
  return jnp.asarray(random_array(rng, shape, dtype, **kw))


# --- plain reads and writes --------------------------------------------------------

@case("whole_ref")
def _whole_ref(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

  return pallas(kernel, S(x.shape, F32)), (x,), x * 2


@case("static_slice")
def _static_slice(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[2:5, :]

  return pallas(kernel, S((3, 16), F32)), (x,), x[2:5, :]


@case("strided_slice")
def _strided_slice(rng):
  x = rand(rng, (9, 16))

  def kernel(x_ref, o_ref, p_ref):
    o_ref[...] = x_ref[1:9:2, ::3]
    p_ref[...] = jnp.zeros_like(p_ref)
    p_ref[::2, 1::5] = x_ref[0:9:2, ::6]

  zeros = jnp.zeros((9, 16), F32)
  return (pallas(kernel, (S((4, 6), F32), S((9, 16), F32))), (x,),
          (x[1:9:2, ::3], zeros.at[::2, 1::5].set(x[0:9:2, ::6])))


@case("ds_static")
def _ds_static(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[pl.ds(1, 3), pl.ds(4, 6)] = x_ref[pl.ds(5, 3), pl.ds(0, 6)]

  return pallas(kernel, S(x.shape, F32)), (x,), jnp.zeros_like(x).at[1:4, 4:10].set(x[5:8, 0:6])


@case("ds_strided")
def _ds_strided(rng):
  x = rand(rng, (8, 32))

  def kernel(x_ref, o_ref):
    # stride 0 broadcasts one element: pl.ds(i, n, 0)
    o_ref[...] = x_ref[pl.ds(1, 3, 2), pl.ds(2, 5, 3)] + x_ref[pl.ds(4, 3, 0), pl.ds(0, 5)]

  ref = x[1:7:2, 2:17:3] + jnp.broadcast_to(x[4:5, 0:5], (3, 5))
  return pallas(kernel, S((3, 5), F32)), (x,), ref


@case("ds_program_id")
def _ds_program_id(rng):
  x = rand(rng, (12, 16))

  def kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[pl.ds(i * 3, 3), :] = x_ref[pl.ds(i * 3, 3), :] + i.astype(F32)

  ref = x + jnp.repeat(jnp.arange(4, dtype=F32), 3)[:, None]
  return pallas(kernel, S(x.shape, F32), grid=(4,)), (x,), ref


@case("ds_loop_index")
def _ds_loop_index(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

    def body(i, carry):
      # a row, and a shifted window of it, at a loop-carried dynamic start
      # (i.astype: the loop index is a tensor, also under the interpreter)
      o_ref[pl.ds(i, 1), pl.ds(3, 5)] = (x_ref[pl.ds(7 - i, 1), pl.ds(2 * (i % 2), 5)]
                                         + i.astype(F32))
      return carry

    jax.lax.fori_loop(0, 8, body, 0)

  ref = jnp.zeros_like(x)
  for i in range(8):
    s = 2 * (i % 2)
    ref = ref.at[i, 3:8].set(x[7 - i, s:s + 5] + i)
  return pallas(kernel, S(x.shape, F32)), (x,), ref


@case("int_index")
def _int_index(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[0] = x_ref[3]
    o_ref[1, :] = x_ref[-1, :]
    o_ref[2, pl.ds(4, 8)] = x_ref[:, 5]         # a column: an int index on the last dim

  ref = jnp.zeros((3, 16), F32).at[0].set(x[3]).at[1].set(x[-1]).at[2, 4:12].set(x[:, 5])
  return pallas(kernel, S((3, 16), F32)), (x,), ref


@case("int_index_program_id")
def _int_index_program_id(rng):
  x = rand(rng, (6, 10))

  def kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[i, :] = x_ref[5 - i, :] * 2

  return pallas(kernel, S(x.shape, F32), grid=(6,)), (x,), x[::-1] * 2


@case("scalar_elements")
def _scalar_elements(rng):
  x = rand(rng, (4, 5))

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[1, 2] = x_ref[3, 4] + x_ref[0, 0]

  return pallas(kernel, S(x.shape, F32)), (x,), jnp.zeros_like(x).at[1, 2].set(x[3, 4] + x[0, 0])


@case("scalar_ref")
def _scalar_ref(rng):
  x = rand(rng, ())
  y = rand(rng, (7,))

  def kernel(x_ref, y_ref, o_ref, s_ref):
    o_ref[...] = y_ref[...] * x_ref[...]
    s_ref[...] = x_ref[...] + 1

  return pallas(kernel, (S((7,), F32), S((), F32))), (x, y), (y * x, x + 1)


@case("chained_at")
def _chained_at(rng):
  x = rand(rng, (6, 8, 10))

  def kernel(x_ref, o_ref, p_ref):
    view = x_ref.at[1:5].at[2].at[:, pl.ds(1, 4, 2)]    # .at[2] picks row 2 of x[1:5]
    o_ref[...] = view[...]
    p_ref[...] = jnp.zeros_like(p_ref)
    p_ref.at[pl.ds(0, 4)].at[1][pl.ds(2, 3)] = x_ref.at[3][0, pl.ds(5, 3)]

  zeros = jnp.zeros((6, 8), F32)
  return (pallas(kernel, (S((8, 4), F32), S((6, 8), F32))), (x,),
          (x[1:5][2][:, 1:9:2], zeros.at[1, 2:5].set(x[3, 0, 5:8])))


@case("index_reuse_across_scopes")
def _index_reuse_across_scopes(rng):
  # Index vectors are reused within a scope; these are the places where they
  # must not be: a while loop's carried index (read in the body, in the
  # condition and after the loop) and the two branches of a cond.
  x = rand(rng, (8, 4))
  limit = jnp.asarray(rng.integers(1, 8), jnp.int32)

  def kernel(x_ref, n_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[0] = x_ref[0]

    def body(c):
      o_ref[c] = x_ref[c] + o_ref[c - 1]
      return c + 1

    last = jax.lax.while_loop(lambda c: (c < n_ref[0]) & (x_ref[c, 0] < 100.0), body, 1)
    o_ref[7] = x_ref[last - 1] * 2

    def positive():
      o_ref[pl.ds(1, 3), 1:3] = x_ref[pl.ds(1, 3), 1:3] * 3

    def negative():
      o_ref[pl.ds(1, 3), 1:3] = x_ref[pl.ds(1, 3), 1:3] * -3

    jax.lax.cond(x_ref[0, 0] > 0, positive, negative)

  n = int(limit)
  ref = np.zeros((8, 4), np.float32)
  xs = np.asarray(x)
  ref[0] = xs[0]
  for c in range(1, n):
    ref[c] = xs[c] + ref[c - 1]
  last = max(n, 1)
  ref[7] = xs[last - 1] * 2
  ref[1:4, 1:3] = xs[1:4, 1:3] * (3 if xs[0, 0] > 0 else -3)
  return pallas(kernel, S((8, 4), F32)), (x, limit.reshape(1)), jnp.asarray(ref)


def test_index_vectors_are_reused_within_a_scope(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]
    o_ref[2:7] += 1                                # read then written: one set of vectors

  source = generated_kernel(pallas(kernel, S((8, 16), F32)), x).source
  assert source.count("= 2 + tl.arange(0, 8)") == 1, source


# --- integer-array indices -----------------------------------------------------------

def _indices(rng, n, size):
  return jnp.asarray(rng.integers(0, size, size=n), jnp.int32)


@case("gather_rows")
def _gather_rows(rng):
  x = rand(rng, (8, 16))
  idx = _indices(rng, 5, 8)

  def kernel(x_ref, i_ref, o_ref):
    o_ref[...] = x_ref[i_ref[...]]

  return pallas(kernel, S((5, 16), F32)), (x, idx), x[idx]


@case("gather_columns")
def _gather_columns(rng):
  x = rand(rng, (8, 16))
  idx = jnp.asarray(rng.integers(0, 16, size=6), jnp.int32)

  def kernel(x_ref, i_ref, o_ref):
    o_ref[...] = x_ref[:, i_ref[...]]

  return pallas(kernel, S((8, 6), F32)), (x, idx), x[:, idx]


@case("gather_masked_out_of_range")
def _gather_masked_out_of_range(rng):
  # Out-of-range array indices are the user's to mask (as in JAX's Triton
  # backend); masked lanes read `other`.
  x = rand(rng, (6, 8))
  idx = jnp.asarray(rng.integers(-14, 14, size=(2, 5)), jnp.int32)

  def kernel(x_ref, i_ref, o_ref):
    i = i_ref[...]
    ok = (i >= 0) & (i < 6)
    o_ref[...] = plgpu.load(x_ref.at[i, 1:4], mask=ok[:, :, None], other=-1.0)

  inside = (idx >= 0) & (idx < 6)
  ref = jnp.where(inside[:, :, None], x[:, 1:4][jnp.clip(idx, 0, 5)], -1.0)
  return pallas(kernel, S((2, 5, 3), F32)), (x, idx), ref


@case("scatter_out_of_range_drops")
def _scatter_out_of_range_drops(rng):
  # XLA's scatter drops updates at out-of-range indices
  x = rand(rng, (6, 8))
  rows = rng.permutation(6)[:4]                                  # distinct rows in range
  outside = rng.choice(np.r_[-13:0, 6:14], size=3, replace=False)  # dropped, negatives too
  idx = jnp.asarray(rng.permutation(np.r_[rows, outside]), jnp.int32)
  v = rand(rng, (7, 8))

  def kernel(x_ref, i_ref, v_ref, o_ref):
    o_ref[...] = x_ref[...]
    o_ref[i_ref[...]] = v_ref[...]

  kept = (idx >= 0) & (idx < 6)
  ref = x.at[jnp.where(kept, idx, 6)].set(v, mode="drop")         # 6: out of range, dropped
  return pallas(kernel, S(x.shape, F32)), (x, idx, v), ref


@case("gather_index_ref")
def _gather_index_ref(rng):
  x = rand(rng, (8, 4))
  idx = _indices(rng, 6, 8)

  def kernel(x_ref, i_ref, o_ref):
    o_ref[...] = x_ref[i_ref]                   # a ref of indices, read by the indexer

  return pallas(kernel, S((6, 4), F32)), (x, idx), x[idx]


@case("gather_advanced_order")
def _gather_advanced_order(rng):
  # NumPy's rule: adjacent advanced indices stay in place, separated ones go first.
  x = rand(rng, (5, 8, 8, 3))
  a, b = _indices(rng, 5, 3), _indices(rng, 5, 5)
  c = _indices(rng, 4, 8)

  def kernel(x_ref, a_ref, b_ref, c_ref, o1, o2, o3, o4, o5, o6):
    a, b, c = a_ref[...], b_ref[...], c_ref[...]
    o1[...] = x_ref[2, ::4, ::2, a]             # int + array separated by slices: front
    o2[...] = x_ref[2, ::4, c, ::2]
    o3[...] = x_ref[:, c, ::2, 1]               # adjacent: in place
    o4[...] = x_ref[b, ::4, c[:, None], a]      # broadcast (4, 5), separated: front
    o5[...] = x_ref.at[1][:, a[:3]]             # chained: the last indexer decides
    o6[...] = x_ref.at[1:4, 2, pl.ds(1, 4, 2)][c[:2] % 3]

  fns = [lambda x: x[2, ::4, ::2, a], lambda x: x[2, ::4, c, ::2],
         lambda x: x[:, c, ::2, 1], lambda x: x[b, ::4, c[:, None], a],
         lambda x: x[1][:, a[:3]], lambda x: x[1:4, 2, 1:8:2][c[:2] % 3]]
  expected = tuple(f(x) for f in fns)
  outs = tuple(S(e.shape, F32) for e in expected)
  return pallas(kernel, outs), (x, a, b, c), expected


@case("scatter_rows")
def _scatter_rows(rng):
  x = rand(rng, (8, 16))
  idx = jnp.asarray(rng.permutation(8)[:5], jnp.int32)
  v = rand(rng, (5, 16))

  def kernel(x_ref, i_ref, v_ref, o_ref):
    o_ref[...] = x_ref[...]
    o_ref[i_ref[...]] = v_ref[...]

  return pallas(kernel, S(x.shape, F32)), (x, idx, v), x.at[idx].set(v)


@case("scatter_2d_index")
def _scatter_2d_index(rng):
  x = rand(rng, (6, 10))
  idx = jnp.asarray(rng.permutation(10)[:6].reshape(2, 3), jnp.int32)
  v = rand(rng, (6, 2, 3))

  def kernel(x_ref, i_ref, v_ref, o_ref):
    o_ref[...] = x_ref[...]
    o_ref[:, i_ref[...]] = v_ref[...]

  return pallas(kernel, S(x.shape, F32)), (x, idx, v), x.at[:, idx].set(v)


# --- pl.load / pl.store with masks and cache options ------------------------------------

@case("masked_load_store")
def _masked_load_store(rng):
  x = rand(rng, (4, 16))
  lanes = jnp.arange(16)

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.full(o_ref.shape, 7.0, F32)
    v = plgpu.load(x_ref.at[2], mask=jnp.arange(16) < 10, other=-1.0,
                   eviction_policy="evict_last", cache_modifier=".cv")
    v = v + plgpu.load(x_ref.at[3], cache_modifier=".cg") * 0 + plgpu.load(x_ref.at[3],
                                                                       volatile=True) * 0
    plgpu.store(o_ref.at[1], v, mask=jnp.arange(16) % 3 == 0, eviction_policy="evict_first")
    w = pallas_primitives.load(x_ref, (pl.ds(0, 2), slice(None)),
                               mask=jnp.arange(16)[None, :] > 4, other=0.5)
    pallas_primitives.store(o_ref, (pl.ds(2, 2), slice(None)), w * 2,
                            mask=(jnp.arange(2) == 0)[:, None])

  loaded = jnp.where(lanes < 10, x[2], -1.0)
  ref = jnp.full((4, 16), 7.0, F32).at[1].set(jnp.where(lanes % 3 == 0, loaded, 7.0))
  ref = ref.at[2].set(jnp.where(lanes > 4, x[0], 0.5) * 2)
  return pallas(kernel, S((4, 16), F32)), (x,), ref


@case("masked_load_ragged")
def _masked_load_ragged(rng):
  x = rand(rng, (10,))

  def kernel(x_ref, o_ref):
    i = pl.program_id(0)
    offs = i * 4 + jnp.arange(4)
    v = plgpu.load(x_ref.at[pl.ds(i * 4, 4)], mask=offs < 10, other=0.0)
    plgpu.store(o_ref.at[pl.ds(i * 4, 4)], v + 1, mask=offs < 10)

  return pallas(kernel, S((10,), F32), grid=(3,)), (x,), x + 1


@case("swap_returns_old")
def _swap_returns_old(rng):
  x = rand(rng, (8, 16))
  y = rand(rng, (8, 16))

  def kernel(x_ref, y_ref, o_ref, old_ref):
    o_ref[...] = x_ref[...]
    old_ref[...] = state_primitives.ref_swap(o_ref, (slice(2, 6), slice(None)), y_ref[2:6])
    mask = jnp.arange(16)[None, :] < 9
    # JAX's rule: masked-off lanes of the old value read back the new value
    old_ref[0:2] = pallas_primitives.swap(o_ref, (pl.ds(6, 2), slice(None)), y_ref[6:8],
                                          mask=mask)

  new = x.at[2:6].set(y[2:6]).at[6:8, :9].set(y[6:8, :9])
  old = x[2:6].at[0:2].set(jnp.where(jnp.arange(16) < 9, x[6:8], y[6:8]))
  return pallas(kernel, (S((8, 16), F32), S((4, 16), F32))), (x, y), (new, old)


@case("addupdate")
def _addupdate(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]
    state_primitives.ref_addupdate(o_ref, (pl.ds(1, 3), slice(None)), x_ref[4:7] * 2)

  return pallas(kernel, S(x.shape, F32)), (x,), x.at[1:4].add(x[4:7] * 2)


# --- atomics ------------------------------------------------------------------------------

_REDUCE = {"add": lambda v: v.sum(0), "max": lambda v: v.max(0), "min": lambda v: v.min(0),
           "and": lambda v: functools.reduce(jnp.bitwise_and, v),
           "or": lambda v: functools.reduce(jnp.bitwise_or, v),
           "xor": lambda v: functools.reduce(jnp.bitwise_xor, v)}
_COMBINE = {"add": jnp.add, "max": jnp.maximum, "min": jnp.minimum, "and": jnp.bitwise_and,
            "or": jnp.bitwise_or, "xor": jnp.bitwise_xor}


def _atomic_race(op, dtype, masked):
  """Eight programs update the same 16 addresses (of an aliased, random start)."""
  def build(rng):
    low = 0 if jnp.issubdtype(dtype, jnp.unsignedinteger) else None
    high = 2**20 if op in ("and", "or", "xor") else None
    vals = rand(rng, (8, 16), dtype, low=low, high=high)
    init = rand(rng, (16,), dtype, low=low, high=high)
    if jnp.issubdtype(dtype, jnp.floating):
      # multiples of 1/64: float sums are exact in any order, as integer ones are
      vals, init = (jnp.round(v * 64) / 64 for v in (vals, init))
    mask = jnp.arange(16) % 3 != 1
    atomic = getattr(plgpu, f"atomic_{op}")

    def kernel(v_ref, init_ref, o_ref, old_ref):
      i = pl.program_id(0)
      kwargs = {"mask": jnp.arange(16) % 3 != 1} if masked else {}
      old_ref[i] = atomic(o_ref, (pl.ds(0, 16),), v_ref[i], **kwargs)

    total = _COMBINE[op](init, _REDUCE[op](vals))
    if masked:
      total = jnp.where(mask, total, init)
    fn = pallas(kernel, (S((16,), dtype), S((8, 16), dtype)), grid=(8,),
                input_output_aliases={1: 0})
    return (lambda v, s: fn(v, s)[0]), (vals, init), total
  return build


for _op, _dtypes in [("add", (F32, jnp.int32, jnp.uint32)), ("max", (F32, jnp.int32, jnp.uint32)),
                     ("min", (F32, jnp.int32)), ("and", (jnp.int32, jnp.uint32)),
                     ("or", (jnp.int32,)), ("xor", (jnp.int32, jnp.uint32))]:
  for _dtype in _dtypes:
    for _masked in (False, True):
      CASES[f"atomic_{_op}_{jnp.dtype(_dtype).name}{'_masked' if _masked else ''}"] = \
          _atomic_race(_op, _dtype, _masked)


@case("atomic_add_f16")
def _atomic_add_f16(rng):
  # multiples of 1/8: every partial sum is exact in f16, whatever the order
  vals = jnp.asarray(rng.integers(-32, 33, size=(4, 8)) / 8, jnp.float16)

  def kernel(v_ref, o_ref):
    plgpu.atomic_add(o_ref, (slice(None),), v_ref[pl.program_id(0)])

  return pallas(kernel, S((8,), jnp.float16), grid=(4,)), (vals,), \
      vals.astype(F32).sum(0).astype(jnp.float16)


@case("atomic_xchg_masked")
def _atomic_xchg_masked(rng):
  x = rand(rng, (16,))
  y = rand(rng, (16,))

  def kernel(x_ref, y_ref, o_ref):
    plgpu.atomic_xchg(o_ref, (slice(None),), y_ref[...], mask=jnp.arange(16) < 11)

  fn = pallas(kernel, S((16,), F32), input_output_aliases={0: 0})
  return fn, (x, y), jnp.where(jnp.arange(16) < 11, y, x)


@case("atomic_xchg_old")
def _atomic_xchg_old(rng):
  x = rand(rng, (16,))
  y = rand(rng, (16,))
  z = rand(rng, (16,))

  def kernel(x_ref, y_ref, z_ref, o_ref, old_ref):
    plgpu.atomic_xchg(o_ref, (slice(None),), y_ref[...])
    old_ref[...] = plgpu.atomic_xchg(o_ref, (slice(None),), z_ref[...])

  fn = pallas(kernel, (S((16,), F32), S((16,), F32)), input_output_aliases={0: 0})
  return fn, (x, y, z), (z, y)


@case("atomic_scatter_add")
def _atomic_scatter_add(rng):
  # a histogram: colliding indices inside one update add up
  idx = _indices(rng, 32, 6)
  w = rand(rng, (32,), jnp.int32)

  def kernel(i_ref, w_ref, o_ref):
    plgpu.atomic_add(o_ref, (i_ref[...],), w_ref[...])

  return pallas(kernel, S((6,), jnp.int32)), (idx, w), jnp.zeros(6, jnp.int32).at[idx].add(w)


@case("atomic_cas_counter")
def _atomic_cas_counter(rng):
  step = rand(rng, (6,), jnp.int32, low=1, high=9)
  start = rand(rng, (), jnp.int32)

  def kernel(s_ref, start_ref, o_ref, seen_ref):
    i = pl.program_id(0)

    def retry(state):
      _, done = state
      old = o_ref[...]
      got = plgpu.atomic_cas(o_ref, old, old + s_ref[i])
      return got, got == old

    old, _ = jax.lax.while_loop(lambda s: ~s[1], retry, (jnp.int32(0), False))
    seen_ref[i] = old

  fn = pallas(kernel, (S((), jnp.int32), S((6,), jnp.int32)), grid=(6,),
              input_output_aliases={1: 0})

  def check(out):
    # Each program adds its step exactly once, so the counter ends at start +
    # sum(step), and in the order the programs got through (in program order
    # under the interpreter, any order on a GPU) each saw the one before it
    # plus that one's step.
    total, seen = (np.asarray(o) for o in out)
    steps, first = np.asarray(step), int(start)
    assert int(total) == first + int(steps.sum()), (total, first, steps)
    order = np.argsort(seen, kind="stable")
    expected_seen = first + np.concatenate([[0], np.cumsum(steps[order])[:-1]])
    np.testing.assert_array_equal(seen[order], expected_seen)

  return fn, (step, start), check


@case("atomic_cas_scalar")
def _atomic_cas_scalar(rng):
  start = rand(rng, (), jnp.int32)
  other = rand(rng, (), jnp.int32)

  def kernel(s_ref, x_ref, o_ref, r_ref):
    start = s_ref[...]      # read first: s_ref and o_ref are one (aliased) buffer
    hit = plgpu.atomic_cas(o_ref, start, x_ref[...])           # compares equal: swaps
    miss = plgpu.atomic_cas(o_ref, start, x_ref[...] + 1)      # no longer equal
    r_ref[0] = hit
    r_ref[1] = miss

  fn = pallas(kernel, (S((), jnp.int32), S((2,), jnp.int32)), input_output_aliases={0: 0})
  # the second cas sees what the first stored; it swaps only if other == start
  final = jnp.where(other == start, other + 1, other)
  return fn, (start, other), (final, jnp.stack([start, other]))


# --- dtypes -------------------------------------------------------------------------------

# --- reusing loads -------------------------------------------------------------------
# A read of the same view (same mask, other) reuses the earlier load unless
# something may have written to memory since; refs can alias, so any write
# counts. These cases are the writes and scopes that must force a new load.

@case("reload_after_aliased_store")
def _reload_after_aliased_store(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref, p_ref):
    a = x_ref[...]
    o_ref[...] = a * 2 + 1                 # o_ref is x_ref's buffer
    p_ref[...] = x_ref[...] + a            # so this reads 2a + 1

  fn = pallas(kernel, (S((8, 16), F32), S((8, 16), F32)), input_output_aliases={0: 0})
  return fn, (x,), (x * 2 + 1, x * 3 + 1)


@case("reload_after_aliased_masked_store")
def _reload_after_aliased_masked_store(rng):
  x = rand(rng, (16,))
  lanes = jnp.arange(16)

  def kernel(x_ref, o_ref, p_ref):
    lanes = jnp.arange(16)
    a = plgpu.load(x_ref.at[:], mask=lanes < 12, other=0.0)
    plgpu.store(o_ref.at[:], a + 5, mask=lanes % 2 == 0)
    p_ref[...] = plgpu.load(x_ref.at[:], mask=lanes < 12, other=0.0)

  new = jnp.where(lanes % 2 == 0, jnp.where(lanes < 12, x, 0.0) + 5, x)
  fn = pallas(kernel, (S((16,), F32), S((16,), F32)), input_output_aliases={0: 0})
  return fn, (x,), (new, jnp.where(lanes < 12, new, 0.0))


@case("reload_after_aliased_atomic")
def _reload_after_aliased_atomic(rng):
  x = rand(rng, (16,))
  y = rand(rng, (16,))

  def kernel(x_ref, y_ref, o_ref, p_ref):
    a = x_ref[...]
    plgpu.atomic_add(o_ref, (slice(None),), y_ref[...])
    p_ref[...] = x_ref[...] - a

  fn = pallas(kernel, (S((16,), F32), S((16,), F32)), input_output_aliases={0: 0})
  return fn, (x, y), (x + y, (x + y) - x)


@case("reload_in_loop_after_store")
def _reload_in_loop_after_store(rng):
  # loaded before the loop, then read and written in every iteration: each
  # read must see the previous iteration's write (a reuse would give x + 1)
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref, p_ref):
    a = x_ref[...]

    def body(i, c):
      o_ref[...] = x_ref[...] + 1.0
      return c + x_ref[0, 0]
    total = jax.lax.fori_loop(0, 5, body, 0.0)    # 5: a loop (above MAX_UNROLL_TRIPS)
    p_ref[...] = a * 0.5
    p_ref[0, 0] = total

  fn = pallas(kernel, (S((8, 16), F32), S((8, 16), F32)), input_output_aliases={0: 0})
  total = sum(x[0, 0] + k for k in range(1, 6))
  return fn, (x,), (x + 5, (x * 0.5).at[0, 0].set(total))


@case("reload_after_loop_of_one_iteration")
def _reload_after_loop_of_one_iteration(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref, p_ref):
    a = x_ref[...]

    def body(i, c):
      o_ref[...] = x_ref[...] * 2 + i.astype(F32)
      return c
    jax.lax.fori_loop(3, 4, body, 0)
    p_ref[...] = x_ref[...] - a

  fn = pallas(kernel, (S((8, 16), F32), S((8, 16), F32)), input_output_aliases={0: 0})
  return fn, (x,), (x * 2 + 3, x * 2 + 3 - x)


@case("load_in_branch_then_after")
def _load_in_branch_then_after(rng):
  x = rand(rng, (8, 16))
  flag = jnp.asarray(rng.integers(0, 2, size=(1,)), jnp.int32)

  def kernel(x_ref, f_ref, o_ref):
    y = jax.lax.cond(f_ref[0] > 0, lambda: x_ref[...] * 2, lambda: jnp.ones((8, 16), F32))
    o_ref[...] = y + x_ref[...]

  ref = jnp.where(flag[0] > 0, x * 3, x + 1)
  return pallas(kernel, S((8, 16), F32)), (x, flag), ref


def _loads_of(source: str, ref: str) -> int:
  return len(re.findall(rf"tl\.load\({ref}\b", source))


def test_loads_are_reused_until_a_write(rng):
  x = rand(rng, (8, 16))
  fn, args, expected = CASES["reload_after_aliased_store"](rng)
  assert _loads_of(generated_kernel(fn, *args).source, "x_ref") == 2

  def kernel(x_ref, o_ref):
    a = plgpu.load(x_ref.at[:, 1:9], eviction_policy="evict_last")
    b = plgpu.load(x_ref.at[:, 1:9], eviction_policy="evict_first")   # reused: first policy stays
    c = x_ref[:, 2:10]                                                  # another view
    v = plgpu.load(x_ref.at[:, 1:9], volatile=True)                     # never reused
    w = plgpu.load(x_ref.at[:, 1:9], cache_modifier=".cv")              # never reused
    o_ref[...] = a + b + c + v * 0 + w * 0

  fn = pallas(kernel, S((8, 8), F32))
  assert_close(fn(x), x[:, 1:9] * 2 + x[:, 2:10])
  source = generated_kernel(fn, x).source
  assert _loads_of(source, "x_ref") == 4, source
  assert "evict_first" not in source and source.count("evict_last") == 1, source


def test_branch_loads_are_not_reused_after_the_branch(rng):
  x = rand(rng, (8, 16))
  fn, _, _ = CASES["load_in_branch_then_after"](rng)
  for flag in (0, 1):
    assert_close(fn(x, jnp.asarray([flag], jnp.int32)), x * 3 if flag else x + 1)
  source = generated_kernel(fn, x, jnp.asarray([1], jnp.int32)).source
  assert _loads_of(source, "x_ref") == 2, source


def test_loop_body_loads_are_not_hoisted_past_its_writes(rng):
  fn, args, _ = CASES["reload_in_loop_after_store"](rng)
  source = generated_kernel(fn, *args).source
  before, body = source.split("for _iter")
  assert _loads_of(before, "x_ref") == 1 and _loads_of(body, "x_ref") == 2, source


@case("no_reload_after_unrelated_store")
def _no_reload_after_unrelated_store(rng):
  # o_ref is x_ref's buffer but p_ref is not: writing p_ref leaves x's load valid
  x = rand(rng, (8, 16))
  y = rand(rng, (8, 16))

  def kernel(x_ref, y_ref, o_ref, p_ref, q_ref):
    a = x_ref[...]
    b = y_ref[...]
    p_ref[...] = a * 2 + b                 # unrelated output: x, y stay loaded
    q_ref[...] = x_ref[...] + y_ref[...]   # reused
    o_ref[...] = a - 1.0                   # x's own buffer: x must be re-read
    p_ref[...] = x_ref[...] * 3 + y_ref[...]

  fn = pallas(kernel, (S((8, 16), F32), S((8, 16), F32), S((8, 16), F32)),
              input_output_aliases={0: 0})
  return fn, (x, y), (x - 1, (x - 1) * 3 + y, x + y)


def test_writes_forget_only_loads_of_refs_they_may_alias(rng):
  fn, args, expected = CASES["no_reload_after_unrelated_store"](rng)
  check_case(CASES["no_reload_after_unrelated_store"], rng)
  source = generated_kernel(fn, *args).source
  # x: the first read and the one after the write to o_ref (its alias); y: once
  assert _loads_of(source, "x_ref") == 2 and _loads_of(source, "y_ref") == 1, source
  # without the aliasing information any write may change any ref
  [eqn] = pallas_call_eqns(fn, *args)
  unknown = lower.lower_kernel(eqn.params["jaxpr"], eqn.params["grid_mapping"],
                                  LoweringOptions(num_warps=4, num_stages=3,
                                                  compute_capability=90)).source
  assert _loads_of(unknown, "x_ref") == 3 and _loads_of(unknown, "y_ref") == 3, unknown


def test_unrolled_loop_writing_an_alias_reloads(rng):
  # 2 iterations, straight-line: each iteration's read of x sees the previous
  # write to o_ref (x's buffer); the read of the unrelated y is reused
  x = rand(rng, (8, 16))
  y = rand(rng, (8, 16))

  def kernel(x_ref, y_ref, o_ref, p_ref):
    def body(i, c):
      o_ref[...] = x_ref[...] * 2 + y_ref[...]
      return c + x_ref[0, 0] + y_ref[0, 0]
    p_ref[...] = jnp.zeros((8, 16), F32) + jax.lax.fori_loop(0, 2, body, 0.0)

  fn = pallas(kernel, (S((8, 16), F32), S((8, 16), F32)), input_output_aliases={0: 0})
  x1 = x * 2 + y
  x2 = x1 * 2 + y
  total = x1[0, 0] + y[0, 0] + x2[0, 0] + y[0, 0]
  out = fn(x, y)
  assert_close(out[0], x2)
  assert_close(out[1], jnp.full((8, 16), total))
  source = generated_kernel(fn, x, y).source
  assert "for " not in source and "# iteration 2 of 2" in source, source
  # x[...] before each write, x[0, 0] after each; y[...] and y[0, 0] once each
  assert _loads_of(source, "x_ref") == 4 and _loads_of(source, "y_ref") == 2, source


@case("mixed_dtypes")
def _mixed_dtypes(rng):
  dtypes = [jnp.float32, jnp.float16, jnp.bfloat16, jnp.int8, jnp.int32, jnp.uint32, jnp.bool_]
  xs = [rand(rng, (3, 10), d) for d in dtypes]

  def kernel(*refs):
    ins, outs = refs[:len(dtypes)], refs[len(dtypes):]
    for i, (x_ref, o_ref) in enumerate(zip(ins, outs)):
      # a read and write of a sub-block and of a strided row, per dtype
      o_ref[...] = x_ref[...]
      o_ref[1, ::2] = x_ref[2, 1::2]
    # and values crossing dtypes through explicit casts
    outs[0][0] = (ins[1][0].astype(F32) + ins[3][0].astype(F32)
                  + jnp.where(ins[6][0], 1.0, 0.0).astype(F32))

  def reference(*xs):
    outs = [x.at[1, ::2].set(x[2, 1::2]) for x in xs]
    outs[0] = outs[0].at[0].set(xs[1][0].astype(F32) + xs[3][0].astype(F32)
                                + jnp.where(xs[6][0], 1.0, 0.0))
    return tuple(outs)

  fn = pallas(kernel, tuple(S((3, 10), d) for d in dtypes))
  return fn, tuple(xs), reference(*xs)


# --- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_matches_jax(name, rng):
  check_case(CASES[name], rng)


def test_int64_refs(rng):
  with jax.enable_x64(True):
    x = rand(rng, (4, 6), jnp.int64, low=-2**40, high=2**40)
    idx = _indices(rng, 3, 4)

    def kernel(x_ref, i_ref, o_ref, g_ref):
      o_ref[...] = x_ref[...] * 3
      o_ref[1, pl.ds(1, 4)] = x_ref[0, pl.ds(2, 4)]
      g_ref[...] = x_ref[i_ref[...], 1:4]
      plgpu.atomic_add(o_ref, (3, slice(None)), x_ref[2])

    out, gathered = pallas(kernel, (S((4, 6), jnp.int64), S((3, 3), jnp.int64)))(x, idx)
    ref = (x * 3).at[1, 1:5].set(x[0, 2:6]).at[3].add(x[2])
    assert_close(out, ref)
    assert_close(gathered, x[idx, 1:4])
    compiles_for_sm90(pallas(kernel, (S((4, 6), jnp.int64), S((3, 3), jnp.int64))), x, idx)


def test_cache_and_eviction_options_reach_triton(rng):
  fn, args, _ = CASES["masked_load_store"](rng)
  source = generated_kernel(fn, *args).source
  loads = [line for line in source.splitlines() if "tl.load(" in line]
  first = next(line for line in loads if "other=" in line)
  # the kernel asked for .cv with evict_last: a .cv load allocates no L1 line,
  # and ptxas 13.x refuses the pair, so the hint is dropped
  assert "cache_modifier='.cv'" in first and "eviction_policy" not in first
  assert any("cache_modifier='.cg'" in line for line in loads)
  assert any("volatile=True" in line for line in loads)
  store = next(line for line in source.splitlines() if "tl.store(" in line and "evict_first" in line)
  assert "mask=" in store

  def kernel(x_ref, o_ref):
    o_ref[...] = plgpu.load(x_ref, eviction_policy="evict_last")
  x = rand(rng, (16,))
  source = generated_kernel(lambda a: pallas(kernel, jax.ShapeDtypeStruct(a.shape, a.dtype))(a),
                            x).source
  assert any("eviction_policy='evict_last'" in line for line in source.splitlines()
             if "tl.load(" in line)


def test_unused_swap_result_skips_the_load(rng):
  x = rand(rng, (8,))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

  source = generated_kernel(pallas(kernel, S((8,), F32)), x).source
  assert source.count("tl.load(") == 1 and source.count("tl.store(") == 1


def test_gather_indices_are_used_as_given(rng):
  """No wrap or clamp on array indices: `i * block + arange` stays a contiguous
  range Triton turns into vector loads (JAX's own backend does the same)."""
  x = rand(rng, (8, 4))

  def kernel(x_ref, i_ref, o_ref):
    o_ref[...] = x_ref[i_ref[...]]

  fn = pallas(kernel, S((4, 4), F32))
  for dtype in (jnp.uint32, jnp.int32):
    idx = jnp.asarray(rng.integers(0, 8, size=4), dtype)
    assert_close(fn(x, idx), x[idx])
    source = generated_kernel(fn, x, idx).source
    assert "tl.where" not in source and "tl.minimum" not in source


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_for_sm90(name, rng):
  fn, args, _ = CASES[name](rng)
  compiles_for_sm90(fn, *args)


# --- errors -----------------------------------------------------------------------------------

def _raises_at_user_line(fn, args, *needles):
  with pytest.raises(pallas_prof.LoweringError) as info:
    jax.block_until_ready(fn(*args))
  return check_lowering_error(info.value, __file__, *needles)


def test_ref_bitcast_is_a_lowering_error(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref.bitcast(jnp.int32)[...]

  err = _raises_at_user_line(pallas(kernel, S((8, 16), jnp.int32)), (x,), "bitcast",
                             "bitcast_convert_type")
  assert err.eqn is not None and err.eqn.file == __file__


def test_ref_reshape_is_a_lowering_error(rng):
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref.reshape(16, 8)[...]

  _raises_at_user_line(pallas(kernel, S((16, 8), F32)), (x,), "reshap")


@pytest.mark.parametrize("options, needle", [
    (dict(volatile=True, eviction_policy="evict_last"), "volatile load with an eviction_policy"),
    (dict(volatile=True, cache_modifier=".ca"), "volatile load with cache_modifier"),
    (dict(cache_modifier=".cg", eviction_policy="evict_first"), "cannot combine"),
    (dict(cache_modifier=".xx"), "cache_modifier='.xx'"),
])
def test_load_options_ptxas_rejects_are_lowering_errors(options, needle, rng):
  x = rand(rng, (16,))

  def kernel(x_ref, o_ref):
    o_ref[...] = plgpu.load(x_ref, **options)

  _raises_at_user_line(pallas(kernel, S((16,), F32)), (x,), needle)


@pytest.mark.parametrize("policies, want", [
    (("evict_last", "evict_last", "evict_first"), "evict_last"),
    (("evict_first", "evict_last"), "evict_first"),
    (("evict_last", None), "evict_last"),
    ((None, "evict_first"), None),
])
def test_merged_reads_keep_the_first_reads_eviction_policy(rng, policies, want):
  """Reads the dispatcher merges into one load keep the first read's policy."""
  x = rand(rng, (16,))

  def kernel(x_ref, o_ref):
    total = jnp.zeros((16,), jnp.float32)
    for p in policies:
      total = total + plgpu.load(x_ref.at[:], eviction_policy=p)
    o_ref[...] = total

  fn = pallas(kernel, S((16,), F32))
  assert_close(fn(x), x * len(policies))
  [load] = [line for line in generated_kernel(fn, x).source.splitlines() if "tl.load(" in line]
  if want:
    assert f"eviction_policy='{want}'" in load and load.count("eviction_policy") == 1, load
  else:
    assert "eviction_policy" not in load, load
  compiles_for_sm90(fn, x)


@pytest.mark.skipif(jax_plgpu() is None, reason=JAX_TRITON_GONE)
def test_triton_flavoured_rules_bind_when_the_user_imports_plgpu(tmp_path):
  """The atomics' and inline asm's rules are bound at the first lookup after the
  user's code imported JAX's Triton primitives, not by importing them ourselves
  (18-78 ms of the process's first lowering on the CPU machine). In a fresh
  process: a first kernel without plgpu leaves that module unimported; plgpu
  imported afterwards still lowers, and runs right."""
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))))
  code = """
import sys, numpy as np, jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from testkit.helpers import pallas, random_array
MODULE = 'jax._src.pallas.triton.primitives'
assert MODULE not in sys.modules, 'JAX itself imports ' + MODULE
rng = np.random.default_rng()
x = random_array(rng, (16,), 'float32')
def double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0
np.testing.assert_allclose(pallas(double, jax.ShapeDtypeStruct((16,), jnp.float32))(x), x * 2.0)
assert MODULE not in sys.modules, 'the first lowering imported ' + MODULE
from jax.experimental.pallas import triton as plgpu
y = random_array(rng, (16,), 'float32')
def accumulate(x_ref, y_ref, o_ref):
  plgpu.atomic_add(o_ref, (slice(None),), y_ref[...])
fn = pallas(accumulate, jax.ShapeDtypeStruct((16,), jnp.float32), input_output_aliases={0: 0})
np.testing.assert_allclose(fn(x, y), x + y, rtol=1e-6)
from pallas_prof.backend.lowering.rules import supported_primitive_names
assert 'atomic_rmw' in supported_primitive_names()
print('ok')
"""
  env = dict(os.environ, PYTHONPATH=root, PALLAS_PROF_CACHE_DIR=str(tmp_path))
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=root, timeout=300, check=False)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.strip().splitlines()[-1] == "ok"


# --- barriers: a program's threads read what other threads of it wrote --------------

def _statements(source: str) -> list[str]:
  """The kernel's statements, without comments, in order."""
  lines = [ln.split("#")[0].strip() for ln in source.splitlines()]
  return [ln for ln in lines if ln and not ln.startswith(("import", "from", "@", "def "))]


def _barrier_between(source: str, first: str, then: str) -> bool:
  """Whether a tl.debug_barrier() comes after the first statement containing
  `first` and before the next one after it containing `then`."""
  stmts = _statements(source)
  i = next(k for k, s in enumerate(stmts) if first in s)
  j = next(k for k in range(i + 1, len(stmts)) if then in stmts[k])
  return any("tl.debug_barrier()" in s for s in stmts[i + 1:j])


def test_a_read_after_a_write_of_the_same_memory_waits_for_a_barrier(rng):
  """On a GPU, the threads of a program each store their part of a block; a
  later read of those addresses (here x, which shares o's buffer, and the
  old value a swap returns) must come after a barrier, or it may see the
  value from before the store (it did on the H200 until the barrier came)."""
  fn, args, _ = CASES["reload_after_aliased_store"](rng)
  source = generated_kernel(fn, *args).source
  assert _barrier_between(source, "tl.store(o_ref", "tl.load(x_ref"), source
  fn, args, _ = CASES["swap_returns_old"](rng)
  source = generated_kernel(fn, *args).source
  assert _barrier_between(source, "tl.store(o_ref", "tl.load(o_ref"), source
  assert source.count("tl.debug_barrier()") == 2, source    # before each swap's read


def test_no_barrier_where_nothing_written_is_read_back(rng):
  """Reads of other refs, and writes of a block in parts (the norms' rows),
  need no barrier: a barrier costs every program time."""
  x, y = rand(rng, (8, 16)), rand(rng, (8, 16))

  def kernel(x_ref, y_ref, o_ref):
    o_ref[:, :8] = x_ref[:, :8] * 2
    o_ref[:, 8:] = y_ref[:, 8:] + x_ref[:, 8:]

  fn = pallas(kernel, S((8, 16), F32))
  assert_close(fn(x, y), jnp.concatenate([x[:, :8] * 2, y[:, 8:] + x[:, 8:]], axis=1))
  assert "debug_barrier" not in generated_kernel(fn, x, y).source


def test_a_loop_reading_what_its_last_iteration_wrote_has_a_barrier(rng):
  """A loop body (a real loop: more trips than are unrolled) that reads a ref
  it writes reads, from the second iteration on, what the first wrote."""
  x = rand(rng, (8, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

    def body(i, c):
      o_ref[...] = o_ref[...] * 0.5 + 1.0
      return c
    jax.lax.fori_loop(0, 6, body, 0)

  fn = pallas(kernel, S((8, 16), F32))
  ref = x
  for _ in range(6):
    ref = ref * 0.5 + 1.0
  assert_close(fn(x), ref)
  source = generated_kernel(fn, x).source
  loop = source[source.index("for "):]
  assert _barrier_between(loop, "for ", "tl.load(o_ref"), source
