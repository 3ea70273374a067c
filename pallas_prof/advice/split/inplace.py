"""The split reduction's second form: sums accumulated in place, in the output refs.

    o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
    def body(i, _):
      o_ref[...] += x_ref[pl.ds(i * rows, rows), :].sum(axis=0)
    jax.lax.fori_loop(0, n // rows, body, None)

is the carried sum of pattern.py written with the output as its accumulator. It splits the
same way (each of S programs zeroes its own partial block, runs its chunk of the loop and
adds into that block; the second pass adds the partials), and is recognized as
conservatively:
  - before the loop each output is stored once, with zero, and read by nothing;
  - the loop carries nothing but its counter; in its body each output is read once and
    written once, at the same index, with the read plus a value that no output feeds
    (`o += v`); the body writes no other ref;
  - after the loop nothing touches the outputs.
The partials are kept in the output's own dtype (the original's sums were).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ...backend import compat
from .walk import SUMS, NotSplittable, is_lit, producer, uses, zero

WRITES = ("swap", "masked_swap", "addupdate")


def _index_operands(e) -> tuple:
  """A get's or swap's index operands (its ref and, for swap, its value left out)."""
  return tuple(e.invars[1:]) if e.primitive.name == "get" else tuple(e.invars[2:])


def _same_index(get, swap) -> bool:
  a, b = _index_operands(get), _index_operands(swap)
  return (get.params.get("tree") == swap.params.get("tree") and len(a) == len(b) and
          all(x is y or (is_lit(x) and is_lit(y) and np.array_equal(x.val, y.val))
              for x, y in zip(a, b, strict=True)))


def _accumulated(body, ref, k: int) -> None:
  """Output k's ref inside the loop body: read once, written once with read + value."""
  used = uses(body.eqns, ref)
  kinds = [body.eqns[u].primitive.name for u in used]
  if kinds != ["get", "swap"]:
    raise NotSplittable(f"output {k} is used in the loop by {', '.join(kinds) or 'nothing'}: "
                        "only `o_ref[...] += value` (one read, one write) accumulates in place")
  get, swap = (body.eqns[u] for u in used)
  if swap.invars[0] is not ref or not _same_index(get, swap):
    raise NotSplittable(f"output {k} is written at another index than it is read")
  if any(not isinstance(v, compat.DropVar) and uses(body.eqns, v) for v in swap.outvars):
    raise NotSplittable(f"output {k}'s old value is read at its store")
  old = get.outvars[0]
  add = producer(body.eqns, swap.invars[1])
  if add is None or add.primitive.name not in SUMS or \
      sum(v is old for v in add.invars) != 1 or uses(body.eqns, old) != [body.eqns.index(add)]:
    raise NotSplittable(f"output {k} is not updated as `o += value` in the loop (its value is "
                        "read for something other than its sum)")
  if uses(body.eqns, add.outvars[0]) != [body.eqns.index(swap)]:
    raise NotSplittable(f"output {k}'s new sum is read for something other than its store")


def recognize_in_place(jaxpr, li: int, body, consts, n_in: int) -> list[tuple[int, str]]:
  """Each output's zeroing store before the loop and its dtype (the partials'), where
  the loop at equation `li` carries nothing but its counter and `consts` are the loop's
  operands its body sees first (the refs it closes over); NotSplittable says why not."""
  eqns = jaxpr.eqns
  outs = jaxpr.invars[n_in:]
  body_ref = {}                             # output k -> the body's name for it
  for outer, inner in zip(consts, body.invars, strict=False):
    for k, o in enumerate(outs):
      if outer is o:
        if k in body_ref:
          raise NotSplittable(f"output {k} enters the loop twice")
        body_ref[k] = inner
  missing = [k for k in range(len(outs)) if k not in body_ref]
  if missing:
    raise NotSplittable(f"the loop carries no sum, and output {missing[0]} is not accumulated "
                        "in it")
  accumulating = set()
  for k, ref in body_ref.items():
    _accumulated(body, ref, k)
    accumulating |= {u for u in uses(body.eqns, ref)}
  for i, e in enumerate(body.eqns):
    if i in accumulating:
      continue
    if e.primitive.name in WRITES or \
        any(not isinstance(x, compat.ReadEffect) for x in getattr(e, "effects", ())):
      raise NotSplittable(f"`{e.primitive.name}` in the loop writes a ref that is not an "
                          "accumulated output (or has another effect)")
  stores = []
  for k, o in enumerate(outs):
    used = [u for u in uses(eqns, o) if u != li]
    if len(used) != 1 or used[0] > li or eqns[used[0]].primitive.name != "swap":
      raise NotSplittable(f"output {k} is used outside the loop other than by one store "
                          "before it: only outputs zeroed, then accumulated in the loop, are split")
    z = eqns[used[0]]
    if any(not isinstance(v, compat.DropVar) and uses(eqns, v) for v in z.outvars) or \
        not zero(eqns, z.invars[1]):
      raise NotSplittable(f"output {k} does not start at zero: each partial would add its start")
    dtype = np.dtype(o.aval.dtype)
    if not jnp.issubdtype(dtype, jnp.number):       # bfloat16 is one; numpy's kind says "V"
      raise NotSplittable(f"output {k} is {dtype.name}: only numbers are summed")
    stores.append((used[0], dtype.name))
  for i, e in enumerate(eqns):
    if i != li and i not in {at for at, _ in stores} and \
        any(not isinstance(x, compat.ReadEffect) for x in getattr(e, "effects", ())):
      raise NotSplittable(f"`{e.primitive.name}` outside the loop writes a ref (or has another "
                          "effect): each of the S programs would do it")
  return stores
