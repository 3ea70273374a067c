"""JAX's own Pallas Triton backend (jax._src.pallas.triton), deprecated since jax 0.11 and
to be removed: whether it is there, and its lowering, for comparing pallas-prof with it
(pallas_call_rule.route_to_builtin) and for the calls pallas-prof hands back to JAX.

pallas-prof's own path needs none of it: nothing here imports it unless asked for its
lowering, and all of it may be absent. Beside compat/, the one other module that
reaches into JAX's internals (this one, for a part of JAX that is going away).
"""
from __future__ import annotations

import functools
import sys


def compiler_params_class():
  """The CompilerParams class of JAX's own Pallas Triton backend, None unless the user's
  code imported it (no instance exists before; this JAX may have no such backend)."""
  return getattr(sys.modules.get("jax._src.pallas.triton.core"), "CompilerParams", None)


def lowering(own_primitives=None):
  """(CompilerParams class, pallas_call lowering rule) of JAX's own Pallas Triton backend, to
  compare with it, None where this JAX has none; it then also lowers the primitives of
  `own_primitives` (backend/triton_primitives.py) as JAX's of the same names."""
  try:
    # lazy: private to JAX, absent in some releases (the except says what then)
    from jax._src.pallas.triton import core, pallas_call_registration, primitives
    from jax._src.pallas.triton import lowering as triton_lowering
  except ImportError:
    return None
  rules = triton_lowering.triton_lowering_rules
  for name in ("atomic_rmw_p", "atomic_cas_p", "debug_barrier_p", "elementwise_inline_asm_p",
               "max_contiguous_p"):
    ours, theirs = getattr(own_primitives, name, None), getattr(primitives, name)
    if ours is not None and theirs in rules:
      rules[ours] = functools.partial(_their_rule, rules[theirs], primitives.AtomicOpType)
  return core.CompilerParams, pallas_call_registration.pallas_call_lowering


def _their_rule(rule, their_atomic_type, ctx, *args, atomic_type=None, **params):
  if atomic_type is not None:      # their rule compares with their enum
    params["atomic_type"] = their_atomic_type(atomic_type.value)
  return rule(ctx, *args, **params)
