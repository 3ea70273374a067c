"""State-discharge helpers that act on values: broadcast_to (from Pallas AD)."""
from __future__ import annotations

from jax._src.state import primitives as state_primitives

from .. import emit
from ..codegen import padded_shape
from . import register


@register(getattr(state_primitives, "broadcast_to_p", None))
def _broadcast_to(ctx, x, *, shape):
  shape = tuple(shape)
  if not x.shape:
    return emit.broadcast_to(ctx.b, x, shape)
  if len(x.shape) < len(shape):
    lead = len(shape) - len(x.shape)
    expanded = emit.expand_to_rank(x, tuple(range(lead, len(shape))), len(shape))
    x = ctx.value("expand", expanded, x.dtype, (1,) * lead + tuple(x.shape))
  if tuple(x.shape) == shape:
    return x
  return ctx.value("bcast", f"tl.broadcast_to({x}, {emit.shape_expr(padded_shape(shape))})",
                   x.dtype, shape)
