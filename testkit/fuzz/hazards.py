"""Programs grown toward the GPU fuzzer's first miss (issue 32, seed 18680).

That program was float16 of odd length (19, padded to 32 in the kernel), a
dynamic_update_slice whose start from the data went past its clamp, and the
updated value's original still live (multiplied again after the update). ptxas
fused the update's select into an in-place predicated select and read the
overwritten register from a packed 16-bit multiply (testkit/fuzz/sass_hazards.py).
These generators make more of that shape, as user code can reach it:

- clamped dynamic indices: dynamic_update_slice / dynamic_slice with starts past
  the clamp (and below 0), of one or two axes, the original used after the update;
- selects on compound (and/or) masks, of iota windows with starts from the data
  or of comparisons of the values, whose else-value stays live;
- lax.pad with interior and negative padding, of 16-bit floats too;
- grid kernels whose masked loads take `other=` a live value;
- odd lengths (19, 7, 33, ...), float16 and bfloat16 most of the time.

Every program is valid JAX with defined results, as in testkit/fuzz/programs.py.
"""
from __future__ import annotations

from hypothesis import strategies as st

from testkit.fuzz.programs import (FLOAT_TOL, INTS, Builder, Program, Var, _binary, _fit_float,
                                 _input_spec, _int_bound, _select, _statement, _unary,
                                 values_program)

ODD_LENGTHS = (19, 7, 33, 1, 3, 5, 9, 17, 21, 13, 31, 10, 40, 2)
HAZARD_DTYPES = ("float16", "bfloat16", "float16", "bfloat16", "float32", "int32", "int16")


def _numeric(v: Var) -> bool:
  return v.is_float or v.is_int


def _start(b: Builder, n: int, label: str) -> str:
  """A start from the data that often lands past the clamp (or below 0): XLA and
  pallas-prof clamp it into range."""
  src = b.pick(lambda v: _numeric(v) and not v.constant, label) or b.vars[0]
  reduce = b.draw(st.sampled_from(["jnp.min", "jnp.max"]), label="start from")
  scale = b.draw(st.sampled_from([1, 5, 8]), label="start scale") if src.is_float else 1
  modulus = b.draw(st.sampled_from([n + 2, 2 * n + 3, n + 7]), label="start modulus")
  shift = b.draw(st.sampled_from([0, 0, n // 2 + 1]), label="start shift")
  scaled = f"({reduce}({src.name}) * {scale})" if scale != 1 else f"{reduce}({src.name})"
  text = f"{scaled}.astype(jnp.int32) % {modulus}"
  return f"({text} - {shift})" if shift else text


def _live_use(b: Builder, a: Var) -> None:
  """The original value read again after it was updated or selected over (in
  16-bit floats: packed HMUL2/HFMA2 candidates), as seed 18680's v4 = v3 * v3 and
  v5 = v3 * v4 were."""
  use = b.draw(st.sampled_from(["none", "square", "cube", "partner"]), label="live use")
  if use == "none" or not _numeric(a):
    return
  other = b.pick(lambda v: v.dtype == a.dtype and v.shape == a.shape, "live partner") or a
  bound = _int_bound(a.dtype) if a.is_int else None
  if use == "partner":
    var = b.add(f"{a.name} * {other.name}", bound or a.bound * other.bound, "live use")
  else:
    var = b.add(f"{a.name} * {a.name}", bound or a.bound * a.bound, "live use")
    if use == "cube":
      var = b.add(f"{a.name} * {var.name}", bound or a.bound * var.bound, "live use")
  if var.is_float:
    _fit_float(b, var)


def _clamped_update(b: Builder):
  a = b.pick(lambda v: v.shape and _numeric(v))
  if a is None:
    return
  rank = len(a.shape)
  two_axes = rank == 2 and b.draw(st.booleans(), label="two-axis update")
  widths = [b.draw(st.integers(1, n), label="update width") for n in a.shape]
  if not two_axes:
    axis = b.draw(st.integers(0, rank - 1), label="axis")
    widths = [w if i == axis else n for i, (w, n) in enumerate(zip(widths, a.shape))]
  window = ", ".join(f"0:{w}" for w in widths)
  source = b.draw(st.sampled_from(["slice", "other", "constant"]), label="update from")
  other = b.pick(lambda v: v.dtype == a.dtype and v.shape == a.shape and v is not a, "other")
  if source == "other" and other is not None:
    update, bound = f"{other.name}[{window}]", other.bound
  elif source == "constant":
    update, bound = f"jnp.full({tuple(widths)}, 3, jnp.{a.dtype})", 3.0
  else:
    update, bound = f"{a.name}[{window}] * 2", 2 * a.bound
  bound = max(bound, a.bound) if a.is_float else _int_bound(a.dtype)
  if two_axes:
    starts = ", ".join(_start(b, n, "start source") for n in a.shape)
    var = b.add(f"lax.dynamic_update_slice({a.name}, {update}, ({starts}))", bound,
                "dynamic_update_slice")
  else:
    var = b.add(f"lax.dynamic_update_slice_in_dim({a.name}, {update}, "
                f"{_start(b, a.shape[axis], 'start source')}, axis={axis})", bound,
                "dynamic_update_slice")
  if var.is_float:
    _fit_float(b, var)
  _live_use(b, a)


def _clamped_slice(b: Builder):
  a = b.pick(lambda v: v.shape and _numeric(v))
  if a is None:
    return
  axis = b.draw(st.integers(0, len(a.shape) - 1), label="axis")
  n = a.shape[axis]
  width = b.draw(st.integers(1, n), label="slice width")
  b.add(f"lax.dynamic_slice_in_dim({a.name}, {_start(b, n, 'start source')}, {width}, "
        f"axis={axis})", a.bound, "dynamic_slice")
  _live_use(b, a)


_COMPARE = ("<", "<=", ">", ">=")


def _mask(b: Builder, a: Var, iota_ok: bool) -> str:
  """A compound mask over a's shape: a window of lanes [s, s + m) (or outside it),
  or two comparisons of values joined by & or |, sometimes negated."""
  form = b.draw(st.sampled_from(["window", "outside", "values"] if iota_ok else ["values"]),
                label="mask form")
  if form in ("window", "outside"):
    axis = b.draw(st.integers(0, len(a.shape) - 1), label="mask axis")
    n = a.shape[axis]
    lanes = f"lax.broadcasted_iota(jnp.int32, {a.shape}, {axis})"
    start = _start(b, n, "mask start")
    m = b.draw(st.integers(1, max(1, n)), label="window width")
    if form == "window":
      return f"(({lanes} >= {start}) & ({lanes} < {start} + {m}))"
    return f"(({lanes} < {start}) | ({lanes} >= {start} + {m}))"
  p = b.pick(lambda v: _numeric(v) and v.shape == a.shape, "mask operand") or a
  q = b.pick(lambda v: _numeric(v) and v.shape == a.shape, "mask operand") or a
  op1, op2 = (b.draw(st.sampled_from(_COMPARE), label="compare") for _ in range(2))
  join = b.draw(st.sampled_from(["&", "|"]), label="join")
  lo, hi = (b.draw(st.sampled_from([-2, -1, 0, 1, 2]), label="literal") for _ in range(2))
  mask = f"(({p.name} {op1} {lo}) {join} ({q.name} {op2} {hi}))"
  if b.draw(st.integers(0, 3), label="negate") == 0:
    mask = f"(~{mask})"
  return mask


def _compound_select(b: Builder, iota_ok: bool = True):
  """jnp.where on a compound mask whose else-value (or then-value) stays live."""
  a = b.pick(lambda v: v.shape and _numeric(v))
  if a is None:
    return
  mask = _mask(b, a, iota_ok)
  other = b.pick(lambda v: v.dtype == a.dtype and v.shape == a.shape and v is not a, "other")
  choice = b.draw(st.sampled_from(["double", "other", "scalar"]), label="then value")
  if choice == "other" and other is not None:
    then, bound = other.name, max(a.bound, other.bound)
  elif choice == "scalar":
    then, bound = "3", max(a.bound, 3.0)
  else:
    then, bound = f"{a.name} * 2", 2 * a.bound
  if a.is_int:
    bound = _int_bound(a.dtype)
  if b.draw(st.booleans(), label="else is the live value"):
    expr = f"jnp.where({mask}, {then}, {a.name})"
  else:
    expr = f"jnp.where({mask}, {a.name}, {then})"
  var = b.add(expr, bound, "compound select")
  if var.is_float:
    _fit_float(b, var)
  _live_use(b, a)


def _kernel_select(b: Builder):
  _compound_select(b, iota_ok=False)


def _interior_pad(b: Builder):
  a = b.pick(lambda v: v.shape and _numeric(v))
  if a is None:
    return
  axis = b.draw(st.integers(0, len(a.shape) - 1), label="axis")
  n = a.shape[axis]
  lo = b.draw(st.integers(-min(2, n - 1), 3), label="pad lo")
  hi = b.draw(st.integers(-min(2, n - 1), 3), label="pad hi")
  interior = b.draw(st.sampled_from([0, 0, 1, 2]), label="interior")
  if n + (n - 1) * interior + lo + hi < 1:
    lo = hi = 0
  config = ", ".join("(0, 0, 0)" if i != axis else f"({lo}, {hi}, {interior})"
                     for i in range(len(a.shape)))
  fill = b.draw(st.sampled_from(["0", "1", "-2"]), label="pad value")
  b.add(f"lax.pad({a.name}, jnp.{a.dtype}({fill}), [{config}])", max(a.bound, 2.0)
        if a.is_float else _int_bound(a.dtype), "pad")
  _live_use(b, a)


def _reduce_prefix(b: Builder):
  """As seed 18680 began: a reduction over axis 0, a shorter value than the block."""
  a = b.vars[0]
  if len(a.shape) < 2 or not _numeric(a):
    return
  op = b.draw(st.sampled_from(["jnp.min", "jnp.max"]), label="prefix reduction")
  b.add(f"{op}({a.name}, axis=0)", a.bound, "reduce")


def _packed_math(b: Builder):
  """Multiplies and fused multiply-adds of 16-bit values: what ptxas packs."""
  a = b.pick(lambda v: v.is_float)
  if a is None:
    return _binary(b)
  c = b.pick(lambda v: v.dtype == a.dtype and v.shape == a.shape, "factor") or a
  if b.draw(st.booleans(), label="fma"):
    _fit_float(b, b.add(f"{a.name} * {c.name} + {a.name}", a.bound * c.bound + a.bound, "fma"))
  else:
    _fit_float(b, b.add(f"{a.name} * {c.name}", a.bound * c.bound, "binary"))


_HAZARD_STATEMENTS = [_clamped_update, _clamped_update, _compound_select, _compound_select,
                      _compound_select, _clamped_slice, _interior_pad, _packed_math,
                      _packed_math, _unary, _select]


@st.composite
def hazard_value_programs(draw) -> Program:
  dtype = draw(st.sampled_from(HAZARD_DTYPES), label="main dtype")
  rank = draw(st.sampled_from([1, 2, 2]), label="rank")
  shape = tuple(draw(st.sampled_from(ODD_LENGTHS), label=f"dim{i}") for i in range(rank))
  inputs, params = [], []
  for i in range(draw(st.integers(1, 3), label="inputs")):
    spec = _input_spec(shape, dtype if i == 0 or draw(st.integers(0, 3), label="same dtype")
                       else "int32")
    inputs.append(spec)
    params.append(Var(f"x{i}", shape, spec.dtype, 4.0 if spec.dtype not in INTS
                      else _int_bound(spec.dtype)))
  b = Builder(draw, params)
  if draw(st.booleans(), label="reduce first"):
    _reduce_prefix(b)
  for _ in range(draw(st.integers(1, 5), label="statements")):
    _statement(b, _HAZARD_STATEMENTS)
  return values_program(draw, b, params, inputs)


@st.composite
def masked_other_kernels(draw) -> Program:
  """A grid kernel (last block overhanging) whose masked load takes `other=` a
  value still live afterwards, under a compound mask; two outputs, one of them
  the live value's own."""
  dtype = draw(st.sampled_from(["float16", "bfloat16", "float16", "float32", "int32"]),
               label="dtype")
  block = draw(st.sampled_from(ODD_LENGTHS[:-1]), label="block")
  blocks = draw(st.integers(1, 4), label="blocks")
  n = max(1, block * blocks - draw(st.integers(0, block - 1), label="overhang"))
  grid = -(-n // block)
  bound = 4.0 if dtype != "int32" else _int_bound(dtype)
  params = [Var("x1", (block,), dtype, bound), Var("gi", (block,), "int32", n)]
  b = Builder(draw, params)
  live = b.add("x1 * x1 + 1" if dtype != "int32" else "x1 * 3 + 1",
               bound * bound + 1 if dtype != "int32" else bound, "live")
  s = draw(st.integers(0, n), label="mask start")
  m = draw(st.integers(1, n + 1), label="mask width")
  mask = draw(st.sampled_from([f"(gi >= {s}) & (gi < {s + m})", f"(gi < {s}) | (gi >= {s + m})",
                               f"((gi % 3) != 1) & (gi < {s + m})"]), label="load mask")
  _load_over_live(b, live, bound)
  for _ in range(draw(st.integers(1, 4), label="statements")):
    _statement(b, [_packed_math, _kernel_select, _unary, _select])
  out = b.vars[-1]
  if out.shape != (block,):
    out = b.add(f"jnp.broadcast_to({out.name}, ({block},))", out.bound, "broadcast")
  lines = [f"gi = pl.program_id(0) * {block} + lax.broadcasted_iota(jnp.int32, ({block},), 0)",
           "x1 = x1_ref[...]", b.lines[0],
           f"x0 = plgpu.load(x0_ref, mask={mask}, other={live.name})"] + b.lines[1:]
  lines += [f"o_ref[...] = {out.name}", f"live_ref[...] = {live.name} * x1"]
  body = "\n".join(f"  {line}" for line in lines)
  spec = f"pl.BlockSpec(({block},), lambda i: (i,))"
  source = (f"def kernel(x0_ref, x1_ref, o_ref, live_ref):\n{body}\n\n"
            f"call = dict(grid=({grid},), in_specs=[{spec}, {spec}],\n"
            f"            out_specs=[{spec}, {spec}],\n"
            f"            out_shape=[jax.ShapeDtypeStruct(({n},), jnp.{out.dtype}),\n"
            f"                       jax.ShapeDtypeStruct(({n},), jnp.{dtype})])\n")
  tol = max([FLOAT_TOL[v.dtype] for v in b.vars if v.is_float] + [0.0])
  scale = max([min(v.bound, 1e6) for v in b.vars if v.is_float] + [1.0])
  features = b.features | {"masked_load other=live", f"grid overhang {grid * block - n}"}
  return Program("kernel", source, (_input_spec((n,), dtype), _input_spec((n,), dtype)),
                 draw(st.integers(0, 2**31 - 1), label="seed"), tol, scale,
                 tuple(sorted(features)), b.fragile)


def _load_over_live(b: Builder, live: Var, bound: float) -> Var:
  """x0, loaded with other=live, and its product with live. Masked-off lanes hold
  the live value: x0 takes its bound and its rounding."""
  x0 = Var("x0", live.shape, live.dtype, max(bound, live.bound), live.inexact)
  b.vars.append(x0)
  product = b.add(f"x0 * {live.name}", _int_bound(live.dtype) if live.dtype == "int32"
                  else x0.bound * live.bound, "live use")
  return _fit_float(b, product) if product.is_float else product


def hazard_programs():
  """Both kinds, values twice as often."""
  return st.one_of(hazard_value_programs(), hazard_value_programs(), masked_other_kernels())
