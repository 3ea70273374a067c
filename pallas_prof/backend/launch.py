"""Running a generated kernel inside a JAX program.

GPU: an XLA custom call through jaxlib's gpu_triton (`triton_kernel_call_ffi`),
carrying the PTX that triton.compile produced for the device's compute
capability. CPU: the same generated kernel run by Triton's interpreter
behind jax.pure_callback.

For the interpreter we hand Triton small numpy adapters rather than torch
tensors: Triton's interpreter only needs `data_ptr()`, `dtype` and a
storage object, and a 20-line adapter avoids a multi-gigabyte dependency.
"""
from __future__ import annotations

import threading
import zlib

import numpy as np

from . import compat
from .compile import CompiledKernel, load_module
from .lowering import GeneratedKernel


# --- CPU: Triton's interpreter ------------------------------------------------------

class _Storage:
  __slots__ = ("array",)

  def __init__(self, array: np.ndarray):
    self.array = array

  def data_ptr(self) -> int:
    return self.array.ctypes.data

  def cpu(self):
    return self          # already host memory: the interpreter works in place

  def copy_(self, other):
    return self


class NumpyArg:
  """What Triton's interpreter needs of a tensor, over a numpy array."""
  __slots__ = ("array", "dtype")

  def __init__(self, array: np.ndarray):
    self.array = array
    self.dtype = "torch." + ("bool" if array.dtype == np.bool_ else array.dtype.name)

  def data_ptr(self) -> int:
    return self.array.ctypes.data

  def untyped_storage(self) -> _Storage:
    return _Storage(self.array)

  def new_empty(self, *args, **kwargs):
    return self

  def set_(self, *args, **kwargs):
    return self

  def storage_offset(self) -> int:
    return 0

  def size(self):
    return self.array.shape

  def stride(self):
    return tuple(s // self.array.itemsize for s in self.array.strides)


_interpreter_lock = threading.Lock()   # the interpreter keeps global state


def run_interpreted(gk: GeneratedKernel, inputs, out_shapes, input_output_aliases=()):
  """Runs `gk` under Triton's interpreter on numpy inputs; returns the outputs."""
  module = load_module(gk, interpret=True)
  fn = getattr(module, gk.name)
  arrays = [np.ascontiguousarray(a) for a in inputs]
  aliases = dict(input_output_aliases)
  outputs = []
  for i, (shape, dtype) in enumerate(out_shapes):
    aliased = [k for k, v in aliases.items() if v == i]
    if aliased:
      outputs.append(np.array(arrays[aliased[0]], dtype=dtype, copy=True))
    else:
      outputs.append(np.zeros(shape, dtype=dtype))
  args = [NumpyArg(a) for a in arrays] + [NumpyArg(o) for o in outputs]
  with _interpreter_lock:
    fn[gk.launch_grid](*args)
  return outputs


def cpu_call(gk: GeneratedKernel, out_avals, input_output_aliases, on_launch=None):
  """A function of jax arrays that runs `gk` on the host through pure_callback."""
  import jax
  out_shapes = [(tuple(a.shape), np.dtype(a.dtype)) for a in out_avals]
  result_shapes = [jax.ShapeDtypeStruct(s, d) for s, d in out_shapes]

  def host(*arrays):
    if on_launch is not None:
      on_launch()
    return run_interpreted(gk, arrays, out_shapes, input_output_aliases)

  def call(*args):
    return jax.pure_callback(host, result_shapes, *args)

  return call


# --- GPU: jaxlib's Triton custom call -----------------------------------------------

def _avals_to_layouts(avals):
  return [list(reversed(range(len(a.shape)))) for a in avals]


def triton_kernel_call(ck: CompiledKernel, zeroed_outputs=()):
  """jaxlib's TritonKernelCall for a compiled kernel."""
  lib = compat.gpu_triton()
  gk = ck.generated
  md = ck.metadata
  kernel = compat.make_triton_kernel(
      lib, name=ck.name, num_warps=ck.num_warps, shared_bytes=ck.shared_bytes, ptx=ck.ptx,
      ttir=ck.asm.get("ttir", ""), compute_capability=ck.target[1],
      global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
      global_scratch_align=int(md.get("global_scratch_align", 1) or 1))
  params = []
  for p in gk.params:
    nbytes = 0
    if p.role == "output" and p.index in zeroed_outputs:
      nbytes = int(np.prod(p.shape, dtype=np.int64)) * np.dtype(p.dtype).itemsize
    params.append(lib.create_array_parameter(nbytes, 16))
  gx, gy, gz = gk.launch_grid
  return lib.TritonKernelCall(kernel, gx, gy, gz, params)


def gpu_custom_call(ctx, in_nodes, ck: CompiledKernel, *, input_output_aliases,
                    zeroed_outputs=(), metadata: str = ""):
  call = triton_kernel_call(ck, zeroed_outputs)
  ir = compat.ir()
  result_types = [compat.aval_to_ir_type(ctx.module_context, aval) for aval in ctx.avals_out]
  opaque = zlib.compress(call.to_proto(ck.name, metadata.encode()))
  return compat.custom_call(
      call_target_name="triton_kernel_call_ffi",
      result_types=result_types,
      operands=list(in_nodes),
      backend_config=dict(name=ir.StringAttr.get(ck.name), opaque=ir.StringAttr.get(opaque)),
      operand_layouts=_avals_to_layouts(ctx.avals_in),
      result_layouts=_avals_to_layouts(ctx.avals_out),
      operand_output_aliases=dict(input_output_aliases),
  ).results
