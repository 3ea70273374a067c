"""A loop's step given to the kernel as a keyword, tried at half and twice its value (and
four and eight times it, where an iteration loads little): kind c.

Attention's `block_k`, a matmul's `bk`: the rows or columns each iteration of the kernel's
own loop takes. The step trades what an iteration holds (registers, and shared memory for
every pipeline stage) against how many loads each issues; the compiler cannot move it, and
no rule's figure says where the balance lies, so advise measures the neighbours. Where the
step is a keyword of a functools.partial kernel, the same kernel traces again at another
value with nothing else changed: the grid and the BlockSpecs stay (the step is the
kernel's, not the call's).

A keyword is a loop's step when, traced at the new value, a top-level loop runs more
iterations for a smaller step and fewer for a larger, over the same range, in each of the
programs its bound is evaluated at (a causal attention's bound grows with the program id;
a head dimension or an epsilon moves no loop; a larger step that a floor-divided bound
would cut short, or that would read past the furthest row the original reaches, is not
offered). Where an iteration's loads are small (the norms' dw/db kernels load 1 KiB an
iteration), twice the step is still a small step: four and eight times it are tried too, as
long as an iteration would load at most LADDER_BYTES; a keyword the grid is computed from (variant.widenings: the
norms' block_n) is the split's, not this. Whether the variant computes what the original
does is the trial's to say, as for every kind c: outputs compared before it is timed.
"""
from __future__ import annotations

import dataclasses
import functools
import math

from .rules.table import Finding, about, fact
from .schema import Action
from .variants import PATCH, checked_on_cpu as checked

RULE = "loop_step"
LEAST = 8                   # a step below this is not tried (a tensor-core tile is 16 wide,
                            # a loop of steps of 4 rows is latency)
LADDER_BYTES = 16384        # larger steps than twice are tried while an iteration would load
                            # at most this per program (a pipeline stage's shared memory, and
                            # registers for what the iteration holds, grow with the step)
ESTIMATE_BASIS = ("no estimate: the step trades registers and shared memory against loads in "
                  "flight, which the work model does not price; measured where tried")


@dataclasses.dataclass(frozen=True)
class Step:
  name: str                 # the keyword (block_k)
  value: int
  new: int
  trips: tuple[int, int]    # the loop's iterations at value and at new (in the program that
                            # runs the most, where the bound depends on the program id)
  by_program: bool = False  # the bound depends on the program id (a causal attention's)

  @property
  def words(self) -> str:
    return f"{self.name}={self.value} -> {self.new}"

  @property
  def iterations(self) -> str:
    most = " in the program that runs the most" if self.by_program else ""
    return f"{self.trips[0]} -> {self.trips[1]} iterations{most}"


def keyword_diff(recipe, name: str, new: int) -> str:
  """The diff giving the call's kernel `name=new` (split/source.py writes it)."""
  from .split.source import keyword_diff as write   # lazy: the source module loads jax
  return write(recipe, name, new)


def rebound(recipe, name: str, new: int):
  """The recipe with the kernel's keyword at its new value (the grid and specs as they are)."""
  kernel = functools.partial(recipe.kernel.func, *recipe.kernel.args,
                             **{**recipe.kernel.keywords, name: new})
  return dataclasses.replace(recipe, kernel=kernel)


def build(recipe, change: dict):
  """The variant's call: the recorded pallas_call with the keyword rebound."""
  r = rebound(recipe, change["keyword"], int(change["to"]))
  return r.original(r.kernel, r.out_shape, **r.kwargs)


def _grid(recipe) -> tuple[int, ...]:
  grid = recipe.kwargs.get("grid") or ()
  return (grid,) if isinstance(grid, int) else tuple(int(n) for n in grid)


def _trips(recipe) -> list[tuple[int, ...] | None]:
  # lazy: these load jax, which the engine keeps out of its import (a recipe means it ran)
  import jax
  from ..backend import compat
  from .split.pattern import trips_by_program
  from .split.variant import _find_call, _structs
  fn = recipe.original(recipe.kernel, recipe.out_shape, **recipe.kwargs)
  eqn = _find_call(jax.make_jaxpr(fn)(*_structs(recipe)).jaxpr)
  if eqn is None:
    return []
  return trips_by_program(compat.open_jaxpr(eqn.params["jaxpr"])[0], _grid(recipe))


def _moved(before: tuple[int, ...], after: tuple[int, ...], value: int, new: int) -> bool:
  """Whether the step moves the loop inversely in every sampled program (strictly in the
  one that runs the most) over the range the original covers: not shorter by a whole
  original step (`k // block_k` of K = 96: 3 steps of 32 cover it, 1 of 64 leaves a third
  out), and reaching no further than the original's furthest program does (a step the
  length does not divide would read past the array: on a GPU an illegal address)."""
  smaller = new < value
  most = max(range(len(before)), key=before.__getitem__)
  reach = max(before) * value
  return (all((b >= a if smaller else b <= a) and (a - 1) * value < b * new <= reach
              for a, b in zip(before, after, strict=True)) and
          (after[most] > before[most] if smaller else after[most] < before[most]))


def larger(per_iteration: int | None) -> tuple[int, ...]:
  """The factors a step is tried larger by: 2, and 4 and 8 while an iteration that loads
  `per_iteration` bytes now would load at most LADDER_BYTES (unknown: 2 alone)."""
  return (2,) + tuple(k for k in (4, 8) if per_iteration and per_iteration * k <= LADDER_BYTES)


def loads_per_iteration(f) -> int | None:
  """The most any of the kernel's loops loads per program per iteration (None: no loop
  with loads the facts know the size of)."""
  sizes = [sum(e.bytes_read for e in f.children(loop.index) if e.is_load and e.bytes_read)
           for loop in f.loops()]       # an unrolled loop's too: the step sizes its loads
  return max((s for s in sizes if s), default=None)


def steps(recipe, factors: tuple[int, ...] = (2,)) -> list[Step]:
  """The loop-step keywords of the recorded call's kernel, each at half its value and at
  `factors` times it (powers of two from LEAST up); a step that is not a power of two, at
  the powers of two on either side (neighbours)."""
  kernel = recipe.kernel
  if not isinstance(kernel, functools.partial):
    return []
  try:
    base = _trips(recipe)
  except Exception:  # noqa: BLE001 - a call that does not trace again has no variants
    return []
  if not any(t is not None for t in base):
    return []
  from .split.variant import widenings   # lazy: loads jax, as _trips
  tied = {w.name for w in widenings(recipe)}
  out = []
  for name, value in kernel.keywords.items():
    if isinstance(value, bool) or not isinstance(value, int) or name in tied or \
        value < LEAST:
      continue
    for new in neighbours(value, factors):
      if new < LEAST:
        continue
      try:
        trips = _trips(rebound(recipe, name, new))
      except Exception:  # noqa: BLE001 - a value the kernel does not trace at is not offered
        continue
      if len(trips) != len(base):       # another loop structure: not the same kernel's step
        continue
      moved = [(a, b) for a, b in zip(base, trips, strict=True)
               if a is not None and b is not None and _moved(a, b, value, new)]
      if moved:
        a, b = moved[0]
        most = max(range(len(a)), key=a.__getitem__)
        out.append(Step(name, value, new, (a[most], b[most]), len(set(a)) > 1))
  return out


def padded(value: int) -> int:
  """The lanes a block of `value` rows takes: Triton's blocks are powers of two, and the
  lowering pads a block to the next one, masked."""
  return 1 << (value - 1).bit_length()


def _loaded_in_loop(f, size: int) -> bool:
  """Whether a block the kernel loads inside a loop has a dimension of `size` (the step is
  a block's rows, not only the loop's stride)."""
  return any(e.is_load and e.parent is not None and size in (e.block_shape or ())
             for e in f.equations.values())


def neighbours(value: int, factors: tuple[int, ...]) -> tuple[int, ...]:
  """The steps tried beside `value`: half and `factors` times it; for a step that is not
  a power of two (24 rows, loaded as 32 lanes with 8 masked off), the powers of two on
  either side, which waste no lanes."""
  if value & (value - 1):
    return (padded(value) // 2, padded(value))
  return (value // 2, *(value * k for k in factors))


def findings(f, recipe, notes: list[str]) -> list[Finding]:
  """The loop steps as one diagnosis (a fact of the kernel, with what advise tries) and an
  action of kind c per neighbour."""
  if recipe is None:
    return []
  found = steps(recipe, larger(loads_per_iteration(f)))
  if not found:
    return []
  from .split.source import SourceRefused, loop_line   # lazy: loads jax, as _trips
  where = loop_line(recipe.kernel)
  line = f"{where[0].rsplit('/', 1)[-1]}:{where[1]}" if where else "the kernel's loop"
  keywords = ", ".join(f"{n}={recipe.kernel.keywords[n]}"
                       for n in sorted({s.name for s in found}))
  first = found[0]
  d = about(RULE, f"the loop at {line} steps by {keywords}, a keyword of the kernel: a "
            "step's size trades registers and shared memory against loads in flight", f,
            evidence=[
                fact("loop", f"{first.name}={first.value}: {first.trips[0]} iterations; "
                     f"{first.name}={first.new}: {first.trips[1]}"
                     + ("; the bound depends on the program id (the program that runs the "
                        "most)" if first.by_program else ""), value=first.trips[0]),
                *[fact("padding", f"{n}={v} is not a power of two: each iteration's block "
                       f"takes {padded(v)} lanes along it, {padded(v) - v} of them masked off "
                       "(Triton's blocks are powers of two)", value=padded(v) - v)
                  for n, v in sorted({(s.name, s.value) for s in found}) if v & (v - 1)
                  and _loaded_in_loop(f, v)]])
  actions = []
  for s in found:
    try:
      diff, why = keyword_diff(recipe, s.name, s.new), None
    except SourceRefused as e:
      diff, why = None, str(e)
    edit = (f"at {recipe.location}: apply the diff ({PATCH}): it rebinds "
            f"{s.name} at the call ({s.words})" if diff else
            f"at {recipe.location}: give the kernel {s.name}={s.new} (its functools.partial "
            f"keyword; no diff: {why})")
    actions.append(Action("c", f"{s.words} (the step of the loop at {line}: "
                          f"{s.iterations})", RULE,
                          {"keyword": s.name, "from": s.value, "to": s.new,
                           "iterations": s.trips[1]}, edit=edit,
                          user_file=where[0] if where else None,
                          user_line=where[1] if where else None, estimate_pct=None,
                          estimate_basis=ESTIMATE_BASIS, diff=diff))
  return [Finding(d, actions)]


def checked_on_cpu(a: Action, recipe, loaded: int = 0) -> Action:
  """On a CPU, where the call is small enough for the interpreter: the variant run beside
  the original on seeded inputs, outputs compared (a step the kernel's arithmetic depends
  on gives another answer: said, so that no one applies it untried). `loaded`: what a
  program's loads cost the interpreter, in iterations (variants.loaded_steps), which a
  step leaves as they were."""
  programs = math.prod(_grid(recipe))
  return checked(a, recipe, lambda: build(recipe, a.change),
                 programs * (int(a.change["iterations"]) + loaded))
