"""Bytes and FLOPs of one kernel launch, from the jaxpr and the block specs.

    bytes        every input read once and every output written once (the
                 traffic a launch cannot avoid; DRAM sees at least this)
    block_bytes  what the programs' loads and stores move: each get/load
                 and swap/store equation's block, times the loop trips
                 around it, times the number of programs (re-reads of the
                 same block by several programs count each time; the L2
                 may serve them)
    dot_flops    2*M*N*K per dot_general, times trips and programs
    elementwise  one per output element of float arithmetic and per input
                 element of float reductions (transcendentals apart)

Trip counts come from the generated source: a loop over `range(a, b[, s])`
with literal bounds has a known count; a bound computed at run time (a
causal mask's `pl.cdiv(...)`) makes the model inexact, and FLOPs are then
left out (None) rather than guessed. A user's `pl.CostEstimate` replaces
the model's bytes and FLOPs when given.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np

from .schema import WorkModel

LOOPS = ("scan", "while", "fori_loop")
BRANCHES = ("cond", "switch")
LOADS = ("get", "load", "masked_load")
STORES = ("swap", "store", "masked_swap")
READ_WRITES = ("addupdate", "atomic_rmw", "atomic_cas")

TRANSCENDENTAL = {"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos",
                  "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh",
                  "atanh", "erf", "erfc", "erf_inv", "lgamma", "digamma", "pow", "sqrt", "rsqrt",
                  "cbrt"}
ARITHMETIC = {"add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "square",
              "integer_pow", "floor", "ceil", "round", "clamp", "nextafter", "reciprocal",
              "add_any", "fma", "copysign"}
REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin",
              "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "reduce_precision"}

_AVAL = re.compile(r"(?:Ref<[^>]*>\{)?~?([a-z0-9_]+)\[([0-9,\s]*)\]")
_RANGE = re.compile(r"for\s+\w+\s+in\s+range\(([^()]*)\)\s*:")


def parse_aval(text: str) -> tuple[np.dtype | None, tuple[int, ...]] | None:
  """'float16[32,64]' / 'Ref<default>{bf16[8]}' / '~int32[]' -> (dtype, shape)."""
  m = _AVAL.search(text or "")
  if not m:
    return None
  dims = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
  return _dtype(m.group(1)), dims


_SHORT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64",
          "i32": "int32", "i64": "int64", "i8": "int8", "i16": "int16", "u8": "uint8",
          "u32": "uint32", "bool": "bool"}


def _dtype(name: str) -> np.dtype | None:
  import jax.numpy as jnp
  try:
    return jnp.dtype(_SHORT.get(name, name))
  except TypeError:
    return None


def _nbytes(aval) -> int:
  if aval is None or aval[0] is None:
    return 0
  return int(np.prod(aval[1], dtype=np.int64)) * aval[0].itemsize


def _size(aval) -> int:
  return 0 if aval is None else int(np.prod(aval[1], dtype=np.int64))


def _is_float(dtype) -> bool:
  import jax.numpy as jnp
  return dtype is not None and bool(jnp.issubdtype(dtype, jnp.floating))


def loop_trips(gk) -> dict[int, int | None]:
  """Trip count of each loop equation (None: known only at run time)."""
  lines_of = defaultdict(list)
  for line, idx in gk.line_map.items():
    lines_of[idx].append(line)
  source = gk.source.splitlines()
  trips = {}
  for e in gk.eqns:
    if e.primitive not in LOOPS:
      continue
    count = None
    for line in sorted(lines_of.get(e.index, ())):
      m = _RANGE.search(source[line - 1])
      if m:
        count = _literal_range(m.group(1))
        break
    trips[e.index] = count
  return trips


def _literal_range(args: str) -> int | None:
  try:
    values = [int(a.strip()) for a in args.split(",") if a.strip()]
  except ValueError:
    return None
  if not 1 <= len(values) <= 3:
    return None
  return len(range(*values))


def dot_flops(in_avals, out_avals) -> int | None:
  """2*prod(out)*K for a dot_general, K inferred from the shapes (one contracting dim)."""
  if len(in_avals) < 2 or not out_avals:
    return None
  lhs, rhs, out = parse_aval(in_avals[0]), parse_aval(in_avals[1]), parse_aval(out_avals[0])
  if lhs is None or rhs is None or out is None:
    return None
  rl, rr, ro = len(lhs[1]), len(rhs[1]), len(out[1])
  n_batch = rl + rr - 2 - ro
  if n_batch < 0 or n_batch > ro:
    return None
  batch = int(np.prod(out[1][:n_batch], dtype=np.int64))
  pl, pr, po = _size(lhs), _size(rhs), _size(out)
  if po == 0 or batch == 0:
    return 0
  k2 = pl * pr / (po * batch)
  k = int(round(math.sqrt(k2)))
  if k * k * po * batch != pl * pr or k == 0 or k not in lhs[1] or k not in rhs[1]:
    return None
  return 2 * po * k


def dot_class(gk, eqn) -> str | None:
  """The matrix-rate ceiling a dot runs against: bf16, f16, tf32, f32, fp8, int8."""
  lhs = parse_aval(eqn.in_avals[0]) if eqn.in_avals else None
  if lhs is None or lhs[0] is None:
    return None
  name = lhs[0].name
  if name == "bfloat16":
    return "bf16"
  if name == "float16":
    return "f16"
  if name.startswith("float8"):
    return "fp8"
  if name in ("int8", "uint8"):
    return "int8"
  if name == "float32":
    text = " ".join(gk.source.splitlines()[line - 1] for line, idx in gk.line_map.items()
                    if idx == eqn.index)
    m = re.search(r"input_precision=['\"](\w+)['\"]", text)
    precision = m.group(1) if m else "tf32"     # Triton's default for f32 dots on sm_80+
    return "tf32" if precision.startswith("tf32") else "f32"
  return name


def work_model(gk, cost_estimate=None) -> WorkModel:
  """Bytes and FLOPs of one launch of a GeneratedKernel."""
  programs = int(np.prod(gk.grid, dtype=np.int64)) if gk.grid else 1
  notes = []
  unique = sum(int(np.prod(p.shape, dtype=np.int64)) * np.dtype(_dtype(p.dtype)).itemsize
               for p in gk.params)
  trips = loop_trips(gk)
  by_index = {e.index: e for e in gk.eqns}
  exact = True
  unknown_loops = set()
  in_branch = False

  def multiplier(e) -> int | None:
    nonlocal in_branch
    m, parent = 1, e.parent
    while parent is not None:
      pe = by_index[parent]
      if pe.primitive in LOOPS:
        t = trips.get(parent)
        if t is None:
          unknown_loops.add(parent)
          return None
        m *= t
      elif pe.primitive in BRANCHES:
        in_branch = True
      parent = pe.parent
    return m

  block = 0
  flops_dot = 0
  flops_elem = 0
  transcendentals = 0
  dtypes = []
  unknown_dots = []
  for e in gk.eqns:
    prim = e.primitive
    interesting = (prim in LOADS or prim in STORES or prim in READ_WRITES or prim == "dot_general"
                   or prim in TRANSCENDENTAL or prim in ARITHMETIC or prim in REDUCTIONS)
    if not interesting:
      continue
    mult = multiplier(e)
    if mult is None:
      exact = False
    count = None if mult is None else mult * programs
    if prim in LOADS:
      moved = _nbytes(parse_aval(e.out_avals[0])) if e.out_avals else 0
    elif prim in STORES:
      moved = _nbytes(parse_aval(e.in_avals[1])) if len(e.in_avals) > 1 else 0
    elif prim in READ_WRITES:
      moved = 2 * (_nbytes(parse_aval(e.in_avals[-1])) if e.in_avals else 0)
    else:
      moved = 0
    if moved and block is not None:
      block = None if count is None else block + moved * count
    if prim == "dot_general":
      f = dot_flops(e.in_avals, e.out_avals)
      dtypes.append(dot_class(gk, e))
      if f is None:
        unknown_dots.append(e)
      elif flops_dot is not None:
        flops_dot = None if count is None else flops_dot + f * count
      continue
    if moved or prim in LOADS or prim in STORES or prim in READ_WRITES:
      continue
    out = parse_aval(e.out_avals[0]) if e.out_avals else None
    if out is None or not _is_float(out[0]):
      continue
    if prim in REDUCTIONS:
      n = _size(parse_aval(e.in_avals[0])) if e.in_avals else 0
    else:
      n = _size(out)
    if prim in TRANSCENDENTAL:
      if transcendentals is not None:
        transcendentals = None if count is None else transcendentals + n * count
    elif flops_elem is not None:
      flops_elem = None if count is None else flops_elem + n * count
  for idx in sorted(unknown_loops):
    e = by_index[idx]
    notes.append(f"loop [{idx}] {e.primitive} at {e.location} runs a number of times known "
                 "only at run time: FLOPs and block traffic inside it are not counted "
                 "(give pl.CostEstimate to the pallas_call for achieved FLOP/s)")
  if in_branch:
    exact = False
    notes.append("equations inside cond branches are counted as if every branch ran")
  for e in unknown_dots:
    exact = False
    flops_dot = None
    notes.append(f"dot_general [{e.index}] at {e.location}: could not infer its contraction "
                 f"size from {e.in_avals} -> {e.out_avals}")
  dot_dtype = _widest(dtypes)
  if len(set(d for d in dtypes if d)) > 1:
    notes.append(f"dots of several operand types {sorted(set(d for d in dtypes if d))}: "
                 f"rated against {dot_dtype}")
  total = None if flops_dot is None or flops_elem is None else flops_dot + flops_elem
  model = WorkModel(source="model", bytes=unique, block_bytes=block, flops=total,
                    dot_flops=flops_dot, elementwise_flops=flops_elem,
                    transcendentals=transcendentals, dot_dtype=dot_dtype, programs=programs,
                    exact=exact, notes=notes)
  return _apply_cost_estimate(model, cost_estimate)


def _widest(classes) -> str | None:
  order = ["f32", "tf32", "f16", "bf16", "fp8", "int8"]
  present = [c for c in classes if c]
  if not present:
    return None
  known = [c for c in present if c in order]
  if not known:
    return present[0]
  return min(known, key=order.index)


def _apply_cost_estimate(model: WorkModel, ce) -> WorkModel:
  if ce is None:
    return model
  flops = getattr(ce, "flops", None)
  nbytes = getattr(ce, "bytes_accessed", None)
  trans = getattr(ce, "transcendentals", None)
  model.notes.append(f"bytes and FLOPs from the pallas_call's cost_estimate "
                     f"(flops={flops}, transcendentals={trans}, bytes_accessed={nbytes}); "
                     f"the jaxpr model said bytes={model.bytes}, flops={model.flops}")
  model.source = "cost_estimate"
  if nbytes is not None:
    model.bytes = int(nbytes)
  if flops is not None:
    model.flops = int(flops)
    model.exact = True
    if model.dot_flops is None:
      # an estimate does not split dots from the rest: rate all of it as dots
      model.dot_flops = int(flops) if model.dot_dtype else None
  if trans is not None:
    model.transcendentals = int(trans)
  return model
