"""Block shapes tried with their own warps and stages: dot_rate's intent made concrete.

A dot's tile is the output block (BM rows along one grid axis, BN columns along another:
blockshape.plan finds the axes whose index maps walk them in block units). A block shape
and its settings go together: a larger tile needs more warps to hold its accumulator
(BM*BN float32 spread over the CTA's threads) and fewer stages to fit shared memory, so
trying num_warps, num_stages and the block each alone from a bad start never reaches the
good corner. Each candidate is one kind c action whose change carries its blocks, grid,
num_warps and num_stages (blockshape.build traces the call with all of them), tried by
`advise` as any kind c action: compiled, replayed on the original's inputs, outputs
compared, timed.

The set is small and fixed (CANDIDATES), reasoned from the tensor cores, not searched:
on Hopper (sm_90) a warpgroup (4 warps) issues wgmma instructions of 64 rows, so BM is 64
rows per warpgroup (BM=64 with 4 warps, BM=128 with 8, or 4 warps each running two 64-row
instructions); wgmma's N goes to 256, so BN of 128 or 256 keeps each instruction long.
The tiles are those Triton's own matmul tutorial tunes over on Hopper for 32-bit and
16-bit operands, larger first (a larger tile reads fewer bytes per FLOP). On older GPUs
(mma.sync, 16 rows a warp) the same tiles are as good a start. A candidate is left out
where its accumulator would pass ACC_REGISTERS a thread, its stages do not fit shared
memory (each stage holds a BMxBK and a BKxBN block of the operands), its grid would leave
SMs without a program, or its block is larger than the array. At most MAX_CANDIDATES,
so that `advise`'s budget holds.
"""
from __future__ import annotations

import dataclasses

import math

from .. import blockshape
from ..schema import Action

# (BM, BN, num_warps, num_stages), larger tiles first
CANDIDATES = ((128, 256, 8, 3), (256, 128, 8, 3), (128, 128, 8, 3), (128, 128, 4, 4),
              (64, 256, 4, 4), (128, 64, 4, 4), (64, 128, 4, 4))
MAX_CANDIDATES = 6
ACC_REGISTERS = 128     # float32 accumulator registers a thread may hold (of 255), the rest
                        # for the operands' fragments and addresses: past it, spills
MIN_STAGES = 2          # fewer: the loop's loads are not pipelined at all


def tile_axes(recipe, dot) -> tuple | None:
  """(plan of the rows' axis, plan of the columns' axis): the grid axes whose blocks are
  the dot's M and N (the first output's last two block dimensions), or None."""
  grid = recipe.kwargs.get("grid") or ()
  if isinstance(grid, int) or not grid:
    return None
  ins, outs = blockshape._flat_specs(recipe)
  out_at = len(ins)
  rank = len(blockshape._arrays(recipe)[out_at])
  if rank < 2:
    return None
  rows = cols = None
  for axis in range(len(grid)):
    p = blockshape.plan(recipe, axis)
    if p is None:
      continue
    dim = p.ties[out_at]
    if dim == rank - 2 and p.block == dot.m:
      rows = p
    elif dim == rank - 1 and p.block == dot.n:
      cols = p
  return (rows, cols) if rows is not None and cols is not None else None


def _pow2_at_least(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


def stages_that_fit(bm: int, bn: int, bk: int, itemsize: int, stages: int, lim) -> int:
  """The most stages up to `stages` whose operand blocks fit the SM's shared memory."""
  per_stage = (bm + bn) * bk * itemsize
  fit = (lim.shared_bytes - lim.shared_reserved) // max(per_stage, 1)
  return min(stages, fit)


def candidates(recipe, dot, f) -> tuple[list[dict], str]:
  """(changes, why there are none): each a block shape with its warps and stages."""
  axes = tile_axes(recipe, dot)
  if axes is None:
    return [], ("no grid axis walks the dot's rows and columns in block units (the output's "
                "block is not the dot's tile)")
  rows, cols = axes
  grid = list(recipe.kwargs["grid"])
  others = math.prod(g for i, g in enumerate(grid) if i not in (rows.axis, cols.axis))
  itemsize = 2 if dot.operand_dtype in ("bfloat16", "float16") else 4
  now = (rows.block, cols.block, f.num_warps, f.num_stages)
  out, why = [], []
  for bm, bn, warps, stages in CANDIDATES:
    if bm > _pow2_at_least(rows.extent) or bn > _pow2_at_least(cols.extent):
      why.append(f"{bm}x{bn} is larger than the array")
      continue
    if bm * bn // (32 * warps) > ACC_REGISTERS:
      continue
    stages = stages_that_fit(bm, bn, dot.k, itemsize, stages, f.limits)
    if stages < MIN_STAGES:
      why.append(f"{bm}x{bn} with K blocks of {dot.k} does not fit shared memory twice")
      continue
    programs = -(-rows.extent // bm) * -(-cols.extent // bn) * others
    if programs < f.sms:
      why.append(f"{bm}x{bn} gives {programs} programs for {f.sms} SMs")
      continue
    if (bm, bn, warps, stages) == now:
      continue
    out.append(change_of(recipe, rows, bm, cols, bn, warps, stages))
    if len(out) == MAX_CANDIDATES:
      break
  return out, "; ".join(dict.fromkeys(why)) or "the kernel's own tile is the only one that fits"


def change_of(recipe, rows, bm: int, cols, bn: int, warps: int, stages: int) -> dict:
  """blockshape's change along both axes at once, with the settings."""
  first = blockshape.change_for(recipe, rows, bm)
  second = blockshape.change_for(recipe, cols, bn)
  blocks = [[b if a == o else a for a, b, o in zip(x, y, old, strict=True)]
            for x, y, old in zip(first["blocks"], second["blocks"], _old_blocks(recipe), strict=True)]
  grid = list(first["grid"])
  grid[cols.axis] = second["grid"][cols.axis]
  return {"grid": grid, "blocks": blocks, "num_warps": warps, "num_stages": stages,
          "tile": [bm, bn], "from_tile": [rows.block, cols.block],
          "axes": [rows.axis, cols.axis]}


def _old_blocks(recipe) -> list:
  ins, outs = blockshape._flat_specs(recipe)
  return [list(s.block_shape) for s in ins + outs]


def _edit(recipe, change: dict, rows, cols) -> str:
  """The change in the user's variables where each axis has one (`bm=64 -> 128`), else in
  the traced grid and BlockSpecs; then the CompilerParams."""
  parts = []
  for plan_, block in ((rows, change["tile"][0]), (cols, change["tile"][1])):
    if plan_.block == block:
      continue
    one = blockshape.change_for(recipe, plan_, block)
    parts.append(blockshape._spec_edit(recipe, one))
  settings = (f"compiler_params=pallas_prof.CompilerParams(num_warps={change['num_warps']}, "
              f"num_stages={change['num_stages']})")
  return f"at {recipe.location}: " + "; ".join(parts + [settings])


def resolve(action: Action, f, recipe, dot, notes: list[str]) -> list[Action]:
  """dot_rate's intent as kind c actions, one per candidate (none, with a note, where the
  call was not recorded or its blocks are not the dot's tile)."""
  if recipe is None or dot is None:
    notes.append("no block-shape candidates for the dot: its pallas_call was not recorded "
                 "(`pallas-prof advise` records it)")
    return []
  try:
    changes, why = candidates(recipe, dot, f)
  except Exception as e:  # noqa: BLE001 - the rest of the advice stands without them
    notes.append(f"no block-shape candidates for the dot: {type(e).__name__}: {str(e)[:200]}")
    return []
  if not changes:
    notes.append(f"no block-shape candidates for the dot: {why}")
    return []
  rows, cols = tile_axes(recipe, dot)
  out = []
  for c in changes:
    (bm, bn), (om, on) = c["tile"], c["from_tile"]
    parts = [f"tile {om}x{on} -> {bm}x{bn}" if (om, on) != (bm, bn) else f"tile {bm}x{bn}"]
    parts += [f"{k} {now} -> {c[k]}" for k, now in (("num_warps", f.num_warps),
                                                    ("num_stages", f.num_stages))
              if c[k] != now]
    grid = (f" (grid {'x'.join(map(str, recipe.kwargs['grid']))} -> "
            f"{'x'.join(map(str, c['grid']))})" if list(c["grid"]) != list(recipe.kwargs["grid"])
            else "")
    title = ", ".join(parts) + grid
    out.append(dataclasses.replace(action, title=title, change=c, edit=_edit(recipe, c, rows, cols),
                                   user_file=recipe.call_file, user_line=recipe.call_line))
  return out
