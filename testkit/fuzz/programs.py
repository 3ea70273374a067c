"""Random Pallas programs for the differential fuzzer, as hypothesis strategies.

A program is Python source (so that a failure is its own reproducer) plus the
inputs it takes. Two kinds:

- "values": a function of whole arrays (elementwise math, comparisons and
  select, casts, reductions over random axes, broadcast/reshape/transpose,
  slices, iota, dots of odd sizes, cumsum, fori/while/cond/switch/scan). The
  kernel reads every input ref, applies it, writes the results; the reference
  is the same function jitted by XLA on the CPU (no pallas code involved).
- "kernel": a Pallas kernel over a grid whose last block overhangs the array
  (block sizes not powers of two), with global indices from program_id, masked
  loads and stores, pl.ds windows with starts from a loop index or from the
  data, and atomics. The reference is JAX's own Pallas interpreter
  (`interpret=True`), which shares no code with pallas-prof.

Every program is valid Pallas with defined results: integer divisors are kept
nonzero, float values bounded (so float16 does not overflow differently in
two evaluation orders), float-to-int casts clipped into range, reductions and
cross-lane ops never see the padding of an overhanging block, and outputs
that a kernel writes only in part start from an input (input_output_aliases).

Every choice is a hypothesis draw, so hypothesis shrinks a failing program
towards fewer statements, smaller shapes and the first option of each list.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int8", "int16", "uint8", "uint32")
# how often each dtype is the program's main one: integers compare exactly,
# so they catch wrong lanes, masks and axes with no tolerance to hide behind
MAIN_DTYPES = ("int32", "float32", "int32", "float32", "float16", "bfloat16", "int8",
               "int16", "uint8", "uint32")
FLOAT_TOL = {"float32": 2e-4, "float16": 1e-2, "bfloat16": 6e-2}
FLOAT_MAX = {"float32": 1e4, "float16": 300.0, "bfloat16": 1e4}


@dataclasses.dataclass(frozen=True)
class InputSpec:
  shape: tuple[int, ...]
  dtype: str
  low: float = -4
  high: float = 4
  # float inputs: some NaN, +-inf and -0.0 among the values
  special: bool = False


@dataclasses.dataclass(frozen=True)
class Program:
  """One fuzz case. `source` defines `fn` (kind "values") or `kernel` and
  `call` (kind "kernel": pallas_call keyword arguments, without
  compiler_params/interpret)."""
  kind: str
  source: str
  inputs: tuple[InputSpec, ...]
  seed: int
  tolerance: float          # relative to max(1, |reference|)
  scale: float = 1.0        # the largest bound of a float value on the way
  features: tuple[str, ...] = ()
  # a rounding difference may flip a few elements (see Builder.fragile)
  fragile: bool = False
  # pallas_prof.CompilerParams(num_warps=...) for pallas-prof's kernel (None: its default);
  # the layouts Triton picks, and so what its passes meet, follow it (testkit/fuzz/scans.py)
  num_warps: int | None = None

  def describe(self) -> str:
    shapes = ", ".join(f"{i.dtype}{list(i.shape)}" for i in self.inputs)
    warps = f", num_warps={self.num_warps}" if self.num_warps else ""
    return f"{self.kind} program on {shapes} ({', '.join(self.features)}{warps})"


# --- values: what a statement has to work with ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Var:
  name: str
  shape: tuple[int, ...]
  dtype: str
  bound: float                # |value| <= bound (floats; ints: their range)
  # may differ from the reference by rounding (transcendentals, sums in
  # another order, dots): a float or a value computed from one
  inexact: bool = False
  # computed from constants alone (iota, literals): XLA folds it while compiling
  constant: bool = False

  @property
  def is_float(self) -> bool:
    return self.dtype in FLOATS

  @property
  def is_int(self) -> bool:
    return self.dtype in INTS

  @property
  def is_bool(self) -> bool:
    return self.dtype == "bool"


def _int_info(dtype):
  return np.iinfo(np.dtype(dtype))


def _int_bound(dtype) -> float:
  info = _int_info(dtype)
  return float(max(abs(int(info.min)), int(info.max)))


def _shape_of(expr: str, env: dict[str, Var]):
  """(shape, dtype) of a statement, as JAX traces it."""
  names = list(env)
  structs = [jax.ShapeDtypeStruct(env[n].shape, jnp.dtype(env[n].dtype)) for n in names]
  out = jax.eval_shape(lambda *vs: eval(expr, {**_NAMESPACE, **dict(zip(names, vs))}), *structs)
  return tuple(out.shape), jnp.dtype(out.dtype).name


_NAMESPACE: dict = {}


def namespace() -> dict:
  """The globals generated source runs with."""
  if not _NAMESPACE:
    from jax import lax
    from jax.experimental import pallas as pl
    from pallas_prof import triton as plgpu
    _NAMESPACE.update(jax=jax, jnp=jnp, lax=lax, np=np, pl=pl, plgpu=plgpu,
                      HIGHEST=lax.Precision.HIGHEST)
  return _NAMESPACE


class Rejected(Exception):
  """A statement JAX does not accept (a dtype combination the generator did
  not foresee): it is left out of the program."""


class Builder:
  """Statements of a function body, each typed by tracing it."""

  def __init__(self, draw, params: list[Var]):
    self.draw = draw
    self.vars: list[Var] = list(params)
    self.lines: list[str] = []
    self.features: set[str] = set()
    # a discontinuous operation (floor, a comparison, a cast to int, ...) of
    # an inexact value: a rounding difference there may flip a whole element
    self.fragile = False
    # float values that are a plain product: an add of one may be contracted to an FMA
    self.products: set[str] = set()

  def _contractible(self, expr: str, operands: list[Var]) -> bool:
    """An add or subtract of a float product, in this statement or of an earlier one:
    XLA's CPU contracts float32 `a * b + c` into an FMA (one rounding), and float16 too
    on some hosts, where pallas-prof rounds the product first as JAX's op-by-op
    semantics say. A last-bit difference, which sin of a value in the hundreds turns
    into anything (the GPU fuzzer's seed 20261215: float16 `x1 * x1 + 1`, rounded once
    by the reference on the H200's host, twice by pallas-prof there and by JAX's CPU
    here; bench/results/fuzz_gpu_h200_04b520d_seed20261215.json)."""
    if not _ADD_OR_SUBTRACT.search(expr):
      return False
    return " * " in expr or any(v.name in self.products for v in operands)

  def env(self) -> dict[str, Var]:
    return {v.name: v for v in self.vars}

  def add(self, expr: str, bound: float, feature: str) -> Var:
    namespace()
    env = self.env()
    try:
      shape, dtype = _shape_of(expr, env)
    except (TypeError, ValueError) as e:
      raise Rejected(f"{expr}: {e}") from None
    operands = [env[n] for n in _NAME.findall(expr) if n in env]
    inexact_in = any(v.inexact for v in operands)
    float_in = any(v.is_float for v in operands) or "float" in expr
    inexact = inexact_in or (float_in and any(m in expr for m in _INEXACT)) \
        or (float_in and self._contractible(expr, operands))
    if inexact_in and any(m in expr for m in _DISCONTINUOUS):
      self.fragile = True
    if _PERIODIC.search(expr) and any(_ill_conditioned(v) for v in operands):
      # sin of a value in the thousands: a last-bit difference upstream (a float16 scan
      # summed in another order) moves the argument by whole units, and the result
      # anywhere in [-1, 1] (bench/fuzz/fuzz.py --tma's CPU run of 2026-12-02, seed 4244)
      self.fragile = True
    var = Var(f"v{len(self.vars)}", shape, dtype, bound, inexact,
              all(v.constant for v in operands))
    if float_in and _PRODUCT.match(expr):
      self.products.add(var.name)
    self.lines.append(f"{var.name} = {expr}")
    self.vars.append(var)
    self.features.add(feature)
    return var

  def pick(self, pred=lambda v: True, label="operand") -> Var | None:
    pool = [v for v in self.vars if pred(v)]
    if not pool:
      return None
    # later values first: chains of operations rather than many leaves
    return pool[len(pool) - 1 - self.draw(st.integers(0, len(pool) - 1), label=label)]


_NAME = re.compile(r"\b([xv]\d+|gi|r|c)\b")
# operations whose float results may differ in the last bits between two
# correct implementations
_INEXACT = ("tanh", "sin", "cos", "exp", "log1p", "sqrt", "sigmoid", "rsqrt", "erf",
            "arctan2", "/ (", "jnp.sum", "cumsum", "cumprod", "cumlogsumexp", "jnp.dot", "fori_loop", "while_loop",
            "lax.scan", "lax.cond", "lax.switch")
# periodic functions of a large inexact argument are ill-conditioned: their absolute
# error is the argument's (bound x its rounding), which past this bound can exceed any
# tolerance once a 16-bit rounding sits upstream
_PERIODIC = re.compile(r"jnp\.(sin|cos|tan)\(")
# `v1 * v2`, `x0 * 2.5`: a product of two names or literals, nothing around it
_PRODUCT = re.compile(r"^[\w.]+ \* [\w.]+$")
# `a + b`, `a * 1.5 - 0.25` (a binary add or subtract, spaced; not `-a` nor `, -5`)
_ADD_OR_SUBTRACT = re.compile(r"\S [+-] \S")
PERIODIC_BOUND = 64.0
# a float's relative spacing (one unit in the last place at 1.0)
EPSILON = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _ill_conditioned(v: Var) -> bool:
  """sin, cos or tan of `v` may differ past the tolerance between two correct
  implementations: `v` is inexact and large (PERIODIC_BOUND), or one unit in its last
  place at its bound, doubled (a square downstream), already exceeds its dtype's
  tolerance. The GPU fuzzer's seed 20261207 on triton 3.9: float16 sin(x1 * x1 + 1)
  squared, bound 17, one rounding in XLA's fused reference and two in pallas-prof's
  (JAX's op-by-op float16), 0.2803 vs 0.2664
  (bench/results/fuzz_gpu_7647c77_seed20261207_triton39.json)."""
  if not v.inexact:
    return False
  spacing = v.bound * EPSILON.get(v.dtype, 0.0)
  return v.bound > PERIODIC_BOUND or 2 * spacing > FLOAT_TOL.get(v.dtype, 1.0)
_DISCONTINUOUS = ("floor", "ceil", "round", "sign", "<", ">", "==", "!=", ".astype(jnp.int",
                  ".astype(jnp.uint", ".astype(jnp.bool", "argmax", "argmin", "%", "//",
                  "lax.cond", "lax.switch", "fori_loop(1, jnp", "dynamic_")


def _fit_float(b: Builder, v: Var) -> Var:
  """Clips a float value whose bound grew past its dtype's comfortable range."""
  limit = FLOAT_MAX[v.dtype]
  if v.bound <= limit:
    return v
  return b.add(f"jnp.clip({v.name}, -{limit:g}, {limit:g})", limit, "clip")


# --- statements --------------------------------------------------------------------

_FLOAT_UNARY = [
    ("-{a}", lambda x: x), ("jnp.abs({a})", lambda x: x), ("jnp.tanh({a})", lambda x: 1),
    ("jnp.sin({a})", lambda x: 1), ("jnp.cos({a})", lambda x: 1),
    ("jnp.exp(jnp.clip({a}, -5, 5))", lambda x: 150), ("jnp.log1p(jnp.abs({a}))",
                                                      lambda x: math.log1p(x)),
    ("jnp.sqrt(jnp.abs({a}))", lambda x: math.sqrt(x)), ("jnp.floor({a})", lambda x: x + 1),
    ("jnp.ceil({a})", lambda x: x + 1), ("jnp.round({a})", lambda x: x + 1),
    ("jnp.sign({a})", lambda x: 1), ("jax.nn.sigmoid({a})", lambda x: 1),
    ("lax.rsqrt(jnp.abs({a}) + 1)", lambda x: 1), ("{a} * {a}", lambda x: x * x),
    ("lax.erf({a})", lambda x: 1), ("jnp.maximum({a}, 0.5)", lambda x: max(x, 0.5)),
    ("{a} * 1.5 - 0.25", lambda x: 1.5 * x + 0.25),
]
_INT_UNARY = ["-{a}", "jnp.abs({a})", "~{a}", "{a} >> {k}", "{a} << {k}", "{a} // {c}",
              "{a} % {c}", "lax.rem({a}, {a}.dtype.type({c}))", "lax.div({a}, {a}.dtype.type({c}))", "{a} * 3 + 1",
              "lax.shift_right_logical({a}, {a}.dtype.type({k}))", "jnp.maximum({a}, {c})"]
_BINARY_ANY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "jnp.maximum({a}, {b})",
               "jnp.minimum({a}, {b})"]
_BINARY_FLOAT = ["{a} / (jnp.abs({b}) + 1)", "jnp.arctan2({a}, {b})"]
_BINARY_INT = ["{a} & {b}", "{a} | {b}", "{a} ^ {b}", "{a} // (({b} & 7) + 1)",
               "lax.div({a}, {b})", "lax.rem({a}, {b})",
               "{a} % (({b} & 7) + 1)", "lax.rem({a}, ({b} & 7) + 1)",
               "lax.shift_left({a}, {b} & {mask})", "lax.shift_right_arithmetic({a}, {b} & {mask})",
               "lax.shift_right_logical({a}, {b} & {mask})"]
_COMPARE = ["<", "<=", ">", ">=", "==", "!="]


def _unary(b: Builder):
  a = b.pick(lambda v: v.is_float or v.is_int)
  if a is None:
    return
  if a.is_float:
    template, grow = b.draw(st.sampled_from(_FLOAT_UNARY), label="float unary")
    _fit_float(b, b.add(template.format(a=a.name), grow(a.bound), "unary"))
    return
  bits = np.dtype(a.dtype).itemsize * 8
  template = b.draw(st.sampled_from(_INT_UNARY), label="int unary")
  if template in ("-{a}", "jnp.abs({a})") and a.dtype.startswith("uint"):
    template = "~{a}"
  k = b.draw(st.integers(0, bits - 1), label="shift")
  c = b.draw(st.sampled_from([3, 7, -5, 2, -1, 5]), label="divisor")
  if a.dtype.startswith("uint"):
    c = abs(c)
  if c == -1 and ("//" in template or "div" in template):
    c = 3      # INT_MIN // -1 overflows: undefined in C, XLA picks a value
  b.add(template.format(a=a.name, k=k, c=c), _int_bound(a.dtype), "unary")


def _binary(b: Builder):
  a = b.pick(lambda v: v.is_float or v.is_int)
  if a is None:
    return
  other = b.pick(lambda v: v.dtype == a.dtype and _broadcastable(v.shape, a.shape))
  if other is None:
    other = a
  templates = list(_BINARY_ANY) + (_BINARY_FLOAT if a.is_float else _BINARY_INT)
  template = b.draw(st.sampled_from(templates), label="binary")
  if a.is_float:
    grow = {"{a} * {b}": a.bound * other.bound, "{a} / (jnp.abs({b}) + 1)": a.bound,
            "jnp.arctan2({a}, {b})": 4.0}.get(template, a.bound + other.bound)
    _fit_float(b, b.add(template.format(a=a.name, b=other.name), grow, "binary"))
    return
  if other.constant and template in ("lax.div({a}, {b})", "lax.rem({a}, {b})"):
    # XLA divides constants while compiling, and jaxlib 0.10.2 dies of SIGFPE
    # there on x % 0 (bench/fuzz/fuzz.py's CPU run of 2026-12-02: rem of an iota by
    # itself): such a divisor is kept nonzero (x / 0 of run-time values stays:
    # XLA defines it, and pallas-prof follows)
    template = template.replace("{b})", "({b} & 7) + 1)")
  mask = np.dtype(a.dtype).itemsize * 8 + 7     # shifts of the width and past it too
  b.add(template.format(a=a.name, b=other.name, mask=mask), _int_bound(a.dtype), "binary")


def _broadcastable(s1, s2) -> bool:
  try:
    return np.broadcast_shapes(s1, s2) == tuple(s2)
  except ValueError:
    return False


def _select(b: Builder):
  a = b.pick(lambda v: v.is_float or v.is_int)
  if a is None:
    return
  c = b.pick(lambda v: v.dtype == a.dtype and _broadcastable(v.shape, a.shape)) or a
  op = b.draw(st.sampled_from(_COMPARE), label="compare")
  x = b.pick(lambda v: (v.is_float or v.is_int) and _broadcastable(v.shape, a.shape)) or a
  y = b.pick(lambda v: v.dtype == x.dtype and _broadcastable(v.shape, a.shape)) or x
  if b.draw(st.booleans(), label="keep the mask"):
    m = b.add(f"{a.name} {op} {c.name}", 1, "compare")
    b.add(f"jnp.where({m.name}, {x.name}, {y.name})", max(x.bound, y.bound), "select")
  else:
    b.add(f"jnp.where({a.name} {op} {c.name}, {x.name}, {y.name})", max(x.bound, y.bound),
          "select")


def _logical(b: Builder):
  m = b.pick(lambda v: v.is_bool)
  if m is None:
    return _select(b)
  other = b.pick(lambda v: v.is_bool and _broadcastable(v.shape, m.shape)) or m
  template = b.draw(st.sampled_from(["{a} & {b}", "{a} | {b}", "{a} ^ {b}", "~{a}",
                                     "{a}.astype(jnp.int32)", "{a}.astype(jnp.float32)"]),
                    label="logical")
  b.add(template.format(a=m.name, b=other.name), 1, "logical")


def _cast(b: Builder):
  a = b.pick(lambda v: v.is_float or v.is_int or v.is_bool)
  if a is None:
    return
  to = b.draw(st.sampled_from(FLOATS + INTS + ("bool",)), label="cast to")
  if to == a.dtype:
    return
  expr = a.name
  raw = b.draw(st.integers(0, 5), label="unclipped cast") == 0
  if a.is_float and to in INTS and raw:
    b.features.add("unclipped float->int")
  elif a.is_float and to in INTS:
    info = _int_info(to)
    lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
    expr = f"jnp.clip({a.name}, {lo}, {hi})"
  bound = a.bound if to not in INTS else _int_bound(to)
  if to in FLOATS:
    bound = min(a.bound, _int_bound(a.dtype)) if a.is_int else a.bound
    bound = min(bound, 2.0 ** 32)
  var = b.add(f"{expr}.astype(jnp.{to})", bound, "cast")
  if var.is_float:
    _fit_float(b, var)


def _reduce(b: Builder):
  a = b.pick(lambda v: v.shape and (v.is_float or v.is_int or v.is_bool))
  if a is None:
    return
  axis = b.draw(st.integers(-1, len(a.shape) - 1), label="axis")
  axis_text = "None" if axis < 0 else str(axis)
  keep = b.draw(st.booleans(), label="keepdims")
  n = math.prod(a.shape) if axis < 0 else a.shape[axis]
  if a.is_bool:
    op = b.draw(st.sampled_from(["jnp.any", "jnp.all"]), label="bool reduction")
    b.add(f"{op}({a.name}, axis={axis_text}, keepdims={keep})", 1, "reduce")
    return
  ops = ["jnp.sum", "jnp.max", "jnp.min", "jnp.argmax", "jnp.argmin"]
  if a.is_int:
    ops += ["jnp.prod", "jnp.cumsum"]
  else:
    ops += ["jnp.cumsum"]
  op = b.draw(st.sampled_from(ops), label="reduction")
  if op == "jnp.cumsum":
    ax = max(axis, 0)
    bound = a.bound * a.shape[ax] if a.is_float else _int_bound(a.dtype)
    var = b.add(f"jnp.cumsum({a.name}, axis={ax})", bound, "cumsum")
  elif op in ("jnp.argmax", "jnp.argmin"):
    if a.dtype == "bfloat16" or a.dtype == "float16":
      return     # ties of rounded values: first index in both, but keep it simple
    var = b.add(f"{op}({a.name}, axis={axis_text}, keepdims={keep})", n, "argreduce")
    return
  else:
    grow = a.bound * n if op == "jnp.sum" and a.is_float else a.bound
    if a.is_int:
      grow = 2.0 ** 63
    var = b.add(f"{op}({a.name}, axis={axis_text}, keepdims={keep})", grow, "reduce")
  if var.is_float:
    _fit_float(b, var)


def _shape_op(b: Builder):
  a = b.pick(lambda v: v.shape and not v.is_bool)
  if a is None:
    return
  kind = b.draw(st.sampled_from(["transpose", "reshape", "broadcast", "slice", "flip",
                                 "concatenate", "dynamic_slice", "expand", "pad"]),
                label="shape op")
  rank = len(a.shape)
  if kind == "transpose" and rank >= 2:
    b.add(f"{a.name}.T", a.bound, "transpose")
  elif kind == "reshape":
    n = math.prod(a.shape)
    divisors = [d for d in range(2, min(n, 40) + 1) if n % d == 0]
    if divisors and b.draw(st.booleans(), label="split"):
      d = b.draw(st.sampled_from(divisors), label="rows")
      b.add(f"{a.name}.reshape({d}, {n // d})", a.bound, "reshape")
    else:
      b.add(f"{a.name}.reshape({n})", a.bound, "reshape")
  elif kind == "broadcast":
    if rank == 1:
      rows = b.draw(st.integers(1, 9), label="rows")
      b.add(f"jnp.broadcast_to({a.name}, ({rows}, {a.shape[0]}))", a.bound, "broadcast")
    else:
      axis = b.draw(st.integers(0, rank - 1), label="axis")
      index = ", ".join(":" if i != axis else "0:1" for i in range(rank))
      b.add(f"jnp.broadcast_to({a.name}[{index}], {a.shape})", a.bound, "broadcast")
  elif kind == "slice":
    axis = b.draw(st.integers(0, rank - 1), label="axis")
    n = a.shape[axis]
    start = b.draw(st.integers(0, n - 1), label="start")
    stop = b.draw(st.integers(start + 1, n), label="stop")
    step = b.draw(st.sampled_from([1, 1, 2, 3]), label="step")
    index = ", ".join(":" if i != axis else f"{start}:{stop}:{step}" for i in range(rank))
    b.add(f"{a.name}[{index}]", a.bound, "slice")
  elif kind == "flip":
    axis = b.draw(st.integers(0, rank - 1), label="axis")
    b.add(f"jnp.flip({a.name}, axis={axis})", a.bound, "flip")
  elif kind == "concatenate":
    other = b.pick(lambda v: v.dtype == a.dtype and len(v.shape) == rank
                   and v.shape[1:] == a.shape[1:]) or a
    b.add(f"jnp.concatenate([{a.name}, {other.name}], axis=0)", max(a.bound, other.bound),
          "concatenate")
  elif kind == "dynamic_slice":
    axis = b.draw(st.integers(0, rank - 1), label="axis")
    n = a.shape[axis]
    width = b.draw(st.integers(1, n), label="width")
    src = b.pick(lambda v: v.is_int or v.is_float) or a
    # a start from the data, sometimes past the end: XLA clamps it into range
    start = f"jnp.max({src.name}).astype(jnp.int32) % {n + 3}"
    b.add(f"lax.dynamic_slice_in_dim({a.name}, {start}, {width}, axis={axis})", a.bound,
          "dynamic_slice")
  elif kind == "expand":
    b.add(f"{a.name}[None]", a.bound, "expand_dims")
  elif kind == "pad" and a.dtype in ("float32", "int32"):
    lo, hi = b.draw(st.integers(0, 3), label="pad lo"), b.draw(st.integers(0, 3), label="pad hi")
    widths = ", ".join("(0, 0)" if i else f"({lo}, {hi})" for i in range(rank))
    b.add(f"jnp.pad({a.name}, ({widths},))", a.bound, "pad")


def _update_slice(b: Builder):
  a = b.pick(lambda v: v.shape and (v.is_float or v.is_int))
  if a is None:
    return
  rank = len(a.shape)
  axis = b.draw(st.integers(0, rank - 1), label="axis")
  n = a.shape[axis]
  width = b.draw(st.integers(1, n), label="width")
  src = b.pick(lambda v: v.is_int or v.is_float) or a
  start = f"jnp.min({src.name}).astype(jnp.int32) % {n + 2}"
  window = ", ".join(":" if i != axis else f"0:{width}" for i in range(rank))
  b.add(f"lax.dynamic_update_slice_in_dim({a.name}, {a.name}[{window}] * 2, {start}, "
        f"axis={axis})", 2 * a.bound if a.is_float else a.bound, "dynamic_update_slice")


def _iota(b: Builder):
  a = b.pick(lambda v: v.shape)
  shape = a.shape if a is not None else (b.draw(st.integers(1, 40), label="size"),)
  axis = b.draw(st.integers(0, len(shape) - 1), label="axis")
  dtype = b.draw(st.sampled_from(["int32", "float32", "int8"]), label="iota dtype")
  b.add(f"lax.broadcasted_iota(jnp.{dtype}, {shape}, {axis})", max(shape), "iota")


def _dot(b: Builder):
  a = b.pick(lambda v: len(v.shape) == 2 and v.dtype in ("float32", "float16", "bfloat16",
                                                        "int8"))
  if a is None:
    return
  m, k = a.shape
  other = b.pick(lambda v: len(v.shape) == 2 and v.dtype == a.dtype and v.shape[0] == k)
  _emit_dot(b, a, other or Var(f"{a.name}.T", (k, m), a.dtype, a.bound))


def _weight_dot(b: Builder):
  """A block of rows times the whole weight matrix `w`: each row on its own.
  (A right-hand side computed from the rows, or the block transposed, sums
  over rows, and the padding rows of an overhanging last block would leak
  into real ones: the fuzzer's run of 2026-12-02 found one, x.T.)"""
  w = next((v for v in b.vars if v.name == "w"), None)
  if w is None:
    return
  a = b.pick(lambda v: len(v.shape) == 2 and v.name != "w" and v.dtype == w.dtype
             and v.shape[1] == w.shape[0])
  if a is not None:
    _emit_dot(b, a, w)


def _emit_dot(b: Builder, a: Var, rhs_var: Var):
  k = a.shape[1]
  rhs = rhs_var.name
  if a.dtype == "int8":
    # int8 values wrap, products sum exactly in int32
    b.add(f"jnp.dot({a.name}, {rhs}, preferred_element_type=jnp.int32)", 2.0 ** 31, "dot")
    return
  out = b.draw(st.sampled_from(["float32", a.dtype]), label="dot result")
  bound = a.bound * rhs_var.bound * k
  var = b.add(f"jnp.dot({a.name}, {rhs}, precision=HIGHEST, preferred_element_type=jnp.{out})",
              bound, "dot")
  _fit_float(b, var)


def _loop(b: Builder):
  a = b.pick(lambda v: v.is_float or v.is_int)
  if a is None:
    return
  other = b.pick(lambda v: v.dtype == a.dtype and _broadcastable(v.shape, a.shape)) or a
  kind = b.draw(st.sampled_from(["fori", "fori_dynamic", "while", "scan", "cond", "switch",
                                 "scan_xs"]), label="control flow")
  trips = b.draw(st.integers(0, 7), label="trips")
  if a.is_float:
    step = f"jnp.tanh(c) * 0.5 + {other.name} * 0.25 + i.astype(c.dtype) * 0.125"
    bound = 0.5 + other.bound * 0.25 + 1
    bound = max(bound + 0.125 * trips, a.bound)
  else:
    step = f"(c ^ {other.name}) + i.astype(c.dtype) * 3"
    bound = _int_bound(a.dtype)
  if kind == "fori":
    b.add(f"lax.fori_loop(0, {trips}, lambda i, c: {step}, {a.name})", bound, "fori_loop")
  elif kind == "fori_dynamic":
    src = b.pick(lambda v: v.is_int or v.is_float) or a
    hi = f"jnp.max({src.name}).astype(jnp.int32) % {trips + 2}"
    b.add(f"lax.fori_loop(1, {hi}, lambda i, c: {step}, {a.name})", bound + 1, "fori_dynamic")
  elif kind == "while":
    body = step.replace("i.astype", "s[0].astype").replace("c", "s[1]").replace(
        "s[1].dtype", "s[1].dtype")
    b.add(f"lax.while_loop(lambda s: s[0] < {trips}, lambda s: (s[0] + 1, {body}), "
          f"(jnp.int32(0), {a.name}))[1]", bound, "while_loop")
  elif kind == "scan":
    body = step.replace("i.astype(c.dtype)", "1")
    b.add(f"lax.scan(lambda c, _: ({body}, None), {a.name}, None, length={max(trips, 1)})[0]",
          bound, "scan")
  elif kind == "scan_xs" and a.shape:
    # the rows of a as xs; ys stacked back to a's shape
    rev = b.draw(st.booleans(), label="reverse")
    body = "jnp.tanh(c) + row" if a.is_float else "(c ^ row) + 1"
    b.add(f"lax.scan(lambda c, row: ({body}, c * 2 - row), {a.name}[0], {a.name}, "
          f"reverse={rev})[1]", 2 * (a.bound + 1) + a.bound if a.is_float else bound,
          "scan_xs")
  elif kind == "cond":
    src = b.pick(lambda v: v.is_int or v.is_float) or a
    b.add(f"lax.cond(jnp.sum({src.name}) > 0, lambda c: {step.replace('i.astype(c.dtype)', '2')},"
          f" lambda c: c - {other.name}, {a.name})",
          bound + other.bound + a.bound if a.is_float else bound, "cond")
  else:
    src = b.pick(lambda v: v.is_int) or None
    index = f"jnp.max({src.name}).astype(jnp.int32)" if src is not None else str(trips)
    b.add(f"lax.switch({index}, [lambda c: c, lambda c: {step.replace('i.astype(c.dtype)', '2')},"
          f" lambda c: c * 2], {a.name})", max(bound, 2 * a.bound), "switch")


def _statement(b: Builder, choices) -> None:
  try:
    b.draw(st.sampled_from(choices), label="statement")(b)
  except Rejected:
    pass


_STATEMENTS = [_unary, _binary, _select, _logical, _cast, _reduce, _shape_op, _update_slice,
               _iota, _dot, _loop, _unary, _binary, _select]


def _dims(draw, label):
  # small sizes mostly, never only powers of two; 1 is an edge case on purpose
  return draw(st.integers(1, 40), label=label)


@st.composite
def value_programs(draw) -> Program:
  dtype = draw(st.sampled_from(MAIN_DTYPES), label="main dtype")
  rank = draw(st.sampled_from([2, 1, 2, 3]), label="rank")
  dims = [_dims(draw, f"dim{i}") for i in range(3)]
  if rank == 3:
    dims = [min(d, 9) for d in dims]
  shape = tuple(dims[:rank])
  n_inputs = draw(st.integers(1, 3), label="inputs")
  inputs, params = [], []
  for i in range(n_inputs):
    # the others: the same shape, or the transposed one (dots chain through it)
    s = shape
    if i and rank == 2 and draw(st.booleans(), label="transposed input"):
      s = (shape[1], dims[2])
    d = dtype if i == 0 or draw(st.integers(0, 3), label="same dtype") else \
        draw(st.sampled_from(FLOATS + INTS), label="dtype")
    spec = _input_spec(s, d)
    if d in FLOATS and draw(st.integers(0, 4), label="special values") == 0:
      spec = dataclasses.replace(spec, special=True)
    inputs.append(spec)
    params.append(Var(f"x{i}", s, d, max(abs(spec.low), abs(spec.high)) if d in FLOATS
                      else _int_bound(d)))
  b = Builder(draw, params)
  n_statements = draw(st.integers(1, 8), label="statements")
  for _ in range(n_statements):
    _statement(b, _STATEMENTS)
  return values_program(draw, b, params, inputs)


def values_program(draw, b: Builder, params: list[Var], inputs,
                   num_warps: int | None = None) -> Program:
  """The "values" Program of a Builder's statements over `params` (the inputs)."""
  # every value computed reaches an output: those no later statement reads
  # (at most four, the latest), so no statement is dead code
  text = "\n".join(b.lines)
  computed = b.vars[len(params):] or b.vars[-1:]
  outs = [v for v in computed
          if not re.search(rf"\b{v.name}\b", text.split(f"{v.name} = ", 1)[-1])][-4:]
  outs = [_as_output(b, v) for v in outs]
  args = ", ".join(p.name for p in params)
  body = "\n".join(f"  {line}" for line in b.lines)
  source = f"def fn({args}):\n{body}\n  return ({', '.join(o.name for o in outs)},)\n"
  float_outs = [o for o in outs if o.is_float]
  tol = max([FLOAT_TOL[o.dtype] for o in float_outs] +
            [FLOAT_TOL[v.dtype] for v in b.vars if v.is_float] + [0.0])
  scale = max([min(v.bound, 1e6) for v in b.vars if v.is_float] + [1.0])
  return Program("values", source, tuple(inputs), draw(st.integers(0, 2**31 - 1), label="seed"),
                 tol, scale, tuple(sorted(b.features)), b.fragile, num_warps)


def _as_output(b: Builder, v: Var) -> Var:
  """Outputs are arrays of rank >= 1 (a scalar output becomes shape (1,))."""
  if v.shape:
    return v
  return b.add(f"jnp.reshape({v.name}, (1,))", v.bound, "scalar output")


def _input_spec(shape, dtype) -> InputSpec:
  if dtype == "bool":
    return InputSpec(tuple(shape), dtype, 0, 1)
  if dtype in FLOATS:
    return InputSpec(tuple(shape), dtype, -4, 4)
  info = _int_info(dtype)
  return InputSpec(tuple(shape), dtype, max(int(info.min), -100), min(int(info.max), 100))


# --- kernels over a grid ----------------------------------------------------------

_KERNEL_FEATURES = ("elementwise", "global_index", "masked_load", "masked_store", "chunks",
                    "data_window", "atomic", "two_d", "rows", "matmul")


@st.composite
def kernel_programs(draw) -> Program:
  feature = draw(st.sampled_from(_KERNEL_FEATURES), label="kernel feature")
  dtype = draw(st.sampled_from(MAIN_DTYPES), label="dtype")
  if feature == "atomic":
    return _atomic_kernel(draw)
  if feature == "two_d":
    return _two_d_kernel(draw, dtype)
  if feature == "data_window":
    return _window_kernel(draw, dtype)
  if feature == "rows":
    return _rows_kernel(draw, dtype)
  if feature == "matmul":
    return _matmul_kernel(draw)
  block = draw(st.integers(1, 50), label="block")
  blocks = draw(st.integers(1, 5), label="blocks")
  # the last block overhangs the array by 0 .. block-1 elements
  n = max(1, block * blocks - draw(st.integers(0, block - 1), label="overhang"))
  grid = -(-n // block)
  n_in = draw(st.integers(1, 3), label="inputs")
  params = [Var(f"x{i}", (block,), dtype, 4.0 if dtype in FLOATS else _int_bound(dtype))
            for i in range(n_in)]
  b = Builder(draw, params)
  lines = [f"x{i} = x{i}_ref[...]" for i in range(n_in)]
  if feature in ("global_index", "masked_load", "masked_store"):
    b.vars.append(Var("gi", (block,), "int32", n))
    lines.insert(0, f"gi = pl.program_id(0) * {block} + lax.broadcasted_iota(jnp.int32, ({block},), 0)")
  if feature == "masked_load":
    other = "-1" if dtype not in ("uint8", "uint32") else "7"
    other = f"{other}.5" if dtype in FLOATS else other
    lines[1] = f"x0 = plgpu.load(x0_ref, mask=(gi % 3) != 1, other={other})"
  # elementwise statements only: the padding of the last block must not mix in
  for _ in range(draw(st.integers(1, 5), label="statements")):
    _statement(b, [_unary, _binary, _select, _cast])
  out = b.vars[-1]
  if out.shape != (block,):
    out = b.add(f"jnp.broadcast_to({out.name}, ({block},))", out.bound, "broadcast")
  lines += b.lines
  aliases = ""
  inputs = [_input_spec((n,), dtype) for _ in range(n_in)]
  out_dtype = out.dtype
  in_specs = [f"pl.BlockSpec(({block},), lambda i: (i,))"] * n_in
  args = [f"x{i}_ref" for i in range(n_in)]
  if feature == "masked_store":
    # unmasked lanes keep the output's initial values: an input aliased to it
    inputs.append(_input_spec((n,), out_dtype))
    in_specs.append(f"pl.BlockSpec(({block},), lambda i: (i,))")
    args.append("init_ref")
    lines.append(f"plgpu.store(o_ref, {out.name}, mask=(gi % 4) != 2)")
    aliases = f", input_output_aliases={{{n_in}: 0}}"
  elif feature == "chunks" and block % 2 == 0 or feature == "chunks" and block % 3 == 0:
    pieces = 2 if block % 2 == 0 else 3
    width = block // pieces
    lines.append(f"o_ref[...] = {out.name}")
    lines.append(f"def chunk(j, carry):\n    window = pl.ds(j * {width}, {width})\n"
                 f"    o_ref[window] = o_ref[window] + x0_ref[window].astype(o_ref.dtype)\n"
                 f"    return carry")
    lines.append(f"lax.fori_loop(0, {pieces}, chunk, 0)")
    b.features.add("pl.ds(loop index)")
  else:
    lines.append(f"o_ref[...] = {out.name}")
  body = "\n".join(f"  {line}" for line in lines)
  source = (f"def kernel({', '.join(args)}, o_ref):\n{body}\n\n"
            f"call = dict(grid=({grid},), in_specs=[{', '.join(in_specs)}],\n"
            f"            out_specs=pl.BlockSpec(({block},), lambda i: (i,)),\n"
            f"            out_shape=jax.ShapeDtypeStruct(({n},), jnp.{out_dtype}){aliases})\n")
  tol = max([FLOAT_TOL[v.dtype] for v in b.vars if v.is_float] + [0.0])
  scale = max([min(v.bound, 1e6) for v in b.vars if v.is_float] + [1.0])
  return Program("kernel", source, tuple(inputs), draw(st.integers(0, 2**31 - 1), label="seed"),
                 tol, scale, tuple(sorted(b.features | {feature, f"grid overhang {grid * block - n}"})),
                 b.fragile)


@st.composite
def tma_kernel_programs(draw) -> Program:
  """Two-dimensional kernels in the shapes TMA takes (blocks of powers of two, rows
  mostly a multiple of 16 bytes; some not, for the fallbacks): bench/fuzz/fuzz.py --tma
  and the fixed TMA set draw these, where kernel_programs' blocks of 1-20 rarely are."""
  dtype = draw(st.sampled_from(MAIN_DTYPES), label="dtype")
  rows = draw(st.sampled_from([1, 2, 4, 8, 16]), label="block rows")
  cols = draw(st.sampled_from([4, 8, 16, 32, 64]), label="block cols")
  align = draw(st.sampled_from([16, 16, 16, 1]), label="row alignment (bytes)")
  return _two_d_kernel(draw, dtype, rows, cols, max(1, align // jnp.dtype(dtype).itemsize))


def _two_d_kernel(draw, dtype, rows=None, cols=None, row_multiple=1) -> Program:
  if rows is None:
    rows, cols = draw(st.integers(1, 20), label="block rows"), draw(st.integers(1, 20),
                                                                     label="block cols")
  gr, gc = draw(st.integers(1, 3), label="grid rows"), draw(st.integers(1, 3), label="grid cols")
  n = max(1, rows * gr - draw(st.integers(0, rows - 1), label="row overhang"))
  m = max(1, cols * gc - draw(st.integers(0, cols - 1), label="col overhang"))
  m = -(-m // row_multiple) * row_multiple      # rows of whole 16-byte units (TMA programs)
  b = Builder(draw, [Var("x0", (rows, cols), dtype, 4.0 if dtype in FLOATS else _int_bound(dtype)),
                     Var("r", (rows, cols), "int32", n), Var("c", (rows, cols), "int32", m)])
  for _ in range(draw(st.integers(1, 4), label="statements")):
    _statement(b, [_unary, _binary, _select, _cast])
  out = b.vars[-1]
  if out.shape != (rows, cols):
    out = b.add(f"jnp.broadcast_to({out.name}, ({rows}, {cols}))", out.bound, "broadcast")
  transposed = draw(st.booleans(), label="transposed index map")
  index_map = "lambda i, j: (j, i)" if transposed else "lambda i, j: (i, j)"
  grid = (-(-m // cols), -(-n // rows)) if transposed else (-(-n // rows), -(-m // cols))
  pid_r, pid_c = ("pl.program_id(1)", "pl.program_id(0)") if transposed else \
      ("pl.program_id(0)", "pl.program_id(1)")
  lines = ["x0 = x0_ref[...]",
           f"r = {pid_r} * {rows} + lax.broadcasted_iota(jnp.int32, ({rows}, {cols}), 0)",
           f"c = {pid_c} * {cols} + lax.broadcasted_iota(jnp.int32, ({rows}, {cols}), 1)"]
  lines += b.lines + [f"o_ref[...] = {out.name}"]
  body = "\n".join(f"  {line}" for line in lines)
  source = (f"def kernel(x0_ref, o_ref):\n{body}\n\n"
            f"call = dict(grid={grid}, in_specs=[pl.BlockSpec(({rows}, {cols}), {index_map})],\n"
            f"            out_specs=pl.BlockSpec(({rows}, {cols}), {index_map}),\n"
            f"            out_shape=jax.ShapeDtypeStruct(({n}, {m}), jnp.{out.dtype}))\n")
  tol = max([FLOAT_TOL[v.dtype] for v in b.vars if v.is_float] + [0.0])
  scale = max([min(v.bound, 1e6) for v in b.vars if v.is_float] + [1.0])
  return Program("kernel", source, (_input_spec((n, m), dtype),),
                 draw(st.integers(0, 2**31 - 1), label="seed"), tol, scale,
                 tuple(sorted(b.features | {"two_d", f"overhang {gr * rows - n}x{gc * cols - m}"})),
                 b.fragile)


def _row_reduce(b: Builder):
  """A reduction or scan along the rows (axis 1) of a (rows, cols) block: the
  rows of an overhanging last block are independent of each other."""
  a = b.pick(lambda v: len(v.shape) == 2 and (v.is_float or v.is_int))
  if a is None:
    return
  op = b.draw(st.sampled_from(["jnp.sum", "jnp.max", "jnp.min", "jnp.cumsum", "jnp.argmax"]),
              label="row reduction")
  n = a.shape[1]
  if op == "jnp.cumsum":
    var = b.add(f"jnp.cumsum({a.name}, axis=1)", a.bound * n if a.is_float else a.bound,
                "row cumsum")
  elif op == "jnp.argmax":
    if not a.dtype in ("float32", "int32"):
      return
    b.add(f"jnp.argmax({a.name}, axis=1, keepdims=True)", n, "row argmax")
    return
  else:
    var = b.add(f"{op}({a.name}, axis=1, keepdims=True)",
                a.bound * n if a.is_float and op == "jnp.sum" else a.bound, "row reduction")
  if var.is_float:
    _fit_float(b, var)


def _rows_kernel(draw, dtype) -> Program:
  """Blocks of whole rows, the last block overhanging: row reductions, scans,
  softmax-like chains and a dot with a whole weight matrix, per row."""
  rows = draw(st.integers(1, 24), label="block rows")
  n = max(1, rows * draw(st.integers(1, 4), label="blocks") - draw(st.integers(0, rows - 1),
                                                                    label="overhang"))
  cols = draw(st.integers(1, 40), label="cols")
  out_cols = draw(st.integers(1, 24), label="weight cols")
  float_dot = dtype in FLOATS
  w_dtype = dtype if float_dot or dtype == "int8" else None
  params = [Var("x0", (rows, cols), dtype, 4.0 if dtype in FLOATS else _int_bound(dtype))]
  if w_dtype:
    params.append(Var("w", (cols, out_cols), w_dtype, 4.0 if float_dot else _int_bound(w_dtype)))
  b = Builder(draw, params)
  for _ in range(draw(st.integers(1, 6), label="statements")):
    choices = [_unary, _binary, _select, _cast, _row_reduce, _row_reduce]
    if w_dtype:
      choices.append(_weight_dot)
    _statement(b, choices)
  out = [v for v in b.vars if len(v.shape) == 2 and v.shape[0] == rows and v.name != "w"][-1]
  width = out.shape[1]
  lines = ["x0 = x0_ref[...]"] + (["w = w_ref[...]"] if w_dtype else []) + b.lines
  lines.append(f"o_ref[...] = {out.name}")
  body = "\n".join(f"  {line}" for line in lines)
  specs = [f"pl.BlockSpec(({rows}, {cols}), lambda i: (i, 0))"]
  inputs = [_input_spec((n, cols), dtype)]
  if w_dtype:
    specs.append(f"pl.BlockSpec(({cols}, {out_cols}), lambda i: (0, 0))")
    inputs.append(_input_spec((cols, out_cols), w_dtype))
  args = "x0_ref, w_ref, o_ref" if w_dtype else "x0_ref, o_ref"
  source = (f"def kernel({args}):\n{body}\n\n"
            f"call = dict(grid=({-(-n // rows)},), in_specs=[{', '.join(specs)}],\n"
            f"            out_specs=pl.BlockSpec(({rows}, {width}), lambda i: (i, 0)),\n"
            f"            out_shape=jax.ShapeDtypeStruct(({n}, {width}), jnp.{out.dtype}))\n")
  tol = max([FLOAT_TOL[v.dtype] for v in b.vars if v.is_float] + [0.0])
  scale = max([min(v.bound, 1e6) for v in b.vars if v.is_float] + [1.0])
  return Program("kernel", source, tuple(inputs), draw(st.integers(0, 2**31 - 1), label="seed"),
                 tol, scale, tuple(sorted(b.features | {"rows", f"overhang {-n % rows}"})),
                 b.fragile)


@st.composite
def loop_sum_programs(draw) -> Program:
  """_matmul_kernel's loop without its dot (sums of the chunks instead): the loops
  CompilerParams(loop_stages) pipelines, for tests/fuzz's fixed set of them."""
  return _matmul_kernel(draw, no_dot=True)


def _matmul_kernel(draw, no_dot: bool | None = None) -> Program:
  """A tiled matmul: a loop over K in chunks read through pl.ds (dynamic starts)
  on both operands, accumulating dots of odd sizes; M and N overhang."""
  bm, bn = draw(st.integers(1, 33), label="bm"), draw(st.integers(1, 33), label="bn")
  kc = draw(st.integers(1, 20), label="k chunk")
  chunks = draw(st.integers(1, 5), label="k chunks")
  k = kc * chunks
  m = max(1, bm * draw(st.integers(1, 3), label="m blocks") - draw(st.integers(0, bm - 1),
                                                                    label="m overhang"))
  n = max(1, bn * draw(st.integers(1, 3), label="n blocks") - draw(st.integers(0, bn - 1),
                                                                    label="n overhang"))
  dtype = draw(st.sampled_from(["float32", "float16", "bfloat16", "int8"]), label="dtype")
  acc = "int32" if dtype == "int8" else "float32"
  prec = "" if dtype == "int8" else ", precision=HIGHEST"
  out_dtype = draw(st.sampled_from([acc, dtype]), label="out dtype")
  # under --loop-stages (bench/fuzz/fuzz.py), half the loops have no dot: the loops that
  # CompilerParams(loop_stages) pipelines (drawn only there: other runs' seeds stay the same)
  if no_dot is None:
    no_dot = bool(os.environ.get("PALLAS_PROF_FUZZ_LOOP_STAGES")) and \
        draw(st.booleans(), label="loop without a dot")
  if no_dot:       # more chunks than the lowering unrolls (control_flow.MAX_UNROLL_TRIPS)
    chunks += draw(st.integers(4, 12), label="more k chunks")
    k = kc * chunks
  update = (f"(a.astype(jnp.{acc}).sum(axis=1, keepdims=True) * "
            f"b.astype(jnp.{acc}).sum(axis=0, keepdims=True))" if no_dot else
            f"jnp.dot(a, b, preferred_element_type=jnp.{acc}{prec})")
  lines = [f"def step(j, acc):",
           f"    a = x_ref[:, pl.ds(j * {kc}, {kc})]",
           f"    b = y_ref[pl.ds(j * {kc}, {kc}), :]",
           f"    return acc + {update}",
           f"acc = lax.fori_loop(0, {chunks}, step, jnp.zeros(({bm}, {bn}), jnp.{acc}))",
           f"o_ref[...] = acc.astype(o_ref.dtype)"]
  body = "\n".join(f"  {line}" for line in lines)
  source = (f"def kernel(x_ref, y_ref, o_ref):\n{body}\n\n"
            f"call = dict(grid=({-(-m // bm)}, {-(-n // bn)}),\n"
            f"            in_specs=[pl.BlockSpec(({bm}, {k}), lambda i, j: (i, 0)),\n"
            f"                      pl.BlockSpec(({k}, {bn}), lambda i, j: (0, j))],\n"
            f"            out_specs=pl.BlockSpec(({bm}, {bn}), lambda i, j: (i, j)),\n"
            f"            out_shape=jax.ShapeDtypeStruct(({m}, {n}), jnp.{out_dtype}))\n")
  tol = 0.0 if dtype == "int8" else max(FLOAT_TOL[dtype], FLOAT_TOL[out_dtype]
                                        if out_dtype in FLOAT_TOL else 0.0)
  return Program("kernel", source, (_input_spec((m, k), dtype), _input_spec((k, n), dtype)),
                 draw(st.integers(0, 2**31 - 1), label="seed"), tol, 16.0 * k,
                 ("loop sums" if no_dot else "matmul", f"k {kc}x{chunks}", dtype,
                  f"overhang {-m % bm}x{-n % bn}"),
                 dtype == "int8" and out_dtype == "int8")


def _window_kernel(draw, dtype) -> Program:
  """pl.ds windows whose start comes from the data (kept in range: reading past
  a ref is undefined in Pallas; check_bounds mode exists for that)."""
  n = draw(st.integers(2, 70), label="length")
  width = draw(st.integers(1, n), label="width")
  dst = draw(st.integers(0, n - width), label="destination")
  stride = draw(st.sampled_from([1, 1, 2]), label="stride")
  if (width - 1) * stride >= n:
    stride = 1
  span = (width - 1) * stride + 1
  lines = [f"start = jnp.clip(s_ref[0], 0, {n - span})",
           f"window = x0_ref[pl.ds(start, {width}, {stride})]",
           f"o_ref[pl.ds({dst}, {width})] = window * 2 if window.dtype != jnp.bool_ else window"]
  body = "\n".join(f"  {line}" for line in lines)
  source = (f"def kernel(x0_ref, s_ref, init_ref, o_ref):\n{body}\n\n"
            f"call = dict(out_shape=jax.ShapeDtypeStruct(({n},), jnp.{dtype}),\n"
            f"            input_output_aliases={{2: 0}})\n")
  inputs = (_input_spec((n,), dtype), InputSpec((1,), "int32", -5, n + 5),
            _input_spec((n,), dtype))
  return Program("kernel", source, inputs, draw(st.integers(0, 2**31 - 1), label="seed"),
                 FLOAT_TOL.get(dtype, 0.0), 8.0, ("data_window", f"stride {stride}"))


def _atomic_kernel(draw) -> Program:
  """Every program adds (max, min, ...) its block into one accumulator with
  atomics; integers, so the order of the programs does not change the sum."""
  block = draw(st.integers(1, 40), label="block")
  blocks = draw(st.integers(1, 6), label="blocks")
  n = max(1, block * blocks - draw(st.integers(0, block - 1), label="overhang"))
  width = draw(st.integers(1, 12), label="accumulator")
  op = draw(st.sampled_from(["add", "max", "min", "or", "xor", "and"]), label="atomic op")
  dtype = draw(st.sampled_from(["int32", "uint32"]) if op != "add" else
               st.sampled_from(["int32", "uint32", "float32"]), label="atomic dtype")
  neutral = {"add": "0", "max": "-2**31" if dtype == "int32" else "0",
             "min": "2**31 - 1" if dtype == "int32" else "2**32 - 1",
             "or": "0", "xor": "0", "and": "-1" if dtype == "int32" else "2**32 - 1"}[op]
  lines = [f"gi = pl.program_id(0) * {block} + lax.broadcasted_iota(jnp.int32, ({block},), 0)",
           f"x = jnp.where(gi < {n}, x0_ref[...], jnp.{dtype}({neutral}))",
           f"slot = lax.broadcasted_iota(jnp.int32, ({width}, {block}), 0)",
           f"hits = jnp.broadcast_to(gi % {width}, ({width}, {block})) == slot",
           f"part = jnp.{_REDUCE_FOR[op]}(jnp.where(hits, x[None, :], jnp.{dtype}({neutral})), axis=1)",
           f"plgpu.atomic_{op}(acc_ref, (pl.ds(0, {width}),), part)"]
  body = "\n".join(f"  {line}" for line in lines)
  source = (f"def kernel(x0_ref, init_ref, acc_ref):\n{body}\n\n"
            f"call = dict(grid=({-(-n // block)},),\n"
            f"            in_specs=[pl.BlockSpec(({block},), lambda i: (i,)),\n"
            f"                      pl.BlockSpec(({width},), lambda i: (0,))],\n"
            f"            out_specs=pl.BlockSpec(({width},), lambda i: (0,)),\n"
            f"            out_shape=jax.ShapeDtypeStruct(({width},), jnp.{dtype}),\n"
            f"            input_output_aliases={{1: 0}})\n\n"
            f"# the reference (JAX's interpreter has no atomic and/or/xor): numpy\n"
            f"def expected(x0, init):\n"
            f"  slots = np.arange({n}) % {width}\n"
            f"  out = np.array(init)\n"
            f"  for k in range({width}):\n"
            f"    out[k] = np.{_NUMPY_FOR[op]}.reduce(np.concatenate([out[k:k + 1], x0[slots == k]]))\n"
            f"  return [out]\n")
  inputs = (_input_spec((n,), dtype), _input_spec((width,), dtype))
  return Program("kernel", source, inputs, draw(st.integers(0, 2**31 - 1), label="seed"),
                 FLOAT_TOL["float32"] if dtype == "float32" else 0.0, 4.0 * n,
                 ("atomic", f"atomic_{op}", dtype))


_NUMPY_FOR = {"add": "add", "max": "maximum", "min": "minimum", "or": "bitwise_or",
              "xor": "bitwise_xor", "and": "bitwise_and"}
_REDUCE_FOR = {"add": "sum", "max": "max", "min": "min", "or": "bitwise_or.reduce",
               "xor": "bitwise_xor.reduce", "and": "bitwise_and.reduce"}


def programs():
  """Both kinds, values three times as often (they cover more rules per run)."""
  return st.one_of(value_programs(), value_programs(), value_programs(), kernel_programs())
