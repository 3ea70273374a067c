"""The kernel's refs from the pallas_call's BlockSpecs: each operand's block
start from its index map (lowered in the kernel's prologue), the index dtype
its offsets need, its name, and which operands may share memory.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import os

import numpy as np

from .. import compat
from . import emit
from .codegen import Value, next_pow2, sanitize, signature_type
from .context import KernelContext
from .coverage import blocks_outside, every_block_inside
from .dispatch import lower_jaxpr
from ..check_sites import OUTSIDE_HINT, block_outside_words
from ..errors import Unsupported
from .access.refs import BlockIndices, RefValue, ViewDim

INT32_OFFSETS_BELOW = 2**31     # offsets at or past this need int64 index arithmetic


def index_dtype_for(array_shape, block_shape) -> np.dtype:
  """int64 when an offset into the array could reach 2**31, else int32.

  Triton's pointer offsets are element counts. Besides the array's own
  size, the padded (power-of-two) lanes of the last, overhanging block
  compute offsets past its end before their mask drops them: in int32 those
  could wrap to negative offsets that pass the `< size` mask. The bound
  allows each dimension two padded blocks beyond its last block.
  """
  if math.prod(array_shape) >= INT32_OFFSETS_BELOW:
    return np.dtype(np.int64)
  stride, reach = 1, 0
  for size, bdim in reversed(list(zip(array_shape, block_shape, strict=True))):
    block = 1 if isinstance(bdim, compat.Squeezed) else compat.block_dim_size(bdim)
    blocks = -(-size // block) if isinstance(bdim, compat.Blocked) else 1
    extent = size if isinstance(bdim, compat.Squeezed) else \
        max(size, blocks * block) + 2 * next_pow2(block)
    reach += extent * stride
    stride *= size
  return np.dtype(np.int64) if reach >= INT32_OFFSETS_BELOW else np.dtype(np.int32)


def block_ref(kernel: KernelContext, bm, name: str, label: str, pids: list[Value],
              eqn_info_parent=None, which: str = "") -> RefValue:
  """The ref of one operand (`which`: "input 0", "output 1", for the bounds check's words)."""
  b = kernel.builder
  array_shape = tuple(bm.array_aval.shape)
  dtype = np.dtype(bm.array_aval.dtype)
  signature_type(dtype)  # fails early with a clear message for unsupported dtypes
  index_dtype = index_dtype_for(array_shape, bm.block_shape)
  if getattr(bm, "pipeline_mode", None) is not None:
    raise Unsupported("pipeline_mode on a BlockSpec",
                      "Triton pipelines loops itself: drop pipeline_mode and set "
                      "num_stages in CompilerParams")
  if getattr(bm, "transforms", ()):
    raise Unsupported("BlockSpec transforms", "index the ref inside the kernel instead")
  closed = bm.index_map_jaxpr
  where = getattr(closed.jaxpr.debug_info, "func_src_info", None) or "index_map"
  where = where.replace(os.path.dirname(where.split(" at ")[-1]) + os.sep, "") if " at " in where else where
  with b.note(f"block of {label}: BlockSpec {where}"):
    ref, picked = _block_ref_body(kernel, bm, name, label, pids, closed, array_shape, dtype,
                                  index_dtype)
  if kernel.listeners.checks_indices and not every_block_inside(bm, tuple(kernel.grid)):
    ref = dataclasses.replace(ref, block=_block_indices(kernel, bm, ref, picked, pids, which))
  return ref


def _block_indices(kernel, bm, ref: RefValue, picked, pids, which: str) -> BlockIndices | None:
  """What the bounds-checked mode checks of the block at each access of `ref`: the block
  indices along the dimensions whose index is not a constant inside the array."""
  axes, indices, counts = [], [], []
  fixed = [str(i.const) if i.const is not None else None for i in picked]
  for axis, (bdim, index, size) in enumerate(zip(bm.block_shape, picked, ref.array_shape,
                                                 strict=True)):
    if isinstance(bdim, compat.Squeezed):
      count = size
    elif isinstance(bdim, compat.Blocked):
      count = -(-size // int(bdim.block_size))
    else:
      continue          # pl.Element: an element offset, checked by the access itself
    if index.const is not None and 0 <= index.const < count:
      continue
    axes.append(axis)
    indices.append(str(index))
    counts.append(count)
  if not axes:
    return None
  site = dict(kind="block", ref=ref.label, operand=which,
              where=index_map_site(bm) or (), grid=tuple(kernel.grid),
              block_shape=tuple(1 if isinstance(bd, compat.Squeezed) else int(bd.block_size)
                                for bd in bm.block_shape),
              array_shape=tuple(ref.array_shape), dtype=np.dtype(ref.dtype).name,
              squeezed=tuple(isinstance(bd, compat.Squeezed) for bd in bm.block_shape),
              static_ranges=tuple(None if axis in axes else fixed[axis]
                                  for axis in range(len(picked))))
  return BlockIndices(tuple(axes), tuple(indices), tuple(counts), tuple(map(str, pids)),
                      tuple(site.items()))


def _block_ref_body(kernel, bm, name, label, pids, closed, array_shape, dtype, index_dtype):
  b = kernel.builder
  indices = lower_jaxpr(kernel, closed.jaxpr, list(pids), parent=None,
                        region=f"index_map {label}", consts=closed.consts)
  dims, ragged, picked = [], [], []     # picked: the block index per axis
  for axis, (bdim, idx, size) in enumerate(zip(bm.block_shape, indices, array_shape, strict=True)):
    if not isinstance(idx, Value):
      raise Unsupported(f"index map of {label} returned {type(idx).__name__}",
                        "index maps must return integer block indices")
    idx = emit.cast(b, idx, index_dtype, f"{name}_idx{axis}")
    picked.append(idx)
    if isinstance(bdim, compat.Squeezed):
      dims.append(ViewDim("int", idx, 1, 1, 0, 1))
      ragged.append(False)
    elif isinstance(bdim, compat.Blocked):
      bs = int(bdim.block_size)
      if idx.const is not None:
        start = emit.const(idx.const * bs, index_dtype)
      elif bs == 1:
        start = idx
      else:
        start = b.value(f"{name}_start{axis}", f"{idx} * {bs}", index_dtype, of=(idx,))
        kernel.listeners.index_multiple(kernel, start, bs)   # TMA's alignment check reads it
      dims.append(ViewDim("slice", start, bs, 1, 0, bs))
      ragged.append(size % bs != 0 or bs > size)
    elif isinstance(bdim, compat.Element):
      if tuple(getattr(bdim, "padding", (0, 0))) != (0, 0):
        raise Unsupported("pl.Element with padding", "pad the array before the pallas_call")
      bs = int(bdim.block_size)
      dims.append(ViewDim("slice", idx, bs, 1, 0, bs))
      ragged.append(True)
    else:
      raise Unsupported(f"block dimension {bdim!r} of {label}",
                        "use pl.BlockSpec with block sizes (ints) or None (squeezed)")
  ref = RefValue(name=name, dtype=dtype, array_shape=array_shape, dims=tuple(dims),
                 ragged=tuple(ragged), index_dtype=index_dtype, label=label,
                 origin=tuple(d.start for d in dims))
  return ref, picked


def check_block_shapes(grid_mapping, labels: list[str]) -> None:
  """Every dimension of every BlockSpec, inputs and outputs, is a size the kernel can
  have: a static integer of at least 1 (None, squeezed, stands for 1).

  JAX's interpret mode fails on the others (a negative size in its slices, a zero one
  dividing by zero); a kernel lowered with them would compute nothing, or at offsets
  that mean nothing, and return a wrong answer without a word. A block larger than
  its array is fine (JAX pads it), and so is an empty array in blocks of 1 or more
  (a grid of 0 programs along it). Raises Unsupported at the BlockSpec's line where
  its index map is the user's (a lambda in the BlockSpec, usually)."""
  n_in = grid_mapping.num_inputs
  for i, (bm, label) in enumerate(zip(grid_mapping.block_mappings, labels, strict=True)):
    for axis, bdim in enumerate(bm.block_shape):
      size = None if isinstance(bdim, compat.Squeezed) else getattr(bdim, "block_size", None)
      if size is None or (_is_int(size) and size >= 1):
        continue
      which = f"input {i}" if i < n_in else f"output {i - n_in}"
      array_shape = tuple(bm.array_aval.shape)
      raise Unsupported(
          f"dimension {axis} of the BlockSpec of {label} ({which}) is {size!r}: "
          + ("a block size must be a static integer" if not _is_int(size)
             else "a block size must be 1 or more"),
          _block_size_hint(array_shape, axis, size), where=index_map_site(bm),
          details={"block_shape": _shape_text(bm.block_shape),
                   "array shape": str(array_shape)})


# accesses of a whole ref, or a view of it, that take no mask: every lane is really read
# or written (masked_load and the atomics may touch nothing)
_UNMASKED_ACCESSES = frozenset({"get", "swap", "addupdate"})


def check_block_indices(grid_mapping, grid: tuple[int, ...], labels: list[str], jaxpr) -> None:
  """No program picks a block that starts outside its array, for an operand the kernel
  reads or writes on every program (an unmasked access at its top level): such a block
  is read or written past the array's end (or before its start) whatever the data, and
  the kernel's line that reads it is not where the mistake is. Raises Unsupported at the
  BlockSpec's line, naming the program, the block index and the array's extent.

  The index maps are evaluated over the whole grid on the host (coverage.blocks_outside);
  where that is not possible (a scalar-prefetch operand, a grid too large), or the access
  is conditional (under pl.when, masked: it may never happen), the bounds-checked mode
  finds it at run time."""
  touched = _accessed_on_every_program(jaxpr, getattr(grid_mapping, "num_index_operands", 0))
  n_in = grid_mapping.num_inputs
  for found in blocks_outside(grid_mapping, grid, labels):
    if found.operand not in touched:
      continue
    bm = grid_mapping.block_mappings[found.operand]
    which = (f"input {found.operand}" if found.operand < n_in
             else f"output {found.operand - n_in}")
    raise Unsupported(_outside_reason(found, bm, which, grid), OUTSIDE_HINT,
                      where=index_map_site(bm), details=_outside_details(found, bm))


def _outside_reason(found, bm, which: str, grid) -> str:
  axis, b = found.axis, found.block[found.axis]
  size = found.shape[axis]
  block = found.block[0] if len(found.block) == 1 else found.block
  program = found.program[0] if len(found.program) == 1 else found.program
  head = (f"the BlockSpec of {found.label} ({which}) picks block {block} for program "
          f"{program} of grid {tuple(grid)}: ")
  where = block_outside_words(axis, b, found.block_sizes[axis], size,
                              isinstance(bm.block_shape[axis], compat.Squeezed))
  more = (f" ({found.programs} of {found.total} programs pick a block outside)"
          if found.programs > 1 else "")
  return head + where + more


def _outside_details(found, bm) -> dict:
  dtype = np.dtype(bm.array_aval.dtype).name
  return {"block_shape": _shape_text(bm.block_shape),
          "array": f"{dtype}[{','.join(map(str, found.shape))}]",
          "programs outside": f"{found.programs} of {found.total}, the first {found.program}"}


def _accessed_on_every_program(jaxpr, skipped: int = 0) -> set[int]:
  """The operands (their place among the block mappings) the kernel's top level reads or
  writes without a mask: every program touches their whole view."""
  position = {v: k - skipped for k, v in enumerate(jaxpr.invars) if k >= skipped}
  touched = set()
  for eqn in jaxpr.eqns:
    if eqn.primitive.name in _UNMASKED_ACCESSES and eqn.invars:
      k = position.get(eqn.invars[0]) if not isinstance(eqn.invars[0], compat.Literal) else None
      if k is not None:
        touched.add(k)
  return touched


def _is_int(value) -> bool:
  return isinstance(value, numbers.Integral)


def _block_size_hint(array_shape, axis: int, size) -> str:
  if axis < len(array_shape) and array_shape[axis] == 0 and size == 0:
    return (f"the array is empty along dimension {axis}, and a block of it cannot be: "
            "give that dimension a block size of 1 or more (the grid then has 0 programs "
            "along it), or skip the pallas_call for empty arrays")
  whole = f" ({array_shape[axis]} here)" if axis < len(array_shape) else ""
  return ("give each block dimension as a Python int of at least 1, e.g. the whole "
          f"dimension{whole}, or None to squeeze a dimension of size 1")


def _shape_text(block_shape) -> str:
  dims = []
  for bdim in block_shape:
    if isinstance(bdim, compat.Squeezed):
      dims.append("None")
    elif isinstance(bdim, compat.Blocked):
      dims.append(repr(bdim.block_size))
    else:
      dims.append(str(bdim))
  return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def index_map_site(bm):
  """(file, line, function) of a BlockSpec's index map when it is the user's code
  (JAX's default index map is not), else None."""
  info = getattr(bm.index_map_jaxpr.jaxpr.debug_info, "func_src_info", None) or ""
  function, sep, where = info.rpartition(" at ")
  path, _, line = where.rpartition(":")
  if not sep or not line.isdigit() or not compat.is_user_file(path):
    return None
  return path, int(line), function


def arg_labels(jaxpr, n_in: int, n_out: int) -> list[str]:
  names = list(getattr(jaxpr.debug_info, "arg_names", None) or [])
  labels = []
  for i in range(n_in + n_out):
    default = f"in{i}_ref" if i < n_in else f"out{i - n_in}_ref"
    name = names[i] if i < len(names) and names[i] else default
    name = sanitize(name.replace("[", "_").replace("]", "").replace("'", ""))
    labels.append(name.strip("_") or default)
  return labels



def operands_line(jaxpr, grid_mapping) -> str:
  """The operands' dtypes and shapes: they are not otherwise in the source text,
  and two kernels that differ only there must not share a file or a compile."""
  n_in, n_out = grid_mapping.num_inputs, grid_mapping.num_outputs
  labels = arg_labels(jaxpr, n_in, n_out)
  parts = []
  for i, (bm, label) in enumerate(zip(grid_mapping.block_mappings, labels, strict=True)):
    aval = bm.array_aval
    shape = ",".join(str(d) for d in aval.shape)
    parts.append(f"{label} {np.dtype(aval.dtype).name}[{shape}]"
                 + ("" if i < n_in else " (out)"))
  return "operands: " + ", ".join(parts)



def alias_sets(names: list[str], n_in: int, input_output_aliases):
  """param name -> the names of the params that may share its memory.

  Only an input and the output it is aliased to (input_output_aliases) share
  a buffer; distinct outputs never do, and inputs are only read, so two
  inputs on the same buffer cannot make a load stale. Aliasing is
  transitive here (sets are merged). None (unknown aliasing) stays None."""
  if input_output_aliases is None:
    return None
  groups = {name: {name} for name in names}
  for i, o in input_output_aliases:
    a, c = names[int(i)], names[n_in + int(o)]
    merged = groups[a] | groups[c]
    for name in merged:
      groups[name] = merged
  return {name: frozenset(group) for name, group in groups.items()}

