"""A Pallas grid on CUDA's launch grid: which Pallas grid dimensions each of
the three launch axes carries, and the program ids the kernel computes from it.
"""
from __future__ import annotations

import math

import numpy as np

from .codegen import KernelBuilder, Value
from .errors import Unsupported

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


def emit_program_ids(b: KernelBuilder, grid, axes) -> list[Value]:
  pids: list[Value | None] = [None] * len(grid)
  for launch_axis, dims in enumerate(axes):
    if len(dims) == 1:
      pids[dims[0]] = b.value(f"pid{dims[0]}", f"tl.program_id({launch_axis})", np.int32)
      continue
    rest = b.assign("pid_flat", f"tl.program_id({launch_axis})")
    for j, d in enumerate(dims):
      if j == len(dims) - 1:
        pids[d] = b.value(f"pid{d}", rest, np.int32)
      else:
        pids[d] = b.value(f"pid{d}", f"{rest} % {grid[d]}", np.int32)
        rest = b.assign("pid_rest", f"{rest} // {grid[d]}")
  return pids  # type: ignore[return-value]



def check_call(grid_mapping) -> None:
  """What pallas-prof cannot lower, whatever the kernel does."""
  if getattr(grid_mapping, "num_dynamic_grid_bounds", 0):
    raise Unsupported("dynamic grid bounds (a grid size traced inside jit)",
                      "use a static grid (Python ints), e.g. mark the size static with "
                      "jax.jit(..., static_argnums=...)")
  if getattr(grid_mapping, "num_index_operands", 0):
    raise Unsupported("scalar prefetch (num_scalar_prefetch)",
                      "pass the scalars as ordinary inputs and read them in the kernel")
  if getattr(grid_mapping, "num_scratch_operands", 0) or getattr(grid_mapping, "scratch_avals", ()):
    raise Unsupported("scratch_shapes", "Triton keeps intermediates in registers: compute "
                      "them as values (carry them through loops) instead of scratch refs")


def static_grid(grid_mapping) -> tuple[int, ...]:
  grid = []
  for g in grid_mapping.grid:
    if not isinstance(g, (int, np.integer)):
      raise Unsupported(f"grid dimension {g!r} is not a static int",
                        "use a static grid (Python ints)")
    grid.append(int(g))
  return tuple(grid)

