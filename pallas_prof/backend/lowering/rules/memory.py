"""Ref reads and writes: x_ref[...], slices, pl.ds, integer and array indices,
pl.load/pl.store with mask/other, swap, addupdate, and atomics.

A ref is a pointer plus a view (ViewDim per array dimension): views.py
composes indexers onto the view, addressing.py turns it into an offset tensor
and a mask for a read or write; the rules here emit the loads and stores.
"""
from __future__ import annotations

import math

import numpy as np

from ... import compat, triton_primitives
from .. import emit
from ..codegen import is_packed4, Value, is_bool, is_float, next_pow2
from ...errors import Unsupported
from ..access.refs import RefValue
from ..access.addressing import (address, address_at_edge, check_value, load_expr, maskless_address,
                                 other_value, pointer, store_stmt)
from .table import register, register_deferred
from ..access.views import apply_transforms, result_shape
from .. import triton_names as tl

from jax import tree_util


_INDEXERS = ("indexers: ints, pl.ds with static size and stride, integer arrays; a view "
             "indexed by an array cannot be indexed again; int4: whole pairs of contiguous "
             "elements")


# --- rules -------------------------------------------------------------------------

def _read(ctx, ref: RefValue, mask=None, other=None, **load_options) -> Value:
  """Loads a view, or reuses what the same read (same view, mask and other)
  loaded earlier if nothing that may alias it was written since (the
  dispatcher forgets those loads) and the earlier read still dominates this
  one (loads are remembered per Scope). Volatile and `.cv` loads are always
  issued.

  When reads merge, the first read's eviction policy stays. For JAX's norm
  kernels that is evict_last (their final pass asked for evict_first): on an
  H200 both ran faster with the first policy than with evict_first
  (bench/suite/ops_vs_builtin.py; the figures in bench/results/archive/comment_figures.md)."""
  key = _load_key(ref, mask, other, load_options)
  if key is not None:
    earlier = ctx.reused_load(key)
    if earlier is not None:
      return earlier
  value = _emit_read(ctx, ref, mask, other, **load_options)
  if key is not None:
    ctx.remember_load(key, value)
  return value


def _load_key(ref: RefValue, mask, other, load_options):
  if load_options.get("volatile") or load_options.get("cache_modifier") == ".cv":
    return None
  if other is not None and not isinstance(other, Value):
    other = (type(other).__name__, repr(other))    # -0.0 is not 0.0 here
  key = ("load", ref, mask, other)
  try:
    hash(key)
  except TypeError:
    return None
  return key


def _moved_bytes(shape, dtype) -> int:
  """The bytes a block of `shape` occupies in memory (int4: two elements a byte)."""
  n = math.prod(shape)
  return (n + 1) // 2 if is_packed4(dtype) else n * np.dtype(dtype).itemsize


def _access(ref: RefValue) -> dict:
  """Which operand an access moves and its contiguous run (EquationRecord's facts)."""
  return {"operand": ref.label,
          "contiguous_bytes": None if is_packed4(ref.dtype) else ref.contiguous_bytes()}


def _emit_read(ctx, ref: RefValue, mask=None, other=None, **load_options) -> Value:
  shape = result_shape(ref)
  loaded = ctx.kernel.listeners.read(ctx, ref, shape, mask, other, load_options)
  if loaded is not None:                # another way to read (TMA's descriptors)
    ctx.record(bytes_read=_moved_bytes(shape, ref.dtype), **_access(ref))
    return loaded
  offset, full_mask, shape, edge = address_at_edge(ctx, ref, mask)
  ctx.record(bytes_read=_moved_bytes(shape, ref.dtype), **_access(ref))
  if is_packed4(ref.dtype):
    return _read_packed4(ctx, ref, offset, full_mask, shape, other, load_options)
  hint = f"{ref.label}_val" if not ref.label.endswith("_ref") else ref.label[:-4]
  fill = other_value(ctx, ref, other) if full_mask else None
  expr = load_expr(ref, offset, full_mask, fill, shape, **load_options)
  if edge is None:
    return ctx.value(hint, expr, ref.dtype, shape, opaque=True)
  # the programs whose block lies inside load whole vectors (addressing._splits_at_edge)
  inside, inner_mask = edge
  name = ctx.b.fresh(hint)
  with ctx.b.block(f"if {inside}:"):
    ctx.b.emit(f"{name} = " + load_expr(ref, offset, inner_mask, fill if inner_mask else None,
                                       shape, **load_options))
  with ctx.b.block("else:"):
    ctx.b.emit(f"{name} = {expr}")
  return Value(name, np.dtype(ref.dtype), tuple(shape), loops=ctx.b.loops_of(opaque=True))


def _write(ctx, ref: RefValue, value: Value, mask=None, eviction_policy=None) -> None:
  shape = result_shape(ref)
  if ctx.kernel.listeners.write(ctx, ref, shape, lambda: check_value(ctx, ref, value, shape),
                                mask, eviction_policy):   # another way (TMA's descriptors)
    ctx.record(bytes_written=_moved_bytes(shape, ref.dtype), **_access(ref))
    return
  offset, full_mask, shape, edge = address_at_edge(ctx, ref, mask, write=True)
  ctx.record(bytes_written=_moved_bytes(shape, ref.dtype), **_access(ref))
  value = check_value(ctx, ref, value, shape)
  if is_packed4(ref.dtype):
    _write_packed4(ctx, ref, offset, full_mask, shape, value, eviction_policy)
    return
  if edge is None:
    ctx.b.emit(store_stmt(ref, offset, value, full_mask, eviction_policy))
    return
  inside, inner_mask = edge           # as in _emit_read
  with ctx.b.block(f"if {inside}:"):
    ctx.b.emit(store_stmt(ref, offset, value, inner_mask, eviction_policy))
  with ctx.b.block("else:"):
    ctx.b.emit(store_stmt(ref, offset, value, full_mask, eviction_policy))


# --- int4 / uint4: two elements per byte ------------------------------------------

def _read_packed4(ctx, ref: RefValue, offset: str, mask, shape, other, load_options) -> Value:
  """Loads the byte holding each element and takes its nibble (element 2k is
  the low nibble of byte k, as XLA lays int4 out)."""
  b = ctx.b
  if offset == "0":
    raise Unsupported(f"reading one int4 element of {ref.label} at a fixed place",
                      "read a slice (or the whole block) and index the value")
  offs = b.assign(f"{ref.label}_nib", offset)
  args = [f"{ref.name} + {offs} // 2"]
  if mask is not None:
    args += [f"mask={mask}", "other=0"]
  for key in ("cache_modifier", "eviction_policy"):
    if load_options.get(key):
      args.append(f"{key}={load_options[key]!r}")
  raw = b.assign(f"{ref.label}_bytes", f"{tl.load}({', '.join(args)}).to({tl.int32})")
  nibble = f"(({raw} >> (({offs} % 2) * 4)) & 15)"
  signed = np.dtype(ref.dtype).name == "int4"
  expr = f"(({nibble} ^ 8) - 8).to({tl.int8})" if signed else f"{nibble}.to({tl.uint8})"
  value = ctx.value(ref.label[:-4] if ref.label.endswith("_ref") else f"{ref.label}_val",
                    expr, ref.dtype, shape, opaque=True)
  if mask is not None and other is not None:
    o = other_value(ctx, ref, other)
    value = ctx.value("masked", f"{tl.where}({mask}, {value}, {o})", ref.dtype, shape)
  return value


def _write_packed4(ctx, ref: RefValue, offset: str, mask, shape, value: Value,
                   eviction_policy) -> None:
  """Pairs elements 2k, 2k+1 of the last dimension into one byte and stores it.

  Needs the pairs to share bytes: the last dimension contiguous, even-sized,
  starting at an even element."""
  b = ctx.b
  last = [d for d in ref.dims if d.kind != "int"]
  if (not shape or shape[-1] % 2 or ref.array_shape[-1] % 2 or not last
      or last[-1] is not ref.dims[-1] or last[-1].kind != "slice" or last[-1].stride != 1
      or (last[-1].static_offset is not None and last[-1].static_offset % 2)
      or last[-1].extent % 2):
    raise Unsupported(f"writing int4 to {ref.label} other than whole pairs of contiguous "
                      "elements along the last dimension",
                      "write an even number of elements starting at an even index, or "
                      "compute in int8 and convert outside the kernel")
  padded = tuple(next_pow2(s) for s in shape)
  pairs = emit.shape_expr(padded[:-1] + (padded[-1] // 2, 2))
  full = emit.shape_expr(padded)
  offs = b.assign(f"{ref.label}_nib", f"{tl.broadcast_to}({offset}, {full})")
  lo_off, _ = b.fresh("lo_off"), None
  hi_off = b.fresh("hi_off")
  b.emit(f"{lo_off}, {hi_off} = {tl.split}({tl.reshape}({offs}, {pairs}))")
  bits = b.assign("bits", f"{tl.reshape}({value}.to({tl.int32}) & 15, {pairs})")
  lo, hi = b.fresh("lo"), b.fresh("hi")
  b.emit(f"{lo}, {hi} = {tl.split}({bits})")
  byte = b.assign(f"{ref.label}_bytes", f"({lo} | ({hi} << 4)).to({tl.uint8})")
  args = [f"{ref.name} + {lo_off} // 2", byte]
  if mask is not None:
    m_lo, m_hi = b.fresh("m_lo"), b.fresh("m_hi")
    b.emit(f"{m_lo}, {m_hi} = {tl.split}({tl.reshape}({tl.broadcast_to}({mask}, {full}), {pairs}))")
    args.append(f"mask={m_lo}")
  if eviction_policy:
    args.append(f"eviction_policy={eviction_policy!r}")
  b.emit(f"{tl.store}({', '.join(args)})")


@register(compat.get_p, limits=_INDEXERS)
def _get(ctx, ref, *leaves, tree):
  transforms = tree_util.tree_unflatten(tree, leaves)
  if not isinstance(ref, RefValue):
    if transforms:
      raise Unsupported("indexing a non-ref value")
    return ref
  return _read(ctx, apply_transforms(ctx, ref, transforms, _read))


@register(compat.swap_p, limits=_INDEXERS)
def _swap(ctx, ref, value, *leaves, tree):
  transforms = tree_util.tree_unflatten(tree, leaves)
  view = apply_transforms(ctx, ref, transforms, _read)
  old = _read(ctx, view) if ctx.out_used(0) else None
  _write(ctx, view, value)
  if old is None:
    shape = result_shape(view)
    return Value("None", ref.dtype, shape)
  return old


_CACHE_MODIFIERS = (".ca", ".cg", ".cv")
_EVICTION_POLICIES = ("evict_first", "evict_last")


def _check_load_options(cache_modifier, eviction_policy, volatile) -> None:
  """Rejects what Triton or ptxas would reject later, with a reason."""
  if cache_modifier and cache_modifier not in _CACHE_MODIFIERS:
    raise Unsupported(f"cache_modifier={cache_modifier!r}",
                      f"Triton loads take one of {', '.join(_CACHE_MODIFIERS)}")
  _check_eviction_policy(eviction_policy)
  # ptxas (sm_90) refuses these combinations of ld modifiers
  if volatile and eviction_policy:
    raise Unsupported("a volatile load with an eviction_policy",
                      "PTX volatile loads take no cache hints: drop one of them")
  if volatile and cache_modifier in (".ca", ".cg"):
    raise Unsupported(f"a volatile load with cache_modifier={cache_modifier!r}",
                      "PTX volatile loads bypass the caches: drop cache_modifier or use '.cv'")
  if eviction_policy and cache_modifier in (".ca", ".cg"):
    raise Unsupported(f"cache_modifier={cache_modifier!r} with eviction_policy="
                      f"{eviction_policy!r}", "PTX cannot combine them: keep one")


def _check_eviction_policy(eviction_policy) -> None:
  if eviction_policy and eviction_policy not in _EVICTION_POLICIES:
    raise Unsupported(f"eviction_policy={eviction_policy!r}",
                      f"use one of {', '.join(_EVICTION_POLICIES)}")


@register(compat.load_p, limits=(
    "cache_modifier .ca, .cg or .cv; eviction_policy evict_first or evict_last; a volatile "
    "load takes no cache hint; indexers as for get"))
def _masked_load(ctx, *flat, args_tree, eviction_policy, cache_modifier, is_volatile):
  ref, transforms, mask, other = args_tree.unflatten(flat)
  _check_load_options(cache_modifier, eviction_policy, is_volatile)
  if cache_modifier == ".cv":
    # a .cv load allocates no L1 line, so an L1 eviction hint has nothing to act
    # on; ptxas 12.8 ignores the pair, 13.x refuses it (Triton 3.9's ptxas-blackwell)
    eviction_policy = None
  view = apply_transforms(ctx, ref, transforms or (), _read)
  return _read(ctx, view, mask, other, cache_modifier=cache_modifier,
               eviction_policy=eviction_policy, volatile=is_volatile)


@register(compat.masked_swap_p)
def _masked_swap(ctx, *flat, args_tree, eviction_policy):
  ref, transforms, value, mask = args_tree.unflatten(flat)
  _check_eviction_policy(eviction_policy)
  view = apply_transforms(ctx, ref, transforms or (), _read)
  old = None
  if ctx.out_used(0):
    # JAX's semantics: masked-off lanes of the old value read back the new one
    other = check_value(ctx, view, value, result_shape(view)) if mask is not None else None
    old = _read(ctx, view, mask, other)
  _write(ctx, view, value, mask, eviction_policy)
  if old is None:
    return Value("None", ref.dtype, result_shape(view))
  return old


@register(compat.addupdate_p)
def _addupdate(ctx, ref, value, *leaves, tree):
  transforms = tree_util.tree_unflatten(tree, leaves)
  view = apply_transforms(ctx, ref, transforms, _read)
  _atomic(ctx, view, value, None, "add")
  return []


_ATOMIC_FUNCS = {"xchg": tl.atomic_xchg, "add": tl.atomic_add, "max": tl.atomic_max,
                 "min": tl.atomic_min, "and": tl.atomic_and, "or": tl.atomic_or,
                 "xor": tl.atomic_xor}


def _atomic(ctx, view: RefValue, value: Value, mask, kind: str) -> Value:
  ctx.kernel.atomic_refs.add(view.name)
  offset, full_mask, shape = address(ctx, view, mask, write=True, access="atomic")
  moved = _moved_bytes(shape, view.dtype)
  ctx.record(bytes_read=moved, bytes_written=moved)
  value = check_value(ctx, view, value, shape)
  if kind in ("add",) and is_bool(view.dtype):
    raise Unsupported("atomic add on bool", "use atomic_or")
  args = [pointer(view, offset), str(value)]
  if full_mask is not None:
    # Triton 3.9's interpreter takes only numpy bools as an atomic's mask, and
    # holds some int1 values (the bounds-checked mode's in_bounds of a scalar
    # index) as int32, which a cast to int1 leaves alone; a comparison makes
    # numpy bools, and compiles to nothing
    args.append(f"mask=({full_mask}) != 0")
  args.append('sem="acq_rel"')
  return ctx.value(f"{view.label}_old", f"{_ATOMIC_FUNCS[kind]}({', '.join(args)})",
                   view.dtype, shape, opaque=True)


def _atomic_rmw(ctx, *flat, args_tree, atomic_type):
  ref, transforms, value, mask = args_tree.unflatten(flat)
  view = apply_transforms(ctx, ref, transforms or (), _read)
  kind = atomic_type.value
  if kind in ("max", "min") and is_float(view.dtype) and view.dtype != np.float32:
    raise Unsupported(f"atomic_{kind} on {view.dtype}", "use float32 for float atomics")
  return _atomic(ctx, view, value, mask, kind)


def _atomic_cas(ctx, ref, cmp, value):
  view = ref
  ctx.kernel.atomic_refs.add(view.name)
  offset, in_bounds, shape = maskless_address(ctx, view, "atomic", "atomic_cas")
  moved = _moved_bytes(shape, view.dtype)
  ctx.record(bytes_read=moved, bytes_written=moved)
  cmp = check_value(ctx, view, cmp, shape)
  value = check_value(ctx, view, value, shape)
  if in_bounds is not None:
    # lanes outside the ref point at its first element (tl.atomic_cas takes no
    # mask): there they swap `cmp` for `cmp`, which leaves the element as it was
    value = ctx.value("cas_value", f"{tl.where}({in_bounds}, {value}, {cmp})", view.dtype, shape)
  return ctx.value(f"{view.label}_old",
                   f'{tl.atomic_cas}({pointer(view, offset)}, {cmp}, {value}, sem="acq_rel")',
                   view.dtype, shape, opaque=True)


def _max_contiguous(ctx, x, *, values):
  return ctx.value("contig", f"{tl.max_contiguous}({x}, {list(values)})", x.dtype, x.shape)


def _multiple_of(ctx, x, *, values):
  vals = list(values)
  if not x.shape:
    return ctx.value("aligned", f"{tl.multiple_of}({x}, {vals[0]})", x.dtype, x.shape)
  return ctx.value("aligned", f"{tl.multiple_of}({x}, {vals})", x.dtype, x.shape)


register(compat.multiple_of_p)(_multiple_of)

# pallas-prof's own (pallas_prof.triton) and JAX's (jax.experimental.pallas.triton, bound
# once the user's code imported it), with the same parameters
_ATOMIC_RMW_LIMITS = "float max/min on float32 only; no add on bool"
_ATOMIC_CAS_LIMITS = f"no view that needs a mask ({tl.atomic_cas} takes none)"
register(triton_primitives.atomic_rmw_p, limits=_ATOMIC_RMW_LIMITS)(_atomic_rmw)
register(triton_primitives.atomic_cas_p, limits=_ATOMIC_CAS_LIMITS)(_atomic_cas)
register(triton_primitives.max_contiguous_p)(_max_contiguous)
register_deferred(compat.TRITON_PRIMITIVES_MODULE, "atomic_rmw_p",
                  limits=_ATOMIC_RMW_LIMITS)(_atomic_rmw)
register_deferred(compat.TRITON_PRIMITIVES_MODULE, "atomic_cas_p",
                  limits=_ATOMIC_CAS_LIMITS)(_atomic_cas)
register_deferred(compat.TRITON_PRIMITIVES_MODULE, "max_contiguous_p")(_max_contiguous)


# jnp-style broadcasting of the scalar and array indices of one indexer
# (NDIndexer.from_indices_shape binds it when ints and int arrays are mixed).
@register(getattr(compat.state_primitives, "broadcast_to_p", None))
def _broadcast_index(ctx, x, *, shape):
  shape = tuple(shape)
  if len(x.shape) < len(shape):
    lead = len(shape) - len(x.shape)
    if x.shape:
      x = Value(emit.expand_to_rank(x, tuple(range(lead, len(shape))), len(shape)), x.dtype,
                (1,) * lead + tuple(x.shape), loops=x.loops)
  return emit.broadcast_to(ctx.b, x, shape, "bcast_idx")
