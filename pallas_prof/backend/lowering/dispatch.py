"""The jaxpr walker and the single rule dispatcher.

`lower_jaxpr` walks a jaxpr (the kernel's, a loop body, a branch, an index
map) and `_lower_equation` is the one dispatcher every equation goes
through: it records the equation for the line map, opens the observer's span,
folds constants, gives a pure equation seen before in scope its earlier
outputs, looks up the rule of its primitive, and turns anything a rule raises
into a LoweringError that names the equation and the user's line. Rules get
a RuleContext. Everything else that happens around an equation (barriers,
forgetting loads after writes, work facts, TMA, probes) is a listener of the
kernel's (feature_hooks.py), told before and after.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ... import events as keys
from .. import compat, hooks
from . import emit
from .codegen import COMPLEX_HINT, EqnInfo, UnsupportedDtype, Value
from .context import KernelContext, Scope
from .describe import describe, ref_names
from ..errors import LoweringError, Unsupported
from .folding import FOLDABLE, try_fold
from .feature_hooks import EquationEvent
from .access.refs import RefValue
from .rules import ALIASES, all_rules, rule_for


class RuleContext:
  """What a rule gets besides its operands: the builder, avals and helpers."""

  def __init__(self, kernel: KernelContext, eqn, info: EqnInfo, live: set | None = None):
    self.kernel = kernel
    self._live = live
    self.b = kernel.builder
    self.eqn = eqn
    self.info = info
    self.avals_in = [v.aval for v in eqn.invars]
    self.avals_out = [v.aval for v in eqn.outvars]

  # helpers that need the equation being lowered; the typed building blocks that need
  # only the builder (casts, broadcasts, masks) are emit.py's, called as emit.cast(ctx.b, ...)
  def value(self, hint: str, expr: str, dtype, shape=(), *, of=None,
            opaque: bool = False) -> Value:
    """`hint = expr` as a Value; `of`, `opaque`: KernelBuilder.loops_of (by default
    the value varies with the loops the equation's operands vary with)."""
    return self.b.value(hint, expr, dtype, shape, of=of, opaque=opaque)

  def assign_once(self, hint: str, expr: str, key: str | None = None) -> str:
    """`name = expr`, or the name an earlier line of this scope (or an
    enclosing one) gave the same expression (or `key`), e.g. the index
    vectors of a ref read and then written.

    Only for expressions of variables that are never reassigned, which holds
    for all but loop carries; a carry exists only inside its loop's body and
    after the loop, and the body's scope ends before the carry is reassigned.
    """
    key = expr if key is None else key
    name = self.kernel.lookup("exprs", key)
    if name is None:
      name = self.b.assign(hint, expr)
      self.kernel.remember("exprs", key, name)
    return name

  def reused_load(self, key) -> Value | None:
    """The value an earlier read with this key loaded, if no write came since."""
    return self.kernel.lookup("loads", key)

  def remember_load(self, key, value: Value) -> None:
    self.kernel.remember("loads", key, value)

  def forget_loads(self, refs=None) -> None:
    self.kernel.forget_loads(refs)

  def record(self, **facts) -> None:
    """Facts about the work of this equation, for its EquationRecord
    (bytes_read, bytes_written, dot, trips, unrolled, ...), per execution by
    one program. Byte counts add up: a swap reads the old value, then writes."""
    for key, value in facts.items():
      if key in _ADDITIVE_FACTS:
        self.info.facts[key] = self.info.facts.get(key, 0) + value
      else:
        self.info.facts[key] = value

  def out_used(self, i: int = 0) -> bool:
    """Whether anything reads output i (a swap whose old value nobody reads skips the load)."""
    var = self.eqn.outvars[i]
    if isinstance(var, compat.DropVar):
      return False
    return self._live is None or var in self._live

  def lower_jaxpr(self, jaxpr, args: Sequence[Any], region: str, consts=(), *,
                  straight_line: bool = False, loop: bool = False) -> list[Any]:
    """Lowers a nested jaxpr (loop body, branch, call) inline, here.

    `straight_line`: the jaxpr's lines run exactly once, right here (not in a
    loop body or a branch), so what it computes stays usable after it.
    `loop`: the jaxpr runs again and again (a loop's body, a condition tested
    in it), so it may read what its own previous run wrote."""
    return lower_jaxpr(self.kernel, jaxpr, list(args), parent=self.info, region=region,
                       consts=consts, new_scope=not straight_line, loop=loop)

  def reemit_jaxpr(self, jaxpr, args: Sequence[Any], region: str, first_index: int,
                   consts=(), *, loop: bool = False) -> list[Any]:
    """Emits a jaxpr lowered before once more (e.g. a while condition at the end
    of the body) under the same equation indices: no new equations, no spans."""
    kernel = self.kernel
    saved_counter, saved_reemitting = kernel._eqn_counter, kernel.reemitting
    kernel._eqn_counter, kernel.reemitting = first_index, True
    try:
      return self.lower_jaxpr(jaxpr, args, region, consts, loop=loop)
    finally:
      kernel._eqn_counter, kernel.reemitting = saved_counter, saved_reemitting


# --- the walker and the dispatcher -------------------------------------------

def _literal_value(lit) -> Value:
  aval = lit.aval
  dtype = getattr(aval, "dtype", None)
  if dtype is not None and np.issubdtype(np.dtype(dtype), np.complexfloating):
    # jax 0.12.1 traces `x * 1j` as real and imag of a complex literal, which never
    # reaches the rules that refuse complex values (rules/elementwise.py)
    raise Unsupported(f"the {np.dtype(dtype).name} literal {lit.val}: Triton has no "
                      "complex numbers", COMPLEX_HINT)
  if getattr(aval, "shape", ()) != ():
    arr = np.asarray(lit.val)
    if arr.size and np.all(arr == arr.reshape(-1)[0]):
      raise Unsupported("array literal", "broadcast a scalar instead")
    raise Unsupported(f"array literal of shape {aval.shape} in a kernel",
                      "pass the array as an input of the pallas_call")
  return emit.const(lit.val, aval.dtype)


def _const_value(value, aval) -> Value:
  arr = np.asarray(value)
  if arr.shape != ():
    raise Unsupported(f"a captured constant array of shape {arr.shape}",
                      "pass arrays into the kernel as pallas_call inputs; only scalar "
                      "constants can be closed over")
  return emit.const(arr, aval.dtype)


def lower_jaxpr(kernel: KernelContext, jaxpr, args: list[Any], *, parent: EqnInfo | None,
                region: str, consts=(), new_scope: bool = True, loop: bool = False) -> list[Any]:
  env: dict[Any, Any] = {}
  for var, value in zip(jaxpr.constvars, consts, strict=True):
    env[var] = _const_value(value, var.aval)
  if len(args) != len(jaxpr.invars):
    raise AssertionError(f"{len(args)} args for {len(jaxpr.invars)} invars")
  for var, value in zip(jaxpr.invars, args, strict=True):
    env[var] = value
    kernel.bind(var, value)
  live = _live_vars(jaxpr)
  if not new_scope and kernel.scopes:
    _lower_equations(kernel, jaxpr, env, live, parent, region)
    return [_read(env, v) for v in jaxpr.outvars]
  # what a loop body or a branch may write, for the features that order memory
  kernel.listeners.enter_jaxpr(kernel, jaxpr, env, loop)
  kernel.scopes.append(Scope())
  try:
    _lower_equations(kernel, jaxpr, env, live, parent, region)
    return [_read(env, v) for v in jaxpr.outvars]
  finally:
    kernel.scopes.pop()
    kernel.listeners.leave_jaxpr(kernel)


def _lower_equations(kernel: KernelContext, jaxpr, env: dict, live: set,
                     parent: EqnInfo | None, region: str) -> None:
  for position, eqn in enumerate(jaxpr.eqns):
    info = describe(kernel, jaxpr, eqn, position, parent, region)
    try:
      invals = [_read(env, v) for v in eqn.invars]
    except Unsupported as e:
      raise _lowering_error(kernel, info, e.reason, e.hint, e) from None
    event = EquationEvent(eqn, info, invals, live, parent, region)
    for listener in kernel.listeners:
      listener.before_equation(kernel, event)
    event.first_line = kernel.builder.num_lines
    outvals = _lower_equation(kernel, event)
    for listener in kernel.listeners:
      listener.after_equation(kernel, event, outvals)
    if eqn.primitive.multiple_results:
      outvals = list(outvals) if outvals is not None else []
      if len(outvals) != len(eqn.outvars):
        raise _lowering_error(kernel, info, f"rule returned {len(outvals)} values for "
                              f"{len(eqn.outvars)} outputs", None, None)
      for var, value in zip(eqn.outvars, outvals, strict=True):
        env[var] = value
    elif eqn.outvars:
      env[eqn.outvars[0]] = outvals


def _read(env: dict, atom):
  if isinstance(atom, compat.Literal):
    return _literal_value(atom)
  return env[atom]


def _live_vars(jaxpr) -> set:
  """Variables some equation or the jaxpr's result reads."""
  live = {v for v in jaxpr.outvars if not isinstance(v, compat.Literal)}
  for eqn in jaxpr.eqns:
    live.update(v for v in eqn.invars if not isinstance(v, compat.Literal))
  return live


def _lower_equation(kernel: KernelContext, event: EquationEvent):
  """THE dispatcher: every equation of every kernel goes through here."""
  b = kernel.builder
  eqn, info, invals, live = event.eqn, event.info, event.invals, event.live
  unrecorded = kernel.reemitting
  if not unrecorded:
    b.add_eqn(info)
  first_line = b.num_lines
  watcher = hooks.NULL_SPAN if unrecorded else hooks.observer().equation(info)
  with b.equation(info.index, _operand_loops(invals)), watcher as span:
    folded = try_fold(eqn, invals)
    if folded is not None:
      return folded
    key = _pure_key(eqn, invals)
    if key is not None:
      earlier = kernel.lookup("values", key)
      if earlier is not None:
        return list(earlier) if eqn.primitive.multiple_results else earlier
    for listener in kernel.listeners:
      listener.before_rule(kernel, event)
    rule = rule_for(eqn.primitive)
    if rule is None:
      raise _lowering_error(kernel, info, f"primitive `{eqn.primitive.name}` has no "
                            "lowering rule in pallas-prof", _unsupported_hint(eqn), None)
    try:
      out = rule(RuleContext(kernel, eqn, info, live), *invals, **eqn.params)
    except LoweringError:
      raise
    except Unsupported as e:
      raise _lowering_error(kernel, info, e.reason, e.hint, e) from None
    except UnsupportedDtype as e:
      raise _lowering_error(kernel, info, str(e),
                            "cast to a supported dtype before this operation", e) from None
    except Exception as e:  # a bug in a rule: still say where it happened
      raise _lowering_error(kernel, info, f"internal error in the `{eqn.primitive.name}` "
                            f"rule: {type(e).__name__}: {e}",
                            "please report this with the kernel; meanwhile try writing "
                            "the operation differently", e) from e
    for listener in kernel.listeners:
      listener.after_rule(kernel, event, out)
    if key is not None:
      kernel.remember("values", key, tuple(out) if eqn.primitive.multiple_results else out)
    if b.num_lines > first_line:
      span.set(keys.PALLAS_GENERATED_LINES,
               f"{b.line_number(first_line)}-{b.line_number(b.num_lines - 1)}")
  return out


def _operand_loops(invals) -> frozenset[int]:
  """The loops an equation's operands vary with (Value.loops): what the values its
  rule computes from them vary with, unless the rule says otherwise."""
  return frozenset().union(*(v.loops for v in invals if isinstance(v, (Value, RefValue))))


# Primitives the dispatcher computes once per scope: pure functions of their
# operands and params that emit only assignments of fresh names (no memory).
# The same equation again (e.g. the `i * block + iota` and `< n` of each of a
# kernel's loops) gets the earlier outputs, so reads through it match too.
# (FOLDABLE is the rule table's, read when asked: the rules fill it as they register)
_PURE_TOO = frozenset({"iota", "broadcast_in_dim"})


def _pure_key(eqn, invals):
  """A hashable key for a pure equation, or None (not pure, or unhashable)."""
  name = eqn.primitive.name
  if (name not in FOLDABLE and name not in _PURE_TOO) or eqn.effects:
    return None
  key = (eqn.primitive, tuple(sorted(eqn.params.items())), tuple(invals),
         tuple(v.aval for v in eqn.invars), tuple(v.aval for v in eqn.outvars))
  try:
    hash(key)
  except TypeError:
    return None
  return key


_ADDITIVE_FACTS = frozenset({"bytes_read", "bytes_written"})


def _unsupported_hint(eqn) -> str:
  name = eqn.primitive.name
  if name in ALIASES:
    return ALIASES[name]
  similar = sorted(p.name for p in all_rules() if p.name.split("_")[0] == name.split("_")[0])
  supported = f"supported primitives include {', '.join(similar[:8])}" if similar else \
      "run `pallas-prof rules` to list the supported primitives"
  return f"rewrite this operation with other jax.numpy/lax operations; {supported}"


def _lowering_error(kernel: KernelContext, info: EqnInfo, reason: str, hint, cause):
  return LoweringError(reason, hint=hint, kernel=kernel.name, eqn=info.record(),
                       jaxpr_text=kernel.jaxpr_text, rule=info.primitive, cause=cause,
                       ref_names=ref_names(kernel.jaxpr, kernel.pp_context, kernel.ref_binders))


