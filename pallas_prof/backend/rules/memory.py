"""Ref reads and writes: x_ref[...], slices, pl.ds, integer and array indices,
pl.load/pl.store with mask/other, swap, addupdate, and atomics.

A ref is a pointer plus a view (ViewDim per array dimension). Indexers
compose onto the view; a read or write turns the view into an offset tensor
(and a mask when lanes are padded, the block overhangs the array, or a static
slice runs past the block).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import compat, emit
from ..codegen import is_packed4, Value, is_bool, is_float, next_pow2
from ..errors import Unsupported
from ..refs import RefValue, ViewDim
from .table import register, register_deferred

from jax import tree_util


# --- views -----------------------------------------------------------------------

def _as_int(ctx, v, dtype) -> Value:
  if isinstance(v, Value):
    return emit.cast(ctx.b, v, dtype, "idx")
  if isinstance(v, (int, np.integer)):
    return emit.const(int(v), dtype)
  raise Unsupported(f"index of type {type(v).__name__}", "use ints, pl.ds or int arrays")


def _add_scaled(ctx, base: Value, offset: Value, stride: int, dtype, hint) -> Value:
  """base + offset * stride, folding constants."""
  if offset.const is not None and base.const is not None:
    return emit.const(base.const + offset.const * stride, dtype)
  scaled = offset.expr if stride == 1 else f"{offset} * {stride}"
  if offset.const is not None:
    if offset.const == 0:
      return base
    scaled = str(offset.const * stride)
  if base.const == 0:
    if stride == 1 and offset.const is None:
      return offset
    return Value(ctx.assign_once(hint, scaled, f"{hint}: {scaled}"), np.dtype(dtype))
  expr = f"{base} + {scaled}"
  return Value(ctx.assign_once(hint, expr, f"{hint}: {expr}"), np.dtype(dtype))


def apply_indexer(ctx, ref: RefValue, indexer) -> RefValue:
  """Composes one NDIndexer (from x_ref.at[...] or x_ref[...]) onto a view."""
  if not isinstance(indexer, compat.NDIndexer):
    raise _unsupported_transform(indexer)
  visible = [i for i, d in enumerate(ref.dims) if d.kind == "slice"]
  if len(visible) != len(indexer.indices):
    raise Unsupported(f"indexer of rank {len(indexer.indices)} on a ref of rank {len(visible)}")
  dims = list(ref.dims)
  dt = ref.index_dtype
  for axis, idx in zip(visible, indexer.indices):
    d = ref.dims[axis]
    if isinstance(idx, compat.Slice):
      dims[axis] = _slice_dim(ctx, ref, axis, d, idx)
      continue
    index = _index_value(ctx, idx, dt)
    if index.shape:
      # `size` keeps the indexed dimension's length: the index's bounds
      dims[axis] = ViewDim("gather", d.start, d.size, d.stride, None, d.extent,
                           _gather_index(ctx, index, d, dt))
      continue
    if index.const is not None and index.const < 0:
      index = emit.const(index.const + d.size, dt)   # x_ref[-1]: NumPy's wrap-around
    start = _add_scaled(ctx, d.start, index, d.stride, dt, f"{ref.name}_i{axis}")
    static = None
    if d.static_offset is not None and index.const is not None:
      static = d.static_offset + index.const * d.stride
    dims[axis] = ViewDim("int", start, 1, 1, static, d.extent)
  return dataclasses.replace(ref, dims=tuple(dims),
                             gather_position=_gather_position(indexer))


def _slice_dim(ctx, ref: RefValue, axis: int, d: ViewDim, idx) -> ViewDim:
  if not isinstance(idx.size, (int, np.integer)):
    raise Unsupported("a pl.ds with a dynamic size", "slice sizes must be static ints")
  if not isinstance(idx.stride, (int, np.integer)):
    raise Unsupported("a pl.ds with a dynamic stride", "strides must be static ints")
  dt = ref.index_dtype
  start = _as_int(ctx, idx.start, dt)
  stride = int(idx.stride)
  new_start = _add_scaled(ctx, d.start, start, d.stride, dt, f"{ref.name}_s{axis}")
  static = None
  if d.static_offset is not None and start.const is not None:
    static = d.static_offset + start.const * d.stride
  return ViewDim("slice", new_start, int(idx.size), d.stride * stride, static, d.extent)


def _index_value(ctx, idx, dt) -> Value:
  """A scalar or array index as a Value (an index ref is read first)."""
  if isinstance(idx, (int, np.integer)):
    return emit.const(int(idx), dt)
  if isinstance(idx, RefValue):
    idx = _read(ctx, idx)        # x_ref[idx_ref]: JAX allows a ref of indices
  if not isinstance(idx, Value):
    raise Unsupported(f"index of type {type(idx).__name__}", "use ints, pl.ds or int arrays")
  if not np.issubdtype(idx.dtype, np.integer):
    raise Unsupported(f"an index of dtype {idx.dtype}", "index with integers")
  return idx if idx.shape else emit.cast(ctx.b, idx, dt, "idx")


def _gather_index(ctx, index: Value, d: ViewDim, dt) -> Value:
  """An integer-array index in the index dtype, used as given.

  Like JAX's own Triton backend, and unlike jnp's gather, entries are not
  wrapped or clamped: `i * block + jnp.arange(block)` must stay a contiguous
  range that Triton can turn into vector loads (a where/min/max on it costs
  2x on layer norm). Reads out of range are undefined (mask them, as JAX's
  GPU kernels do); writes out of range are dropped.
  """
  return emit.cast(ctx.b, index, dt, "gidx")


def _gather_position(indexer) -> int:
  """Where an indexer's integer-array dims go in the result (JAX = NumPy's rule):
  in place when the non-slice indices are adjacent, else in front."""
  is_int = [not isinstance(i, compat.Slice) for i in indexer.indices]
  if not any(is_int):
    return 0
  positions = [i for i, flag in enumerate(is_int) if flag]
  if any(b - a != 1 for a, b in zip(positions, positions[1:])):
    return 0
  return positions[0]   # every index before the first int index is a slice


def _unsupported_transform(transform) -> Unsupported:
  kind = type(transform).__name__
  hints = {
      "BitcastTransform": ("bitcasting a ref (x_ref.bitcast(...))",
                           "load the value and use lax.bitcast_convert_type on it"),
      "ReshapeTransform": ("reshaping a ref (x_ref.reshape(...))",
                           "load the value and reshape it, or give the BlockSpec the "
                           "shape you need"),
      "TransposeTransform": ("transposing a ref (x_ref.T / x_ref.transpose(...))",
                             "load the value and transpose it (jnp.transpose / .T)"),
  }
  reason, hint = hints.get(kind, (f"the ref transform {kind}",
                                  "only indexing (slices, pl.ds, ints, int arrays) is "
                                  "supported on refs; load the value and transform it"))
  return Unsupported(reason, hint)


def apply_transforms(ctx, ref, transforms) -> RefValue:
  if not isinstance(ref, RefValue):
    raise Unsupported("indexing a value that is not a kernel ref")
  for t in transforms:
    if any(d.kind == "gather" for d in ref.dims):
      raise Unsupported("indexing a ref view that was itself indexed by an array",
                        "index with the array last")
    ref = apply_indexer(ctx, ref, t)
  return ref


def result_shape(ref: RefValue) -> tuple[int, ...]:
  """The shape of a read through this view (NumPy's advanced-indexing order)."""
  slice_sizes = [d.size for d in ref.dims if d.kind == "slice"]
  gathers = [d for d in ref.dims if d.kind == "gather"]
  if not gathers:
    return tuple(slice_sizes)
  int_shape = np.broadcast_shapes(*[g.index.shape for g in gathers])
  pos = ref.gather_position
  return tuple(slice_sizes[:pos]) + tuple(int_shape) + tuple(slice_sizes[pos:])


# --- addresses -------------------------------------------------------------------

def address(ctx, ref: RefValue, user_mask: Value | None = None, *, write: bool = False,
            check: bool = True):
  """(offsets expression, mask expression or None, result shape) for a view.

  Integer-array indices out of range have their lanes dropped for writes;
  reads use them as given (see _gather_index). In the bounds-checked mode
  (ctx.kernel.bounds) every index is also checked against the ref's extent
  (bounds.emit_check) and lanes outside are dropped.
  """
  b = ctx.b
  shape = result_shape(ref)
  rank = len(shape)
  padded = tuple(next_pow2(s) for s in shape)
  dt = ref.index_dtype
  strides = ref.strides
  terms, masks = [], []
  checking = check and ctx.kernel.bounds is not None
  active, checks = [], []     # check mode: the lanes really accessed; (local index, extent)
  slice_pos = 0
  pos = ref.gather_position
  gathers = [d for d in ref.dims if d.kind == "gather"]
  int_rank = len(np.broadcast_shapes(*[g.index.shape for g in gathers])) if gathers else 0
  for axis, d in enumerate(ref.dims):
    array_size = ref.array_shape[axis]
    if d.kind == "int":
      index = d.start.expr
      if checking and not _statically_inside(d):
        checks.append(_local_index(ref, axis, index))
      if _needs_bound_mask(ref, axis, d):
        masks.append(f"({index} < {array_size})")
      terms.append(_scaled(index, strides[axis]))
      continue
    if d.kind == "gather":
      g, in_range = _bounded_gather_index(ctx, d, write)
      positions = tuple(range(pos + int_rank - len(g.shape), pos + int_rank))
      index = emit.expand_to_rank(g, positions, rank)
      if in_range is not None and not checking:
        masks.append(emit.expand_to_rank(in_range, positions, rank))
      if d.start.const != 0:
        index = f"({d.start} + {index}{_times(d.stride)})"
      elif d.stride != 1:
        index = f"({index} * {d.stride})"
      if checking:
        checks.append(_local_index(ref, axis, index))
      if ref.ragged[axis]:
        masks.append(f"({index} < {array_size})")
      terms.append(_scaled(index, strides[axis]))
      continue
    # a slice: one output dimension
    out_axis = slice_pos if slice_pos < pos or not gathers else slice_pos + int_rank
    slice_pos += 1
    lanes = f"tl.arange(0, {padded[out_axis]})"
    if dt == np.int64:
      lanes = f"{lanes}.to(tl.int64)"
    step = f" * {d.stride}" if d.stride != 1 else ""
    if d.start.const == 0:
      index_1d = f"{lanes}{step}"
    else:
      index_1d = f"{d.start} + {lanes}{step}"
    # keyed by ref too: a store to o_ref reads better with o_ref's own vectors
    name = ctx.assign_once(f"{ref.name}_ax{axis}", index_1d, f"{ref.name}: {index_1d}")
    index = emit.expand_to_rank(Value(name, dt, (d.size,)), (out_axis,), rank)
    if d.size != padded[out_axis]:
      lane_ok = emit.expand_to_rank(
          Value(f"(tl.arange(0, {padded[out_axis]}) < {d.size})", np.dtype(bool), (d.size,)),
          (out_axis,), rank)
      masks.append(lane_ok)
      active.append(str(lane_ok))
    if checking and not _statically_inside(d):
      checks.append(_local_index(ref, axis, index))
    if _needs_bound_mask(ref, axis, d):
      masks.append(f"({index} < {array_size})")
    terms.append(_scaled(index, strides[axis]))
  # padded lanes of gathered dims hold garbage indices: mask them
  for k in range(int_rank):
    size = shape[pos + k]
    if size != padded[pos + k]:
      cond = Value(f"(tl.arange(0, {padded[pos + k]}) < {size})", np.dtype(bool), (size,))
      masks.append(emit.expand_to_rank(cond, (pos + k,), rank))
      active.append(str(masks[-1]))
  terms = [t for t in terms if t != "0"]
  offset = " + ".join(terms) if terms else "0"
  if user_mask is not None:
    if tuple(user_mask.shape) != tuple(shape) and user_mask.shape:
      user_mask = emit.broadcast_to(b, user_mask, shape)
    masks.append(str(user_mask))
    active.append(str(user_mask))
  if checking:
    in_bounds = _check_access(ctx, ref, checks, active, shape, write)
    if in_bounds is not None:
      masks.append(in_bounds)
  mask = None
  if masks:
    combined = " & ".join(masks)
    mask = masks[0] if len(masks) == 1 else ctx.assign_once(f"{ref.name}_mask", combined,
                                                           f"{ref.name}: {combined}")
  return offset, mask, shape


def _statically_inside(d: ViewDim) -> bool:
  """A view dimension whose offset in its block is known and stays inside it."""
  if d.static_offset is None:
    return False
  last = d.static_offset + (d.size - 1) * d.stride
  return 0 <= d.static_offset and last < d.extent


def _constant(expr: str) -> int | None:
  try:
    return int(expr)
  except (TypeError, ValueError):
    return None


def _local_index(ref: RefValue, axis: int, index: str) -> tuple[str, int]:
  """(index relative to the ref the kernel sees, that ref's extent) along `axis`."""
  d = ref.dims[axis]
  origin = ref.origin[axis] if ref.origin else None
  if origin is None:
    return index, ref.array_shape[axis]
  if origin.const == 0:
    return index, d.extent
  return f"({index} - {origin})", d.extent


def _check_access(ctx, ref: RefValue, checks, active, shape, write: bool) -> str | None:
  """The in-bounds mask of a bounds-checked access; None when every index is a
  constant inside its ref (nothing to check at run time)."""
  from ..bounds import emit_check
  static = [_constant(i) for i, _ in checks]
  if all(c is not None and 0 <= c < e for c, (_, e) in zip(static, checks)):
    return None          # also when no dimension needs a check

  checks = [(f"tl.full((), {c}, tl.int32)" if c is not None else i, e)
            for c, (i, e) in zip(static, checks)]
  site = ctx.kernel.bounds.add(eqn_index=ctx.info.index, access="write" if write else "read",
                               ref=ref.label, block_shape=tuple(e for _, e in checks),
                               array_shape=tuple(ref.array_shape),
                               dtype=np.dtype(ref.dtype).name)
  return emit_check(ctx, site, [i for i, _ in checks], " & ".join(active) or None, shape)


def _bounded_gather_index(ctx, d: ViewDim, write: bool):
  """(index, in-range mask or None) for an integer-array index of a view of d.size."""
  g = d.index
  if write:
    cond = f"({g} >= 0) & ({g} < {d.size})"
    return g, Value(ctx.assign_once("in_range", cond), np.dtype(bool), g.shape)
  return g, None


def _times(stride: int) -> str:
  return "" if stride == 1 else f" * {stride}"


def _scaled(index: str, stride: int) -> str:
  if index == "0":
    return "0"
  return index if stride == 1 else f"{index} * {stride}"


def _needs_bound_mask(ref: RefValue, axis: int, d: ViewDim) -> bool:
  if ref.ragged[axis]:
    return True
  if d.static_offset is None:
    return False  # dynamic start: assumed in bounds, like JAX's Triton backend
  last = d.static_offset + (d.size - 1) * d.stride
  return last >= d.extent or d.static_offset < 0


def _pointer(ref: RefValue, offset: str) -> str:
  return ref.name if offset == "0" else f"{ref.name} + {offset}"


def _load_expr(ref, offset, mask, other, shape, cache_modifier=None, eviction_policy=None,
               volatile=False):
  args = [_pointer(ref, offset)]
  if mask is not None:
    args.append(f"mask={mask}")
    if other is not None:
      args.append(f"other={other}")
  if cache_modifier:
    args.append(f"cache_modifier={cache_modifier!r}")
  if eviction_policy:
    args.append(f"eviction_policy={eviction_policy!r}")
  if volatile:
    args.append("volatile=True")
  return f"tl.load({', '.join(args)})"


def _store_stmt(ref, offset, value, mask, eviction_policy=None):
  args = [_pointer(ref, offset), str(value)]
  if mask is not None:
    args.append(f"mask={mask}")
  if eviction_policy:
    args.append(f"eviction_policy={eviction_policy!r}")
  return f"tl.store({', '.join(args)})"


def _check_value(ctx, ref: RefValue, value: Value, shape) -> Value:
  if value.dtype != ref.dtype:
    value = emit.cast(ctx.b, value, ref.dtype)
  if tuple(value.shape) != tuple(shape):
    if not value.shape:
      value = emit.broadcast_to(ctx.b, value, shape)
    else:
      raise Unsupported(f"storing a value of shape {value.shape} into a view of shape {shape}")
  return value


def _other_value(ctx, ref: RefValue, other) -> str | None:
  if other is None:
    return None
  if not isinstance(other, Value):
    other = emit.const(other, ref.dtype)
  if other.dtype != ref.dtype:
    other = emit.cast(ctx.b, other, ref.dtype)
  return str(other)


# --- rules -------------------------------------------------------------------------

def _read(ctx, ref: RefValue, mask=None, other=None, **load_options) -> Value:
  """Loads a view, or reuses what the same read (same view, mask and other)
  loaded earlier if nothing that may alias it was written since (the
  dispatcher forgets those loads) and the earlier read still dominates this
  one (loads are remembered per Scope). Volatile and `.cv` loads are always
  issued.

  When reads merge, the first read's eviction policy stays. For JAX's norm
  kernels that is evict_last (their final pass asked for evict_first): on an
  H200, layer_norm ran in 0.077 ms with the first policy and 0.085 ms with
  evict_first, rms_norm 0.080 and 0.087 ms (bench/ops_vs_builtin.py, one run
  each, bench/results/archive/README.md)."""
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


def _emit_read(ctx, ref: RefValue, mask=None, other=None, **load_options) -> Value:
  offset, full_mask, shape = address(ctx, ref, mask)
  ctx.record(bytes_read=_moved_bytes(shape, ref.dtype))
  if is_packed4(ref.dtype):
    return _read_packed4(ctx, ref, offset, full_mask, shape, other, load_options)
  expr = _load_expr(ref, offset, full_mask, _other_value(ctx, ref, other) if full_mask else None,
                    shape, **load_options)
  return ctx.value(f"{ref.label}_val" if not ref.label.endswith("_ref") else
                   ref.label[:-4], expr, ref.dtype, shape)


def _write(ctx, ref: RefValue, value: Value, mask=None, eviction_policy=None) -> None:
  offset, full_mask, shape = address(ctx, ref, mask, write=True)
  ctx.record(bytes_written=_moved_bytes(shape, ref.dtype))
  value = _check_value(ctx, ref, value, shape)
  if is_packed4(ref.dtype):
    _write_packed4(ctx, ref, offset, full_mask, shape, value, eviction_policy)
    return
  ctx.b.emit(_store_stmt(ref, offset, value, full_mask, eviction_policy))


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
  raw = b.assign(f"{ref.label}_bytes", f"tl.load({', '.join(args)}).to(tl.int32)")
  nibble = f"(({raw} >> (({offs} % 2) * 4)) & 15)"
  signed = np.dtype(ref.dtype).name == "int4"
  expr = f"(({nibble} ^ 8) - 8).to(tl.int8)" if signed else f"{nibble}.to(tl.uint8)"
  value = ctx.value(ref.label[:-4] if ref.label.endswith("_ref") else f"{ref.label}_val",
                    expr, ref.dtype, shape)
  if mask is not None and other is not None:
    o = _other_value(ctx, ref, other)
    value = ctx.value("masked", f"tl.where({mask}, {value}, {o})", ref.dtype, shape)
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
  offs = b.assign(f"{ref.label}_nib", f"tl.broadcast_to({offset}, {full})")
  lo_off, _ = b.fresh("lo_off"), None
  hi_off = b.fresh("hi_off")
  b.emit(f"{lo_off}, {hi_off} = tl.split(tl.reshape({offs}, {pairs}))")
  bits = b.assign("bits", f"tl.reshape({value}.to(tl.int32) & 15, {pairs})")
  lo, hi = b.fresh("lo"), b.fresh("hi")
  b.emit(f"{lo}, {hi} = tl.split({bits})")
  byte = b.assign(f"{ref.label}_bytes", f"({lo} | ({hi} << 4)).to(tl.uint8)")
  args = [f"{ref.name} + {lo_off} // 2", byte]
  if mask is not None:
    m_lo, m_hi = b.fresh("m_lo"), b.fresh("m_hi")
    b.emit(f"{m_lo}, {m_hi} = tl.split(tl.reshape(tl.broadcast_to({mask}, {full}), {pairs}))")
    args.append(f"mask={m_lo}")
  if eviction_policy:
    args.append(f"eviction_policy={eviction_policy!r}")
  b.emit(f"tl.store({', '.join(args)})")


@register(compat.get_p, limits="indexers: ints, pl.ds with static size and stride, integer arrays; a view indexed by an array cannot be indexed again; int4: whole pairs of contiguous elements")
def _get(ctx, ref, *leaves, tree):
  transforms = tree_util.tree_unflatten(tree, leaves)
  if not isinstance(ref, RefValue):
    if transforms:
      raise Unsupported("indexing a non-ref value")
    return ref
  return _read(ctx, apply_transforms(ctx, ref, transforms))


@register(compat.swap_p, limits="indexers: ints, pl.ds with static size and stride, integer arrays; a view indexed by an array cannot be indexed again; int4: whole pairs of contiguous elements")
def _swap(ctx, ref, value, *leaves, tree):
  transforms = tree_util.tree_unflatten(tree, leaves)
  view = apply_transforms(ctx, ref, transforms)
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
  view = apply_transforms(ctx, ref, transforms or ())
  return _read(ctx, view, mask, other, cache_modifier=cache_modifier,
               eviction_policy=eviction_policy, volatile=is_volatile)


@register(compat.masked_swap_p)
def _masked_swap(ctx, *flat, args_tree, eviction_policy):
  ref, transforms, value, mask = args_tree.unflatten(flat)
  _check_eviction_policy(eviction_policy)
  view = apply_transforms(ctx, ref, transforms or ())
  old = None
  if ctx.out_used(0):
    # JAX's semantics: masked-off lanes of the old value read back the new one
    other = _check_value(ctx, view, value, result_shape(view)) if mask is not None else None
    old = _read(ctx, view, mask, other)
  _write(ctx, view, value, mask, eviction_policy)
  if old is None:
    return Value("None", ref.dtype, result_shape(view))
  return old


@register(compat.addupdate_p)
def _addupdate(ctx, ref, value, *leaves, tree):
  transforms = tree_util.tree_unflatten(tree, leaves)
  view = apply_transforms(ctx, ref, transforms)
  _atomic(ctx, view, value, None, "add")
  return []


_ATOMIC_FUNCS = {"xchg": "tl.atomic_xchg", "add": "tl.atomic_add", "max": "tl.atomic_max",
                 "min": "tl.atomic_min", "and": "tl.atomic_and", "or": "tl.atomic_or",
                 "xor": "tl.atomic_xor"}


def _atomic(ctx, view: RefValue, value: Value, mask, kind: str) -> Value:
  ctx.kernel.atomic_refs.add(view.name)
  offset, full_mask, shape = address(ctx, view, mask, write=True)
  moved = _moved_bytes(shape, view.dtype)
  ctx.record(bytes_read=moved, bytes_written=moved)
  value = _check_value(ctx, view, value, shape)
  if kind in ("add",) and is_bool(view.dtype):
    raise Unsupported("atomic add on bool", "use atomic_or")
  args = [_pointer(view, offset), str(value)]
  if full_mask is not None:
    args.append(f"mask={full_mask}")
  args.append('sem="acq_rel"')
  return ctx.value(f"{view.label}_old", f"{_ATOMIC_FUNCS[kind]}({', '.join(args)})",
                   view.dtype, shape)


def _atomic_rmw(ctx, *flat, args_tree, atomic_type):
  ref, transforms, value, mask = args_tree.unflatten(flat)
  view = apply_transforms(ctx, ref, transforms or ())
  kind = atomic_type.value
  if kind in ("max", "min") and is_float(view.dtype) and view.dtype != np.float32:
    raise Unsupported(f"atomic_{kind} on {view.dtype}", "use float32 for float atomics")
  return _atomic(ctx, view, value, mask, kind)


def _atomic_cas(ctx, ref, cmp, value):
  view = ref
  ctx.kernel.atomic_refs.add(view.name)
  # tl.atomic_cas takes no mask: not bounds-checked
  offset, mask, shape = address(ctx, view, write=True, check=False)
  moved = _moved_bytes(shape, view.dtype)
  ctx.record(bytes_read=moved, bytes_written=moved)
  cmp = _check_value(ctx, view, cmp, shape)
  value = _check_value(ctx, view, value, shape)
  if mask is not None:
    raise Unsupported("atomic_cas on a view that needs masking")
  return ctx.value(f"{view.label}_old",
                   f'tl.atomic_cas({_pointer(view, offset)}, {cmp}, {value}, sem="acq_rel")',
                   view.dtype, shape)


def _max_contiguous(ctx, x, *, values):
  return ctx.value("contig", f"tl.max_contiguous({x}, {list(values)})", x.dtype, x.shape)


def _multiple_of(ctx, x, *, values):
  vals = list(values)
  if not x.shape:
    return ctx.value("aligned", f"tl.multiple_of({x}, {vals[0]})", x.dtype, x.shape)
  return ctx.value("aligned", f"tl.multiple_of({x}, {vals})", x.dtype, x.shape)


register(compat.multiple_of_p)(_multiple_of)

register_deferred(compat.TRITON_PRIMITIVES_MODULE, "atomic_rmw_p", limits=(
    "float max/min on float32 only; no add on bool"))(_atomic_rmw)
register_deferred(compat.TRITON_PRIMITIVES_MODULE, "atomic_cas_p", limits=(
    "no view that needs a mask (tl.atomic_cas takes none)"))(_atomic_cas)
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
                (1,) * lead + tuple(x.shape))
  return emit.broadcast_to(ctx.b, x, shape, "bcast_idx")
