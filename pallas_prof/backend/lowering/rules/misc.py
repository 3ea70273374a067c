"""Program ids, grid sizes, debug printing, barriers and inline assembly."""
from __future__ import annotations

import re

import numpy as np
from jax import lax

from ... import compat, triton_primitives
from .. import emit
from ..codegen import Value, is_low_float, tl_dtype
from ...errors import Unsupported
from .table import register, register_deferred
from .. import triton_names as tl


@register(compat.program_id_p)
def _program_id(ctx, *, axis):
  ids = ctx.kernel.program_ids
  if not 0 <= axis < len(ids):
    raise Unsupported(f"program_id({axis}) in a grid of rank {len(ids)}",
                      f"axis must be in [0, {len(ids)})")
  return ids[axis]


@register(compat.num_programs_p)
def _num_programs(ctx, *, axis):
  sizes = ctx.kernel.num_programs
  if not 0 <= axis < len(sizes):
    raise Unsupported(f"num_programs({axis}) in a grid of rank {len(sizes)}",
                      f"axis must be in [0, {len(sizes)})")
  return emit.const(sizes[axis], np.int32)


@register(getattr(lax, "axis_index_p", None))
def _axis_index(ctx, *, axis_name, **params):
  names = ctx.kernel.grid_names
  if names is not None and axis_name in names:
    return _program_id(ctx, axis=list(names).index(axis_name))
  raise Unsupported(f"axis_index({axis_name!r}): not a named grid axis",
                    "name the grid axes with pl.GridSpec(grid_names=...)")




@register(compat.debug_print_p, limits="ordered=False; values passed positionally")
def _debug_print(ctx, *args, fmt, ordered=False, **params):
  if ordered:
    raise Unsupported("ordered debug_print", "use ordered=False inside kernels")
  in_tree = params.get("in_tree")
  static_args = params.get("static_args")
  if in_tree is not None and static_args is not None:
    args, kwargs = compat.merge_callback_args(in_tree, args, static_args)
    if kwargs:
      raise Unsupported("debug_print with keyword arguments", "pass values positionally")
  prefix = re.sub(r"\{[^{}]*\}", "", fmt).strip()
  # 16-bit floats print as float32: the interpreter keeps bf16 as raw bits
  values = [emit.cast(ctx.b, a, np.float32) if is_low_float(a.dtype) else a
            for a in args if isinstance(a, Value)]
  text = repr(f" {prefix} ")        # a Python string literal, quotes escaped
  ctx.b.emit(f"{tl.device_print}({', '.join([text] + [str(v) for v in values])})")
  return []


# pallas-prof's own (pallas_prof.triton) and JAX's (jax.experimental.pallas.triton, bound
# once the user's code imported it), with the same parameters
@register(triton_primitives.debug_barrier_p)
@register_deferred(compat.TRITON_PRIMITIVES_MODULE, "debug_barrier_p")
def _debug_barrier(ctx):
  ctx.b.emit(f"{tl.debug_barrier}()")
  return []


@register(triton_primitives.elementwise_inline_asm_p)
@register_deferred(compat.TRITON_PRIMITIVES_MODULE, "elementwise_inline_asm_p")
def _inline_asm(ctx, *args, asm, constraints, pack, result_shape_dtypes):
  outs = list(result_shape_dtypes)
  dtypes = [np.dtype(o.dtype) for o in outs]
  shape = tuple(outs[0].shape)
  if len(outs) == 1:
    dt = f"{tl_dtype(dtypes[0])}"
  else:
    dt = "(" + ", ".join(tl_dtype(d) for d in dtypes) + ",)"
  arg_list = "[" + ", ".join(str(a) for a in args) + "]"
  call = (f"{tl.inline_asm_elementwise}({asm!r}, {constraints!r}, {arg_list}, dtype={dt}, "
          f"is_pure=True, pack={pack})")
  # the assembly may read what changes between iterations (a clock, a special register)
  if len(outs) == 1:
    return [ctx.value("asm", call, dtypes[0], shape, opaque=True)]
  name = ctx.b.assign("asm", call)
  return [ctx.value("asm", f"{name}[{i}]", d, shape, opaque=True) for i, d in enumerate(dtypes)]
