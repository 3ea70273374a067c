"""What the grid's blocks cover: which output elements no program's block writes
(uncovered_outputs), which output blocks several programs pick and the kernel reads
(revisited_outputs: a race on a GPU), and which programs pick a block outside its array
(blocks_outside).

A pallas_call writes each output through the blocks its BlockSpec's index
map picks for the grid's programs. Elements in no picked block are never
written: they hold zeros on the CPU (the interpreter's fresh buffers) and
whatever the memory held on a GPU, without a word (`grid=(100 // 48,)` with a
48-wide block leaves 4 of 100 elements). This module evaluates each output's
index map for every program of the grid, at lowering time, and says which
elements stay unwritten.

The index maps are evaluated on numpy arrays holding every grid point at
once, by a small evaluator of the integer primitives index maps are made of
(an index map with anything else is not analysed: no warning rather than a
wrong one). An output aliased to an input is skipped: its unwritten elements
keep the input's values, which is defined.
"""
from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from .. import compat
from .features.bounds import check_bounds_enabled

MAX_GRID_POINTS = 1 << 22      # beyond this, the analysis is skipped (its cost)
MAX_BLOCK_GRID = 1 << 24       # blocks per output tracked one by one


class UncoveredOutputWarning(UserWarning):
  """Some elements of a pallas_call output are in no block the grid writes."""


@dataclasses.dataclass(frozen=True)
class UncoveredOutput:
  """Elements of output `index` that no program's block covers."""
  index: int
  label: str
  shape: tuple[int, ...]
  dtype: str
  count: int                              # elements never written
  box: tuple[tuple[int, int], ...]        # [start, stop) per dimension, around all of them

  def range_text(self) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in self.box) + "]"

  def describe(self) -> str:
    total = math.prod(self.shape)
    shape = ",".join(map(str, self.shape))
    return (f"output {self.index} ({self.label}: {self.dtype}[{shape}]): {self.count} of "
            f"{total} elements in no block the grid writes, within {self.range_text()}")

  def to_dict(self) -> dict:
    return {"output": self.index, "label": self.label, "shape": list(self.shape),
            "dtype": self.dtype, "unwritten_elements": self.count,
            "range": [list(b) for b in self.box]}


def uncovered_outputs(grid_mapping, grid: tuple[int, ...], labels=None,
                      input_output_aliases=()) -> list[UncoveredOutput]:
  """The outputs with elements no program writes (empty when all are covered
  or the analysis does not apply)."""
  n_in, n_out = grid_mapping.num_inputs, grid_mapping.num_outputs
  points = math.prod(grid) if grid else 1
  if points > MAX_GRID_POINTS:
    return []
  aliased = {int(o) for _, o in input_output_aliases}
  if points == 0:     # a grid with an empty dimension runs no program at all
    found = []
    for k in range(n_out):
      aval = grid_mapping.block_mappings[n_in + k].array_aval
      shape = tuple(int(s) for s in aval.shape)
      if k not in aliased and math.prod(shape):
        found.append(UncoveredOutput(k, labels[n_in + k] if labels else f"out{k}_ref", shape,
                                     np.dtype(aval.dtype).name, math.prod(shape),
                                     tuple((0, s) for s in shape)))
    return found
  ids = _grid_points(grid)
  found = []
  for k in range(n_out):
    if k in aliased:
      continue
    bm = grid_mapping.block_mappings[n_in + k]
    label = labels[n_in + k] if labels else f"out{k}_ref"
    hole = _uncovered(_analysed(bm, ids))
    if hole is not None:
      aval = bm.array_aval
      found.append(UncoveredOutput(k, label, tuple(aval.shape), np.dtype(aval.dtype).name,
                                   *hole))
  return found


def warn_uncovered(found: list[UncoveredOutput], kernel: str, site) -> None:
  """One UncoveredOutputWarning per output, pointing at the user's pallas_call
  (`site`: its EqnInfo, PallasCall.site)."""
  file = site.file or "<unknown>"
  line = site.line or 0
  held = ("check mode's poison: NaN, or all ones" if check_bounds_enabled() else
          "zeros on the CPU, whatever the memory held on a GPU")
  for u in found:
    message = (f"pallas_call `{kernel}` at {file}:{line}: {u.describe()}; they are never "
               f"written ({held}). Make the "
               "grid cover the output (pl.cdiv(size, block) blocks), or alias the output "
               "to an input that holds its initial values")
    warnings.warn_explicit(message, UncoveredOutputWarning, file, line)


class RevisitedOutputWarning(UserWarning):
  """Several programs of a pallas_call's grid pick the same block of an output the kernel
  reads: on a GPU they run at the same time, and the read-modify-write races."""


@dataclasses.dataclass(frozen=True)
class RevisitedOutput:
  """Output `index`, whose blocks several programs pick (its index map ignores grid axes
  `axes`), read by the kernel at `read_at` (file, line)."""
  index: int
  label: str
  shape: tuple[int, ...]
  dtype: str
  axes: tuple[int, ...]                   # grid axes along which its block stays the same
  programs: int                           # programs that pick its most-picked block
  block: tuple[int, ...]                  # that block
  read_at: tuple[str | None, int | None] = (None, None)

  def describe(self) -> str:
    shape = ",".join(map(str, self.shape))
    along = (f" along grid axis {self.axes[0]}" if len(self.axes) == 1 else
             f" along grid axes {', '.join(map(str, self.axes))}" if self.axes else "")
    block = self.block[0] if len(self.block) == 1 else self.block
    return (f"output {self.index} ({self.label}: {self.dtype}[{shape}]): block {block} is "
            f"picked by {self.programs} programs{along}, and the kernel reads it")


def revisited_outputs(grid_mapping, grid: tuple[int, ...], labels=None,
                      read=lambda label: None) -> list[RevisitedOutput]:
  """The outputs whose blocks several programs pick and the kernel reads (`read(label)`:
  where the kernel reads that output ref, (file, line), or None where it only writes it:
  programs that write the same values to a block are not a fault)."""
  points = math.prod(grid) if grid else 1
  if points < 2 or points > MAX_GRID_POINTS:
    return []
  n_in, n_out = grid_mapping.num_inputs, grid_mapping.num_outputs
  ids = _grid_points(grid)
  found = []
  for k in range(n_out):
    label = labels[n_in + k] if labels else f"out{k}_ref"
    at = read(label)
    picked_found = _analysed(grid_mapping.block_mappings[n_in + k], ids) if at else None
    if picked_found is None:
      continue
    picked, _, blocks, shape = picked_found
    inside = np.all((picked >= 0) & (picked < np.asarray(blocks)[:, None]), axis=0)
    if math.prod(blocks) > MAX_BLOCK_GRID or not inside.any():
      continue
    counts = np.bincount(np.ravel_multi_index(tuple(picked[:, inside]), blocks))
    most = int(np.argmax(counts))
    if counts[most] < 2:
      continue
    per_axis = picked.reshape((picked.shape[0], *grid))
    axes = tuple(a for a, g in enumerate(grid) if g > 1 and np.all(
        per_axis == per_axis.take([0], axis=1 + a)))
    aval = grid_mapping.block_mappings[n_in + k].array_aval
    block = tuple(int(b) for b in np.unravel_index(most, blocks))
    found.append(RevisitedOutput(k, label, shape, np.dtype(aval.dtype).name, axes,
                                 int(counts[most]), block, at))
  return found


def warn_revisited(found: list[RevisitedOutput], kernel: str, site) -> None:
  """One RevisitedOutputWarning per output, at the user's pallas_call (`site`)."""
  file, line = site.file or "<unknown>", site.line or 0
  for r in found:
    read = (f" ({r.read_at[0].rsplit('/', 1)[-1]}:{r.read_at[1]})" if r.read_at[0] else "")
    axis = (f"grid axis {r.axes[0]}" if len(r.axes) == 1 else "those grid axes")
    message = (f"pallas_call `{kernel}` at {file}:{line}: {r.describe()}{read}. On a GPU the "
               "grid's programs run at the same time, so each read-modify-write of a shared "
               "block races and updates are lost (Triton's interpreter, like a TPU, runs them "
               f"one after another, which hides it). Reduce over {axis} inside the kernel (a "
               "fori_loop over its blocks), or give each program a block of partial results "
               "of its own and sum them after the call")
    warnings.warn_explicit(message, RevisitedOutputWarning, file, line)


@dataclasses.dataclass(frozen=True)
class BlockOutside:
  """Programs whose BlockSpec picks a block of operand `operand` (its place among the
  call's inputs then outputs) that starts outside the array: at or past its end, or
  before its start. A partial last block (the array's size not a multiple of the block
  size) is inside: its start is in the array, and its lanes past the end are masked."""
  operand: int
  label: str
  shape: tuple[int, ...]
  block_sizes: tuple[int, ...]            # elements per block (1: a squeezed dimension)
  programs: int                           # how many programs pick such a block
  total: int                              # programs in the grid
  program: tuple[int, ...]                # the first of them, as its grid indices
  block: tuple[int, ...]                  # the block index it picks
  axis: int                               # the first dimension where that block is outside

  @property
  def blocks(self) -> int:
    """Blocks of the array along `axis` (valid block indices: 0 to blocks - 1)."""
    return -(-self.shape[self.axis] // self.block_sizes[self.axis])

  @property
  def first_element(self) -> int:
    """Where the block starts along `axis`."""
    return self.block[self.axis] * self.block_sizes[self.axis]


def blocks_outside(grid_mapping, grid: tuple[int, ...], labels=None) -> list[BlockOutside]:
  """Each operand (inputs, then outputs) whose index map picks, for some program of the
  grid, a block that starts outside its array: the first such program and block. Index
  maps this cannot evaluate (scalar-prefetch operands, primitives the evaluator does not
  know, offsets rather than block indices) are left to the bounds-checked mode."""
  points = math.prod(grid) if grid else 1
  if points == 0 or points > MAX_GRID_POINTS:
    return []
  ids = _grid_points(grid)
  found = []
  for k, bm in enumerate(grid_mapping.block_mappings):
    picked_found = _analysed(bm, ids)
    if picked_found is None:
      continue
    picked, sizes, blocks, shape = picked_found
    outside = (picked < 0) | (picked >= np.asarray(blocks)[:, None])
    bad = np.flatnonzero(outside.any(axis=0))
    if not bad.size:
      continue
    first = int(bad[0])
    program = tuple(int(i[first]) for i in ids)
    found.append(BlockOutside(
        k, labels[k] if labels else f"operand{k}", shape, tuple(sizes), int(bad.size), points,
        program, tuple(int(b) for b in picked[:, first]),
        int(np.flatnonzero(outside[:, first])[0])))
  return found


def every_block_inside(bm, grid: tuple[int, ...]) -> bool:
  """Whether the index map of `bm` is known to pick, for every program of the grid, a
  block that starts inside its array (False where it cannot be evaluated)."""
  points = math.prod(grid) if grid else 1
  if points > MAX_GRID_POINTS:
    return False
  found = _analysed(bm, _grid_points(grid))
  if found is None:
    return False
  picked, _, blocks, _ = found
  return bool(np.all((picked >= 0) & (picked < np.asarray(blocks)[:, None])))


# --- the analysis ------------------------------------------------------------------

class _NotAnalysed(Exception):
  pass


def _grid_points(grid) -> list[np.ndarray]:
  if not grid:
    return []
  mesh = np.meshgrid(*[np.arange(g, dtype=np.int64) for g in grid], indexing="ij")
  return [m.reshape(-1) for m in mesh]


def _uncovered(picked_found):
  found = _visited_blocks(picked_found)
  if found is None:
    return None
  visited, sizes, shape = found
  if visited.all():
    return None
  missing = np.argwhere(~visited)
  count = 0
  for block in missing:
    count += math.prod(min(shape[d], (b + 1) * sizes[d]) - b * sizes[d]
                       for d, b in enumerate(block))
  lo, hi = missing.min(axis=0), missing.max(axis=0)
  box = tuple((int(lo[d]) * sizes[d], min(shape[d], (int(hi[d]) + 1) * sizes[d]))
              for d in range(len(shape)))
  return count, box


def _visited_blocks(found):
  """(visited blocks as a boolean array, block sizes, array shape) from _picked_blocks'
  answer, or None."""
  if found is None:
    return None
  picked, sizes, blocks, shape = found
  if math.prod(blocks) > MAX_BLOCK_GRID:
    return None
  visited = np.zeros(blocks, dtype=bool)
  inside = np.all((picked >= 0) & (picked < np.asarray(blocks)[:, None]), axis=0)
  visited[tuple(picked[:, inside])] = True
  return visited, sizes, shape


def _analysed(bm, ids):
  """_picked_blocks, or None where the index map is not analysed."""
  try:
    return _picked_blocks(bm, ids)
  except Exception:  # noqa: BLE001 - an analysis never fails a lowering (_NotAnalysed too)
    return None


def _picked_blocks(bm, ids):
  """(the block index each program picks, [rank, programs]; block sizes; blocks per
  dimension; array shape), or None for an array of no elements."""
  shape = tuple(int(s) for s in bm.array_aval.shape)
  if not shape or math.prod(shape) == 0:
    return None
  sizes = []
  for bdim in bm.block_shape:
    if isinstance(bdim, compat.Squeezed) or bdim is None:
      sizes.append(1)
    elif isinstance(bdim, compat.Blocked):
      sizes.append(int(bdim.block_size))
    else:
      raise _NotAnalysed       # Element / BoundedSlice: offsets, not block indices
  blocks = [-(-s // b) for s, b in zip(shape, sizes, strict=True)]
  closed = bm.index_map_jaxpr
  n = len(ids[0]) if ids else 1
  indices = _eval(closed.jaxpr, list(closed.consts), [i for i in ids], n)
  if len(indices) != len(shape):
    raise _NotAnalysed
  picked = np.stack([np.broadcast_to(np.asarray(i, np.int64), (n,)) for i in indices])
  return picked, sizes, blocks, shape


def _eval(jaxpr, consts, args, n):
  """Evaluates an index-map jaxpr on int64 arrays of all grid points."""
  env = {}

  def read(atom):
    if isinstance(atom, compat.Literal):
      return np.asarray(atom.val)
    return env[atom]

  for var, value in zip(jaxpr.constvars, consts, strict=True):
    value = np.asarray(value)
    if value.shape:
      raise _NotAnalysed
    env[var] = value
  if len(args) != len(jaxpr.invars):
    raise _NotAnalysed
  for var, value in zip(jaxpr.invars, args, strict=True):
    env[var] = value
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    ins = [read(v) for v in eqn.invars]
    if name in ("pjit", "jit", "closed_call", "core_call"):
      sub = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
      sub_jaxpr = getattr(sub, "jaxpr", sub)
      outs = _eval(sub_jaxpr, list(getattr(sub, "consts", ())), ins, n)
    else:
      fn = _OPS.get(name)
      if fn is None:
        raise _NotAnalysed
      try:
        with np.errstate(all="ignore"):
          outs = [fn(*ins, **eqn.params)]
      except (TypeError, ValueError, ZeroDivisionError):
        raise _NotAnalysed from None
    for var, value in zip(eqn.outvars, outs, strict=True):
      if np.asarray(value).dtype.kind == "f":
        raise _NotAnalysed
      env[var] = np.asarray(value)
  return [read(v) for v in jaxpr.outvars]


def _div(a, b, **_):
  """lax.div: rounds toward zero."""
  b = np.where(b == 0, 1, b)
  q = np.abs(a) // np.abs(b)
  return np.where((a < 0) != (b < 0), -q, q)


def _rem(a, b, **_):
  return a - _div(a, b) * np.where(b == 0, 1, b)


def _select(which, *cases, **_):
  return np.choose(np.asarray(which).astype(np.int64), np.broadcast_arrays(*cases))


_OPS = {
    "add": lambda a, b, **_: a + b, "sub": lambda a, b, **_: a - b,
    "mul": lambda a, b, **_: a * b, "neg": lambda a, **_: -a,
    "div": _div, "rem": _rem, "max": lambda a, b, **_: np.maximum(a, b),
    "min": lambda a, b, **_: np.minimum(a, b), "abs": lambda a, **_: np.abs(a),
    "sign": lambda a, **_: np.sign(a),
    "convert_element_type": lambda a, **p: np.asarray(a).astype(
        np.int64 if np.dtype(p["new_dtype"]).kind in "iu" else bool),
    "eq": lambda a, b, **_: a == b, "ne": lambda a, b, **_: a != b,
    "lt": lambda a, b, **_: a < b, "le": lambda a, b, **_: a <= b,
    "gt": lambda a, b, **_: a > b, "ge": lambda a, b, **_: a >= b,
    "and": lambda a, b, **_: a & b, "or": lambda a, b, **_: a | b,
    "not": lambda a, **_: ~a, "select_n": _select,
    "clamp": lambda lo, x, hi, **_: np.clip(x, lo, hi),
    "copy": lambda a, **_: a, "copy_p": lambda a, **_: a,
    "squeeze": lambda a, **_: a, "broadcast_in_dim": lambda a, **p: a,
}
