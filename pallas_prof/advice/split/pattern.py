"""The split reduction's pattern, recognized on a kernel's jaxpr, conservatively.

A kernel fits when its top level runs ONE fori loop (a scan with a counter, or a while
loop of fori's shape) whose trip count is a constant, and:
  - each carry other than the counter starts at zero and is a sum: the body reads it
    once, in an `add` whose result is the carry's next value and nothing else;
  - the body reads refs and writes none (a write would happen once per program, not once
    per partial);
  - after the loop each sum reaches the outputs through steps linear in the sums (a cast,
    a reshape or transpose, a sum over an axis, a multiply or divide by a value no sum
    feeds, an add of sums, a select against zero), every output ref is stored once from
    them and nothing else touches the outputs. The last cast before a store is skipped: the
    partials stay in the dtype they were computed in.
Then the loop's trip range can be cut into S contiguous chunks run by S programs, each
storing its partial sums, and the partials' sum is the original's (up to the order of the
adds: a float sum reassociated rounds differently). Anything else is refused with the
reason (NotSplittable): a max or product carry (the second pass adds), a carry read for
anything but its sum, a sum sent through sqrt or an added constant after the loop, a bound
read from data or from the program id, a second loop.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ...backend import compat
from .inplace import recognize_in_place
from .walk import CONVERT, LOOPS, SUMS, NotSplittable
from .walk import is_lit as _is_lit
from .walk import producer as _producer
from .walk import uses as _uses
from .walk import zero as _zero

@dataclasses.dataclass(frozen=True)
class Store:
  output: int                     # position among the kernel's outputs
  carry: int                      # position among the loop's sums
  eqn: int                        # the store's equation (top level)
  convert: int | None             # the convert_element_type between them, if any
  partial_dtype: str              # the sum's dtype: what each partial is kept in
  dtype: str                      # the output's own dtype


@dataclasses.dataclass(frozen=True)
class Pattern:
  loop: int                       # the loop's equation index (top level)
  form: str                       # "scan" | "while"
  lo: int                         # the counter's first value
  trip: int                       # iterations
  stores: tuple[Store, ...]       # one per output, in output order
  file: str | None = None         # the loop's file and line (the user's fori_loop), where known
  lineno: int | None = None
  in_place: bool = False          # the outputs are the sums (inplace.py), not the carries

  @property
  def line(self) -> str:
    return f"{self.file.rsplit('/', 1)[-1]}:{self.lineno}" if self.file else "the kernel's loop"

  @property
  def dropped(self) -> frozenset[int]:
    """The converts the variant skips: each partial is kept in the sum's dtype."""
    return frozenset(s.convert for s in self.stores if s.convert is not None)


def _where(eqn, kernel_file: str | None) -> tuple[str | None, int | None]:
  """The loop's line: in the kernel's own file where it is known (the diff edits that
  file), else the user's innermost frame."""
  try:
    frame = compat.frame_in(eqn.source_info, kernel_file) or compat.user_frame(eqn.source_info)
  except Exception:  # noqa: BLE001 - a location is a courtesy
    frame = None
  return (frame.file_name, frame.start_line) if frame else (None, None)


def _static_int(eqns, v, what: str) -> int:
  """The loop bound `v` as a Python int; refused where it is computed from data or the
  program id (each program would run a different loop)."""
  if _is_lit(v):
    return int(v.val)
  seen, todo = [], [v]
  while todo:                     # the equations the bound is computed by (the kernel's
    e = _producer(eqns, todo.pop())     # refs, its invars, have none)
    if e is not None:
      seen.append(e.primitive.name)
      todo += [x for x in e.invars if not _is_lit(x)]
  reads = [p for p in seen if p in ("get", "load", "swap")]
  why = ("is read from a ref (it depends on data)" if reads else
         "depends on the program id" if any(p in ("program_id", "num_programs") for p in seen)
         else f"is computed ({', '.join(dict.fromkeys(seen))})")
  raise NotSplittable(f"the loop's {what} {why}: only a loop whose trip count is a constant "
                      "is split (each program runs its own chunk of a known range)")


def _loop_parts(eqn):
  """(body jaxpr, index of the counter among the body's invars, first sum carry's index
  among the loop's carries (after counter and bound), lo operand, hi operand or trip,
  carry operands)."""
  name = eqn.primitive.name
  if name == "scan":
    nc, ncarry = compat.scan_layout(eqn.params)
    body, _ = compat.open_jaxpr(eqn.params["jaxpr"])
    if eqn.params.get("reverse") or len(eqn.invars) != nc + ncarry or ncarry < 1:
      raise NotSplittable("the scan is not a fori loop (it is reversed or runs over arrays)")
    i = body.invars[nc]
    nxt = _producer(body.eqns, body.outvars[0])
    if not (nxt is not None and nxt.primitive.name == "add" and i in nxt.invars and
            any(_is_lit(x) and x.val == 1 for x in nxt.invars)):
      raise NotSplittable("the scan carries no counter that steps by one: not a fori loop")
    return body, nc, 1, eqn.invars[nc], int(eqn.params["length"]), eqn.invars[nc + 1:]
  body, _ = compat.open_jaxpr(eqn.params["body_jaxpr"])
  cond, _ = compat.open_jaxpr(eqn.params["cond_jaxpr"])
  cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
  carries = eqn.invars[cn + bn:]
  ok = (cn == 0 and len(cond.eqns) == 1 and cond.eqns[0].primitive.name == "lt" and
        list(cond.eqns[0].invars[:2]) == list(cond.invars[:2]) and len(carries) >= 2 and
        body.outvars[1] is body.invars[bn + 1])
  nxt = _producer(body.eqns, body.outvars[0]) if ok else None
  if not (nxt is not None and nxt.primitive.name == "add" and body.invars[bn] in nxt.invars
          and any(_is_lit(x) and x.val == 1 for x in nxt.invars)):
    raise NotSplittable("the while loop is not a fori loop (a counter below a bound, "
                        "stepping by one)")
  return body, bn, 2, carries[0], carries[1], carries[2:]


def _check_sums(body, first: int, skip: int, inits, top) -> list[str]:
  """Each sum carry's dtype; refused unless every carry is a sum from zero."""
  dtypes = []
  for k, init in enumerate(inits):
    cin = body.invars[first + skip + k]
    out = body.outvars[skip + k]
    name = f"carry {k}"
    if not _zero(top, init):
      raise NotSplittable(f"{name} does not start at zero: each partial would add its start")
    uses = _uses(body.eqns, cin)
    if any(v is cin for v in body.outvars):
      raise NotSplittable(f"{name} is passed through the loop unchanged, not summed")
    if len(uses) != 1:
      seen = ", ".join(body.eqns[u].primitive.name for u in uses) or "nothing"
      raise NotSplittable(f"{name} is read inside the loop for something other than its sum "
                          f"({seen}): a partial could not stand for it")
    e = body.eqns[uses[0]]
    if e.primitive.name not in SUMS:
      raise NotSplittable(f"{name} is combined by `{e.primitive.name}`, not summed: the second "
                          "pass adds the partials, so only a sum carry is split")
    if e.outvars[0] is not out or _uses(body.eqns, out) or \
        sum(v is out for v in body.outvars) != 1:
      raise NotSplittable(f"{name}'s sum is read inside the loop for something else")
    dtype = np.dtype(cin.aval.dtype)
    if dtype.kind not in "fiu":
      raise NotSplittable(f"{name} is {dtype.name}: only numbers are summed")
    dtypes.append(dtype.name)
  return dtypes


def _reads_only(body) -> None:
  for eff in getattr(body, "effects", ()):
    if not isinstance(eff, compat.ReadEffect):
      raise NotSplittable(f"the loop body has the effect {type(eff).__name__} (it writes a ref "
                          "or prints): a split runs it once per chunk")


def recognize(jaxpr, n_in: int, n_out: int, kernel_file: str | None = None) -> Pattern:
  """The kernel jaxpr's split-reduction pattern (n_in inputs, n_out outputs: its refs'
  count; kernel_file: the kernel function's file, where its loop's line is looked for);
  NotSplittable says why it does not fit."""
  if len(jaxpr.invars) != n_in + n_out:
    raise NotSplittable("the kernel has scratch refs: only inputs and outputs are split")
  eqns = jaxpr.eqns
  loops = [i for i, e in enumerate(eqns) if e.primitive.name in LOOPS]
  if len(loops) != 1:
    raise NotSplittable(f"{len(loops)} loops at the kernel's top level: only a kernel with one "
                        "loop is split" if loops else "the kernel has no loop at its top level")
  li = loops[0]
  loop = eqns[li]
  body, first, skip, lo_v, hi, inits = _loop_parts(loop)
  lo = _static_int(eqns, lo_v, "start")
  trip = hi if isinstance(hi, int) else _static_int(eqns, hi, "bound") - lo
  if any(not isinstance(v, compat.DropVar) and _uses(eqns, v) for v in loop.outvars[:skip]):
    raise NotSplittable("the loop's counter is read after the loop")
  if not inits:                     # no carried sums: the outputs may be the accumulators
    stores = tuple(Store(k, k, at, None, dtype, dtype) for k, (at, dtype) in
                   enumerate(recognize_in_place(jaxpr, li, body, loop.invars[:first], n_in)))
    return Pattern(li, loop.primitive.name, lo, trip, stores, *_where(loop, kernel_file),
                   in_place=True)
  _check_sums(body, first, skip, inits, eqns)
  _reads_only(body)
  outs = jaxpr.invars[n_in:]
  if any(any(v is o for o in outs) for v in loop.invars):
    raise NotSplittable("the loop reads an output ref: the partials would each read it")
  stores = _stores(eqns, li, loop.outvars[skip:], outs)
  return Pattern(li, loop.primitive.name, lo, trip, stores, *_where(loop, kernel_file))


def _value_index(e) -> int:
  """The position among a store's operands of the value it stores: a Pallas store's
  (ref, transforms, value, mask) as its args_tree lays them out; state's swap's (ref, value,
  *indices)."""
  tree = e.params.get("args_tree")
  if tree is None:
    return 1
  _, _, value, _ = tree.unflatten(list(range(len(e.invars))))
  return value


# Equations after the loop that keep a value linear in the sums: f(sum of partials) is the
# sum of f(partials), so each program may apply them to its partial (up to rounding).
STRUCTURAL = frozenset({"convert_element_type", "neg", "reduce_sum", "broadcast_in_dim",
                        "reshape", "squeeze", "expand_dims", "transpose", "copy", "copy_p",
                        "slice", "rev", "reduce_precision"})


CALLS = ("pjit", "jit", "closed_call", "core_call")


class _NotLinear(Exception):
  pass


def _linear(eqns, e, summed: list[bool], zero=None) -> list[bool]:
  """Which of equation e's results come from sums, where e is linear in its operands that
  come from sums (`summed`); _NotLinear says why where it is not. `zero(v)`: whether
  operand v is zero (a literal, or a broadcast one)."""
  zero = zero or (lambda v: _zero(eqns, v))
  name = e.primitive.name
  out = np.dtype(e.outvars[0].aval.dtype) if e.outvars else np.dtype("float32")
  every = [True] * len(e.outvars)
  if name in CALLS:                  # jnp.where and friends: the call's own equations
    inner, _ = compat.open_jaxpr(e.params["jaxpr"])
    outer = dict(zip(map(id, inner.invars), e.invars, strict=True))
    inner_zero = lambda v: _zero(inner.eqns, v, lambda u: id(u) in outer and zero(outer[id(u)]))  # noqa: E731
    made = {id(v) for v, s in zip(inner.invars, summed, strict=True) if s}
    for ie in inner.eqns:
      inner_summed = [not _is_lit(v) and id(v) in made for v in ie.invars]
      if any(inner_summed):
        flows = _linear(inner.eqns, ie, inner_summed, inner_zero)
        made |= {id(v) for v, t in zip(ie.outvars, flows, strict=True) if t}
    return [not _is_lit(v) and id(v) in made for v in inner.outvars]
  if name == CONVERT and out.kind in "biu" and np.dtype(e.invars[0].aval.dtype).kind == "f":
    uses = _uses(eqns, e.outvars[0])
    if len(uses) == 1 and eqns[uses[0]].primitive.name in ("swap", "masked_swap"):
      return every                   # the cast before the store: the second pass makes it
    raise _NotLinear("a float sum cast to an integer is rounded: the partials' roundings do "
                     "not add up")
  if name in STRUCTURAL:
    if any(summed[1:]):
      raise _NotLinear(f"`{name}` reads a sum as a parameter")
    return every
  if name in ("mul", "dot_general"):
    if sum(summed) != 1:
      raise _NotLinear(f"`{name}` multiplies two sums together")
    return every
  if name == "div":
    if out.kind in "iu":
      raise _NotLinear("an integer `div` rounds: the partials' quotients do not add up to the "
                       "sum's")
    if summed[1]:
      raise _NotLinear("`div` divides by a sum")
    return every
  if name in ("add", "add_any", "sub"):
    if all(summed):
      return every
    raise _NotLinear(f"`{name}` adds a value that does not come from a sum: each of the S "
                     "partials would add it")
  if name == "select_n":
    if summed[0]:
      raise _NotLinear("`select_n` chooses by a sum")
    if all(s or zero(v) for s, v in zip(summed[1:], e.invars[1:], strict=True)):
      return every
    raise _NotLinear("`select_n` chooses between a sum and a value that is not zero")
  raise _NotLinear(f"`{name}` is not linear: the sum of its values over the partials is not "
                   "its value over their sum")


def _stores(eqns, li: int, sums, outs) -> tuple[Store, ...]:
  """One Store per output. After the loop, every value computed from the sums must be
  linear in them (STRUCTURAL ops, a multiply or divide by what no sum feeds, adds of sums,
  a select against zero: a mean, a sum over rows, a scale by a loaded weight) until it is
  stored, once, to an output."""
  for k, r in enumerate(sums):
    if isinstance(r, compat.DropVar) or not _uses(eqns, r):
      raise NotSplittable(f"carry {k}'s sum is not used after the loop")
  carries = {id(r): (k,) for k, r in enumerate(sums)}    # value -> the sums it is made of
  found: dict[int, Store] = {}
  for i in range(li + 1, len(eqns)):
    e = eqns[i]
    summed = [not _is_lit(v) and id(v) in carries for v in e.invars]
    if not any(summed):
      continue
    ks = tuple(sorted({k for v, s in zip(e.invars, summed, strict=True) if s for k in carries[id(v)]}))
    what = f"carry {ks[0]}'s sum" if len(ks) == 1 else f"the sums of carries {ks}"
    if e.primitive.name in ("swap", "masked_swap"):
      found_store = _store(eqns, i, e, outs, summed, what, ks[0], carries)
      if found_store.output in found:
        raise NotSplittable(f"output {found_store.output} is stored twice")
      found[found_store.output] = found_store
      continue
    try:
      made = _linear(eqns, e, summed)
    except _NotLinear as why:
      raise NotSplittable(f"{what} goes to `{e.primitive.name}` after the loop: {why} (only "
                          "sums stored as they are, or through linear steps, are split: the "
                          "partials' sum must be what is stored)") from None
    for v, t in zip(e.outvars, made, strict=True):
      if t and not isinstance(v, compat.DropVar):
        carries[id(v)] = ks
  stored = {s.eqn for s in found.values()}
  for i, e in enumerate(eqns):
    if i in stored or i == li:
      continue
    touched = [j for j, v in enumerate(outs) if any(x is v for x in e.invars)]
    if touched:
      raise NotSplittable(f"output {touched[0]} is also used by `{e.primitive.name}`: only a "
                          "kernel whose outputs are its stored sums is split")
  missing = [j for j in range(len(outs)) if j not in found]
  if missing:
    raise NotSplittable(f"output {missing[0]} is not stored from a sum of the loop")
  for i, e in enumerate(eqns):
    if i not in stored and i != li and \
        any(not isinstance(x, compat.ReadEffect) for x in getattr(e, "effects", ())):
      raise NotSplittable(f"`{e.primitive.name}` outside the loop writes a ref (or has another "
                          "effect): each of the S programs would do it")
  return tuple(found[j] for j in range(len(outs)))


def _store(eqns, i, e, outs, summed, what, k, carries) -> Store:
  refs = [j for j, v in enumerate(outs) if any(x is v for x in e.invars)]
  if len(refs) != 1 or e.invars[0] is not outs[refs[0]]:
    raise NotSplittable(f"{what} is stored to a ref that is not an output")
  if any(not isinstance(v, compat.DropVar) and _uses(eqns, v) for v in e.outvars):
    raise NotSplittable("a store's old value is read")
  at = _value_index(e)
  if [j for j, s in enumerate(summed) if s] != [at]:
    raise NotSplittable(f"{what} is used as an index or mask of its store")
  value = e.invars[at]
  convert = None
  made = _producer(eqns, value)
  if made is not None and made.primitive.name == CONVERT and len(_uses(eqns, value)) == 1 \
      and not _is_lit(made.invars[0]) and id(made.invars[0]) in carries:
    convert = eqns.index(made)       # the last cast to the output's dtype: dropped
    value = made.invars[0]
  partial = np.dtype(value.aval.dtype).name
  return Store(refs[0], k, i, convert, partial, np.dtype(outs[refs[0]].aval.dtype).name)


_UNKNOWN = object()
READS = ("get", "load", "swap")


def _int_at(eqns, v, pid: tuple[int, ...], grid: tuple[int, ...]) -> int:
  """The scalar `v` for the program at `pid` (its index along each grid axis): the scalar
  equations before it evaluated with the program id given; NotSplittable where `v` is read
  from a ref or made by anything else that cannot be evaluated here."""
  if _is_lit(v):
    return int(v.val)
  env = {}

  def known(x):
    return x.val if _is_lit(x) else env.get(x, _UNKNOWN)

  for e in eqns:
    if not e.outvars or e.effects or any(getattr(o.aval, "shape", None) != ()
                                         for o in e.outvars):
      continue                        # only pure scalars: a bound is one, they cost nothing,
                                      # and a debug print or a write must not run here
    name = e.primitive.name
    if name == "program_id":
      outs = [pid[e.params["axis"]]]
    elif name == "num_programs":
      outs = [grid[e.params["axis"]]]
    else:
      ins = [known(x) for x in e.invars]
      if name in READS or any(x is _UNKNOWN for x in ins):
        continue
      try:
        res = e.primitive.bind(*ins, **e.params)
      except Exception:  # noqa: BLE001 - a value this cannot evaluate stays unknown
        continue
      outs = list(res) if e.primitive.multiple_results else [res]
    for o, r in zip(e.outvars, outs, strict=True):
      env[o] = r
    if v in env:
      return int(env[v])
  raise NotSplittable("the loop's bound is not a scalar computed from the program id")


def sample_programs(grid: tuple[int, ...]) -> list[tuple[int, ...]]:
  """Programs where a bound that depends on the program id is evaluated: the first, the
  middle and the last along each axis (a causal bound grows with the query block)."""
  return list(itertools.product(*[sorted({0, n // 2, n - 1}) for n in grid]))


def trips_by_program(jaxpr, grid: tuple[int, ...]) -> list[tuple[int, ...] | None]:
  """Each top-level fori loop's trip count at each of sample_programs(grid), in order: a
  constant repeated, or a causal attention's bound evaluated per program (None: a loop of
  another shape, or a bound read from data)."""
  eqns = jaxpr.eqns
  programs = sample_programs(grid)
  out = []
  for e in (e for e in eqns if e.primitive.name in LOOPS):
    try:
      _, _, _, lo_v, hi, _ = _loop_parts(e)
      out.append(tuple(
          hi if isinstance(hi, int) else _int_at(eqns, hi, p, grid) - _int_at(eqns, lo_v, p, grid)
          for p in programs))
    except NotSplittable:
      out.append(None)
  return out
