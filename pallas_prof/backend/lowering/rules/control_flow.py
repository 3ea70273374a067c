"""Control flow: fori_loop/scan and while_loop as Triton loops, cond/switch as
if/elif/else, and calls (jit, closed_call, custom_jvp/vjp, remat) inlined.

Loop-carried values live in named variables assigned before the loop and
re-assigned (all at once, as a tuple) at the end of each iteration, so their
Triton types never change. A fori_loop (also one written with dynamic
bounds, which JAX turns into a while_loop) becomes `for i in range(lo, hi)`,
which Triton's software pipeliner understands.

A loop with a static trip count of at most MAX_UNROLL_TRIPS whose body is
small (at most MAX_UNROLL_EQNS equations, nested ones included) and has no
dot (those are left to Triton's software pipeliner) is emitted
as straight-line code instead: the body once per iteration, the index bound
to each value and the carries threaded through. Nothing is reassigned, so
what an iteration computes or loads stays usable in the next ones and after
the loop (e.g. the later column loops of a layer norm reuse the first one's
loads of x).
"""
from __future__ import annotations

import numpy as np
from jax import lax

from ... import compat
from .. import emit
from ..codegen import Value, is_low_float, literal, padded_shape, tl_dtype
from ...errors import Unsupported
from ..access.refs import RefValue
from .table import register
from ..scan_arrays import lower_scan_over_arrays
from .. import triton_names as tl


def _materialize(ctx, v, hint: str) -> str:
  """A fresh variable holding `v` with its exact Triton type (for carries/outs)."""
  name = ctx.b.fresh(hint)
  ctx.b.emit(f"{name} = {_typed_expr(v)}")
  return name


def _typed_expr(v: Value) -> str:
  if v.const is not None:
    shape = "()" if not v.shape else emit.shape_expr(padded_shape(v.shape))
    if is_low_float(v.dtype):
      return f"{tl.full}({shape}, {_raw(v)}, {tl.float32}).to({tl_dtype(v.dtype)})"
    return f"{tl.full}({shape}, {_raw(v)}, {tl_dtype(v.dtype)})"
  return str(v)


def _raw(v: Value) -> str:
  c = v.const
  if isinstance(c, bool):
    return "True" if c else "False"
  if isinstance(c, float):
    if c != c:
      return 'float("nan")'
    if c in (float("inf"), float("-inf")):
      return 'float("inf")' if c > 0 else 'float("-inf")'
    return repr(c)
  return str(int(c))


def _bound(v: Value) -> str:
  """A loop bound; int32 constants stay plain so Triton sees a static range."""
  if v.const is not None and np.dtype(v.dtype) == np.int32:
    return str(int(v.const))
  return _typed_expr(v)


def _assign_all(ctx, names: list[str], values: list) -> None:
  """names = values, simultaneously (a carry may feed another)."""
  pairs = [(n, _typed_expr(v)) for n, v in zip(names, values, strict=True) if n != str(v)]
  if not pairs:
    return
  if len(pairs) == 1:
    ctx.b.emit(f"{pairs[0][0]} = {pairs[0][1]}")
  else:
    ctx.b.emit(f"{', '.join(n for n, _ in pairs)} = {', '.join(e for _, e in pairs)}")


def _check_carry(v, what: str):
  if isinstance(v, RefValue):
    raise Unsupported(f"a ref as a loop {what}", "pass refs to the loop body by closure")
  return v


def _as_values(names, templates, loops=None) -> list[Value]:
  """The variables `names` as Values typed as `templates`. `loops`: the loops they
  vary with (inside a loop, its carries: the loop and those around it); None: the
  templates', whose values they hold (before their loop)."""
  return [Value(n, t.dtype, t.shape, loops=t.loops if loops is None else loops)
          for n, t in zip(names, templates, strict=True)]


def _loop_index(ctx, raw: str, dtype, loops: frozenset[int]) -> Value:
  """The induction variable as a tensor of exactly the counter's dtype: Triton
  types it from the bounds, and its interpreter hands out Python ints. `loops`:
  those the counter `raw` varies with (its loop and those around it)."""
  counter = Value(raw, np.dtype(dtype), (), loops=loops)
  return ctx.value("i", f"{tl.cast}({raw}, {tl_dtype(dtype)})", dtype, (), of=(counter,))


# Loops of up to this many iterations (static) are emitted straight-line...
MAX_UNROLL_TRIPS = 4
# ...when their body has at most this many equations (nested jaxprs' included):
# enough for a row-reduction loop with its loads, masks and stores, small
# enough that 4 copies keep the source readable and compile time flat.
MAX_UNROLL_EQNS = 64


def _num_eqns(jaxpr) -> int:
  n = 0
  for eqn in jaxpr.eqns:
    n += 1
    for sub in _sub_jaxprs(eqn.params):
      n += _num_eqns(sub)
  return n


def _sub_jaxprs(params):
  for param in params.values():
    for sub in param if isinstance(param, (tuple, list)) else (param,):
      if isinstance(sub, compat.JAXPR_TYPES):
        yield compat.open_jaxpr(sub)[0]


def _has_dot(jaxpr) -> bool:
  return any(eqn.primitive is lax.dot_general_p or any(_has_dot(sub) for sub in
                                                       _sub_jaxprs(eqn.params))
             for eqn in jaxpr.eqns)


def _straight_line(trips: int, body) -> bool:
  """Whether a loop of `trips` (static) iterations is emitted straight-line.
  A body with a dot stays a loop (of 2+ iterations): Triton's software
  pipeliner overlaps its loads with the previous iteration's dot."""
  return trips == 1 or (2 <= trips <= MAX_UNROLL_TRIPS and _num_eqns(body) <= MAX_UNROLL_EQNS
                        and not _has_dot(body))


def _run_straight(ctx, body, consts: list, lo: Value | None, carry: list, closed_consts,
                  trips: int) -> list:
  """A loop of `trips` iterations as straight-line code: the body once per
  iteration, with the index (when `lo` is given) bound to lo, lo + 1, ...
  and the carries to the previous iteration's outputs (first: their initial
  values); the last iteration's outputs are the loop's. No variable is
  reassigned, so what the body computes (and loads) stays usable later."""
  for k in range(trips):
    index = []
    binding = ""
    if lo is not None:
      if lo.const is not None:
        i = emit.const(lo.const + k, lo.dtype)
        binding = f"i = {i.const}"
      else:
        i = lo if k == 0 else ctx.value("i", f"{lo} + {literal(k, lo.dtype)}", lo.dtype,
                                        of=(lo,))
        binding = f"i = {lo}" + (f" + {k}" if k else "")
      index = [i]
    what = "one iteration" if trips == 1 else f"iteration {k + 1} of {trips}"
    ctx.b.emit(f"# {what}{' (' + binding + ')' if binding else ''}: the loop body inline")
    carry = ctx.lower_jaxpr(body, consts + index + list(carry), "body", consts=closed_consts,
                            straight_line=True)
  return list(carry)


def _touches_ref(eqn) -> bool:
  return any(_is_ref(v) for v in eqn.invars)


def mark_invariant(ctx, body, fixed: int, args=()) -> None:
  """Marks the loop body's equations that compute the same value every iteration
  (EquationRecord.invariant, which the advice reads): those whose operands are
  literals, the body's constants, its first `fixed` inputs (the loop's constants)
  or results of such equations, and the reads (`get`) of a ref nothing in the body
  writes (nor a ref that may share its memory); never an equation that holds a jaxpr.
  `args`: what the body's first inputs are bound to (the refs' RefValues among them): a
  fori_loop gives its constants only, hence strict=False."""
  # strict=False: `args` binds the body's first inputs only (a fori_loop's constants)
  names = {v: a.name for v, a in zip(body.invars, args, strict=False) if isinstance(a, RefValue)}
  written: set | None = set()
  for e in body.eqns:
    if any(_holds_jaxpr(p) for p in e.params.values()):
      written = None                  # a nested jaxpr may write anything
    elif _touches_ref(e) and e.primitive.name != "get" and written is not None:
      refs = [v for v in e.invars if _is_ref(v)]
      written = None if any(v not in names for v in refs) else written | {names[v] for v in refs}
  stable = set(body.constvars) | set(body.invars[:fixed])
  positions = set()
  for j, eqn in enumerate(body.eqns):
    if any(_holds_jaxpr(p) for p in eqn.params.values()):
      continue
    if _touches_ref(eqn):
      ref = eqn.invars[0]
      may = ctx.kernel.aliases_of({names[ref]}) if eqn.primitive.name == "get" and \
          ref in names and written is not None else None
      if may is None or may & written:
        continue
    if all(isinstance(v, compat.Literal) or v in stable or _is_ref(v) for v in eqn.invars):
      stable.update(eqn.outvars)
      positions.add(j)
  prefix = f"{ctx.info.path}.body."
  for info in ctx.b.eqns:
    tail = info.path[len(prefix):] if info.path.startswith(prefix) else ""
    if info.parent == ctx.info.index and tail.isdigit() and int(tail) in positions:
      info.facts["invariant"] = True


def _is_ref(v) -> bool:
  return not isinstance(v, compat.Literal) and isinstance(v.aval, compat.AbstractRef)


def _holds_jaxpr(param) -> bool:
  return hasattr(param, "eqns") or hasattr(param, "jaxpr") or (
      isinstance(param, (tuple, list)) and any(_holds_jaxpr(p) for p in param))


# --- scan / fori_loop -----------------------------------------------------------------

@register(lax.scan_p, limits=(
    "no refs as carries; xs/ys: rewritten into a fori_loop over their rows; up to "
    f"{MAX_UNROLL_TRIPS} iterations of a small body without a dot emitted straight-line"))
def _scan(ctx, *args, jaxpr, length, reverse, unroll=1, **params):
  num_consts, num_carry = compat.scan_layout(params)
  jaxpr, consts_closed = compat.open_jaxpr(jaxpr)
  n_xs = len(args) - num_consts - num_carry
  n_ys = len(jaxpr.outvars) - num_carry
  if n_xs or n_ys:
    return lower_scan_over_arrays(ctx, args, jaxpr, consts_closed, length=length,
                                  reverse=reverse, num_consts=num_consts, num_carry=num_carry)
  body, has_index = compat.pattern_match_scan_to_fori_loop(jaxpr, num_consts, num_carry)
  consts, carry = list(args[:num_consts]), list(args[num_consts:])
  for c in carry:
    _check_carry(c, "carry")
  if has_index:
    lower, carry = carry[0], carry[1:]
    lo = emit.cast(ctx.b, lower, lower.dtype)
    upper = (emit.const(lo.const + length, lo.dtype) if lo.const is not None
             else ctx.value("loop_end", f"{lo} + {literal(length, lo.dtype)}", lo.dtype,
                            of=(lo,)))
  straight = _straight_line(length, body)
  ctx.record(trips=length, unrolled=straight)
  if straight:
    outs = _run_straight(ctx, body, consts, lo if has_index else None, carry, consts_closed,
                         length)
    return ([upper] if has_index else []) + outs
  names = [_materialize(ctx, c, "carry") for c in carry]
  if has_index:
    i = ctx.b.fresh("i_raw")
    header = _for(ctx, i, _bound(lo), _bound(upper), body)
  else:
    i = ctx.b.fresh("_iter")
    header = _for(ctx, i, "0", str(length), body)
  with ctx.b.loop(header) as varying:
    carried = _as_values(names, carry, varying)
    index = [_loop_index(ctx, i, lo.dtype, varying)] if has_index else []
    body_args = consts + index + carried
    outs = ctx.lower_jaxpr(body, body_args, "body", consts=consts_closed, loop=True)
    _assign_all(ctx, names, outs)
  mark_invariant(ctx, body, len(consts), body_args)
  if has_index:
    return [upper] + carried
  return carried


# Reads of a ref's memory a loop's pipelining can issue ahead; loops and dots inside keep a
# loop as written (Triton pipelines innermost loops, and a dot's loads by num_stages), and so
# do writes: Triton's pipeliner issues a later iteration's loads before this iteration's
# stores without asking whether they meet (triton-lang/triton#8259: a load after a store
# to the same address read the old value), and two refs may be one buffer
# (input_output_aliases)
_LOADS = frozenset({"get", "masked_load"})
_NOT_STAGED = frozenset({"while", "scan", "dot_general", "cond", "swap", "masked_swap",
                         "addupdate", "atomic_rmw", "atomic_cas"})


def _for(ctx, i: str, lo: str, hi: str, body) -> str:
  """A counted loop's header: `for i in range(lo, hi):`, or with options.loop_stages, for
  an innermost loop that loads and has no dot and writes no memory, `for i in tl.range(lo,
  hi, num_stages=...)`, whose loads Triton then pipelines."""
  stages = ctx.kernel.options.loop_stages
  stageable = _stageable(body)
  ctx.record(stageable=stageable)   # advice reads it: loop_stages is offered where it applies
  if stages and stageable:
    ctx.kernel.staged_loops += 1
    return f"for {i} in {tl.pipelined_range}({lo}, {hi}, num_stages={stages}):"
  return f"for {i} in range({lo}, {hi}):"


def _stageable(jaxpr) -> bool:
  """Whether a loop's body loads and holds nothing of _NOT_STAGED, at any depth of the
  calls in it (a store inside a pjit inside the body counts as the body's)."""
  names = set(_primitives(jaxpr))
  return not names & _NOT_STAGED and bool(names & _LOADS)


def _primitives(jaxpr):
  for e in jaxpr.eqns:
    yield e.primitive.name
    for sub in compat.sub_jaxprs(e):
      yield from _primitives(sub)


# --- while_loop -------------------------------------------------------------------------

def _fori_pattern(cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  """The body jaxpr without its `i + 1`, if this while_loop is a fori_loop."""
  if cond_nconsts:
    return None
  cj = cond_jaxpr.jaxpr
  invars = cj.invars
  if len(invars) < 2 or len(cj.eqns) != 1:
    return None
  a1, a2 = invars[0].aval, invars[1].aval
  if a1.shape or a2.shape or np.dtype(a1.dtype) not in (np.int32, np.int64) or a1.dtype != a2.dtype:
    return None
  eqn = cj.eqns[0]
  if eqn.primitive is not lax.lt_p or list(eqn.invars) != [invars[0], invars[1]] \
      or eqn.outvars[0] is not cj.outvars[0]:
    return None
  bj = body_jaxpr.jaxpr
  binv = bj.invars[body_nconsts:]
  if bj.outvars[1] is not binv[1]:
    return None
  for k, e in enumerate(bj.eqns):
    if (e.primitive is lax.add_p and e.invars[0] is binv[0]
        and isinstance(e.invars[1], compat.Literal) and e.invars[1].val == 1
        and e.outvars[0] is bj.outvars[0]):
      new_invars = [*bj.invars[:body_nconsts], binv[0], *binv[2:]]
      return bj.replace(eqns=bj.eqns[:k] + bj.eqns[k + 1:], invars=new_invars,
                        outvars=list(bj.outvars[2:]))
  return None


@register(lax.while_p, limits=(
    "no refs as carries; a fori_loop becomes `for i in range(lo, hi)`, any other loop a "
    "`while` that re-reads memory each iteration"))
def _while(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  cond_consts = list(args[:cond_nconsts])
  body_consts = list(args[cond_nconsts:cond_nconsts + body_nconsts])
  carry = list(args[cond_nconsts + body_nconsts:])
  for c in carry:
    _check_carry(c, "carry")
  fori_body = _fori_pattern(cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts)
  if fori_body is not None:
    lo, hi, rest = carry[0], carry[1], carry[2:]
    static = lo.const is not None and hi.const is not None
    straight = static and _straight_line(int(hi.const) - int(lo.const), fori_body)
    ctx.record(trips=max(0, int(hi.const) - int(lo.const)) if static else "dynamic",
               unrolled=straight)
    if straight:
      outs = _run_straight(ctx, fori_body, body_consts, lo, rest, body_jaxpr.consts,
                           int(hi.const) - int(lo.const))
      return [hi, hi] + outs
    names = [_materialize(ctx, c, "carry") for c in rest]
    i = ctx.b.fresh("i_raw")
    with ctx.b.loop(_for(ctx, i, _bound(lo), _bound(hi), fori_body)) as varying:
      carried = _as_values(names, rest, varying)
      index = _loop_index(ctx, i, lo.dtype, varying)
      outs = ctx.lower_jaxpr(fori_body, body_consts + [index] + carried,
                             "body", consts=body_jaxpr.consts, loop=True)
      _assign_all(ctx, names, outs)
    mark_invariant(ctx, fori_body, len(body_consts), body_consts)
    # the counter ends at max(lo, hi): the loop may not run at all
    final = (emit.const(max(lo.const, hi.const), lo.dtype)
             if lo.const is not None and hi.const is not None
             else ctx.value("loop_end", f"{tl.maximum}({_typed_expr(lo)}, {_typed_expr(hi)})",
                            lo.dtype, of=(lo, hi)))
    return [final, hi] + carried
  # a general while loop may spin on memory another program writes: none of
  # it reuses a load from before the loop
  ctx.record(trips="dynamic")
  ctx.forget_loads()
  names = [_materialize(ctx, c, "carry") for c in carry]
  first_cond_eqn = ctx.kernel.peek_eqn_index()
  (cond,) = ctx.lower_jaxpr(cond_jaxpr.jaxpr, cond_consts + _as_values(names, carry), "cond",
                            consts=cond_jaxpr.consts)
  go = _materialize(ctx, cond, "keep_going")
  with ctx.b.loop(f"while {go}:") as varying:
    carried = _as_values(names, carry, varying)
    outs = ctx.lower_jaxpr(body_jaxpr.jaxpr, body_consts + carried, "body",
                           consts=body_jaxpr.consts, loop=True)
    _assign_all(ctx, names, outs)
    # the condition again, for the next iteration (same equations: no new spans)
    (cond,) = ctx.reemit_jaxpr(cond_jaxpr.jaxpr, cond_consts + carried, "cond",
                               first_cond_eqn, consts=cond_jaxpr.consts, loop=True)
    ctx.b.emit(f"{go} = {_typed_expr(cond)}")
  return carried


# --- cond / switch ------------------------------------------------------------------------

@register(lax.cond_p)
def _cond(ctx, index, *args, branches, **params):
  outs_avals = ctx.avals_out
  if not outs_avals and len(branches) == 1:
    ctx.lower_jaxpr(branches[0].jaxpr, args, "branch 0", consts=branches[0].consts)
    return []
  names = [ctx.b.fresh("cond_out") for _ in outs_avals]
  if index.const is not None:
    k = min(max(int(index.const), 0), len(branches) - 1)
    outs = ctx.lower_jaxpr(branches[k].jaxpr, args, f"branch {k}", consts=branches[k].consts,
                           straight_line=True)
    return outs
  sel = index if not np.dtype(index.dtype) == np.bool_ else emit.cast(ctx.b, index, np.int32)
  loops = sel.loops        # the outputs vary with the branch taken, and with what it computes
  for k, branch in enumerate(branches):
    if k == 0:
      header = f"if {sel} == {literal(0, sel.dtype)}:"
    elif k < len(branches) - 1:
      header = f"elif {sel} == {literal(k, sel.dtype)}:"
    else:
      header = "else:"
    with ctx.b.block(header):
      outs = ctx.lower_jaxpr(branch.jaxpr, args, f"branch {k}", consts=branch.consts)
      for name, value in zip(names, outs, strict=True):
        ctx.b.emit(f"{name} = {_typed_expr(value)}")
      loops = loops.union(*(v.loops for v in outs))
  return [Value(n, np.dtype(a.dtype), tuple(a.shape), loops=loops)
          for n, a in zip(names, outs_avals, strict=True)]


# --- calls ------------------------------------------------------------------------------------

def _inline(param: str, region: str):
  def rule(ctx, *args, **params):
    jaxpr, consts = compat.open_jaxpr(params[param])
    return ctx.lower_jaxpr(jaxpr, args, region, consts=consts, straight_line=True)
  return rule


register(compat.jit_p)(_inline("jaxpr", "call"))
register(*compat.closed_call_primitives)(_inline("call_jaxpr", "call"))
register(compat.custom_jvp_call_p)(_inline("call_jaxpr", "custom_jvp"))
register(compat.custom_vjp_call_p)(_inline("call_jaxpr", "custom_vjp"))
register(compat.custom_vjp_call_jaxpr_p)(_inline("fun_jaxpr", "custom_vjp"))
register(compat.remat_p)(_inline("jaxpr", "remat"))
register(compat.reshard_p)(lambda ctx, x, **p: x)
