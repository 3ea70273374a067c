"""Scan programs (issue 28): where Triton's own compiler broke on a user's kernel.

A Mamba-style selective scan (`jnp.cumsum(d[:, None], axis=0) * a[None, :]`,
exp, a second cumsum of a broadcast product, a row sum) failed Triton 3.6's
ConvertTritonGPUToLLVM (ScanOpToLLVM's AddPartialReduce assertion) when
compiled for sm_90, while it ran right under the interpreter. These "values"
programs make more of that: cumsum, cumprod, cummax, cummin and cumlogsumexp
along each axis, forward and reverse, of inputs, of broadcast outer products
and broadcast columns, the selective-scan chain itself, in shapes including 1
and non-powers of two, in several dtypes, each with a num_warps of its own
(the layout Triton picks, and so what its scan lowering meets, follows it).
bench/fuzz/fuzz.py --compile-sm90 compiles them for sm_90 as well.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from testkit.fuzz.programs import (INTS, Builder, Program, Var, _binary, _fit_float, _input_spec,
                                 _int_bound, _reduce, _statement, _unary, values_program)

SCAN_LENGTHS = (1, 2, 3, 7, 16, 19, 33, 5, 32, 24, 64, 48)
SCAN_DTYPES = ("float32", "float16", "bfloat16", "int32", "float32", "float16")
NUM_WARPS = (None, 1, 2, 4, 8)
SCAN_OPS = ("cumsum", "cumsum", "cumprod", "cummax", "cummin", "cumsum")


def _scan(b: Builder):
  a = b.pick(lambda v: v.shape and (v.is_float or v.is_int))
  if a is None:
    return
  op = b.draw(st.sampled_from(SCAN_OPS), label="scan")
  if b.draw(st.integers(0, 24), label="cumlogsumexp") == 24:
    op = "cumlogsumexp"     # rarely: a scan of its own combiner (tl.associative_scan)
  if op == "cumlogsumexp" and not a.is_float:
    op = "cumsum"
  rank = len(a.shape)
  axis = b.draw(st.integers(0, rank - 1), label="scan axis")
  reverse = b.draw(st.booleans(), label="reverse")
  n = a.shape[axis]
  operand, bound = a.name, a.bound
  if op == "cumprod" and a.is_float:      # products of |x| <= 1.1 stay in float16's range
    operand, bound = f"jnp.clip({a.name}, -1.1, 1.1)", 1.1 ** n
  elif op == "cumprod":                   # integers wrap alike in XLA and in Triton
    operand, bound = f"({a.name} % 3)", _int_bound(a.dtype)
  elif op == "cumsum":
    bound = a.bound * n if a.is_float else _int_bound(a.dtype)
  elif op == "cumlogsumexp":
    operand, bound = f"jnp.clip({a.name}, -8, 8)", 8 + math.log(n) + 1
  if not reverse and op in ("cumsum", "cumprod") and b.draw(st.booleans(), label="jnp form"):
    expr = f"jnp.{op}({operand}, axis={axis - rank if b.draw(st.booleans()) else axis})"
  else:
    expr = f"lax.{op}({operand}, axis={axis}, reverse={reverse})"
  var = b.add(expr, bound, op)
  if var.is_float:
    _fit_float(b, var)


def _outer(b: Builder):
  """d[:, None] * a[None, :] of two vectors (a broadcast input to a scan)."""
  d = b.pick(lambda v: len(v.shape) == 1 and (v.is_float or v.is_int), "column")
  if d is None:
    return
  a = b.pick(lambda v: len(v.shape) == 1 and v.dtype == d.dtype, "row") or d
  bound = d.bound * a.bound if d.is_float else _int_bound(d.dtype)
  var = b.add(f"{d.name}[:, None] * {a.name}[None, :]", bound, "outer")
  if var.is_float:
    _fit_float(b, var)


def _column(b: Builder):
  """d[:, None], or d broadcast to a whole matrix: a scan over a broadcast axis."""
  d = b.pick(lambda v: len(v.shape) == 1 and (v.is_float or v.is_int), "column")
  if d is None:
    return
  if b.draw(st.booleans(), label="as a column"):
    b.add(f"{d.name}[:, None]", d.bound, "column")
  else:
    cols = b.draw(st.sampled_from(SCAN_LENGTHS), label="cols")
    b.add(f"jnp.broadcast_to({d.name}[:, None], ({d.shape[0]}, {cols}))", d.bound, "broadcast")


def _selective(b: Builder):
  """The selective-scan step of issue 28: exp(cumsum(d)[:, None] * a), a cumsum of
  a broadcast product with it along the rows, a row sum."""
  d = b.pick(lambda v: len(v.shape) == 1 and v.is_float, "d")
  if d is None:
    return
  a = b.pick(lambda v: len(v.shape) == 1 and v.dtype == d.dtype, "a") or d
  x = b.pick(lambda v: v.shape == d.shape and v.dtype == d.dtype, "x") or d
  n = d.shape[0]
  # 16-bit inputs: the chain in float32, as such kernels compute it. In float16, exp of a
  # cumsum near the clip turns a last-bit difference into whole units, summed 64 times
  # over: XLA's answer and pallas-prof's were each 30-40 of 300 from the exactly summed
  # one (bench/results/fuzz_cpu_8caa88f_seed20261211.json)
  wide = ".astype(jnp.float32)" if d.dtype != "float32" else ""
  dw, aw, xw = (f"{v.name}{wide}" for v in (d, a, x))
  da = b.add(f"jnp.cumsum({dw}[:, None], axis=0) * {aw}[None, :]", d.bound * n * a.bound,
             "cumsum")
  decay = b.add(f"jnp.exp(jnp.clip(-{da.name}, -5, 5))", 150.0, "unary")
  h = b.add(f"jnp.cumsum(({dw} * {xw})[:, None] * {decay.name}, axis=0)",
            d.bound * x.bound * 150.0 * n, "cumsum")
  h = _fit_float(b, h)
  if b.draw(st.booleans(), label="row sum"):
    _fit_float(b, b.add(f"jnp.sum({h.name}, axis=1)", h.bound * h.shape[1], "reduce"))


_SCAN_STATEMENTS = [_scan, _scan, _scan, _outer, _column, _selective, _unary, _binary, _reduce]


@st.composite
def scan_programs(draw) -> Program:
  dtype = draw(st.sampled_from(SCAN_DTYPES), label="main dtype")
  rows, cols = (draw(st.sampled_from(SCAN_LENGTHS), label=f"dim{i}") for i in range(2))
  layout = draw(st.sampled_from(["vectors", "matrix", "both"]), label="inputs")
  shapes = {"vectors": [(rows,), (cols,), (rows,)], "matrix": [(rows, cols), (rows, cols)],
            "both": [(rows,), (cols,), (rows, cols)]}[layout]
  inputs, params = [], []
  for i, shape in enumerate(shapes):
    spec = _input_spec(shape, dtype)
    inputs.append(spec)
    params.append(Var(f"x{i}", shape, dtype, 4.0 if dtype not in INTS else _int_bound(dtype)))
  b = Builder(draw, params)
  if draw(st.booleans(), label="selective scan first") and dtype not in INTS:
    _selective(b)
  for _ in range(draw(st.integers(1, 4), label="statements")):
    _statement(b, _SCAN_STATEMENTS)
  if not any(f in b.features for f in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")):
    _statement(b, [_scan])
  return values_program(draw, b, params, inputs,
                        num_warps=draw(st.sampled_from(NUM_WARPS), label="num_warps"))
