"""Walks a Pallas kernel's jaxpr and emits Triton source, one rule per equation.

`lower_kernel` sets up the kernel (parameters, program ids, block starts from
the index maps) and lowers the body. `lower_jaxpr` is the walker and
`_lower_equation` the single dispatcher: it looks up RULES[primitive],
records the equation for the line map, opens the observer's span, and turns
anything a rule raises into a LoweringError that names the equation and the
user's line. It also gives a pure equation seen before in scope its earlier
outputs, and after an equation that may write to memory it forgets every
load (the memory rules reuse a load only until then; see Scope).
"""
from __future__ import annotations

import dataclasses
import gc
import hashlib
import math
import os
import time
import traceback
from typing import Any, Sequence

import numpy as np

from . import compat, emit, hooks
from .codegen import (EqnInfo, KernelBuilder, UnsupportedDtype, Value, next_pow2, sanitize,
                      signature_type)
from .errors import LoweringError, Unsupported
from .folding import FOLDABLE, try_fold

MAX_GRID_YZ = 2**16 - 1
MAX_GRID_X = 2**31 - 1
INT32_OFFSETS_BELOW = 2**31     # offsets at or past this need int64 index arithmetic


# --- what the kernel sees ------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ViewDim:
  """One dimension of the array behind a ref, as the current view indexes it.

  kind "int": the view fixes this dimension at `start` (squeezed / int index).
  kind "slice": `size` elements `start, start+stride, ...`.
  `static_offset` is the view's start relative to its block when known at
  lowering time; `extent` is the block's size along this dimension.
  """
  kind: str
  start: Value
  size: int = 1
  stride: int = 1
  static_offset: int | None = 0
  extent: int = 1
  index: Value | None = None     # kind "gather": the integer index array


@dataclasses.dataclass(frozen=True)
class RefValue:
  """A kernel operand in global memory: a pointer plus the block it sees."""
  name: str
  dtype: np.dtype
  array_shape: tuple[int, ...]
  dims: tuple[ViewDim, ...]
  ragged: tuple[bool, ...]       # the block grid overhangs the array on this dim
  index_dtype: np.dtype
  label: str                     # the user's name for it (x_ref)
  gather_position: int = 0       # where integer-array index dims land in a read's shape
  # the block's first element per dimension (bounds-checked mode: indices
  # relative to it must lie in [0, extent)); () when not known
  origin: tuple = ()

  @property
  def shape(self) -> tuple[int, ...]:
    return tuple(d.size for d in self.dims if d.kind == "slice")

  @property
  def strides(self) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(self.array_shape):
      strides.append(acc)
      acc *= d
    return tuple(reversed(strides))

  def with_dims(self, dims) -> "RefValue":
    return dataclasses.replace(self, dims=tuple(dims))


@dataclasses.dataclass
class KernelParam:
  name: str
  label: str
  dtype: str
  shape: tuple[int, ...]
  role: str                     # "input" | "output"
  index: int                    # position among inputs or outputs


@dataclasses.dataclass
class GeneratedKernel:
  """A lowered kernel: Triton source in a real file plus everything about it."""
  name: str
  source: str
  path: str
  line_map: dict[int, int]
  eqns: list[EqnInfo]
  params: list[KernelParam]
  grid: tuple[int, ...]
  launch_grid: tuple[int, int, int]
  num_warps: int
  num_stages: int
  jaxpr_text: str
  source_info: str
  lowering_seconds: float
  key: str
  atomic_params: tuple[str, ...] = ()
  enable_fp_fusion: bool = False     # Triton may contract a*b+c into one FMA
  # of lowering_seconds, Python's garbage collections meanwhile (CollectionClock)
  gc_seconds: float = 0.0
  # bounds-checked mode: each checked access (bounds.CheckSite); the kernel
  # then has one more parameter, the flag buffer (role "check")
  bounds_sites: tuple = ()
  check_bounds: bool = False

  @property
  def inputs(self) -> list[KernelParam]:
    return [p for p in self.params if p.role == "input"]

  @property
  def outputs(self) -> list[KernelParam]:
    return [p for p in self.params if p.role == "output"]

  def eqn(self, index: int) -> EqnInfo:
    return self.eqns[index]

  def eqn_at_line(self, line: int) -> EqnInfo | None:
    i = self.line_map.get(line)
    return None if i is None else self.eqns[i]


# --- the rule context -----------------------------------------------------------

@dataclasses.dataclass
class Scope:
  """What one jaxpr being lowered (the kernel, a loop body, a branch) has
  already computed, for later lines of it and of the jaxprs nested in it.

  `exprs`: expression -> the variable holding it (RuleContext.assign_once).
  `values`: a pure equation (primitive, params, operands) -> its outputs
  (the dispatcher's common-subexpression step).
  `loads`: a ref read (view, mask, other) -> the value it loaded, only while
  no equation has written to that ref, or to one that may alias it, since
  (KernelContext.forget_loads).

  A nested jaxpr gets its own Scope, dropped when it ends, so nothing it
  computed is used where it may not have run (after a branch, after a loop
  body, or in the next iteration of a loop before it is recomputed). Jaxprs
  emitted as straight-line code (calls, a loop of one iteration) share their
  caller's Scope: what they compute runs exactly once, right there.
  """
  exprs: dict[str, str] = dataclasses.field(default_factory=dict)
  values: dict[tuple, Any] = dataclasses.field(default_factory=dict)
  loads: dict[tuple, Any] = dataclasses.field(default_factory=dict)


class KernelContext:
  """State shared by all rules while one kernel is lowered."""

  def __init__(self, builder: KernelBuilder, name: str, grid: tuple[int, ...],
               program_ids: list[Value], compute_capability: int,
               grid_names=None, jaxpr_text: str = ""):
    self.builder = builder
    self.name = name
    self.grid = grid
    self.program_ids = program_ids
    self.compute_capability = compute_capability
    self.grid_names = grid_names
    self.jaxpr_text = jaxpr_text
    self.launch_grid = (1, 1, 1)
    self.num_programs: list[int] = []
    self._eqn_counter = 0
    self.replaying = False
    self.atomic_refs: set[str] = set()     # params updated with atomics (zeroed on GPU)
    self.bounds = None     # bounds.SiteTable in the bounds-checked mode
    self._pp_contexts: dict[int, Any] = {}
    # one Scope per jaxpr being lowered, innermost last
    self.scopes: list[Scope] = []
    # ref (param) name -> the names of the refs that may share its memory
    # (itself included); None: unknown, any ref may alias any other
    self.may_alias: dict[str, frozenset[str]] | None = None
    # refs written since the last barrier, or _ANY_REF. A program's threads
    # each store their part of a block, and nothing orders one thread's store
    # before another thread's later load of the same address: on a GPU a read
    # after a write of a ref by the same program needs a barrier in between
    # (sync_before). The interpreter runs a program's lanes in lockstep and
    # never shows the difference. Two writes of the same address by different
    # threads of one program, with no read between them, are not ordered
    # (neither are they by JAX's backend): telling which writes overlap would
    # need the addresses, and a barrier between every two writes of a ref
    # would slow kernels that write a block in parts (the norms: one per row).
    self.unsynced: set[str] | object = set()

  def next_eqn_index(self) -> int:
    i = self._eqn_counter
    self._eqn_counter += 1
    return i

  def peek_eqn_index(self) -> int:
    return self._eqn_counter

  def lookup(self, table: str, key):
    """What this scope or an enclosing one recorded under `key`, else None."""
    for scope in reversed(self.scopes):
      hit = getattr(scope, table).get(key)
      if hit is not None:
        return hit
    return None

  def remember(self, table: str, key, value) -> None:
    if self.scopes:
      getattr(self.scopes[-1], table)[key] = value

  def forget_loads(self, refs=None) -> None:
    """Something may have written to memory: no earlier load of it may be reused.

    `refs`: the names of the refs written, None if unknown (then every load
    is forgotten). Loads of those refs and of every ref that may alias one
    of them (an input and an output tied by input_output_aliases; all refs,
    when the aliasing is unknown) are forgotten, in every scope, not just
    the innermost."""
    hit = self.aliases_of(refs)
    for scope in self.scopes:
      if hit is None:
        scope.loads.clear()
      else:
        for key in [k for k in scope.loads if _load_ref_name(k) in hit or
                    _load_ref_name(k) is None]:
          del scope.loads[key]

  def note_writes(self, writes) -> None:
    """`writes` (_write_targets) happened: later accesses to them need a barrier."""
    if writes is None:
      return
    if writes is _ANY_REF or self.unsynced is _ANY_REF:
      self.unsynced = _ANY_REF
    else:
      self.unsynced = self.unsynced | set(writes)

  def sync_before(self, refs: set[str]) -> None:
    """Emits a barrier (__syncthreads) before an access to `refs` if one of them,
    or a ref that may share its memory, was written since the last barrier."""
    if not refs or not self.unsynced:
      return
    if self.unsynced is not _ANY_REF:
      hit = self.aliases_of(refs)
      if hit is not None and not (hit & self.unsynced):
        return
    self.builder.emit("tl.debug_barrier()   # other threads' writes to this memory land first")
    self.unsynced = set()

  def aliases_of(self, refs) -> frozenset[str] | None:
    """The refs that may share memory with any of `refs`; None: any ref."""
    if refs is None or self.may_alias is None:
      return None
    out = set()
    for name in refs:
      if name not in self.may_alias:
        return None
      out |= self.may_alias[name]
    return frozenset(out)


def _load_ref_name(key) -> str | None:
  """The name of the ref a `loads` key reads (memory._load_key), else None."""
  ref = key[1] if isinstance(key, tuple) and len(key) > 1 else None
  return ref.name if isinstance(ref, RefValue) else None


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

  # typed helpers shared by the rules
  def value(self, hint: str, expr: str, dtype, shape=()) -> Value:
    return self.b.value(hint, expr, dtype, shape)

  def cast(self, v: Value, dtype, hint: str | None = None) -> Value:
    return emit.cast(self.b, v, dtype, hint)

  def broadcast_to(self, v: Value, shape) -> Value:
    return emit.broadcast_to(self.b, v, shape)

  def full(self, shape, value, dtype, hint="full") -> Value:
    return emit.full(self.b, shape, value, dtype, hint)

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

  def replay_jaxpr(self, jaxpr, args: Sequence[Any], region: str, first_index: int,
                   consts=(), *, loop: bool = False) -> list[Any]:
    """Emits a jaxpr lowered before once more (e.g. a while condition at the end
    of the body) under the same equation indices: no new equations, no spans."""
    kernel = self.kernel
    saved_counter, saved_replaying = kernel._eqn_counter, kernel.replaying
    kernel._eqn_counter, kernel.replaying = first_index, True
    try:
      return self.lower_jaxpr(jaxpr, args, region, consts, loop=loop)
    finally:
      kernel._eqn_counter, kernel.replaying = saved_counter, saved_replaying


# --- the walker and the dispatcher -------------------------------------------

def _literal_value(lit) -> Value:
  aval = lit.aval
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
  for var, value in zip(jaxpr.constvars, consts):
    env[var] = _const_value(value, var.aval)
  if len(args) != len(jaxpr.invars):
    raise AssertionError(f"{len(args)} args for {len(jaxpr.invars)} invars")
  for var, value in zip(jaxpr.invars, args):
    env[var] = value
  live = _live_vars(jaxpr)
  if not new_scope and kernel.scopes:
    _lower_equations(kernel, jaxpr, env, live, parent, region)
    return [_read(env, v) for v in jaxpr.outvars]
  written = _jaxpr_write_targets(jaxpr, env)
  if written is not None:
    # a loop body runs again after its own writes: nothing loaded before the
    # loop (or before the write, in an earlier iteration) of a ref it writes
    # (or one aliasing it) may be reused in it
    kernel.forget_loads(None if written is _ANY_REF else written)
  unsynced_before = kernel.unsynced
  if loop:
    kernel.note_writes(written)        # the previous iteration's writes
  kernel.scopes.append(Scope())
  try:
    _lower_equations(kernel, jaxpr, env, live, parent, region)
    return [_read(env, v) for v in jaxpr.outvars]
  finally:
    kernel.scopes.pop()
    # a barrier inside may not have run (a branch not taken, no iteration)
    kernel.unsynced = unsynced_before
    kernel.note_writes(written)


# Read memory through their ref operands (the atomics and addupdate read, modify
# and write it); a swap reads the old value only when something uses it.
_REF_READERS = frozenset({"get", "masked_load", "addupdate", "atomic_rmw", "atomic_cas"})
_REF_SWAPS = frozenset({"swap", "masked_swap"})


def _refs_read(eqn, invals, live) -> set[str]:
  """The names of the refs an equation reads (a loop or branch: none of its own,
  its equations say)."""
  name = eqn.primitive.name
  if name in _REF_SWAPS:
    var = eqn.outvars[0] if eqn.outvars else None
    if var is None or isinstance(var, compat.DropVar) or (live is not None and var not in live):
      return set()
  elif name not in _REF_READERS:
    return set()
  return {v.name for v in invals if isinstance(v, RefValue)}


def _lower_equations(kernel: KernelContext, jaxpr, env: dict, live: set,
                     parent: EqnInfo | None, region: str) -> None:
  for position, eqn in enumerate(jaxpr.eqns):
    info = _describe(kernel, jaxpr, eqn, position, parent, region)
    try:
      invals = [_read(env, v) for v in eqn.invars]
    except Unsupported as e:
      raise _lowering_error(kernel, info, e.reason, e.hint, e) from None
    outvals = _lower_equation(kernel, eqn, info, invals, live)
    if eqn.primitive.multiple_results:
      outvals = list(outvals) if outvals is not None else []
      if len(outvals) != len(eqn.outvars):
        raise _lowering_error(kernel, info, f"rule returned {len(outvals)} values for "
                              f"{len(eqn.outvars)} outputs", None, None)
      for var, value in zip(eqn.outvars, outvals):
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


def _lower_equation(kernel: KernelContext, eqn, info: EqnInfo, invals: list[Any], live=None):
  """THE dispatcher: every equation of every kernel goes through here."""
  from .rules import rule_for
  b = kernel.builder
  if not kernel.replaying:
    b.add_eqn(info)
  first_line = b.num_lines
  watcher = hooks.NULL_SPAN if kernel.replaying else hooks.observer().equation(info)
  with b.equation(info.index), watcher as span:
    folded = try_fold(eqn, invals)
    if folded is not None:
      return folded
    key = _pure_key(eqn, invals)
    if key is not None:
      earlier = kernel.lookup("values", key)
      if earlier is not None:
        return list(earlier) if eqn.primitive.multiple_results else earlier
    writes = _write_targets(eqn, _operand_values(eqn, invals))
    kernel.sync_before(_refs_read(eqn, invals, live))
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
    if writes is not None:
      # also what the rule itself loaded (a swap's old value); a loop body
      # that writes forgets them on entry too (lower_jaxpr)
      kernel.forget_loads(None if writes is _ANY_REF else writes)
      kernel.note_writes(writes)
    if key is not None:
      kernel.remember("values", key, tuple(out) if eqn.primitive.multiple_results else out)
    if b.num_lines > first_line:
      span.set("pallas.generated_lines",
               f"{b.line_number(first_line)}-{b.line_number(b.num_lines - 1)}")
  return out


# Primitives the dispatcher computes once per scope: pure functions of their
# operands and params that emit only assignments of fresh names (no memory).
# The same equation again (e.g. the `i * block + iota` and `< n` of each of a
# kernel's loops) gets the earlier outputs, so reads through it match too.
_PURE = frozenset(FOLDABLE | {"iota", "broadcast_in_dim"})

# Write to memory through their first operand, whatever their effects say.
_REF_WRITERS = frozenset({"swap", "masked_swap", "addupdate", "atomic_rmw", "atomic_cas"})
# May write anywhere (inline asm: it might).
_ANYWHERE_WRITERS = frozenset({"elementwise_inline_asm", "elementwise_inline_asm_p"})

_ANY_REF = object()    # a write whose target is unknown: it may change any ref


def _pure_key(eqn, invals):
  """A hashable key for a pure equation, or None (not pure, or unhashable)."""
  if eqn.primitive.name not in _PURE or eqn.effects:
    return None
  key = (eqn.primitive, tuple(sorted(eqn.params.items())), tuple(invals),
         tuple(v.aval for v in eqn.invars), tuple(v.aval for v in eqn.outvars))
  try:
    hash(key)
  except TypeError:
    return None
  return key


def _operand_values(eqn, invals):
  """var -> value of an equation's (non-literal) operands."""
  values = {}
  for var, value in zip(eqn.invars, invals):
    if not isinstance(var, compat.Literal):
      values[var] = value
  return values.get


def _write_targets(eqn, value_of):
  """What an equation may write to: None (nothing), a frozenset of ref
  names, or _ANY_REF (unknown). Loads of what it writes are not reused after it.

  JAX tracks reads and writes of refs as effects on operands, also through
  control flow (a loop's effects are its body's, on the loop's operands):
  a write or accumulate effect names the operand written (a variable, or
  its position among the operands); `value_of(var)` is its value (None if
  not known). Any other effect, or a
  written operand that is not a kernel ref, counts as a write anywhere, and
  so do primitives known to write anywhere."""
  from jax._src.state import types as state_types
  name = eqn.primitive.name
  if name in _ANYWHERE_WRITERS:
    return _ANY_REF
  targets = set()

  def add(var) -> bool:
    if isinstance(var, (int, np.integer)):
      var = eqn.invars[var] if 0 <= var < len(eqn.invars) else None
    try:
      value = None if var is None or isinstance(var, compat.Literal) else value_of(var)
    except TypeError:     # unhashable
      value = None
    if not isinstance(value, RefValue):
      return False
    targets.add(value.name)
    return True

  if name in _REF_WRITERS and not (eqn.invars and add(eqn.invars[0])):
    return _ANY_REF
  for e in eqn.effects:
    if isinstance(e, state_types.ReadEffect):
      continue
    if isinstance(e, (state_types.WriteEffect, state_types.AccumEffect)) \
        and add(getattr(e, "input", None)):
      continue
    return _ANY_REF
  return frozenset(targets) if targets else None


def _jaxpr_write_targets(jaxpr, env: dict):
  """_write_targets of a whole jaxpr (a loop body, a branch) about to be
  lowered with `env` bound to its inputs; operands it computes itself count
  as unknown."""
  targets = set()
  for eqn in jaxpr.eqns:
    t = _write_targets(eqn, env.get)
    if t is _ANY_REF:
      return _ANY_REF
    if t:
      targets |= t
  return frozenset(targets) if targets else None


def _unsupported_hint(eqn) -> str:
  from .rules import ALIASES, all_rules
  name = eqn.primitive.name
  if name in ALIASES:
    return ALIASES[name]
  similar = sorted(p.name for p in all_rules() if p.name.split("_")[0] == name.split("_")[0])
  supported = f"supported primitives include {', '.join(similar[:8])}" if similar else \
      "run `pallas-prof rules` to list the supported primitives"
  return f"rewrite this operation with other jax.numpy/lax operations; {supported}"


def _lowering_error(kernel: KernelContext, info: EqnInfo, reason: str, hint, cause):
  return LoweringError(reason, hint=hint, kernel=kernel.name, eqn=info,
                       jaxpr_text=kernel.jaxpr_text, rule=info.primitive, cause=cause)


def _describe(kernel: KernelContext, jaxpr, eqn, position: int, parent: EqnInfo | None,
              region: str) -> EqnInfo:
  frame = compat.user_frame(eqn.source_info)
  path = str(position) if parent is None else f"{parent.path}.{_region_tag(region)}{position}"

  def describe():
    return (_eqn_text(kernel, jaxpr, eqn), tuple(str(v.aval) for v in eqn.invars),
            tuple(str(v.aval) for v in eqn.outvars))

  file, line, function = ((frame.file_name, frame.start_line, frame.function_name) if frame
                          # inside a library's jit (jnp.sort, ...): the user's call of it
                          else (parent.file, parent.line, parent.function) if parent
                          else (None, None, None))
  return EqnInfo(index=kernel.next_eqn_index(), path=path, primitive=eqn.primitive.name,
                 file=file, line=line, function=function,
                 parent=None if parent is None else parent.index,
                 region=region, describe=describe)


def _region_tag(region: str) -> str:
  return sanitize(region.split()[0]) + "."


def _eqn_text(kernel: KernelContext, jaxpr, eqn) -> str:
  """The equation as JAX prints it, with the names of its enclosing jaxpr."""
  from jax._src import core as jax_core
  context = kernel._pp_contexts.get(id(jaxpr))
  if context is None:
    context = jax_core.JaxprPpContext()
    settings = jax_core.JaxprPpSettings(source_info=False, print_effects=False)
    jax_core.pp_jaxpr(jaxpr, context, settings)   # names vars in order
    kernel._pp_contexts[id(jaxpr)] = context
  settings = jax_core.JaxprPpSettings(source_info=False, print_effects=False)
  text = jax_core.pp_eqn(eqn, context, settings).format()
  lines = text.splitlines()
  if len(lines) > 1 or len(text) > 240:
    def var(v):
      if isinstance(v, compat.Literal):
        return str(v)
      doc = jax_core.pp_var(v, context)
      return doc if isinstance(doc, str) else doc.format()
    outs = " ".join(var(v) for v in eqn.outvars)
    ins = " ".join(var(v) for v in eqn.invars)
    text = f"{outs} = {eqn.primitive.name}[...] {ins}".strip()
  return text


# --- grid ------------------------------------------------------------------------

def launch_grid_for(grid: tuple[int, ...], vmapped_dims: tuple[int, ...]):
  """Folds a Pallas grid of any rank into CUDA's three launch axes.

  Same order as JAX's own Triton backend, so tile order (and L2 reuse) is
  unchanged: the grid's dimensions in order, vmapped dimensions last
  (innermost first), leading dimensions collapsed into axis 0 when there are
  more than three or when axes 1/2 would exceed CUDA's 65535 limit.
  Returns (launch grid, plan) where plan lists, per launch axis, the Pallas
  grid dims it carries (fastest-varying first).
  """
  order = [i for i in range(len(grid)) if i not in vmapped_dims]
  order += list(reversed(vmapped_dims))
  sizes = [grid[i] for i in order]
  num_collapse = max(len(sizes) - 2, 0)
  if num_collapse + 1 < len(sizes) and sizes[num_collapse + 1] > MAX_GRID_YZ:
    num_collapse += 2
  elif num_collapse < len(sizes) and sizes[num_collapse] > MAX_GRID_YZ:
    num_collapse += 1
  if num_collapse == 0:
    axes = [[d] for d in order]
  else:
    axes = [order[:num_collapse]] + [[d] for d in order[num_collapse:]]
  launch = [math.prod(grid[d] for d in ax) for ax in axes]
  if len(launch) > 3 or (launch and launch[0] > MAX_GRID_X) or any(
      s > MAX_GRID_YZ for s in launch[1:]):
    raise Unsupported(f"grid {grid} cannot be mapped onto CUDA's launch limits",
                      "use fewer or smaller grid dimensions (axis 0 <= 2**31-1)")
  launch += [1] * (3 - len(launch))
  return tuple(launch), axes


def _emit_program_ids(b: KernelBuilder, grid, axes) -> list[Value]:
  pids: list[Value | None] = [None] * len(grid)
  for launch_axis, dims in enumerate(axes):
    if len(dims) == 1:
      pids[dims[0]] = b.value(f"pid{dims[0]}", f"tl.program_id({launch_axis})", np.int32)
      continue
    rest = b.assign("pid_flat", f"tl.program_id({launch_axis})")
    for j, d in enumerate(dims):
      if j == len(dims) - 1:
        pids[d] = b.value(f"pid{d}", rest, np.int32)
      else:
        pids[d] = b.value(f"pid{d}", f"{rest} % {grid[d]}", np.int32)
        rest = b.assign("pid_rest", f"{rest} // {grid[d]}")
  return pids  # type: ignore[return-value]


# --- refs from block mappings -----------------------------------------------------

def index_dtype_for(array_shape, block_shape) -> np.dtype:
  """int64 when an offset into the array could reach 2**31, else int32.

  Triton's pointer offsets are element counts. Besides the array's own
  size, the padded (power-of-two) lanes of the last, overhanging block
  compute offsets past its end before their mask drops them: in int32 those
  could wrap to negative offsets that pass the `< size` mask. The bound
  allows each dimension two padded blocks beyond its last block.
  """
  if math.prod(array_shape) >= INT32_OFFSETS_BELOW:
    return np.dtype(np.int64)
  stride, reach = 1, 0
  for size, bdim in reversed(list(zip(array_shape, block_shape))):
    block = 1 if isinstance(bdim, compat.Squeezed) else compat.block_dim_size(bdim)
    blocks = -(-size // block) if isinstance(bdim, compat.Blocked) else 1
    extent = size if isinstance(bdim, compat.Squeezed) else \
        max(size, blocks * block) + 2 * next_pow2(block)
    reach += extent * stride
    stride *= size
  return np.dtype(np.int64) if reach >= INT32_OFFSETS_BELOW else np.dtype(np.int32)


def _block_ref(kernel: KernelContext, bm, name: str, label: str, pids: list[Value],
               eqn_info_parent=None) -> RefValue:
  b = kernel.builder
  array_shape = tuple(bm.array_aval.shape)
  dtype = np.dtype(bm.array_aval.dtype)
  signature_type(dtype)  # fails early with a clear message for unsupported dtypes
  index_dtype = index_dtype_for(array_shape, bm.block_shape)
  if getattr(bm, "pipeline_mode", None) is not None:
    raise Unsupported("pipeline_mode on a BlockSpec",
                      "Triton pipelines loops itself: drop pipeline_mode and set "
                      "num_stages in CompilerParams")
  if getattr(bm, "transforms", ()):
    raise Unsupported("BlockSpec transforms", "index the ref inside the kernel instead")
  closed = bm.index_map_jaxpr
  where = getattr(closed.jaxpr.debug_info, "func_src_info", None) or "index_map"
  where = where.replace(os.path.dirname(where.split(" at ")[-1]) + os.sep, "") if " at " in where else where
  with b.note(f"block of {label}: BlockSpec {where}"):
    return _block_ref_body(kernel, bm, name, label, pids, closed, array_shape, dtype, index_dtype)


def _block_ref_body(kernel, bm, name, label, pids, closed, array_shape, dtype, index_dtype):
  b = kernel.builder
  indices = lower_jaxpr(kernel, closed.jaxpr, list(pids), parent=None,
                        region=f"index_map {label}", consts=closed.consts)
  dims, ragged = [], []
  for axis, (bdim, idx, size) in enumerate(zip(bm.block_shape, indices, array_shape)):
    if not isinstance(idx, Value):
      raise Unsupported(f"index map of {label} returned {type(idx).__name__}",
                        "index maps must return integer block indices")
    idx = emit.cast(b, idx, index_dtype, f"{name}_idx{axis}")
    if isinstance(bdim, compat.Squeezed):
      dims.append(ViewDim("int", idx, 1, 1, 0, 1))
      ragged.append(False)
    elif isinstance(bdim, compat.Blocked):
      bs = int(bdim.block_size)
      if idx.const is not None:
        start = emit.const(idx.const * bs, index_dtype)
      elif bs == 1:
        start = idx
      else:
        start = b.value(f"{name}_start{axis}", f"{idx} * {bs}", index_dtype)
      dims.append(ViewDim("slice", start, bs, 1, 0, bs))
      ragged.append(size % bs != 0 or bs > size)
    elif isinstance(bdim, compat.Element):
      if tuple(getattr(bdim, "padding", (0, 0))) != (0, 0):
        raise Unsupported("pl.Element with padding", "pad the array before the pallas_call")
      bs = int(bdim.block_size)
      dims.append(ViewDim("slice", idx, bs, 1, 0, bs))
      ragged.append(True)
    else:
      raise Unsupported(f"block dimension {bdim!r} of {label}",
                        "use pl.BlockSpec with block sizes (ints) or None (squeezed)")
  return RefValue(name=name, dtype=dtype, array_shape=array_shape, dims=tuple(dims),
                  ragged=tuple(ragged), index_dtype=index_dtype, label=label,
                  origin=tuple(d.start for d in dims))


# --- the kernel --------------------------------------------------------------------

def _arg_labels(jaxpr, n_in: int, n_out: int) -> list[str]:
  names = list(getattr(jaxpr.debug_info, "arg_names", None) or [])
  labels = []
  for i in range(n_in + n_out):
    default = f"in{i}_ref" if i < n_in else f"out{i - n_in}_ref"
    name = names[i] if i < len(names) and names[i] else default
    name = sanitize(name.replace("[", "_").replace("]", "").replace("'", ""))
    labels.append(name.strip("_") or default)
  return labels


class CollectionClock:
  """Time spent in Python's garbage collector while a kernel is lowered.

  A full collection stops every thread of the process and walks its whole
  heap: 51-64 ms on the H200 machine's host with JAX loaded. It starts when
  enough objects have been allocated, whoever allocates them, so it often
  lands on a process's first lowering (or on JAX's tracing, a second later).
  Reported beside the lowering's time so that one is not read as the other.
  """

  def __init__(self):
    self.seconds = 0.0
    self._started: float | None = None

  def __call__(self, phase: str, info: dict) -> None:
    if phase == "start":
      self._started = time.perf_counter()
    elif self._started is not None:
      self.seconds += time.perf_counter() - self._started
      self._started = None

  def __enter__(self) -> "CollectionClock":
    gc.callbacks.append(self)
    return self

  def __exit__(self, *exc) -> None:
    gc.callbacks.remove(self)


def kernel_name_of(jaxpr, name: str | None = None) -> str:
  from jax._src.interpreters import mlir
  fn = name or getattr(jaxpr.debug_info, "func_name", None) or "kernel"
  return mlir.sanitize_name(fn)


def lower_kernel(jaxpr, grid_mapping, *, num_warps: int, num_stages: int,
                 compute_capability: int = 90, name: str | None = None,
                 enable_fp_fusion: bool = False,
                 debug: bool = False, call_site=None,
                 input_output_aliases=None, check_bounds: bool = False) -> GeneratedKernel:
  """Lowers the jaxpr of a pallas_call to a GeneratedKernel (Triton source).

  `input_output_aliases`: the pallas_call's (input index, output index)
  pairs. Which refs may share memory decides which loads a write makes
  stale; None (unknown) means any ref may alias any other.

  `call_site` is the source info of the pallas_call equation (anything
  with a `.traceback`): errors about the call as a whole (grid, BlockSpecs,
  scratch shapes) point at the user's line there.
  """
  with CollectionClock() as collections:
    gk = _lower_kernel(jaxpr, grid_mapping, collections, num_warps=num_warps,
                       num_stages=num_stages, compute_capability=compute_capability,
                       name=name, enable_fp_fusion=enable_fp_fusion, call_site=call_site,
                       input_output_aliases=input_output_aliases, check_bounds=check_bounds)
  if debug:
    print(f"\npallas-prof: kernel jaxpr for {gk.source_info}:\n{jaxpr}\n")
    print(f"pallas-prof: generated Triton ({gk.path}):\n{gk.source}")
  return gk


def _lower_kernel(jaxpr, grid_mapping, collections: CollectionClock, *, num_warps, num_stages,
                  compute_capability, name, enable_fp_fusion, call_site,
                  input_output_aliases, check_bounds=False) -> GeneratedKernel:
  start_time = time.perf_counter()
  kname = kernel_name_of(jaxpr, name)
  src_info = getattr(jaxpr.debug_info, "func_src_info", None) or kname
  jaxpr_text = str(jaxpr)

  def call_error(reason: str, hint: str | None) -> LoweringError:
    site = pallas_call_info(call_site, jaxpr, kname, grid_mapping)
    return LoweringError(reason, hint=hint, kernel=kname, eqn=site, jaxpr_text=jaxpr_text,
                         rule="pallas_call", details={"kernel": src_info})

  with hooks.observer().kernel(kname, {"pallas.kernel": kname,
                                       "pallas.grid": str(tuple(grid_mapping.grid)),
                                       "pallas.num_warps": num_warps,
                                       "pallas.num_stages": num_stages,
                                       "pallas.source": src_info}) as kernel_span:
    try:
      _check_call(grid_mapping)
      grid = static_grid(grid_mapping)
    except Unsupported as e:
      raise call_error(e.reason, e.hint) from None
    header = [f"Triton kernel generated by pallas-prof from the Pallas kernel {src_info}",
              f"grid {grid}, num_warps={num_warps}, num_stages={num_stages}"
              + (", enable_fp_fusion=True" if enable_fp_fusion else ""),
              _operands_line(jaxpr, grid_mapping),
              "each line's comment: [equation index] primitive @ your file:line"]
    b = KernelBuilder(kname, header)
    kernel = KernelContext(b, kname, grid, [], compute_capability,
                           getattr(grid_mapping, "grid_names", None), jaxpr_text)
    if check_bounds:
      from .bounds import SiteTable
      kernel.bounds = SiteTable()
    try:
      params = _lower_kernel_body(kernel, jaxpr, grid_mapping, input_output_aliases)
      launch = kernel.launch_grid
    except Unsupported as e:
      raise call_error(e.reason, e.hint) from None
    except UnsupportedDtype as e:
      raise call_error(str(e), "cast to a supported dtype outside the kernel") from None
    source, line_map = b.render()
    key = hashlib.sha256(source.encode()).hexdigest()
    kernel_span.set("pallas.source_key", key)   # ties the kernel's compile spans to this one
    if collections.seconds:
      kernel_span.set("pallas.lowering.gc_ms", collections.seconds * 1e3)
  path = _write_source(kname, key, source)
  gk = GeneratedKernel(name=b.kernel_name, source=source, path=path, line_map=line_map,
                       eqns=sorted(b.eqns, key=lambda e: e.index), params=params, grid=grid,
                       launch_grid=launch, num_warps=num_warps, num_stages=num_stages,
                       enable_fp_fusion=enable_fp_fusion,
                       jaxpr_text=jaxpr_text, source_info=src_info,
                       lowering_seconds=time.perf_counter() - start_time, key=key,
                       atomic_params=tuple(sorted(kernel.atomic_refs)),
                       gc_seconds=collections.seconds,
                       bounds_sites=tuple(kernel.bounds.sites) if kernel.bounds else (),
                       check_bounds=bool(check_bounds))
  return gk


def _operands_line(jaxpr, grid_mapping) -> str:
  """The operands' dtypes and shapes: they are not otherwise in the source text,
  and two kernels that differ only there must not share a file or a compile."""
  n_in, n_out = grid_mapping.num_inputs, grid_mapping.num_outputs
  labels = _arg_labels(jaxpr, n_in, n_out)
  parts = []
  for i, (bm, label) in enumerate(zip(grid_mapping.block_mappings, labels)):
    aval = bm.array_aval
    shape = ",".join(str(d) for d in aval.shape)
    parts.append(f"{label} {np.dtype(aval.dtype).name}[{shape}]"
                 + ("" if i < n_in else " (out)"))
  return "operands: " + ", ".join(parts)


def pallas_call_info(call_site, jaxpr, kname: str, grid_mapping=None) -> EqnInfo:
  """The pallas_call itself as an equation, for errors about the whole call.

  Its line is the user's pallas_call: from the equation's traceback under
  jit, from the live Python stack when called eagerly (JAX traces an eager
  pallas_call inside its own jit, which cuts the user's frames from the
  equation's traceback); failing both, the kernel function's definition.
  """
  frame = compat.user_frame(call_site) if call_site is not None else None
  if frame is not None:
    file, line, function = frame.file_name, frame.start_line, frame.function_name
  else:
    file, line, function = _live_user_frame() or _definition_site(jaxpr)
  grid = getattr(grid_mapping, "grid", None)
  text = f"pallas_call[name={kname}" + (f", grid={tuple(grid)}]" if grid is not None else "]")
  return EqnInfo(index=-1, path="pallas_call", primitive="pallas_call", file=file, line=line,
                 function=function, parent=None, region="call", text=text, in_avals=(),
                 out_avals=())


def _live_user_frame():
  for summary in reversed(traceback.extract_stack()):
    if compat._is_user_file(summary.filename):
      return summary.filename, summary.lineno, summary.name
  return None


def _definition_site(jaxpr):
  """(file, line, function) of the kernel function, from "name at file:line"."""
  info = getattr(jaxpr.debug_info, "func_src_info", None) or ""
  name, sep, where = info.rpartition(" at ")
  path, _, line = where.rpartition(":")
  if not sep or not line.isdigit():
    return None, None, None
  return path, int(line), name


def _check_call(grid_mapping) -> None:
  """What pallas-prof cannot lower, whatever the kernel does."""
  if getattr(grid_mapping, "num_dynamic_grid_bounds", 0):
    raise Unsupported("dynamic grid bounds (a grid size traced inside jit)",
                      "use a static grid (Python ints), e.g. mark the size static with "
                      "jax.jit(..., static_argnums=...)")
  if getattr(grid_mapping, "num_index_operands", 0):
    raise Unsupported("scalar prefetch (num_scalar_prefetch)",
                      "pass the scalars as ordinary inputs and read them in the kernel")
  if getattr(grid_mapping, "num_scratch_operands", 0) or getattr(grid_mapping, "scratch_avals", ()):
    raise Unsupported("scratch_shapes", "Triton keeps intermediates in registers: compute "
                      "them as values (carry them through loops) instead of scratch refs")


def static_grid(grid_mapping) -> tuple[int, ...]:
  grid = []
  for g in grid_mapping.grid:
    if not isinstance(g, (int, np.integer)):
      raise Unsupported(f"grid dimension {g!r} is not a static int",
                        "use a static grid (Python ints)")
    grid.append(int(g))
  return tuple(grid)


def _lower_kernel_body(kernel: KernelContext, jaxpr, grid_mapping,
                       input_output_aliases=None) -> list[KernelParam]:
  b = kernel.builder
  n_in = grid_mapping.num_inputs
  n_out = grid_mapping.num_outputs
  block_mappings = grid_mapping.block_mappings
  labels = _arg_labels(jaxpr, n_in, n_out)
  names = [b.add_param(label) for label in labels]
  if kernel.bounds is not None:
    kernel.bounds.param = b.add_param(kernel.bounds.param)
  kernel.may_alias = _alias_sets(names, n_in, input_output_aliases)
  launch, axes = launch_grid_for(kernel.grid, tuple(grid_mapping.vmapped_dims))
  kernel.launch_grid = launch
  with b.note("program ids of the grid"):
    pids = _emit_program_ids(b, kernel.grid, axes)
  vmapped = set(grid_mapping.vmapped_dims)
  kernel.program_ids = [p for i, p in enumerate(pids) if i not in vmapped]
  kernel.num_programs = [g for i, g in enumerate(kernel.grid) if i not in vmapped]
  refs, params = [], []
  for i, (bm, name, label) in enumerate(zip(block_mappings, names, labels)):
    refs.append(_block_ref(kernel, bm, name, label, pids))
    role = "input" if i < n_in else "output"
    params.append(KernelParam(name=name, label=label, dtype=np.dtype(bm.array_aval.dtype).name,
                              shape=tuple(bm.array_aval.shape), role=role,
                              index=i if i < n_in else i - n_in))
  if len(jaxpr.invars) != len(refs):
    raise Unsupported(f"kernel takes {len(jaxpr.invars)} refs but the call has "
                      f"{len(refs)} operands", None)
  lower_jaxpr(kernel, jaxpr, refs, parent=None, region="kernel")
  if kernel.bounds is not None:
    from .bounds import flag_length
    params.append(KernelParam(name=kernel.bounds.param, label="bounds flags", dtype="int32",
                              shape=(flag_length(kernel.bounds.sites),), role="check", index=0))
  return params


def _alias_sets(names: list[str], n_in: int, input_output_aliases):
  """param name -> the names of the params that may share its memory.

  Only an input and the output it is aliased to (input_output_aliases) share
  a buffer; distinct outputs never do, and inputs are only read, so two
  inputs on the same buffer cannot make a load stale. Aliasing is
  transitive here (sets are merged). None (unknown aliasing) stays None."""
  if input_output_aliases is None:
    return None
  groups = {name: {name} for name in names}
  for i, o in input_output_aliases:
    a, c = names[int(i)], names[n_in + int(o)]
    merged = groups[a] | groups[c]
    for name in merged:
      groups[name] = merged
  return {name: frozenset(group) for name, group in groups.items()}


# --- where generated kernels live ------------------------------------------------

def cache_dir() -> str:
  root = os.environ.get("PALLAS_PROF_CACHE_DIR") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pallas-prof")
  return root


def _write_source(name: str, key: str, source: str) -> str:
  # Triton reads kernel source back with inspect (and stamps the path into the
  # PTX line info), so each kernel is a real file, named by its content.
  directory = os.path.join(cache_dir(), "kernels")
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{name}_{key[:16]}.py")
  if not os.path.exists(path):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
      f.write(source)
    os.replace(tmp, path)
  return path
