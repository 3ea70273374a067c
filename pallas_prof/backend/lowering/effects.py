"""What each equation does to memory, for the dispatcher: which refs it reads,
which it may write, so that loads are reused only while nothing may have
changed them and a read after a write of the same memory gets a barrier.
"""
from __future__ import annotations

import numpy as np

from .. import compat
from .access.refs import RefValue

# Read memory through their ref operands (the atomics and addupdate read, modify
# and write it); a swap reads the old value only when something uses it.
REF_READERS = frozenset({"get", "masked_load", "addupdate", "atomic_rmw", "atomic_cas"})
REF_SWAPS = frozenset({"swap", "masked_swap"})

# Write to memory through their first operand, whatever their effects say.
REF_WRITERS = frozenset({"swap", "masked_swap", "addupdate", "atomic_rmw", "atomic_cas"})
# May write anywhere (inline asm: it might).
ANYWHERE_WRITERS = frozenset({"elementwise_inline_asm", "elementwise_inline_asm_p"})

ANY_REF = object()    # a write whose target is unknown: it may change any ref


def refs_read(eqn, invals, live) -> set[str]:
  """The names of the refs an equation reads (a loop or branch: none of its own,
  its equations say)."""
  name = eqn.primitive.name
  if name in REF_SWAPS:
    var = eqn.outvars[0] if eqn.outvars else None
    if var is None or isinstance(var, compat.DropVar) or (live is not None and var not in live):
      return set()
  elif name not in REF_READERS:
    return set()
  return {v.name for v in invals if isinstance(v, RefValue)}


def write_targets(eqn, value_of):
  """What an equation may write to: None (nothing), a frozenset of ref
  names, or ANY_REF (unknown). Loads of what it writes are not reused after it.

  JAX tracks reads and writes of refs as effects on operands, also through
  control flow (a loop's effects are its body's, on the loop's operands):
  a write or accumulate effect names the operand written (a variable, or
  its position among the operands); `value_of(var)` is its value (None if
  not known). Any other effect, or a
  written operand that is not a kernel ref, counts as a write anywhere, and
  so do primitives known to write anywhere."""
  name = eqn.primitive.name
  if name in ANYWHERE_WRITERS:
    return ANY_REF
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

  if name in REF_WRITERS and not (eqn.invars and add(eqn.invars[0])):
    return ANY_REF
  for e in eqn.effects:
    if isinstance(e, compat.ReadEffect):
      continue
    if isinstance(e, (compat.WriteEffect, compat.AccumEffect)) \
        and add(getattr(e, "input", None)):
      continue
    return ANY_REF
  return frozenset(targets) if targets else None


def jaxpr_write_targets(jaxpr, env: dict):
  """write_targets of a whole jaxpr (a loop body, a branch) about to be
  lowered with `env` bound to its inputs; operands it computes itself count
  as unknown."""
  targets = set()
  for eqn in jaxpr.eqns:
    t = write_targets(eqn, env.get)
    if t is ANY_REF:
      return ANY_REF
    if t:
      targets |= t
  return frozenset(targets) if targets else None


def load_ref_name(key) -> str | None:
  """The name of the ref a `loads` key reads (memory._load_key), else None."""
  ref = key[1] if isinstance(key, tuple) and len(key) > 1 else None
  return ref.name if isinstance(ref, RefValue) else None

