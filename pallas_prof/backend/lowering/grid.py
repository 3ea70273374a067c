"""A Pallas grid on CUDA's launch grid: which Pallas grid dimensions each of
the three launch axes carries, and the program ids the kernel computes from it.
"""
from __future__ import annotations

import math

import numpy as np

from .codegen import KernelBuilder, Value
from ..errors import Unsupported
from . import triton_names as tl

MAX_GRID_YZ = 2**16 - 1
MAX_GRID_X = 2**31 - 1


def launch_grid_for(grid: tuple[int, ...], vmapped_dims: tuple[int, ...]):
  """Folds a Pallas grid of any rank into CUDA's three launch axes.

  Same order as JAX's own Triton backend, so tile order (and L2 reuse) is
  unchanged: the grid's dimensions in order, vmapped dimensions last
  (innermost first), leading dimensions collapsed into axis 0 when there are
  more than three or when axes 1/2 would exceed CUDA's 65535 limit.
  Returns (launch grid, plan) where plan lists, per launch axis, the Pallas
  grid dims it carries (fastest-varying first).
  """
  order = [i for i in range(len(grid)) if i not in vmapped_dims]
  order += list(reversed(vmapped_dims))
  sizes = [grid[i] for i in order]
  num_collapse = max(len(sizes) - 2, 0)
  if num_collapse + 1 < len(sizes) and sizes[num_collapse + 1] > MAX_GRID_YZ:
    num_collapse += 2
  elif num_collapse < len(sizes) and sizes[num_collapse] > MAX_GRID_YZ:
    num_collapse += 1
  if num_collapse == 0:
    axes = [[d] for d in order]
  else:
    axes = [order[:num_collapse]] + [[d] for d in order[num_collapse:]]
  launch = [math.prod(grid[d] for d in ax) for ax in axes]
  if len(launch) > 3 or (launch and launch[0] > MAX_GRID_X) or any(
      s > MAX_GRID_YZ for s in launch[1:]):
    raise Unsupported(f"grid {grid} cannot be mapped onto CUDA's launch limits",
                      "use fewer or smaller grid dimensions (axis 0 <= 2**31-1)")
  launch += [1] * (3 - len(launch))
  return tuple(launch), axes


def launch_axis_ids(launch_axes: int = 3) -> list[str]:
  """What each launch axis's program id is read as: the hardware's, in a plain launch."""
  return [f"{tl.program_id}({k})" for k in range(launch_axes)]


def emit_program_ids(b: KernelBuilder, grid, axes, axis_ids=None) -> list[Value]:
  """The program id of each grid dimension, from the launch axes' ids (`axis_ids`:
  launch_axis_ids() unless a persistent loop computes them, persistent_axis_ids)."""
  axis_ids = axis_ids or launch_axis_ids()
  pids: list[Value | None] = [None] * len(grid)
  for launch_axis, dims in enumerate(axes):
    _emit_axis(b, grid, axis_ids[launch_axis], dims, pids, "")
  return pids  # type: ignore[return-value]


def _emit_axis(b: KernelBuilder, grid, axis_id: str, dims, pids, suffix: str) -> None:
  """The program ids of the grid dimensions one launch axis (read as `axis_id`) carries."""
  if len(dims) == 1:
    pids[dims[0]] = b.value(f"pid{dims[0]}", axis_id, np.int32)
    return
  rest = b.assign(f"pid_flat{suffix}", axis_id)
  for j, d in enumerate(dims):
    if j == len(dims) - 1:
      pids[d] = b.value(f"pid{d}", rest, np.int32)
    else:
      pids[d] = b.value(f"pid{d}", f"{rest} % {grid[d]}", np.int32)
      rest = b.assign(f"pid_rest{suffix}", f"{rest} // {grid[d]}")


def grouped_launch(launch: tuple[int, int, int], axes, group: int):
  """The launch grid of a grouped launch order, or None where it does not apply.

  Launch order `group` (> 1) runs the first two launch axes' programs as one
  axis, in groups of `group` values of the first: within a group the first
  dimension varies fastest, then the second, group after group (the order of
  Triton's matmul tutorial). Programs that run together then share the blocks
  of both dimensions' operands in L2 (a matmul's rows of A and columns of B).
  Each program computes exactly what it computed before, only at another
  moment. It applies when the first two axes carry one grid dimension each,
  both longer than 1, and their product fits CUDA's axis 0."""
  if group <= 1 or len(axes) < 2 or len(axes[0]) != 1 or len(axes[1]) != 1:
    return None
  n0, n1 = launch[0], launch[1]
  if n0 <= 1 or n1 <= 1 or n0 * n1 > MAX_GRID_X:
    return None
  return (n0 * n1, launch[2], 1)


def emit_grouped_program_ids(b: KernelBuilder, grid, axes, group: int,
                             axis_ids=None) -> list[Value]:
  """Program ids for grouped_launch's order (its launch axis 0 is the first two
  launch axes in groups, its axis 1 the third, if any)."""
  axis_ids = axis_ids or launch_axis_ids()
  pids: list[Value | None] = [None] * len(grid)
  d0, d1 = axes[0][0], axes[1][0]
  n0, n1 = grid[d0], grid[d1]
  group = min(group, n0)
  per_group = group * n1
  flat = b.assign("pid_flat", axis_ids[0])
  first = b.assign("pid_first", f"({flat} // {per_group}) * {group}")
  size = b.assign("pid_group_size", f"{tl.minimum}({n0} - {first}, {group})")
  within = b.assign("pid_within", f"{flat} % {per_group}")
  pids[d0] = b.value(f"pid{d0}", f"{first} + {within} % {size}", np.int32)
  pids[d1] = b.value(f"pid{d1}", f"{within} // {size}", np.int32)
  if len(axes) > 2:
    _emit_axis(b, grid, axis_ids[1], axes[2], pids, "_z")
  return pids  # type: ignore[return-value]


def persistent_launch(launch: tuple[int, int, int], programs: int):
  """The launch grid of persistent programs, or None where it does not apply.

  `programs` (> 0) programs are launched in all, each looping over the launch grid's
  points from its own id in steps of `programs` (persistent_loop): the same tiles, each
  computed as before, by fewer programs that stay resident (no tail wave of a few
  programs on an otherwise idle GPU, and one program's next tile can start while
  others still finish). It applies where the launch has more points than that."""
  total = math.prod(launch)
  if programs <= 0 or total <= programs or total > MAX_GRID_X:
    return None
  return (programs, 1, 1)


def persistent_loop_header(launch: tuple[int, int, int], programs: int, tile: str) -> str:
  """The loop of a persistent program over the launch grid's points (flattened, axis 0
  fastest: the order CUDA hands out blocks in)."""
  return f"for {tile} in range({tl.program_id}(0), {math.prod(launch)}, {programs}):"


def persistent_axis_ids(b: KernelBuilder, launch: tuple[int, int, int], tile: str,
                        axes_read: int) -> list[str]:
  """The program id of each of the first `axes_read` launch axes in a persistent loop's
  iteration `tile` (what launch_axis_ids reads from the hardware in a plain launch)."""
  n0, n1, _ = launch
  if axes_read == 1 and math.prod(launch) == n0:
    return [tile]
  # a launch axis of one program may still carry a grid dimension of size 1: each id is
  # a tensor computed from the loop's, as tl.program_id's is, not a Python 0
  forms = [(f"{tile} % {n0}"), f"({tile} // {n0}) % {n1}", f"{tile} // {n0 * n1}"]
  return [b.assign(f"pid_axis{k}", forms[k]) for k in range(axes_read)]


def check_call(grid_mapping) -> None:
  """What pallas-prof cannot lower, whatever the kernel does."""
  if getattr(grid_mapping, "num_dynamic_grid_bounds", 0):
    raise Unsupported("dynamic grid bounds (a grid size traced inside jit)",
                      "use a static grid (Python ints), e.g. mark the size static with "
                      "jax.jit(..., static_argnums=...)")
  if getattr(grid_mapping, "num_index_operands", 0):
    raise Unsupported("scalar prefetch (num_scalar_prefetch)",
                      "pass the scalars as ordinary inputs and read them in the kernel")
  scratch = tuple(getattr(grid_mapping, "scratch_avals", ()))
  if getattr(grid_mapping, "num_scratch_operands", 0) or scratch:
    # a bad shape among them is said too: fixing it alone would not make the call lower
    bad = {f"scratch_shapes[{i}]": f"shape {tuple(a.shape)}: dimension {d} is {n!r}, "
           "not a size (0 or more)" for i, a in enumerate(scratch)
           for d, n in enumerate(getattr(a, "shape", ()))
           if not isinstance(n, (int, np.integer)) or n < 0}
    raise Unsupported("scratch_shapes", "Triton keeps intermediates in registers: compute "
                      "them as values (carry them through loops) instead of scratch refs",
                      details=bad)


def static_grid(grid_mapping) -> tuple[int, ...]:
  """The grid as ints, each 0 or more. JAX's interpret mode runs a negative dimension
  as if the product of the dimensions were the count (two negatives make a positive),
  and a GPU cannot launch one: refused, as a count of programs must be 0 or more (0
  runs none, as in JAX)."""
  grid = []
  for axis, g in enumerate(grid_mapping.grid):
    if not isinstance(g, (int, np.integer)):
      raise Unsupported(f"grid dimension {g!r} is not a static int",
                        "use a static grid (Python ints)")
    if g < 0:
      raise Unsupported(f"dimension {axis} of the grid {tuple(grid_mapping.grid)} is {g}: a "
                        "grid dimension counts programs, 0 or more",
                        "give each grid dimension as a number of blocks, e.g. "
                        "pl.cdiv(size, block_size); 0 runs no program along it")
    grid.append(int(g))
  return tuple(grid)

