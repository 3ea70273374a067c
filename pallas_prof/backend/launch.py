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

import ast
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
    self._patch_float_xchg()
    self._patch_loop_variables()
    self._patch_dot_precisions()
    self._patch_vectorized_reduce_scan()
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

  def _patch_loop_variables(self):
    # Compiled Triton's `for i in range(...)` gives a tensor `i`; the
    # interpreter runs a plain Python loop with an int `i`, on which
    # `i.to(tl.int64)` fails. Triton's interpreter already rewrites each
    # assignment `x = v` into `x = to_tensor(v)`; rewrite loop variables too.
    from triton.runtime.interpreter import ASTTransformer
    self._had_visit_for = "visit_For" in vars(ASTTransformer)

    def visit_for(transformer, node):
      transformer.generic_visit(node)
      if isinstance(node.target, ast.Name):
        as_tensor = ast.Assign(
            targets=[ast.Name(id=node.target.id, ctx=ast.Store())],
            value=ast.Call(func=ast.Attribute(value=ast.Name(id="interpreter_semantic",
                                                             ctx=ast.Load()),
                                              attr="to_tensor", ctx=ast.Load()),
                           args=[ast.Name(id=node.target.id, ctx=ast.Load()),
                                 ast.Constant(value=False)], keywords=[]))
        node.body.insert(0, ast.copy_location(as_tensor, node.body[0]))
      return node

    if not self._had_visit_for:
      ASTTransformer.visit_For = visit_for

  def _patch_float_xchg(self):
    # The interpreter's atomic exchange only handles integers; an exchange
    # moves bits, so do float ones on the same-width integer view.
    from triton._C.libtriton import ir
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    original = InterpreterBuilder.create_atomic_rmw
    self._original_rmw = original

    def create_atomic_rmw(builder, rmw_op, ptr, val, mask, sem, scope):
      data = val.data
      if rmw_op != ir.ATOMIC_OP.XCHG or data.dtype.kind != "f":
        return original(builder, rmw_op, ptr, val, mask, sem, scope)
      bits = np.dtype(f"int{8 * data.dtype.itemsize}")
      as_int = TensorHandle(data.view(bits), val.dtype)
      old = original(builder, rmw_op, ptr, as_int, mask, sem, scope)
      return TensorHandle(np.asarray(old.data).view(data.dtype), val.dtype.scalar)

    InterpreterBuilder.create_atomic_rmw = create_atomic_rmw

  def _patch_vectorized_reduce_scan(self):
    # The interpreter reduces and scans with a custom combiner (NaN-propagating
    # max, argmax, prod, ...) one element at a time, calling the combiner per
    # element: seconds for a few thousand elements. Combine whole slices
    # instead, in log2(n) steps (Triton requires combiners to be associative,
    # and the GPU combines in a tree too), always as combine(earlier, later).
    from triton.runtime.interpreter import ReduceOps, ScanOps
    self._original_reduce_scan = (ReduceOps.generic_reduce, ScanOps.generic_scan)
    ReduceOps.generic_reduce = _vectorized_reduce
    ScanOps.generic_scan = _vectorized_scan

  def _patch_dot_precisions(self):
    # NVIDIA accepts input_precision "bf16x3"/"bf16x6" (lax.DotAlgorithmPreset
    # BF16_BF16_F32_X3/_X6); the interpreter, which multiplies exactly anyway,
    # only lists tf32/tf32x3/ieee.
    import dataclasses
    from triton.runtime import interpreter
    builder = interpreter.interpreter_builder
    self._original_options = builder.options
    allowed = tuple(builder.options.allowed_dot_input_precisions)
    extra = tuple(p for p in ("bf16x3", "bf16x6") if p not in allowed)
    builder.options = dataclasses.replace(builder.options,
                                          allowed_dot_input_precisions=allowed + extra)

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
    interpreter.InterpreterBuilder.create_atomic_rmw = self._original_rmw
    if not self._had_visit_for:
      del interpreter.ASTTransformer.visit_For
    interpreter.interpreter_builder.options = self._original_options
    interpreter.ReduceOps.generic_reduce, interpreter.ScanOps.generic_scan = \
        self._original_reduce_scan
    compat.set_triton_interpret(self._knob)
    for module, name, value in self._saved:
      setattr(module, name, value)
    # Interpreted device-function calls patch triton.language and never undo
    # it; the next triton.compile in this process needs it pristine.
    _restore_triton_language(self._snapshot)
    _forget_rewritten_language_functions()
    return None


def _forget_rewritten_language_functions() -> None:
  """The interpreter caches each rewritten helper (tl.max, ...) and puts its own
  globals (interpreter_semantic, ...) into the helper's module once, when it
  rewrites it; the restore above removes those globals, so the cached rewrite
  would fail the next run with a NameError. Rewrite them afresh each run."""
  from triton.runtime.interpreter import InterpretedFunction
  language_globals = {id(vars(obj)) for obj in _language_objects()}
  cache = InterpretedFunction.rewritten_fn
  for fn in [f for f in cache if id(getattr(f, "__globals__", None)) in language_globals]:
    del cache[fn]


def _combine(op, earlier, later, dtypes, axis):
  """combine_fn over whole arrays: lists of numpy arrays in, same dtypes out.
  Triton tensors need power-of-two shapes: the slices are padded along `axis`
  with copies of their last lane and the padding is dropped afterwards."""
  n = earlier[0].shape[axis]
  width = [(0, 0)] * earlier[0].ndim
  width[axis] = (0, (1 << (n - 1).bit_length()) - n)
  pad = lambda d: np.pad(d, width, mode="edge")
  args = [op.to_tensor(pad(d), t) for d, t in zip(earlier, dtypes)]
  args += [op.to_tensor(pad(d), t) for d, t in zip(later, dtypes)]
  out = op.combine_fn.fn(*args)
  out = out if isinstance(out, tuple) else (out,)
  padded_shape = args[0].handle.data.shape
  keep = np.arange(n)
  return [np.take(np.broadcast_to(np.asarray(o.handle.data if hasattr(o, "handle") else o),
                                  padded_shape), keep, axis=axis).astype(e.dtype)
          for o, e in zip(out, earlier)]


def _vectorized_reduce(self, input):
  """ReduceOps.generic_reduce in log2(n) combiner calls on whole slices."""
  original_axis, original_rank = self.axis, len(input[0].handle.data.shape)
  input, axis = self.unravel(input, self.axis)
  dtypes = [arg.dtype for arg in input]
  data = [np.asarray(arg.handle.data) for arg in input]
  while data[0].shape[axis] > 1:
    n = data[0].shape[axis]
    pairs = n // 2 * 2
    take = lambda d, sl: np.take(d, np.arange(n)[sl], axis=axis)
    combined = _combine(self, [take(d, slice(0, pairs, 2)) for d in data],
                        [take(d, slice(1, pairs, 2)) for d in data], dtypes, axis)
    if n % 2:
      combined = [np.concatenate([c, take(d, slice(n - 1, n))], axis=axis)
                  for c, d in zip(combined, data)]
    data = combined
  ret = []
  for d, dtype in zip(data, dtypes):
    if original_axis is None:
      d = d.reshape((1,) * original_rank) if self.keep_dims else d.item()
    elif not self.keep_dims:
      d = np.squeeze(d, axis=axis)
    ret.append(self.to_tensor(d, dtype))
  return ret


def _vectorized_scan(self, input):
  """ScanOps.generic_scan as a Hillis-Steele scan: log2(n) combiner calls."""
  dtypes = [arg.dtype for arg in input]
  data = [np.asarray(arg.handle.data) for arg in input]
  n = data[0].shape[self.axis]
  step = 1
  while step < n:
    take = lambda d, lo, hi: np.take(d, np.arange(lo, hi), axis=self.axis)
    combined = _combine(self, [take(d, 0, n - step) for d in data],
                        [take(d, step, n) for d in data], dtypes, self.axis)
    data = [np.concatenate([take(d, 0, step), c], axis=self.axis) for d, c in zip(data, combined)]
    step *= 2
  return [self.to_tensor(d, dtype) for d, dtype in zip(data, dtypes)]


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
  # Private C-ordered copies: the kernel may write through any pointer (an
  # input ref it stores to, an atomic), and JAX's callback buffers are not
  # ours to change. (np.ascontiguousarray would also turn 0-d arrays into 1-d.)
  arrays = [np.array(a, order="C", copy=True) for a in inputs]
  aliases = dict(input_output_aliases)
  outputs = []
  for i, (shape, dtype) in enumerate(out_shapes):
    aliased = [k for k, v in aliases.items() if v == i]
    if aliased:
      # one buffer behind both refs, as on the GPU (XLA passes the same pointer)
      outputs.append(arrays[aliased[0]])
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
