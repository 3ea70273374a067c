"""Row sums deferred to after the loop: the split's loop, its sums kept unreduced.

The norms' dw/db loops add a tile's sum over its rows to each carry every iteration
(`dw_acc + (dout * a_hat).sum(axis=0)`). On a GPU that sum crosses warps: Triton exchanges
the partial sums through shared memory between barriers (the sm_90 PTX of the split
kernel holds six `bar.sync` an iteration), and the next iteration's loads wait behind
them. Kept as a (rows, columns) tile instead - the carry starts as zeros of the tile's
shape, each iteration adds its tile elementwise, and the rows are summed once after the
loop, as Triton's own layer-norm tutorial accumulates its dw - the loop is its loads and
multiply-adds alone. The sum is the same sum reassociated (its rows added last), which
choice.same_outputs' tolerance allows; trial.py times it beside the split as written and
keeps the faster.

A carry is deferred where its one update is `carry + reduce_sum(x, axes=(0,))`, the sum
read by nothing else and x of the carry's dtype, and where the tiles of all deferred
carries together stay within MAX_TILE_ELEMENTS (a program's registers: a larger tile
would spill, which costs more than the barriers it saves).
"""
from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from ...backend import compat
from .pattern import Pattern, _loop_parts
from .walk import SUMS, producer, uses

MAX_TILE_ELEMENTS = 8192      # float32 elements of all deferred tiles of a program: 32 KiB,
                              # 64 registers a thread at 4 warps


@dataclasses.dataclass(frozen=True)
class Deferral:
  carry: int                  # position among the loop's sums
  rows: int                   # the tile's rows the loop summed each iteration (axis 0)
  shape: tuple[int, ...]      # the unreduced tile: (rows, *the carry's shape)


def deferrals(jaxpr, p: Pattern) -> tuple[Deferral, ...]:
  """The loop's sum carries whose update is carry + x.sum(axis=0), within the registers'
  budget (all or none: one deferred carry keeps the barriers of the others); () where
  none is."""
  if p.in_place:
    return ()
  body, first, skip, _, _, inits = _loop_parts(jaxpr.eqns[p.loop])
  found = []
  for k in range(len(inits)):
    cin = body.invars[first + skip + k]
    (at,) = uses(body.eqns, cin)           # the pattern checked: one use, a sum
    add = body.eqns[at]
    other = [v for v in add.invars if v is not cin]
    made = producer(body.eqns, other[0]) if len(other) == 1 else None
    if made is None or made.primitive.name != "reduce_sum" or \
        tuple(made.params.get("axes", ())) != (0,) or len(uses(body.eqns, made.outvars[0])) != 1:
      return ()
    x = made.invars[0]
    if np.dtype(x.aval.dtype) != np.dtype(cin.aval.dtype) or \
        tuple(x.aval.shape[1:]) != tuple(cin.aval.shape):
      return ()
    found.append(Deferral(k, int(x.aval.shape[0]), tuple(int(d) for d in x.aval.shape)))
  if sum(math.prod(d.shape) for d in found) > MAX_TILE_ELEMENTS:
    return ()
  return tuple(found)


def _deferred_ops(body, first: int, skip: int, found) -> tuple[set, set]:
  """(the reduce_sum equations skipped, the adds that now take the tile): body indices."""
  reduces, adds = set(), set()
  for d in found:
    cin = body.invars[first + skip + d.carry]
    (at,) = uses(body.eqns, cin)
    other = next(v for v in body.eqns[at].invars if v is not cin)
    made = producer(body.eqns, other)
    reduces.add(next(i for i, e in enumerate(body.eqns) if e is made))
    adds.add(at)
  return reduces, adds


def evaluate_body(body, bconsts, args, found, first: int, skip: int) -> list:
  """The loop body evaluated with the deferred carries' row sums left out: each such
  reduce_sum passes its tile on, and the add it fed adds the tile to the tile carry."""
  reduces, _ = _deferred_ops(body, first, skip, found)
  env = {}
  read = lambda v: v.val if isinstance(v, compat.Literal) else env[v]   # noqa: E731
  for v, c in zip(body.constvars, bconsts, strict=True):
    env[v] = c
  for v, a in zip(body.invars, args, strict=True):
    env[v] = a
  for i, eqn in enumerate(body.eqns):
    ins = [read(v) for v in eqn.invars]
    outs = [ins[0]] if i in reduces else compat.bind_equation(eqn, ins)
    for v, x in zip(eqn.outvars, outs, strict=True):
      if not isinstance(v, compat.DropVar):
        env[v] = x
  return [read(v) for v in body.outvars]


def tile_inits(inits: list, found) -> list:
  """The loop's initial carries with each deferred one a zero tile."""
  out = list(inits)
  for d in found:
    out[d.carry] = jnp.zeros(d.shape, inits[d.carry].dtype)
  return out


def rows_summed(sums: list, found) -> list:
  """The loop's results with each deferred tile summed over its rows: the carries again."""
  out = list(sums)
  for d in found:
    out[d.carry] = out[d.carry].sum(axis=0, dtype=out[d.carry].dtype)
  return out
