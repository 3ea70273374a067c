"""A view's addresses: the offset tensor of a read or write, its mask (padded
lanes, a block overhanging the array, a static slice past the block, the
bounds-checked mode's checks), and the tl.load / tl.store expressions.
"""
from __future__ import annotations

import re

import numpy as np

from .. import emit
from ..codegen import Value, is_packed4, next_pow2
from ...errors import Unsupported
from .refs import RefValue, ViewDim
from .views import result_shape
from .. import triton_names as tl


# --- addresses -------------------------------------------------------------------

def address(ctx, ref: RefValue, user_mask: Value | None = None, *, write: bool = False,
            access: str | None = None):
  """(offsets expression, mask expression or None, result shape) for a view.

  Integer-array indices out of range have their lanes dropped for writes;
  reads use them as given (see gather_index). In the bounds-checked mode
  (a listener that checks_indices) every index is also checked against the
  ref's extent (the listener's check_access) and lanes outside are dropped. `access` names the
  access in a bounds error: "read", "write" (the default from `write`) or
  "atomic".
  """
  offset, mask, shape, _ = address_at_edge(ctx, ref, user_mask, write=write, access=access)
  return offset, mask, shape


def address_at_edge(ctx, ref: RefValue, user_mask: Value | None = None, *, write: bool = False,
                    access: str | None = None):
  """address()'s (offsets, mask, shape) and, for a block that may overhang the array
  along its contiguous axis (see _splits_at_edge), (interior condition, the mask
  without that axis's bound) for the programs whose block lies inside; else None."""
  offset, masks, shape, in_bounds, edge = _address(ctx, ref, user_mask, write,
                                                   access or ("write" if write else "read"))
  if in_bounds is not None:
    masks.append(in_bounds)
  mask = _combined(ctx, ref, masks, "mask")
  if edge is None:
    return offset, mask, shape, None
  inner = [m for m in masks if m is not edge[1]]
  return offset, mask, shape, (edge[0], _combined(ctx, ref, inner, "inner_mask"))


def _combined(ctx, ref: RefValue, masks: list, hint: str) -> str | None:
  if not masks:
    return None
  combined = " & ".join(str(m) for m in masks)
  return masks[0] if len(masks) == 1 else ctx.assign_once(f"{ref.name}_{hint}", combined,
                                                          f"{ref.name}: {combined}")


def maskless_address(ctx, ref: RefValue, access: str, primitive: str):
  """(offsets, in-bounds mask or None, shape) for an access that takes no mask
  (tl.atomic_cas). A view that needs a mask (padded lanes, an overhanging
  block) is refused. In the bounds-checked mode the lanes outside the ref are
  pointed at the ref's first element, and the caller makes them harmless
  there (atomic_cas: compare and swap a value with itself)."""
  offset, masks, shape, in_bounds, _ = _address(ctx, ref, None, True, access)
  if masks:
    raise Unsupported(f"{primitive} on a view that needs masking",
                      f"{tl.atomic_cas} takes no mask: use a view whose lanes all exist "
                      "(power-of-two sizes, no overhanging block)")
  if in_bounds is not None:
    offset = ctx.b.assign(f"{ref.label}_off", f"{tl.where}({in_bounds}, {offset}, 0)")
  return offset, in_bounds, shape


def _address(ctx, ref: RefValue, user_mask, write: bool, access: str):
  """(offsets, the masks the access needs, shape, the bounds check's in-bounds
  mask or None)."""
  b = ctx.b
  shape = result_shape(ref)
  rank = len(shape)
  padded = tuple(next_pow2(s) for s in shape)
  dt = ref.index_dtype
  strides = ref.strides
  terms, masks = [], []
  scalars = set()             # the terms that are scalars (int indices; split: slice starts)
  moving = set()              # the tensor terms the innermost loop being emitted changes
  edge = None                 # (interior condition, the mask term only the edge needs)
  checking = ctx.kernel.listeners.checks_indices
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
        checks.append((axis, *_local_index(ref, axis, index)))
      if _needs_bound_mask(ref, axis, d):
        masks.append(f"({index} < {array_size})")
      terms.append(_scaled(index, strides[axis]))
      scalars.add(terms[-1])
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
        checks.append((axis, *_local_index(ref, axis, index)))
      if ref.ragged[axis]:
        masks.append(f"({index} < {array_size})")
      terms.append(_scaled(index, strides[axis]))
      if b.varies(g, d.start):
        moving.add(terms[-1])
      continue
    # a slice: one output dimension
    out_axis = slice_pos if slice_pos < pos or not gathers else slice_pos + int_rank
    slice_pos += 1
    lanes = f"{tl.arange}(0, {padded[out_axis]})"
    if dt == np.int64:
      lanes = f"{lanes}.to({tl.int64})"
    step = f" * {d.stride}" if d.stride != 1 else ""
    if d.start.const == 0:
      index_1d = f"{lanes}{step}"
    else:
      index_1d = f"{d.start} + {lanes}{step}"
    dynamic = d.start.const is None
    bound = _needs_bound_mask(ref, axis, d)
    check = checking and not _statically_inside(d)
    index = None
    if bound or check or not dynamic:    # (a dynamic start's offset takes start and lanes apart)
      # keyed by ref too: a store to o_ref reads better with o_ref's own vectors
      name = ctx.assign_once(f"{ref.name}_ax{axis}", index_1d, f"{ref.name}: {index_1d}")
      index = emit.expand_to_rank(Value(name, dt, (d.size,)), (out_axis,), rank)
    if d.size != padded[out_axis]:
      lane_ok = emit.expand_to_rank(
          Value(f"({tl.arange}(0, {padded[out_axis]}) < {d.size})", np.dtype(bool), (d.size,)),
          (out_axis,), rank)
      masks.append(lane_ok)
      active.append(str(lane_ok))
    if check:
      checks.append((axis, *_local_index(ref, axis, index)))
    if bound:
      masks.append(f"({index} < {array_size})")
      if not checking and not gathers and _splits_at_edge(ref, axis, d):
        edge = (ctx.assign_once(f"{ref.name}_inside{axis}", f"{d.start} + {d.size} <= {array_size}"),
                masks[-1])
    if dynamic:
      # a dynamic start (a block's, pl.ds(i * block, block)): a scalar term of its own,
      # the lanes a tensor term that stays the same from one iteration of a loop to the next
      # (pointer() below). Splitting only the starts that change inside a loop left the mha
      # forward (causal, bf16 4x4096x16x64) at 68 bytes of spills on sm_90, splitting all at 8.
      # Starts are already in the ref's index type (blockspec and views cast them), so a
      # start times a stride cannot wrap in int32 where the ref needs int64.
      assert np.dtype(d.start.dtype) == dt, (ref.name, d.start, d.start.dtype, dt)
      start = str(d.start) if re.fullmatch(r"[\w.]+", str(d.start)) else f"({d.start})"
      # one name per lane vector, whichever ref reads or writes it
      hint = (f"lanes{padded[out_axis]}" + (f"x{d.stride}" if d.stride != 1 else "")
              + ("_i64" if dt == np.int64 else ""))
      lanes_name = ctx.assign_once(hint, f"{lanes}{step}")
      terms.append(_scaled(start, strides[axis]))
      scalars.add(terms[-1])
      terms.append(_scaled(emit.expand_to_rank(Value(lanes_name, dt, (d.size,)), (out_axis,), rank),
                           strides[axis]))
    else:
      terms.append(_scaled(index, strides[axis]))     # `index` is assigned from d.start
      if b.varies(d.start):
        moving.add(terms[-1])
  # padded lanes of gathered dims hold garbage indices: mask them
  for k in range(int_rank):
    size = shape[pos + k]
    if size != padded[pos + k]:
      cond = Value(f"({tl.arange}(0, {padded[pos + k]}) < {size})", np.dtype(bool), (size,))
      masks.append(emit.expand_to_rank(cond, (pos + k,), rank))
      active.append(str(masks[-1]))
  terms = [t for t in terms if t != "0"]
  offset = Offset.of(terms, scalars, moving)
  if user_mask is not None:
    if tuple(user_mask.shape) != tuple(shape) and user_mask.shape:
      user_mask = emit.broadcast_to(b, user_mask, shape)
    masks.append(str(user_mask))
    active.append(str(user_mask))
  in_bounds = _check_access(ctx, ref, checks, active, shape, access) if checking else None
  if checking and ref.block is not None:
    # the block itself may lie outside the array (its index map's fault, not this index's)
    block_ok = ctx.kernel.listeners.check_block(ctx, ref.block, access,
                                                " & ".join(active) or None, shape)
    in_bounds = block_ok if in_bounds is None else ctx.b.assign(
        "in_bounds", f"{in_bounds} & {block_ok}")
  return offset, masks, shape, in_bounds, edge


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


def _check_access(ctx, ref: RefValue, checks, active, shape, access: str) -> str | None:
  """The in-bounds mask of a bounds-checked access; None when every index is a
  constant inside its ref (nothing to check at run time). `checks`: (axis,
  index relative to the ref, the ref's extent) for each dimension checked at
  run time; the others are statically inside and described as they are."""
  static = [_constant(i) for _, i, _ in checks]
  if all(c is not None and 0 <= c < e for c, (_, _, e) in zip(static, checks, strict=True)):
    return None          # also when no dimension needs a check

  checks = [(axis, f"{tl.full}((), {c}, {tl.int32})" if c is not None else i, e)
            for c, (axis, i, e) in zip(static, checks, strict=True)]
  checked = {axis: e for axis, _, e in checks}
  extents, fixed = [], []
  for axis, d in enumerate(ref.dims):
    extents.append(checked[axis] if axis in checked else _local_index(ref, axis, "0")[1])
    fixed.append(None if axis in checked else _static_range(d))
  site = dict(access=access, ref=ref.label, block_shape=tuple(extents),
              array_shape=tuple(ref.array_shape), dtype=np.dtype(ref.dtype).name,
              checked_axes=tuple(axis for axis, _, _ in checks), static_ranges=tuple(fixed))
  return ctx.kernel.listeners.check_access(ctx, site, [i for _, i, _ in checks],
                                           " & ".join(active) or None, shape)


def _static_range(d: ViewDim) -> str:
  """A view dimension statically inside its ref, as a bounds error prints it."""
  first = d.static_offset or 0
  if d.kind == "int":
    return str(first)
  last = first + (d.size - 1) * d.stride
  return f"{first}:{last + 1}" + (f":{d.stride}" if d.stride != 1 else "")


def _bounded_gather_index(ctx, d: ViewDim, write: bool):
  """(index, in-range mask or None) for an integer-array index of a view of d.size."""
  g = d.index
  if write:
    cond = f"({g} >= 0) & ({g} < {d.size})"
    return g, Value(ctx.assign_once("in_range", cond), np.dtype(bool), g.shape, loops=g.loops)
  return g, None


def _times(stride: int) -> str:
  return "" if stride == 1 else f" * {stride}"


def _scaled(index: str, stride: int) -> str:
  if index == "0":
    return "0"
  return index if stride == 1 else f"{index} * {stride}"


VECTOR_BYTES = 16     # the widest global load and store a thread issues (ld.global.v4.b32)


def _splits_at_edge(ref: RefValue, axis: int, d: ViewDim) -> bool:
  """Whether a read or write of this view is better emitted twice, for the programs
  whose block lies inside the array (without the bound mask of `axis`) and for those
  at its edge. The bound mask `index < extent` stops Triton's vectorisation when the
  extent is not a multiple of a vector: Triton cannot prove the mask constant over 16
  bytes, so every element becomes a load of its own (a 2-byte load for bf16), and a
  memory-bound kernel runs at a fraction of the bandwidth. Only where the inside branch
  can vectorise: the axis is the contiguous one and the block a whole number of
  vectors, every other axis's stride a multiple of one (in practice 1-D arrays)."""
  item = np.dtype(ref.dtype).itemsize if not is_packed4(ref.dtype) else 0
  if not item or d.kind != "slice" or d.stride != 1 or axis != len(ref.dims) - 1:
    return False
  if ref.strides[axis] != 1 or not ref.ragged[axis] or d.static_offset != 0 or d.size != d.extent:
    return False
  if (ref.array_shape[axis] * item) % VECTOR_BYTES == 0 or (d.size * item) % VECTOR_BYTES:
    return False
  return all((ref.strides[a] * item) % VECTOR_BYTES == 0 or ref.array_shape[a] == 1
             for a in range(len(ref.dims) - 1))


def _needs_bound_mask(ref: RefValue, axis: int, d: ViewDim) -> bool:
  if ref.ragged[axis]:
    return True
  if d.static_offset is None:
    return False  # dynamic start: assumed in bounds, like JAX's Triton backend
  last = d.static_offset + (d.size - 1) * d.stride
  return last >= d.extent or d.static_offset < 0


class Offset(str):
  """An access's offset expression, `a + b + c` (the str, for the uses that take it
  whole: tl.where, the packed int4 accesses), that also knows its terms: `scalar`
  (int indices, dynamic slice starts: one value for all lanes, which may change from one
  iteration of a loop to the next), `fixed` (tensors that do not change from one iteration
  of the innermost loop being emitted to the next) and `moving` (the tensors that do:
  those made from Values that vary with that loop, KernelBuilder.varies)."""
  scalar: tuple[str, ...]
  fixed: tuple[str, ...]
  moving: tuple[str, ...]

  @classmethod
  def of(cls, terms: list[str], scalars: set[str], moving: set[str]) -> "Offset":
    out = cls(" + ".join(terms) if terms else "0")
    out.scalar = tuple(t for t in terms if t in scalars)
    tensors = [t for t in terms if t not in scalars]
    out.fixed = tuple(t for t in tensors if t not in moving)
    out.moving = tuple(t for t in tensors if t in moving)
    return out


def pointer(ref: RefValue, offset: str) -> str:
  """The pointer expression of an access: `ref + (scalars) + (tensors that stay the same
  inside the innermost loop around the access) + (tensors that do not)`.

  Each `+` on a pointer is one addptr, 64-bit arithmetic on a whole tensor of pointers; a
  sum in parentheses is in the index type (index_dtype_for keeps it inside that type). An
  addptr whose operands do not change inside a loop is hoisted out of it by Triton, and a
  scalar sum costs one register. Two other forms each lost on one of JAX's attention
  kernels on an H200 (bench/results/archive/README.md, "The pointer's form, timed"): chained
  (`ref + a + b + c`) was slower on the mha backward, summed (`ref + (a + b + c)`) slower
  on the mha forward; this one was the fastest of the three on both bf16 attention cases,
  level on the matmul, and a close second to summed on the f32 backward."""
  if offset == "0":
    return ref.name
  if not isinstance(offset, Offset):
    return f"{ref.name} + {_summed([offset])}"
  groups = [offset.scalar, offset.fixed, offset.moving]
  return " + ".join([ref.name] + [_summed(g) for g in groups if g])


def _summed(terms) -> str:
  if len(terms) == 1:
    t = terms[0]
    return t if _one_term(t) else f"({t})"
  return f"({' + '.join(terms)})"


def _one_term(offset: str) -> bool:
  """Whether an offset expression has no + or - outside brackets (needs no parentheses)."""
  depth = 0
  for ch in offset:
    if ch in "([":
      depth += 1
    elif ch in ")]":
      depth -= 1
    elif depth == 0 and ch in "+-":
      return False
  return True


def load_expr(ref, offset, mask, other, shape, cache_modifier=None, eviction_policy=None,
               volatile=False):
  args = [pointer(ref, offset)]
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
  return f"{tl.load}({', '.join(args)})"


def store_stmt(ref, offset, value, mask, eviction_policy=None):
  args = [pointer(ref, offset), str(value)]
  if mask is not None:
    args.append(f"mask={mask}")
  if eviction_policy:
    args.append(f"eviction_policy={eviction_policy!r}")
  return f"{tl.store}({', '.join(args)})"


def check_value(ctx, ref: RefValue, value: Value, shape) -> Value:
  if value.dtype != ref.dtype:
    value = emit.cast(ctx.b, value, ref.dtype)
  if tuple(value.shape) != tuple(shape):
    if not value.shape:
      value = emit.broadcast_to(ctx.b, value, shape)
    else:
      raise Unsupported(f"storing a value of shape {value.shape} into a view of shape {shape}")
  return value


def other_value(ctx, ref: RefValue, other) -> str | None:
  if other is None:
    return None
  if not isinstance(other, Value):
    other = emit.const(other, ref.dtype)
  if other.dtype != ref.dtype:
    other = emit.cast(ctx.b, other, ref.dtype)
  return str(other)
