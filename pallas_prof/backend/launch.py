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


class _InterpretStandardLibrary:
  """Makes triton.language's own @triton.jit helpers (tl.sum, tl.max, ...)
  callable from interpreted kernels.

  With TRITON_INTERPRET=1 set before `import triton`, those helpers are built
  as interpreter functions; pallas-prof switches to the interpreter per
  kernel instead, so for the duration of a run it wraps them the same way.
  """

  def __enter__(self):
    import triton.experimental.gluon  # noqa: F401 - imports (and checks) tl's helpers once
    import triton.language as tl
    from triton.language import standard
    self._snapshot = _snapshot_triton_language()
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    self._saved = []
    for module in (tl, standard):
      for name, value in list(vars(module).items()):
        if isinstance(value, JITFunction):
          self._saved.append((module, name, value))
          setattr(module, name, InterpretedFunction(value.fn))
    self._knob = compat.set_triton_interpret(True)
    self._patch_scalar_index()
    self._patch_bf16_dot()
    self._patch_bf16_casts()
    return self

  def _patch_bf16_casts(self):
    # The interpreter keeps bfloat16 as raw uint16 bits; its casts truncate
    # f32 -> bf16 (the GPU rounds to nearest even) and reinterpret those bits
    # as integers in every other bf16 cast. Convert the values with ml_dtypes.
    import ml_dtypes
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle, _get_np_dtype
    import triton.language as tl
    original = InterpreterBuilder.cast_impl
    self._original_cast = original

    def cast_impl(builder, src, dst_type):
      src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
      if tl.bfloat16 not in (src_ty, dst_ty):
        return original(builder, src, dst_type)
      values = src.data.view(ml_dtypes.bfloat16) if src_ty == tl.bfloat16 else src.data
      if dst_ty == tl.bfloat16:
        data = values.astype(ml_dtypes.bfloat16).view(np.uint16)
      else:
        data = values.astype(_get_np_dtype(dst_ty))
      return TensorHandle(data, dst_ty)

    InterpreterBuilder.cast_impl = cast_impl

  def _patch_bf16_dot(self):
    # The interpreter keeps bfloat16 as raw uint16 bits and multiplies those
    # bits in tl.dot; widen bf16 operands to float32 first (exact).
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    import triton.language as tl
    original = InterpreterBuilder.create_dot
    self._original_dot = original

    def widen(h):
      if getattr(h.dtype, "scalar", h.dtype) == tl.bfloat16:
        bits = h.data.astype(np.uint32) << np.uint32(16)
        return TensorHandle(bits.view(np.float32), tl.float32)
      return h

    def create_dot(builder, a, b, d, input_precision, max_num_imprecise_acc):
      return original(builder, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    InterpreterBuilder.create_dot = create_dot

  def _patch_scalar_index(self):
    # Triton's interpreter turns scalar tensors into ints with int(array), which
    # NumPy >= 2.4 refuses for 1-element 1-D arrays (loop bounds like
    # `range(0, n)` with a computed n). Convert through .reshape(-1)[0].
    from triton.runtime import interpreter
    original = interpreter._patch_lang_tensor
    self._original_patch = original

    def patch_lang_tensor(tensor, scope):
      original(tensor, scope)
      scope.set_attr(tensor, "__index__",
                     lambda t: int(np.asarray(t.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor

  def __exit__(self, *exc):
    from triton.runtime import interpreter
    interpreter._patch_lang_tensor = self._original_patch
    interpreter.InterpreterBuilder.create_dot = self._original_dot
    interpreter.InterpreterBuilder.cast_impl = self._original_cast
    compat.set_triton_interpret(self._knob)
    for module, name, value in self._saved:
      setattr(module, name, value)
    # Interpreted device-function calls patch triton.language and never undo
    # it; the next triton.compile in this process needs it pristine.
    _restore_triton_language(self._snapshot)
    return None


def _language_objects():
  import triton.language as tl
  from triton.language import core, math, standard
  objects = [tl, core, math, standard, core.tensor, core.dtype]
  base = getattr(core, "tensor_descriptor_base", None)
  if base is not None:
    objects.append(base)
  return objects


def _snapshot_triton_language():
  return [(obj, dict(vars(obj))) for obj in _language_objects()]


def _restore_triton_language(snapshot) -> None:
  for obj, saved in snapshot:
    current = dict(vars(obj))
    for name, value in saved.items():
      if current.get(name, _MISSING) is not value:
        setattr(obj, name, value)
    for name in current.keys() - saved.keys():
      try:
        delattr(obj, name)
      except (AttributeError, TypeError):
        pass


_MISSING = object()


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
  from .compile import triton_lock
  with triton_lock(), _InterpretStandardLibrary():
    try:
      fn[gk.launch_grid](*args)
    except Exception as e:  # noqa: BLE001 - re-raised with the equation that failed
      raise interpreter_error(gk, e) from e
  return outputs


def interpreter_error(gk: GeneratedKernel, error: BaseException) -> Exception:
  """Points an interpreter failure at the generated line and its equation."""
  from .errors import LoweringError
  line = None
  tb = error.__traceback__
  cause = error.__cause__ or error.__context__
  for exc in (error, cause):
    tb = getattr(exc, "__traceback__", None)
    while tb is not None:
      if tb.tb_frame.f_code.co_filename == gk.path:
        line = tb.tb_lineno
      tb = tb.tb_next
  eqn = gk.eqn_at_line(line) if line is not None else None
  text = gk.source.splitlines()[line - 1].strip() if line else None
  details = {"generated line": f"{gk.path}:{line}: {text}"} if line else {}
  return LoweringError(f"the kernel failed under Triton's interpreter: {cause or error}",
                       hint="this is a pallas-prof bug if the kernel is valid Pallas; "
                            "`pallas-prof show` prints the generated code",
                       kernel=gk.name, eqn=eqn, details=details, cause=cause or error,
                       jaxpr_text=gk.jaxpr_text)


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
