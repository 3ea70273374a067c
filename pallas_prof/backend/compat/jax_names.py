"""JAX's internal names the lowering, its rules and pallas-prof's own primitives use: the
Pallas and state types and primitives, the primitives the rules lower, the effects of refs,
discharge registration, and JAX's helpers the rules borrow (erf_inv, the scan pattern,
lax's special functions). Where a JAX version lacks a name it is None.
"""
from __future__ import annotations

import jax
from jax._src import ad_checkpoint as _ad_checkpoint
from jax._src import ad_util as _ad_util
from jax._src import core as jax_core
from jax._src import custom_derivatives as _custom_derivatives
from jax._src import debugging as _debugging
from jax._src import effects as _effects
from jax._src import pjit as _pjit
from jax._src.interpreters import mlir
from jax._src.lax import lax as _lax_internal
from jax._src.pallas import core as pallas_core
from jax._src.pallas import pallas_call as _pallas_call_mod
from jax._src.pallas import primitives as pallas_primitives
from jax._src.state import discharge as _state_discharge
from jax._src.state import indexing as state_indexing
from jax._src.state import primitives as state_primitives
from jax._src.state import types as state_types

JAX_VERSION = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())

pallas_call_p = _pallas_call_mod.pallas_call_p

# Block dimension kinds of a BlockMapping.
Blocked = pallas_core.Blocked
Squeezed = pallas_core.Squeezed
Element = pallas_core.Element
BoundedSlice = getattr(pallas_core, "BoundedSlice", None)

NDIndexer = state_indexing.NDIndexer
Slice = state_indexing.Slice
AbstractRef = state_types.AbstractRef
Literal = jax_core.Literal
DropVar = jax_core.DropVar
Jaxpr = jax_core.Jaxpr
# jax 0.12 removed ClosedJaxpr (0.11 had folded it into Jaxpr, keeping the name)
JAXPR_TYPES = tuple(t for t in (getattr(jax_core, "ClosedJaxpr", None), Jaxpr) if t is not None)

get_p = state_primitives.get_p
swap_p = state_primitives.swap_p
addupdate_p = state_primitives.addupdate_p
program_id_p = pallas_primitives.program_id_p
num_programs_p = pallas_primitives.num_programs_p
load_p = pallas_primitives.load_p
masked_swap_p = pallas_primitives.swap_p
multiple_of_p = pallas_primitives.multiple_of_p


# --- JAX's own Pallas Triton backend (deprecated since jax 0.11): pallas-prof's own path
# needs none of it (backend/builtin_triton.py reaches it, to compare with it). The rules of
# its Triton-flavoured primitives (atomics, inline asm, ...) are bound once the user's code
# has imported their module (rules/table.py).
TRITON_PRIMITIVES_MODULE = "jax._src.pallas.triton.primitives"


# What pallas-prof's own Triton-flavoured primitives need (backend/triton_primitives.py)
kernel_local_effects = pallas_core.kernel_local_effects
control_flow_allowed_effects = _effects.control_flow_allowed_effects
get_ref_and_transforms = state_primitives.get_ref_and_transforms
swap_abstract_eval = pallas_primitives._swap_abstract_eval
transform_array = _state_discharge.transform_array
pallas_load, pallas_store = pallas_primitives.load, pallas_primitives.store
pallas_dot = getattr(pallas_primitives, "dot", None)
source_info_to_location = mlir.source_info_to_location    # an op's location: name stack, user line


def register_discharge_rule(prim, rule) -> None:
  """rule(in_avals, *operands, **params) -> (new operand values, results) discharges `prim`
  (jax 0.12 hands rules a context holding in_avals, earlier JAX in_avals and out_avals)."""
  if hasattr(_state_discharge, "DischargeContext"):
    wrapped = lambda ctx, *args, **params: rule(ctx.in_avals, *args, **params)  # noqa: E731
  else:
    wrapped = lambda in_avals, _, *args, **params: rule(in_avals, *args, **params)  # noqa: E731
  _state_discharge.register_discharge_rule(prim)(wrapped)


def block_dim_size(dim) -> int:
  return pallas_core._get_block_dim_size(dim)


# None where this JAX has no such primitive (rules.table.register skips None)
jit_p = getattr(_pjit, "jit_p", None) or getattr(_pjit, "pjit_p", None)
reshard_p = getattr(_pjit, "reshard_p", None)
custom_jvp_call_p = _custom_derivatives.custom_jvp_call_p
custom_vjp_call_p = getattr(_custom_derivatives, "custom_vjp_call_p", None)
custom_vjp_call_jaxpr_p = getattr(_custom_derivatives, "custom_vjp_call_jaxpr_p", None)
remat_p = _ad_checkpoint.remat_p
add_jaxvals_p = getattr(_ad_util, "add_jaxvals_p", None)
stop_gradient_p = getattr(_ad_util, "stop_gradient_p", None)
copy_p = getattr(_lax_internal, "copy_p", None)
reduce_precision_p = getattr(_lax_internal, "reduce_precision_p", None)
stack_p = getattr(_lax_internal, "stack_p", None)
unstack_p = getattr(_lax_internal, "unstack_p", None)
debug_print_p = _debugging.debug_print_p
merge_callback_args = _debugging.merge_callback_args      # debug_print's operands back in order
reciprocal_p = getattr(pallas_primitives, "reciprocal_p", None)

# Effects of ref operands (the dispatcher's memory-effect analysis)
ReadEffect = state_types.ReadEffect
WriteEffect = state_types.WriteEffect
AccumEffect = state_types.AccumEffect


def erf_inv_lowering_helper():
  """JAX's polynomial for erf_inv (what XLA and JAX's Triton backend compute)."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src.pallas import utils as pallas_utils
  return pallas_utils.erf_inv_lowering_helper


def pattern_match_scan_to_fori_loop(jaxpr, num_consts: int, num_carry: int):
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src.pallas import utils as pallas_utils
  return pallas_utils.pattern_match_scan_to_fori_loop(jaxpr, num_consts, num_carry)


def lax_special_impl(name: str, broadcast_and_upcast: bool):
  """JAX's lax-level implementation `name` of a special function (what XLA
  compiles), None where this JAX has none."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src.lax import special
  impl = getattr(special, name, None)
  if impl is not None and broadcast_and_upcast:
    impl = special._up_and_broadcast(impl)
  return impl
