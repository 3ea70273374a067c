"""pallas-prof's own Triton-flavoured Pallas primitives: atomics, compare-and-swap,
inline assembly, a barrier and a contiguity hint (pallas_prof.triton is their public face).

They take the parameters of JAX's own (jax._src.pallas.triton.primitives, deprecated
since jax 0.11 and to be removed) and the names jax 0.12 gives those, so one rule
(rules/memory.py, rules/misc.py) lowers both and a kernel may mix them. Their discharge
rules compute what JAX's do, so `interpret=True` runs them as it runs JAX's. Nothing
here imports JAX's Triton backend.
"""
from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax import tree_util
from jax.core import ShapedArray
from jax.extend.core import Effect, Primitive
from jax.interpreters import mlir

from . import compat


# --- inline assembly ----------------------------------------------------------------

def elementwise_inline_asm(asm: str, *, args: Sequence[jax.Array], constraints: str, pack: int,
                           result_shape_dtypes: Sequence[jax.ShapeDtypeStruct]
                           ) -> Sequence[jax.Array]:
  """Inline PTX applied elementwise (Triton's tl.inline_asm_elementwise): `constraints` in
  LLVM's syntax, `pack` elements of each argument per instance of `asm`. Runs compiled for
  a GPU only: Triton's interpreter runs no inline assembly."""
  return elementwise_inline_asm_p.bind(*args, asm=asm, constraints=constraints, pack=pack,
                                       result_shape_dtypes=tuple(result_shape_dtypes))


elementwise_inline_asm_p = Primitive("elementwise_inline_asm")
elementwise_inline_asm_p.multiple_results = True


@elementwise_inline_asm_p.def_abstract_eval
def _inline_asm_abstract_eval(*avals, result_shape_dtypes, **_):
  if not all(x.shape == y.shape for x, y in itertools.pairwise(avals)):
    raise ValueError("All arguments of elementwise_inline_asm must have the same shape")
  return [ShapedArray(s.shape, s.dtype) for s in result_shape_dtypes]


_TANH_ASM = {np.dtype(jnp.float16): ("tanh.approx.f16 $0, $1;", "h"),
             np.dtype(jnp.bfloat16): ("tanh.approx.bf16 $0, $1;", "h"),
             np.dtype(jnp.float32): ("tanh.approx.f32 $0, $1;", "f")}


def approx_tanh(x: jax.Array) -> jax.Array:
  """Elementwise approximate tanh (PTX tanh.approx) of a float16, bfloat16 or float32 array."""
  dtype = np.dtype(x.dtype)
  if dtype == np.float64:       # JAX's own refuses it only when lowering for CUDA
    raise TypeError("approx_tanh does not support float64 on CUDA (PTX has no tanh.approx.f64)")
  if dtype not in _TANH_ASM:
    raise TypeError(f"approx_tanh does not accept {x.dtype} arrays")
  asm, c = _TANH_ASM[dtype]
  [result] = elementwise_inline_asm(asm, args=[x], constraints=f"={c},{c}", pack=1,
                                    result_shape_dtypes=[jax.ShapeDtypeStruct(x.shape, x.dtype)])
  return result


# --- barrier ------------------------------------------------------------------------

class BarrierEffect(Effect):
  pass


barrier_effect = BarrierEffect()
compat.kernel_local_effects.add_type(BarrierEffect)
compat.control_flow_allowed_effects.add_type(BarrierEffect)

debug_barrier_p = Primitive("debug_barrier")
debug_barrier_p.multiple_results = True
debug_barrier_p.def_effectful_abstract_eval(lambda: ((), {barrier_effect}))


def debug_barrier() -> None:
  """Synchronizes the threads of a program (Triton's tl.debug_barrier)."""
  return debug_barrier_p.bind()


# --- loads and stores: Pallas's own, with the Triton options ------------------------------

def load(ref, *, mask=None, other=None, cache_modifier: str | None = None,
         eviction_policy: str | None = None, volatile: bool = False) -> jax.Array:
  """`ref[...]` where `mask` is True, `other` elsewhere (undefined without it); the options
  are Triton's tl.load's."""
  return compat.pallas_load(ref, None, mask=mask, other=other, cache_modifier=cache_modifier,
                            eviction_policy=eviction_policy, volatile=volatile)


def store(ref, val, *, mask=None, eviction_policy: str | None = None) -> None:
  """`ref[...] = val` where `mask` is True."""
  return compat.pallas_store(ref, None, val, mask=mask, eviction_policy=eviction_policy)


# --- atomics --------------------------------------------------------------------------

class AtomicOpType(enum.Enum):
  XCHG = "xchg"
  ADD = "add"
  MAX = "max"
  MIN = "min"
  AND = "and"
  OR = "or"
  XOR = "xor"


atomic_rmw_p = Primitive("atomic_rmw")


@atomic_rmw_p.def_effectful_abstract_eval
def _atomic_abstract_eval(*avals_flat, args_tree, atomic_type: AtomicOpType):
  ref = args_tree.unflatten(avals_flat)[0]
  if ref.dtype == np.dtype("float16") and atomic_type != AtomicOpType.ADD:
    raise ValueError(f"`atomic_{atomic_type.value}` does not support f16.")
  if ref.dtype in {np.dtype("bool"), np.dtype("int8"), np.dtype("int16"), jnp.bfloat16}:
    raise ValueError(f"`atomic_{atomic_type.value}` does not support {ref.dtype}.")
  return compat.swap_abstract_eval(*avals_flat, args_tree=args_tree)


_MONOIDS = {AtomicOpType.ADD: lambda x, y: x + y, AtomicOpType.MAX: jnp.maximum,
            AtomicOpType.MIN: jnp.minimum}


def _atomic_rmw_discharge(in_avals, *args_flat, args_tree, atomic_type):
  """What JAX's discharge of its atomic_rmw computes (interpret=True): add, max and min
  without a mask, on a window of slices or scalar indices or on gathered indices."""
  ref, transforms, val, mask = args_tree.unflatten(args_flat)
  *prev_transforms, idx = transforms
  ref = compat.transform_array(ref, prev_transforms)
  if mask is not None or atomic_type not in _MONOIDS:
    raise NotImplementedError(atomic_type if mask is None else "a masked atomic")
  monoid = _MONOIDS[atomic_type]
  if all(isinstance(s, compat.Slice) or not s.shape for s in idx.indices):
    scalar = [not isinstance(s, compat.Slice) and not s.shape for s in idx.indices]
    starts = [s.start if isinstance(s, compat.Slice) else s for s in idx.indices]
    sizes = tuple(s.size if isinstance(s, compat.Slice) else 1 for s in idx.indices)
    old = lax.dynamic_slice(ref, starts, slice_sizes=sizes)
    new = monoid(val[tuple(None if s else slice(None) for s in scalar)], old)
    x_new = lax.dynamic_update_slice(ref, new, start_indices=starts)
    out = old[tuple(0 if s else slice(None) for s in scalar)]
  elif all(not isinstance(s, compat.Slice) for s in idx.indices):
    out = ref[idx.indices]
    x_new = ref.at[idx.indices].set(monoid(out, val))
  else:
    raise NotImplementedError("an atomic over slices and gathered indices at once")
  return (x_new,) + (None,) * (len(in_avals) - 1), out


compat.register_discharge_rule(atomic_rmw_p, _atomic_rmw_discharge)


def _atomic_rmw(x_ref_or_view, idx, val, *, mask: Any | None, atomic_type: AtomicOpType):
  x_ref, transforms = compat.get_ref_and_transforms(x_ref_or_view, idx, "atomic_rmw")
  args_flat, args_tree = tree_util.tree_flatten((x_ref, transforms, val, mask))
  return atomic_rmw_p.bind(*args_flat, args_tree=args_tree, atomic_type=atomic_type)


def _atomic(kind: AtomicOpType, does: str):
  def atomic(x_ref_or_view, idx, val, *, mask: Any | None = None):
    return _atomic_rmw(x_ref_or_view, idx, val, mask=mask, atomic_type=kind)
  atomic.__name__ = atomic.__qualname__ = f"atomic_{kind.value}"
  atomic.__doc__ = (f"Atomically {does} where `mask` is True; returns the values there "
                    "before the operation.")
  return atomic


atomic_xchg = _atomic(AtomicOpType.XCHG, "sets x_ref_or_view[idx] = val")
atomic_add = _atomic(AtomicOpType.ADD, "computes x_ref_or_view[idx] += val")
atomic_max = _atomic(AtomicOpType.MAX, "computes x_ref_or_view[idx] = max(x_ref_or_view[idx], val)")
atomic_min = _atomic(AtomicOpType.MIN, "computes x_ref_or_view[idx] = min(x_ref_or_view[idx], val)")
atomic_and = _atomic(AtomicOpType.AND, "computes x_ref_or_view[idx] &= val")
atomic_or = _atomic(AtomicOpType.OR, "computes x_ref_or_view[idx] |= val")
atomic_xor = _atomic(AtomicOpType.XOR, "computes x_ref_or_view[idx] ^= val")


atomic_cas_p = Primitive("atomic_cas")


@atomic_cas_p.def_effectful_abstract_eval
def _atomic_cas_abstract_eval(ref_aval, cmp_aval, val_aval):
  if cmp_aval.dtype != val_aval.dtype or cmp_aval.shape != val_aval.shape:
    raise ValueError("cmp and val must have identical dtypes and shapes")
  for what, aval in (("ref", ref_aval), ("cmp", cmp_aval), ("val", val_aval)):
    if aval.shape:
      raise ValueError(f"{what} must be scalar.")
  return ShapedArray(val_aval.shape, val_aval.dtype), {compat.WriteEffect(0)}


compat.register_discharge_rule(
    atomic_cas_p, lambda in_avals, ref, cmp, val: ((jnp.where(ref == cmp, val, ref), None, None),
                                                   ref))


def atomic_cas(ref, cmp, val):
  """Atomically: the scalar ref's old value; `val` stored where it equalled `cmp`."""
  return atomic_cas_p.bind(ref, cmp, val)


# --- hints ----------------------------------------------------------------------------

max_contiguous_p = Primitive("max_contiguous")
max_contiguous_p.def_impl(lambda x, **_: x)
max_contiguous_p.def_abstract_eval(lambda aval, **_: aval)
mlir.register_lowering(max_contiguous_p, lambda _, x, **__: [x])


def max_contiguous(x, values):
  """A compiler hint: the first `values` elements of `x` are contiguous (tl.max_contiguous)."""
  if not isinstance(values, (list, tuple)):
    values = (values,)
  return max_contiguous_p.bind(x, values=tuple(values))

