"""Other lowerings of a cumulative scan (cumsum, cumprod, cummax, cummin), for
when Triton fails to compile the plain `tl.cumsum` / `tl.associative_scan`
(workarounds.py retries with them; workaround_plan.py says which equation
gets which). Each computes what the plain scan computes:

  squeeze     the block scanned without its size-1 axes (tl.reshape there and
              back), so Triton picks the scan's layout from a block with no
              broadcast axis; a scan along a size-1 axis is its input. The same
              scan, the same order of operations.
  transpose   the scanned axis moved last (tl.permute), the contiguous axis of
              Triton's layouts, scanned there and moved back. The same scan.
  triangular  no scan at all: out[i] = reduce over j <= i (j >= i reversed) of
              x[j], a masked reduction over a new axis (tl.where, then tl.sum
              or tl.reduce), for short axes only (its work grows with the
              square of the axis). Exact for integers and for max/min; a sum
              or product of floats rounds as a tree, as tl.sum does, instead
              of in the scan's order: within (n - 1) ulps-per-term of the
              exact sum, like any reordering of an n-term float sum.

A form that does not fit (no size-1 axis, a scan already along the last
axis, an axis too long) returns None and the equation stays plain.
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import emit
from ..codegen import Value, literal
from .. import triton_names as tl

FORMS = ("squeeze", "transpose", "triangular")
WORDS = {
    "squeeze": f"scanned as a block without its size-1 axes ({tl.reshape} there and back)",
    "transpose": f"scanned along the last (contiguous) axis after {tl.permute}, and back",
    "triangular": (f"computed as a masked reduction over j <= i (no {tl.scan}; floats round as "
                   "a tree sum does)"),
}
TRIANGULAR_MAX_AXIS = 64          # the longest axis the triangular form takes
TRIANGULAR_MAX_ELEMENTS = 1 << 14  # elements of its (.., n, n, ..) intermediate


def lower(ctx, form: str, x: Value, axis: int, kind: str, reverse: bool, out_dtype,
          scan, reduce) -> Value | None:
  """x scanned along `axis` in `form`, or None where the form does not fit.
  `scan(value, axis)`: the plain scan's expression; `reduce(value, axis)`: the
  reduction's of the same kind (for the triangular form)."""
  return {"squeeze": _squeeze, "transpose": _transpose, "triangular": _triangular}[form](
      ctx, x, axis, kind, reverse, out_dtype, scan, reduce)


def note(ctx, form: str, x: Value, axis: int, kind: str) -> str:
  """What lowering this scan in `form` changed, for the source's header."""
  info = ctx.info
  at = f" at {os.path.basename(info.file)}:{info.line}" if info.file else ""
  return f"cum{kind}{at} ({_aval(x)} along axis {axis}): {WORDS[form]}"


def _aval(x: Value) -> str:
  return f"{np.dtype(x.dtype).name}[{','.join(map(str, x.shape))}]"


def _squeeze(ctx, x, axis, kind, reverse, out_dtype, scan, reduce):
  padded = x.padded
  if 1 not in padded:
    return None
  if padded[axis] == 1:               # a scan along one element is that element
    return emit.cast(ctx.b, x, out_dtype) if np.dtype(out_dtype) != x.dtype else \
        ctx.value(f"cum{kind}", str(x), x.dtype, x.shape)
  keep = [i for i, d in enumerate(padded) if d != 1]
  small_shape = emit.shape_expr([padded[i] for i in keep])
  small = ctx.value("squeezed", f"{tl.reshape}({x}, {small_shape})", x.dtype,
                    tuple(x.shape[i] for i in keep))
  scanned = ctx.value(f"cum{kind}", scan(small, keep.index(axis)), out_dtype, small.shape)
  return ctx.value(f"cum{kind}", f"{tl.reshape}({scanned}, {emit.shape_expr(padded)})",
                   out_dtype, x.shape)


def _transpose(ctx, x, axis, kind, reverse, out_dtype, scan, reduce):
  rank = len(x.shape)
  if rank < 2 or axis == rank - 1:
    return None
  perm = [i for i in range(rank) if i != axis] + [axis]
  back = [perm.index(i) for i in range(rank)]
  moved = ctx.value("moved", f"{tl.permute}({x}, {tuple(perm)})", x.dtype,
                    tuple(x.shape[i] for i in perm))
  scanned = ctx.value(f"cum{kind}", scan(moved, rank - 1), out_dtype, moved.shape)
  return ctx.value(f"cum{kind}", f"{tl.permute}({scanned}, {tuple(back)})", out_dtype, x.shape)


def _triangular(ctx, x, axis, kind, reverse, out_dtype, scan, reduce):
  padded = x.padded
  n = padded[axis]
  if n > TRIANGULAR_MAX_AXIS or math.prod(padded) * n > TRIANGULAR_MAX_ELEMENTS:
    return None
  rank = len(padded)
  positions = ctx.b.assign("positions", f"{tl.arange}(0, {n})")
  i = emit.expand_to_rank(Value(positions, np.dtype(np.int32), (n,)), (axis,), rank + 1)
  j = emit.expand_to_rank(Value(positions, np.dtype(np.int32), (n,)), (axis + 1,), rank + 1)
  before = ctx.b.assign("included", f"{j} {'>=' if reverse else '<='} {i}")
  spread = emit.expand_to_rank(x, tuple(d for d in range(rank + 1) if d != axis), rank + 1)
  fill = emit.identity_of(kind, x.dtype)
  terms = ctx.value("terms", f"{tl.where}({before}, {spread}, {literal(fill, x.dtype)})",
                    x.dtype, tuple(x.shape[:axis]) + (x.shape[axis],) + tuple(x.shape[axis:]))
  return ctx.value(f"cum{kind}", reduce(terms, axis + 1), out_dtype, x.shape)
