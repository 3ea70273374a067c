"""Block-shape actions made concrete.

A rule asks for larger, smaller or wider blocks (table.blocks: an intent). Where the
kernel's pallas_call was recorded (recipes.py) and its index maps walk a grid axis in
block units (an output of the index map *is* that grid index), the same kernel can be
traced again with another block size along that axis and the grid rescaled to cover
the same array: a kind c action, whose variant trials.py compiles and checks for equal
outputs. Otherwise, and for kernels that read their program id (their results may
depend on the grid), it becomes an edit at the pallas_call line (kind d).

Either way the factor an action states is one that fits the kernel's blocks: a power of
two that divides the block (smaller), keeps every SM a program (larger), no larger than
the rule asked. An intent no factor fits is left out, with a note saying why: advice
ranked by a saving it cannot deliver would be the first thing a user tries in vain.
"""
from __future__ import annotations

import dataclasses
import functools
import math

from . import call_source, estimate
from .floors import program_work
from .schema import Action
from .variants import variant_kernel, why_not_in_block_units

MAX_BLOCK_ELEMENTS = 1 << 16      # larger blocks than this do not fit a CTA's registers
MIN_BLOCK = 16                    # nor, in a kernel with a dot, smaller ones along a split
                                  # dimension (a tensor-core tile is 16 wide at least)
NO_AXIS = "no grid axis walks every BlockSpec in block units"
# a block's rows along an array's last (contiguous) dimension are not split narrower than a
# memory sector: below it each program fetches whole sectors to use part of each (a column
# sum's 128 float32 columns were proposed as blocks of 4, 16 bytes a row)
SECTOR_BYTES = 32


def _flat_specs(recipe) -> tuple[list, list]:
  """(in specs, out specs) as lists of BlockSpec (or None), one per array: the spec of an
  operand given as None (attention's segment_ids, recipe.absent) left out, as its array is."""
  ins = recipe.kwargs.get("in_specs")
  ins = list(ins) if isinstance(ins, (list, tuple)) else [ins] * (len(recipe.arg_shapes) or 1)
  if recipe.absent and len(ins) == len(recipe.arg_shapes) + len(recipe.absent):
    ins = [spec for i, spec in enumerate(ins) if i not in recipe.absent]
  return ins, recipe.out_specs()


def _with_absent(recipe, ins: list) -> list:
  """The in specs for the call again: the absent operands' own specs back in their places."""
  if not recipe.absent or not isinstance(recipe.kwargs.get("in_specs"), (list, tuple)):
    return ins
  given, it = list(recipe.kwargs["in_specs"]), iter(ins)
  if len(given) != len(ins) + len(recipe.absent):
    return ins
  return [given[i] if i in recipe.absent else next(it) for i in range(len(given))]


def _itemsizes(recipe) -> list[int | None]:
  """Bytes per element of each array (inputs then outputs), None where unknown."""
  return [_itemsize(d) for d in [d for _, d in recipe.arg_shapes]
          + [getattr(o, "dtype", None) for o in recipe.outs]]


def least_row(dims_and_rank, itemsizes, min_block: int = 1) -> int:
  """The least block along a split: `min_block`, and a sector's worth of elements where the
  split dimension is an array's last (`dims_and_rank`: (its dim or None, the array's rank)
  per array, beside its itemsize)."""
  least = min_block
  for (dim, rank), size in zip(dims_and_rank, itemsizes, strict=True):
    if dim is not None and dim == rank - 1 and size:
      least = max(least, -(-SECTOR_BYTES // size))
  return least


def _arrays(recipe) -> list[tuple[int, ...]]:
  return [tuple(s) for s, _ in recipe.arg_shapes] + [tuple(o.shape) for o in recipe.outs]


def _tie(spec, axis: int, rank: int) -> tuple[bool, int | None]:
  """(usable, dim): the block dimension that is grid index `axis` (None: the spec does
  not read that index); usable False when the index map uses it any other way."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  import jax.numpy as jnp
  if spec is None or getattr(spec, "index_map", None) is None or spec.block_shape is None:
    return False, None
  try:
    jaxpr = jax.make_jaxpr(spec.index_map)(*[jnp.int32(0)] * rank).jaxpr
  except Exception:  # noqa: BLE001 - an index map we cannot trace: no variant
    return False, None
  target = jaxpr.invars[axis]
  used = {target}
  is_var = lambda v: not hasattr(v, "val")      # a Literal (unhashable) has its value
  for eqn in jaxpr.eqns:
    if any(is_var(v) and v in used for v in eqn.invars):
      used.update(eqn.outvars)
  dims = [j for j, v in enumerate(jaxpr.outvars) if v is target]
  others = [j for j, v in enumerate(jaxpr.outvars) if is_var(v) and v in used and v is not target]
  if others or len(dims) > 1:
    return False, None
  return True, (dims[0] if dims else None)


@dataclasses.dataclass(frozen=True)
class Plan:
  axis: int
  ties: tuple                       # per spec (ins then outs): its tied dim or None
  block: int                        # the tied dims' block size
  extent: int                       # the array extent they cover


def plan(recipe, axis: int) -> Plan | None:
  grid = tuple(recipe.kwargs.get("grid") or ())
  if not isinstance(grid, tuple) or axis >= len(grid) or not all(isinstance(g, int) for g in grid):
    return None
  ins, outs = _flat_specs(recipe)
  arrays = _arrays(recipe)
  if len(ins) + len(outs) != len(arrays):
    return None          # not one BlockSpec per array (JAX refuses such a call): no plan
  ties, sizes = [], set()
  for spec, shape in zip(ins + outs, arrays, strict=True):
    ok, dim = _tie(spec, axis, len(grid))
    if not ok:
      return None
    ties.append(dim)
    if dim is not None:
      b = spec.block_shape[dim]
      if not isinstance(b, int) or -(-shape[dim] // b) != grid[axis]:
        return None
      sizes.add((b, shape[dim]))
  if len(sizes) != 1:
    return None
  (block, extent), = sizes
  return Plan(axis, tuple(ties), block, extent)


def change_for(recipe, p: Plan, new_block: int) -> dict:
  ins, outs = _flat_specs(recipe)
  grid = list(recipe.kwargs["grid"])
  grid[p.axis] = -(-p.extent // new_block)
  shapes = []
  for spec, dim in zip(ins + outs, p.ties, strict=True):
    shape = list(spec.block_shape)
    if dim is not None:
      shape[dim] = new_block
    shapes.append(shape)
  return {"grid": grid, "blocks": shapes, "axis": p.axis, "from_block": p.block,
          "to_block": new_block}


SETTINGS = ("num_warps", "num_stages")     # what a joint change (advice/dots) sets beside blocks


def changed(recipe, change: dict):
  """The recipe of the variant: its grid, block shapes and (where the change names them)
  num_warps and num_stages changed, the kernel's own block size rebound with its blocks;
  a recipe still, so that another edit (advice/dots/layout.py's K-major B) builds on it."""
  ins, outs = _flat_specs(recipe)
  new = [dataclasses.replace(s, block_shape=tuple(b))
         for s, b in zip(ins + outs, change["blocks"], strict=True)]
  kwargs = dict(recipe.kwargs, grid=tuple(change["grid"]),
                in_specs=_with_absent(recipe, new[:len(ins)]),
                out_specs=recipe.out_specs_like(new[len(ins):]))
  settings = {k: int(change[k]) for k in SETTINGS if k in change}
  if settings:
    kwargs["compiler_params"] = with_settings(recipe.kwargs.get("compiler_params"), settings)
  kernel = recipe.kernel
  if change.get("rebind"):          # the kernel's own block size, rebound with the blocks
    kernel = functools.partial(kernel, **change["rebind"])
  return dataclasses.replace(recipe, kernel=kernel, kwargs=kwargs)


def build(recipe, change: dict):
  """The pallas_call of the variant: same kernel, index maps and outputs; with the
  change's num_warps and num_stages where it names them (a block shape tried with its own
  settings: advice/dots/joint.py)."""
  variant = changed(recipe, change)
  return recipe.original(variant.kernel, recipe.out_shape, **variant.kwargs)


def with_settings(params, settings: dict):
  """The call's compiler params with these num_warps/num_stages: pallas-prof's or Triton's
  CompilerParams replaced field by field, none made pallas-prof's."""
  if params is None:
    # lazy: compiler_params loads jax, which this module keeps out of its import (start-up time)
    from ..backend.compiler_params import CompilerParams
    return CompilerParams(**settings)
  if dataclasses.is_dataclass(params) and all(
      k in {f.name for f in dataclasses.fields(params)} for k in settings):
    return dataclasses.replace(params, **settings)
  raise ValueError(f"cannot set {', '.join(settings)} in compiler params of type "
                   f"{type(params).__name__}")


def _candidates(recipe, goal: str, factor: int, operand_index: int | None,
                last: int | None, sms: int, min_block: int = 1) -> tuple[list[dict], str]:
  """(changes, why there are none)."""
  grid = recipe.kwargs.get("grid") or ()
  plans = [p for p in (plan(recipe, a) for a in range(len(grid))) if p is not None]
  if goal == "wider" and operand_index is not None:
    rank = len(_arrays(recipe)[operand_index])
    plans = [p for p in plans if p.ties[operand_index] == rank - 1]
  if not plans:
    return [], NO_AXIS
  out, row, too_big = [], False, None
  for p in sorted(plans, key=lambda p: -grid[p.axis]):
    if goal in ("larger", "wider"):
      want = p.block * factor if goal == "larger" else max(last or 1, p.block * 2)
      cap = _pow2_at_least(p.extent)
      sizes = [min(want // 2, cap), min(want, cap)] if want // 2 > p.block else [min(want, cap)]
      # not so large that the grid leaves SMs idle (unless it already did)
      programs = lambda b: math.prod(grid) * p.block // b
      enough = [b for b in sizes if programs(b) >= sms]
      if not enough:                  # the largest that still gives every SM a program
        b = sizes[0]
        while b > p.block and programs(b) < sms:
          b //= 2
        enough = [b] if b > p.block else []
      sizes = enough
    else:
      least = least_row([(d, len(a)) for d, a in zip(p.ties, _arrays(recipe), strict=True)],
                        _itemsizes(recipe), min_block)
      fits = smaller_factor(p.block, factor, least)
      sizes = [p.block // fits] if fits > 1 else []
      row = least > min_block and smaller_factor(p.block, 2, min_block) > 1
    for b in dict.fromkeys(sizes):
      change = change_for(recipe, p, b)
      # the blocks the change makes larger or smaller: one it leaves as it was (attention's
      # whole K and V, read a slice at a time) is no more resident than before
      old = [list(s.block_shape) for s in sum(_flat_specs(recipe), [])]
      largest = max((block_elements(n) for o, n in zip(old, change["blocks"], strict=True)
                     if list(o) != list(n)), default=0)
      if largest > MAX_BLOCK_ELEMENTS and b != p.block:
        too_big = (b, largest)
      elif b != p.block and (goal != "smaller" or b >= min_block):
        out.append(change)
    if out:
      break
  blocks = ", ".join(f"{p.block} along grid axis {p.axis}" for p in plans)
  dot = f" into blocks of {min_block} or more (a kernel with a dot)" if min_block > 1 else ""
  if goal == "smaller" and row:
    dot = (f" into rows of {SECTOR_BYTES} bytes or more (narrower, a program fetches whole "
           "memory sectors to use part of each)")
  why = (f"it does not split in two{dot}" if goal == "smaller" else
         f"{goal} ones would leave some of the {sms} SMs without a program or not fit a CTA")
  if goal == "smaller" and too_big is not None:
    why = (f"at {too_big[0]} a block would still hold {too_big[1]:,} elements, more than the "
           f"{MAX_BLOCK_ELEMENTS:,} a CTA's registers can hold")
  return out, f"its blocks ({blocks}) cannot be made {goal} here: {why}"


def block_elements(block_shape) -> int:
  """Elements in one block: a squeezed dimension (None, pl.squeezed) holds one; pl.Element
  and the other block-dimension objects hold their block_size."""
  return math.prod(d if isinstance(d, int) else getattr(d, "block_size", 1) or 1
                   for d in block_shape)


def _pow2_at_least(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


def smaller_factor(block: int, factor: int, min_block: int = 1) -> int:
  """The largest power of two, at most `factor`, that divides `block` and leaves blocks of
  `min_block` or more: 1 when none does."""
  fits = 1 << max(0, int(factor).bit_length() - 1)
  while fits > 1 and (block % fits or block // fits < min_block):
    fits //= 2
  return fits


def larger_factor(f, factor: int) -> int:
  """Without a recorded pallas_call: the largest power of two, at most `factor`, by which
  the kernel's largest block can grow and still fit a CTA, its grid still giving every SM
  a program: 1 when none does."""
  e = f.largest_block()
  elements = math.prod(e.block_shape) if e is not None else None
  fits = 1 << max(0, int(factor).bit_length() - 1)
  while fits > 1 and (elements is None or elements * fits > MAX_BLOCK_ELEMENTS
                      or f.programs // fits < f.sms):
    fits //= 2
  return fits


def _program_block(f):
  """The block whose split gives more programs: the largest a program stores outside any
  loop (its share of the outputs: never a dimension the kernel reduces, as a loop's rows
  loaded and summed are), else the kernel's largest block."""
  stores = [e for e in f.equations.values() if e.block_shape and e.is_store
            and e.parent is None]
  return max(stores, key=lambda e: math.prod(e.block_shape), default=None) or \
      f.largest_block()


def _facts_split(f, factor: int, min_block: int) -> tuple[int, str]:
  """Without a grid axis to rescale: (the factor, the words) of splitting one dimension of
  the block a program stores (_program_block; 1 when none splits)."""
  e = _program_block(f)
  if e is None:
    return 1, "its block shapes are not known"
  rank = len(e.block_shape)
  itemsize = _itemsize(e.dtype)
  dims = [smaller_factor(d, factor, least_row([(i, rank)], [itemsize], min_block))
          for i, d in enumerate(e.block_shape)]
  best = max(range(len(dims)), key=lambda d: dims[d])
  shape = "x".join(map(str, e.block_shape))
  if dims[best] < 2:
    least = f" (a kernel with a dot keeps {min_block} or more)" if min_block > 1 else ""
    if itemsize and smaller_factor(e.block_shape[-1], 2, min_block) > 1 and all(
        smaller_factor(d, 2, min_block) < 2 for d in e.block_shape[:-1]):
      least = f" (its rows keep {SECTOR_BYTES} bytes or more: a memory sector)"
    return 1, f"no dimension of its {shape} blocks splits in two{least}"
  if e.is_store:                        # an output's dimension is never one it reduces
    return dims[best], f"dimension {best} of its {shape} output blocks"
  return dims[best], f"dimension {best} of its {shape} blocks, if the kernel does not reduce " \
      "over it"


def _itemsize(dtype) -> int | None:
  import numpy as np      # lazy: with jax, kept out of this module's import
  try:
    return np.dtype(dtype).itemsize if dtype not in (None, "?") else None
  except TypeError:
    return None


def _words(change: dict) -> str:
  rebound = "".join(f", the kernel's {k}={change['from_block']} -> {v}"
                    for k, v in (change.get("rebind") or {}).items())
  return (f"block {change['from_block']} -> {change['to_block']} along grid axis "
          f"{change['axis']}, grid {'x'.join(map(str, change['grid']))}{rebound}")


def _at_factor(action: Action, f, goal: str, factor: int) -> dict:
  """The estimate at the factor that fits: smaller blocks' saving is the work spread over
  more programs (estimate.spread), which depends on the factor; the others' do not."""
  if goal != "smaller" or action.estimate_pct is None:
    return {}
  value, basis = estimate.capped(
      estimate.spread(f.programs, f.sms, factor, program_work(f).in_floors), f)
  return {"estimate_pct": value, "estimate_basis": basis}


def _ratio(change: dict) -> int:
  a, b = change["from_block"], change["to_block"]
  return max(a, b) // min(a, b)


def resolve(action: Action, f, recipe, operand_index: int | None = None,
            notes: list[str] | None = None) -> list[Action]:
  """A block intent (table.blocks) as concrete actions: kind c variants, else a kind d edit,
  each at a factor that fits; none (and a line in `notes`) when no factor does."""
  goal, factor = action.change.get("block"), int(action.change.get("factor", 2))
  reads_pid = any(e.primitive in ("program_id", "num_programs") for e in f.equations.values())
  min_block = MIN_BLOCK if any(e.primitive == "dot_general" for e in f.equations.values()) else 1
  changes, why_not = [], "its pallas_call was not recorded (run it through `pallas-prof " \
      "advise` or `run`)"
  if recipe is not None:
    changes, why_not = _candidates(recipe, goal, factor, operand_index,
                                   action.change.get("last"), f.sms, min_block)
  if changes and reads_pid:          # tried where the kernel's offsets follow the blocks
    following = [c for c in (_following(recipe, c) for c in changes) if c is not None]
    changes, reads_pid = following or changes, not following
  elif changes:                      # a block size of the kernel's own rebound where needed
    changes = [_traced(recipe, c) or c for c in changes]
  if changes and not reads_pid:
    return [dataclasses.replace(action, kind="c", title=f"{_words(c)} ({goal} blocks)",
                                change=dict(c, block=goal), user_file=recipe.call_file,
                                user_line=recipe.call_line,
                                edit=f"at {recipe.location}: {_spec_edit(recipe, c)}",
                                **_at_factor(action, f, goal, _ratio(c)))
            for c in changes]
  if changes:         # the same change, made by the user: pallas-prof cannot check it
    c = changes[-1]
    how = (f"{_spec_edit(recipe, c)} (not tried: the kernel reads its program id, so its "
           "results may depend on the grid: change what it computes from it to match)")
    return [_edit(action, f, recipe, goal, _ratio(c) if goal != "wider" else None, how)]
  if goal == "wider":
    return [_edit(action, f, recipe, goal, None, f"make the block's last dimension longer "
                  f"(not tried: {why_not})")]
  if recipe is not None and why_not != NO_AXIS:
    return _left_out(action, goal, why_not, notes)   # the axis the grid walks cannot take it
  if goal == "larger":
    fits, along = larger_factor(f, factor), "the grid's longest axis"
  else:
    fits, along = _facts_split(f, factor, min_block)
  if fits < 2:
    return _left_out(action, goal, why_not if goal == "larger" else along, notes)
  how = ({"larger": f"make the blocks {fits}x larger along {along} and that grid axis "
                    f"{fits}x shorter",
          "smaller": f"split each program's work over {fits}x more programs (blocks {fits}x "
                     f"smaller along {along}; the grid "
                     f"{fits}x longer)"}[goal] + f" (not tried: {why_not})")
  return [_edit(action, f, recipe, goal, fits, how)]


# --- a kernel that reads its program id ----------------------------------------------------
# Whether a block variant keeps what its kernel computes from the program id: variants.py's
# why_not_in_block_units, on the kernel traced at the variant's blocks.

def _pid_follows(recipe, change: dict) -> bool:
  """Whether the kernel, traced at the change's blocks, uses its program id along the
  rescaled axis only times the new block size (why_not_in_block_units)."""
  from .split.variant import _structs   # lazy: loads jax, as the variant's trace does
  try:
    kernel = variant_kernel(build(recipe, change), _structs(recipe))
  except Exception:  # noqa: BLE001 - a variant that does not trace is not one to try
    return False
  return kernel is not None and why_not_in_block_units(
      kernel, change["axis"], change["to_block"]) is None


def _own_block_sizes(recipe, block: int) -> list[str]:
  """The kernel's keywords (functools.partial's) whose value is `block`: a block size of its
  own, as JAX's attention's block_q, that a variant's blocks must rebind to follow."""
  names, fn = {}, recipe.kernel
  while isinstance(fn, functools.partial):
    names = {**fn.keywords, **names}
    fn = fn.func
  return [k for k, v in names.items() if isinstance(v, int) and not isinstance(v, bool)
          and v == block]


def _candidates_rebound(recipe, change: dict) -> list[dict]:
  """The change as it is, then with each of the kernel's own block sizes at its old value
  rebound to the new block."""
  return [change] + [dict(change, rebind={name: change["to_block"]})
                     for name in _own_block_sizes(recipe, change["from_block"])]


def _following(recipe, change: dict) -> dict | None:
  """The change where the kernel's offsets follow its blocks (_pid_follows): as it is, else
  with one of the kernel's own block sizes rebound to the new block (the keyword the
  kernel multiplies its program id by); None where neither follows."""
  return next((c for c in _candidates_rebound(recipe, change) if _pid_follows(recipe, c)), None)


def _traces(recipe, change: dict) -> bool:
  from .split.variant import _structs   # lazy: loads jax, as the variant's trace does
  try:
    return variant_kernel(build(recipe, change), _structs(recipe)) is not None
  except Exception:  # noqa: BLE001 - a variant that does not trace
    return False


def _traced(recipe, change: dict) -> dict | None:
  """The change as it is where its variant traces, else with one of the kernel's own block
  sizes rebound to the new block (a keyword that sizes the kernel's values, as attention's
  block_q sizes its running maximum: at the old value the variant does not trace); None
  where neither traces (the trial then says why)."""
  return next((c for c in _candidates_rebound(recipe, change) if _traces(recipe, c)), None)


def _edit(action: Action, f, recipe, goal: str, factor: int | None, how: str) -> Action:
  where = recipe.location if recipe is not None else (
      f"{f.kernel_file.rsplit('/', 1)[-1]}:{f.kernel_line}" if f.kernel_file else "the pallas_call")
  change = {"block": goal} if factor is None else {"block": goal, "factor": factor}
  return dataclasses.replace(action, kind="d",
                             title=f"{goal} blocks{f' ({factor}x)' if factor else ''}: "
                                   "edit the pallas_call",
                             change=change,
                             user_file=recipe.call_file if recipe else f.kernel_file,
                             user_line=recipe.call_line if recipe else f.kernel_line,
                             edit=f"at {where}: {how}",
                             **(_at_factor(action, f, goal, factor) if factor else {}))


def _left_out(action: Action, goal: str, why: str, notes: list[str] | None) -> list[Action]:
  if notes is not None:
    notes.append(f"no {goal}-blocks action for {action.rule.replace('_', ' ')}: {why}")
  return []


def _spec_edit(recipe, change: dict) -> str:
  """The change as the user makes it (call_source.spec_edit)."""
  return call_source.spec_edit(recipe, change, _flat_specs(recipe))
