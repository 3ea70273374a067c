"""lax.scan with xs and ys inside a kernel, as a fori_loop over their rows.

The scan is rewritten, at lowering time, into the jaxpr of

    ys = zeros((length, ...)) for each y
    for i in range(length):                    # reversed for reverse=True
      x_i = dynamic_index_in_dim(x, i) for each x
      carry, y_i = body(consts, carry, x_i)
      ys = dynamic_update_index_in_dim(ys, y_i, i)

and that jaxpr is lowered in place: a loop whose carries are the scan's
carries and its ys (values in registers), built only from rules that exist
anyway (fori_loop, dynamic_slice, dynamic_update_slice). The body's own
equations keep their source info, so errors and spans inside it still name the
user's lines; the rewrite's few equations take the scan's.
"""
from __future__ import annotations

from jax import lax

from .. import compat


def lower_scan_over_arrays(ctx, args, jaxpr, consts_closed, *, length: int, reverse: bool,
                           num_consts: int, num_carry: int):
  in_avals = list(ctx.avals_in)
  y_avals = [v.aval for v in jaxpr.outvars[num_carry:]]
  n_carry_xs = len(args) - num_consts

  def as_loop(*flat):
    consts, init = list(flat[:num_consts]), list(flat[num_consts:num_consts + num_carry])
    xs = list(flat[num_consts + num_carry:num_consts + n_carry_xs])
    ys0 = [lax.full((length,) + tuple(a.shape), 0, a.dtype) for a in y_avals]

    def body(i, state):
      carry, ys = state
      k = length - 1 - i if reverse else i
      x_k = [lax.dynamic_index_in_dim(x, k, 0, keepdims=False) for x in xs]
      outs = compat.eval_jaxpr(jaxpr, consts_closed, *consts, *carry, *x_k)
      ys = [lax.dynamic_update_index_in_dim(y, lax.convert_element_type(y_k, y.dtype), k, 0)
            for y, y_k in zip(ys, outs[num_carry:], strict=True)]
      return list(outs[:num_carry]), ys

    carry, ys = lax.fori_loop(0, length, body, (init, ys0))
    return [*carry, *ys]

  loop, consts = compat.trace_to_jaxpr(as_loop, in_avals, "lax.scan over xs/ys")
  return ctx.lower_jaxpr(loop, list(args), "scan", consts=consts, straight_line=True)
