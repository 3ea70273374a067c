"""The split variant, built from the recorded pallas_call (advice/recipes.py) and the
pattern its jaxpr fits (pattern.py).

The variant is the same kernel jaxpr, evaluated inside a new pallas_call whose grid gains a
last axis of S programs: the loop runs the trip range's chunk s (contiguous, of
ceil(trip / S) iterations, the last one shorter) where s is that axis's program id; each
output gains a leading axis of S (its BlockSpec squeezes it, so the kernel sees the blocks
it saw) and keeps the partial sums in the loop's own dtype (float32 for the norms' bf16
weights: the convert before the store is skipped). The second pass is XLA's: `.sum(0)` of
the partials, then the output's dtype. Not atomics: an atomic add makes the result depend
on the programs' order from run to run, and bf16 or fp16 outputs have no atomic add that
keeps float32 sums; a sum of S rows costs one small XLA reduction.

Its outputs equal the original's to choice.same_outputs' tolerance for floats (2e-2 of the
output's largest magnitude for 16-bit dtypes, 1e-4 for float32, as the tuner compares
configs): the adds are reassociated (S partial sums, then their sum), which moves each
element by about the rounding of the largest partial sums, not its own; integers exactly.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import jax
from jax.experimental import pallas as pl
import jax.numpy as jnp
import numpy as np

from ...backend import compat
from ...tune.choice import leaves, same_outputs
from . import defer
from .pattern import NotSplittable, Pattern, recognize
from .source import loop_line

MIN_CHUNK = 8                     # iterations each program keeps at least: fewer, and the
                                  # program spends its life starting (floors.py's argument)
PROGRAMS_PER_SM = 4               # the grid the smaller S aims at: 4 programs per SM, enough
                                  # loads in flight to hide the memory's latency
LARGER = 4                        # the other S tried: 4x more programs, for advise to measure


@dataclasses.dataclass(frozen=True)
class Kernel:
  jaxpr: object
  consts: tuple
  n_in: int
  n_out: int
  grid: tuple


def _find_call(jaxpr):
  for e in jaxpr.eqns:
    if e.primitive is compat.pallas_call_p:
      return e
    for sub in compat.sub_jaxprs(e):
      found = _find_call(sub)
      if found is not None:
        return found
  return None


def _structs(recipe):
  return [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in recipe.arg_shapes]


def kernel_of(recipe) -> Kernel:
  """The recorded call's kernel jaxpr (traced again, abstractly: nothing runs)."""
  if recipe.kwargs.get("input_output_aliases"):
    raise NotSplittable("its outputs alias inputs: each partial would start from the input")
  if recipe.kwargs.get("scratch_shapes"):
    raise NotSplittable("the kernel has scratch refs: only inputs and outputs are split")
  fn = recipe.original(recipe.kernel, recipe.out_shape, **recipe.kwargs)
  eqn = _find_call(jax.make_jaxpr(fn)(*_structs(recipe)).jaxpr)
  if eqn is None:
    raise NotSplittable("no pallas_call in the recorded call's trace")
  jaxpr, consts = compat.open_jaxpr(eqn.params["jaxpr"])
  grid = recipe.kwargs.get("grid") or ()
  grid = (grid,) if isinstance(grid, int) else tuple(grid)
  if not all(isinstance(g, int) for g in grid):
    raise NotSplittable("its grid is not a tuple of numbers")
  return Kernel(jaxpr, consts, len(recipe.arg_shapes), len(recipe.outs), grid)


def pattern_of(recipe) -> tuple[Kernel, Pattern]:
  k = kernel_of(recipe)
  fn = recipe.kernel
  while isinstance(fn, functools.partial):
    fn = fn.func
  try:
    file = inspect.getsourcefile(fn)
  except TypeError:
    file = None
  p = recognize(k.jaxpr, k.n_in, k.n_out, file)
  if p.file != file:                    # the equation does not name the kernel's line
    found = loop_line(recipe.kernel)
    p = dataclasses.replace(p, file=found[0], lineno=found[1]) if found else p
  return k, p


def splits(programs: int, trip: int, sms: int) -> list[int]:
  """The S to try: enough programs for PROGRAMS_PER_SM on each SM, and LARGER times that,
  each leaving every program MIN_CHUNK iterations or more (S normalised so that no program
  gets an empty chunk). Empty when the grid already fills the GPU or the loop is too short
  to split."""
  most = trip // MIN_CHUNK
  first = math.ceil(PROGRAMS_PER_SM * sms / max(programs, 1))
  if first < 2:                       # the grid gives every SM its programs already
    return []
  out = []
  for s in (first, first * LARGER):
    s = min(s, most)
    if s >= 2:
      s = math.ceil(trip / math.ceil(trip / s))       # no empty chunk
      out.append(s)
  return list(dict.fromkeys(out))


WIDER = (4, 8)                    # the factors a block parameter tied to the grid is tried at


@dataclasses.dataclass(frozen=True)
class Widening:
  """A block parameter of the kernel (a functools.partial keyword, say block_n=16) that the
  grid is computed from (grid axis `axis` == cdiv(extent, value)): tried larger, the grid
  shorter, beside the split. The norms' dw/db kernels read 16 bfloat16 columns a program
  (32-byte rows); wider rows read the memory in longer runs, and the split gives the grid
  back its programs. Only where the call has no BlockSpecs (the kernel indexes whole refs
  itself): the comparison with the original's outputs is what says it holds. With `axis`
  None, the keyword is the loop's step (advice/loop_steps.py): rebound, the grid kept."""
  name: str
  value: int
  new: int
  axis: int | None
  extent: int

  @property
  def words(self) -> str:
    return f"{self.name}={self.value} -> {self.new}"


def widenings(recipe) -> list[Widening]:
  """The block parameters the grid is computed from, each at WIDER's factors (up to the
  extent's next power of two)."""
  kernel = recipe.kernel
  if not isinstance(kernel, functools.partial) or recipe.kwargs.get("in_specs") is not None \
      or recipe.kwargs.get("out_specs") is not None:
    return []
  grid = recipe.kwargs.get("grid") or ()
  grid = (grid,) if isinstance(grid, int) else tuple(grid)
  extents = sorted({d for shape, _ in recipe.arg_shapes for d in shape})
  out = []
  for name, value in kernel.keywords.items():
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      continue
    for axis, g in enumerate(grid):
      tied = [e for e in extents if isinstance(g, int) and g > 1 and -(-e // value) == g]
      if len(tied) != 1:
        continue
      cap = 1 << (tied[0] - 1).bit_length()
      out += [Widening(name, value, value * f, axis, tied[0]) for f in WIDER
              if value * f <= cap]
  if out:
    try:
      base = _sums_size(recipe)
    except Exception:  # noqa: BLE001 - a kernel that does not fit has no widening either
      return []
    out = [w for w in out if _scales_the_sums(recipe, w, base)]
  names = {w.name for w in out}
  return out if len(names) == 1 else []          # one parameter, or none (ambiguous)


def _sums_size(recipe) -> int:
  k, p = pattern_of(recipe)
  loop = k.jaxpr.eqns[p.loop]
  return sum(math.prod(v.aval.shape) for v in loop.outvars if getattr(v.aval, "shape", ()))


def _scales_the_sums(recipe, w: Widening, base: int) -> bool:
  """Whether the parameter is the output block's: with the grid axis f times shorter,
  each program must sum f times as many elements (`base`: the original's; a parameter that
  is the loop's step, of the same value, leaves the sums as they are)."""
  try:
    return _sums_size(widened(recipe, w)) == base * (w.new // w.value)
  except Exception:  # noqa: BLE001 - a parameter the kernel cannot be traced at is not one
    return False


def widened(recipe, w: Widening):
  """The recipe with the block parameter at its new value and the grid axis recomputed
  (a loop's step, axis None: the grid as it is)."""
  kernel = functools.partial(recipe.kernel.func, *recipe.kernel.args,
                             **{**recipe.kernel.keywords, w.name: w.new})
  if w.axis is None:
    return dataclasses.replace(recipe, kernel=kernel)
  grid = recipe.kwargs.get("grid")
  grid = list((grid,) if isinstance(grid, int) else grid)
  grid[w.axis] = -(-w.extent // w.new)
  return dataclasses.replace(recipe, kernel=kernel, kwargs=dict(recipe.kwargs, grid=tuple(grid)))


def chunk(trip: int, s: int) -> int:
  return -(-trip // s)


def _split_loop(eqn, ins, p: Pattern, splits_: int, axis: int, deferred=()):
  """The loop equation replaced by a fori loop over program s's chunk of the trip range
  (`deferred`: defer.deferrals' carries kept as tiles, their rows summed after it)."""
  if p.form == "scan":
    nc, ncarry = compat.scan_layout(eqn.params)
    body, bconsts = compat.open_jaxpr(eqn.params["jaxpr"])
    consts, inits, extra = ins[:nc], ins[nc + 1:nc + ncarry], ()
  else:
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    body, bconsts = compat.open_jaxpr(eqn.params["body_jaxpr"])
    consts, inits = ins[cn:cn + bn], ins[cn + bn + 2:]
    extra = (ins[cn + bn + 1],)           # the bound, a carry of fori's while loop
  n = chunk(p.trip, splits_)
  s = pl.program_id(axis)
  lo = jnp.int32(p.lo) + s * n
  hi = jnp.minimum(lo + n, jnp.int32(p.lo + p.trip))

  def step(i, carry):
    args = (*consts, i, *extra, *carry)
    outs = (defer.evaluate_body(body, bconsts, args, deferred, len(consts), 1 + len(extra))
            if deferred else compat.eval_jaxpr(body, bconsts, *args))
    return tuple(outs[1 + len(extra):])

  sums = jax.lax.fori_loop(lo, hi, step, tuple(defer.tile_inits(list(inits), deferred)))
  return [hi, *extra, *defer.rows_summed(list(sums), deferred)]


def _kernel(k: Kernel, p: Pattern, splits_: int, deferred=()):
  """The variant's kernel function: the original jaxpr, evaluated with its loop split."""
  axis = len(k.grid)
  dropped = p.dropped

  def kernel(*refs):
    env = {}
    read = lambda v: v.val if isinstance(v, compat.Literal) else env[v]   # noqa: E731
    for v, c in zip(k.jaxpr.constvars, k.consts, strict=True):
      env[v] = c
    for v, r in zip(k.jaxpr.invars, refs, strict=True):
      env[v] = r
    for i, eqn in enumerate(k.jaxpr.eqns):
      ins = [read(v) for v in eqn.invars]
      if i == p.loop:
        with compat.equation_context(eqn):      # the new loop at the user's loop's line
          outs = _split_loop(eqn, ins, p, splits_, axis, deferred)
      elif i in dropped:
        outs = [ins[0]]                   # the partial stays in the sum's dtype
      else:
        outs = compat.bind_equation(eqn, ins)
      for v, x in zip(eqn.outvars, outs, strict=True):
        if not isinstance(v, compat.DropVar):
          env[v] = x
  return kernel


def _in_specs(recipe):
  """The inputs' BlockSpecs with index maps that ignore the new last grid axis."""
  specs = recipe.kwargs.get("in_specs")
  if specs is None:
    return {}
  wrap = lambda s: s if getattr(s, "index_map", None) is None else dataclasses.replace(  # noqa: E731
      s, index_map=lambda *g, f=s.index_map: f(*g[:-1]))
  return {"in_specs": [wrap(s) for s in specs] if isinstance(specs, (list, tuple)) else wrap(specs)}


def _out_spec(spec, shape):
  """An output's BlockSpec with a leading squeezed dimension that grid axis s picks."""
  block = getattr(spec, "block_shape", None)
  block = tuple(shape) if block is None else tuple(block)
  index = getattr(spec, "index_map", None)
  rank = len(shape)

  def index_map(*g):
    at = index(*g[:-1]) if index is not None else (0,) * rank
    return (g[-1], *(at if isinstance(at, tuple) else (at,)))
  new = pl.BlockSpec((pl.squeezed, *block), index_map)
  if spec is not None and hasattr(spec, "memory_space"):
    new = dataclasses.replace(new, memory_space=spec.memory_space)
  return new


def build(recipe, k: Kernel, p: Pattern, splits_: int, deferred: bool = False):
  """The variant as a function of the original's arguments, returning what it returns;
  `deferred`: with the loop's row sums deferred to after it, where defer.deferrals finds
  them (the split as written where it finds none: `variant.deferred` says which)."""
  found = defer.deferrals(k.jaxpr, p) if deferred else ()
  outs, specs = recipe.outs, recipe.out_specs()
  partial = [jax.ShapeDtypeStruct((splits_, *o.shape), s.partial_dtype)
             for o, s in zip(outs, p.stores, strict=True)]
  kwargs = dict(recipe.kwargs, grid=(*k.grid, splits_), **_in_specs(recipe),
                out_specs=[_out_spec(s, o.shape) for s, o in zip(specs, outs, strict=True)])
  call = recipe.original(_kernel(k, p, splits_, found), partial, **kwargs)

  def variant(*args):
    parts = call(*args)
    summed = [x.sum(0, dtype=s.partial_dtype).astype(s.dtype)
              for x, s in zip(parts, p.stores, strict=True)]
    return recipe.outs_like(summed)
  variant.call = call
  variant.splits = splits_
  variant.deferred = bool(found)
  variant.dtypes = tuple(jnp.dtype(s.dtype).name for s in p.stores)
  return variant


def original(recipe):
  return recipe.original(recipe.kernel, recipe.out_shape, **recipe.kwargs)


def inputs(recipe, seed: int = 0) -> list:
  """Seeded arguments of the recorded shapes: floats normal, integers in [0, 4), booleans
  half true (small integers stay valid indices of most arrays)."""
  rng = np.random.default_rng(seed)
  out = []
  for shape, dtype in recipe.arg_shapes:
    dt = np.dtype(dtype)
    if dt.kind == "f" or dt.name == "bfloat16":
      x = rng.standard_normal(shape, np.float32)
    elif dt.kind == "b":
      x = rng.random(shape) < 0.5
    else:
      x = rng.integers(0, 4, shape)
    out.append(jnp.asarray(x).astype(dtype))
  return out


def compare(recipe, variant, seed: int = 0) -> str | None:
  """Runs the original and the variant on seeded inputs; None when the outputs are equal
  (choice.same_outputs: the tuner's tolerance), else what differs."""
  args = inputs(recipe, seed)
  want = leaves(jax.jit(original(recipe))(*args))
  got = leaves(jax.jit(variant)(*args))
  return same_outputs(got, want)
