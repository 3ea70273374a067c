"""Running generated kernels under Triton's interpreter: the adapters and patches.

Dependency-free on purpose: numpy and triton only (ml_dtypes for bfloat16
kernels), no JAX and no pallas_prof import, so `pallas-prof show --eject`
copies this file verbatim into an ejected program, and the program computes
what the in-process CPU path computes. launch.py runs kernels through
`launch()`; an ejected program through the same function.

Also the one place that knows the interpreter's internals (what it needs of
a tensor, the functions patched below), with the modules beside it that an
ejected program inlines too: interpreter_memory.py (every access checked
against the launch's arrays) and interpreter_reductions.py (reductions and
scans a slice at a time); compat/ knows JAX's.

No `from __future__` here: the source is pasted into the middle of a file.
"""
import ast
import contextlib
import ctypes
import ctypes.util
import dataclasses
import importlib
import importlib.util
import os

import numpy as np


# interpreter_reductions.py and interpreter_memory.py (see _beside); an ejected program
# inlines them and sets these first
_REDUCTIONS = globals().get("_REDUCTIONS")
_MEMORY = globals().get("_MEMORY")


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


class InterpreterPatches:
  """While active: Triton's interpreter computes what the compiled kernel does
  on a GPU (each patch below says where it did not), and triton.language's own
  @triton.jit helpers (tl.sum, tl.max, ...) are callable from interpreted kernels.

  With TRITON_INTERPRET=1 set before `import triton` (as an ejected program
  does), those helpers are built as interpreter functions; pallas-prof
  switches to the interpreter per kernel instead, so for the duration of a
  run it wraps them the same way. Everything is undone on exit: the next
  triton.compile in the process needs Triton pristine.
  """

  def __enter__(self):
    # lazy: keeps triton out of this module's import (start-up time)
    import triton.experimental.gluon  # noqa: F401 - imports (and checks) tl's helpers once
    import triton.language as tl
    from triton.language import standard
    self._snapshot = _snapshot_triton_language()
    # lazy: keeps triton out of this module's import (start-up time)
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    self._saved = []
    for module in (tl, standard):
      for name, value in list(vars(module).items()):
        if isinstance(value, JITFunction):
          self._saved.append((module, name, value))
          setattr(module, name, InterpretedFunction(value.fn))
    self._knob = _set_interpret(True)
    self._patch_scalar_index()
    self._patch_bf16_dot()
    self._patch_float_xchg()
    self._patch_loop_variables()
    self._patch_dot_precisions()
    self._patch_vectorized_reduce_scan()
    self._patch_bf16_casts()
    self._patch_tf32_rounding()
    return self

  def _patch_bf16_casts(self):
    # The interpreter keeps bfloat16 as raw uint16 bits; its casts truncate
    # f32 -> bf16 (the GPU rounds to nearest even) and reinterpret those bits
    # as integers in every other bf16 cast. Convert the values with ml_dtypes.
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle, _get_np_dtype
    import triton.language as tl
    original = InterpreterBuilder.cast_impl
    self._original_cast = original

    def cast_impl(builder, src, dst_type):
      src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
      if tl.bfloat16 not in (src_ty, dst_ty):
        return original(builder, src, dst_type)
      import ml_dtypes    # only bfloat16 kernels need it
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
    reductions = _reductions()
    self._original_reduce_scan = (ReduceOps.generic_reduce, ScanOps.generic_scan, ReduceOps.sum)
    ReduceOps.generic_reduce = reductions._vectorized_reduce
    ScanOps.generic_scan = reductions._vectorized_scan
    ReduceOps.sum = reductions._wrapping_sum

  def _patch_dot_precisions(self):
    # NVIDIA accepts input_precision "bf16x3"/"bf16x6" (lax.DotAlgorithmPreset
    # BF16_BF16_F32_X3/_X6); the interpreter, which multiplies exactly anyway,
    # only lists tf32/tf32x3/ieee.
    from triton.runtime import interpreter
    builder = interpreter.interpreter_builder
    self._original_options = builder.options
    allowed = tuple(builder.options.allowed_dot_input_precisions)
    extra = tuple(p for p in ("bf16x3", "bf16x6") if p not in allowed)
    builder.options = dataclasses.replace(builder.options,
                                          allowed_dot_input_precisions=allowed + extra)

  def _patch_tf32_rounding(self):
    # The one inline assembly pallas-prof emits itself (rules/dot.py, before tf32
    # dots of f32 operands); the interpreter runs no inline assembly.
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    import triton.language as tl
    original = InterpreterBuilder.create_inline_asm
    self._original_inline_asm = original

    class Call:                       # what tl.inline_asm_elementwise reads of the call
      def __init__(self, result):
        self.get_result = lambda i: result

    def create_inline_asm(builder, asm, constraints, values, tys, is_pure, pack):
      if asm != TF32_ROUND_ASM or len(values) != 1:
        return original(builder, asm, constraints, values, tys, is_pure, pack)
      return Call(TensorHandle(round_to_tf32(values[0].data), tl.float32))

    InterpreterBuilder.create_inline_asm = create_inline_asm

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
    # lazy: keeps triton out of this module's import (start-up time)
    from triton.runtime import interpreter
    interpreter._patch_lang_tensor = self._original_patch
    interpreter.InterpreterBuilder.create_dot = self._original_dot
    interpreter.InterpreterBuilder.create_inline_asm = self._original_inline_asm
    interpreter.InterpreterBuilder.cast_impl = self._original_cast
    interpreter.InterpreterBuilder.create_atomic_rmw = self._original_rmw
    if not self._had_visit_for:
      del interpreter.ASTTransformer.visit_For
    interpreter.interpreter_builder.options = self._original_options
    (interpreter.ReduceOps.generic_reduce, interpreter.ScanOps.generic_scan,
     interpreter.ReduceOps.sum) = self._original_reduce_scan
    _set_interpret(self._knob)
    for module, name, value in self._saved:
      setattr(module, name, value)
    # Interpreted device-function calls patch triton.language and never undo
    # it; the next triton.compile in this process needs it pristine.
    _restore_triton_language(self._snapshot)
    _forget_rewritten_language_functions()
    return None


TF32_ROUND_ASM = "cvt.rna.tf32.f32 $0, $1;"     # rules/dot.py's (the test checks they agree)


def round_to_tf32(x) -> np.ndarray:
  """cvt.rna.tf32.f32 as ptxas emits it for sm_90: a finite value gets 0x1000 added
  to its bits (round half away from zero), then the low 13 mantissa bits are
  cleared (Inf and NaN only cleared)."""
  bits = np.asarray(x, np.float32).view(np.uint32)
  finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
  rounded = np.where(finite, bits + np.uint32(0x1000), bits) & np.uint32(0xFFFFE000)
  return rounded.astype(np.uint32).view(np.float32)


def _forget_rewritten_language_functions() -> None:
  """The interpreter caches each rewritten helper (tl.max, ...) and puts its own
  globals (interpreter_semantic, ...) into the helper's module once, when it
  rewrites it; the restore above removes those globals, so the cached rewrite
  would fail the next run with a NameError. Rewrite them afresh each run."""
  # lazy: keeps triton out of this module's import (start-up time)
  from triton.runtime.interpreter import InterpretedFunction
  language_globals = {id(vars(obj)) for obj in _language_objects()}
  cache = InterpretedFunction.rewritten_fn
  for fn in [f for f in cache if id(getattr(f, "__globals__", None)) in language_globals]:
    del cache[fn]


def _reductions():
  global _REDUCTIONS
  if _REDUCTIONS is None:
    _REDUCTIONS = _beside("interpreter_reductions")
  return _REDUCTIONS


def _memory():
  global _MEMORY
  if _MEMORY is None:
    _MEMORY = _beside("interpreter_memory")
  return _MEMORY


def _beside(name: str):
  """The module `name` beside this one (an ejected program inlines it and sets it first,
  as _REDUCTIONS or _MEMORY): the package's module, else the file next to this one."""
  if __package__:
    return importlib.import_module(f"{__package__}.{name}")
  # loaded by path, with no package around it
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _language_objects():
  # lazy: keeps triton out of this module's import (start-up time)
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


def _set_interpret(enabled: bool) -> bool:
  """Sets Triton's interpret knob; returns the previous value."""
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  previous = bool(triton.knobs.runtime.interpret)
  triton.knobs.runtime.interpret = enabled
  return previous


@contextlib.contextmanager
def ieee_subnormals():
  """Subnormal floats kept, as on the GPU (pallas-prof compiles without
  flush-to-zero, as XLA's GPU compiler does).

  XLA's CPU runtime sets the flush-to-zero and denormals-are-zero bits on its
  threads, and jax.pure_callback runs the interpreter on one of those: numpy
  would then flush every subnormal result (an erfc-based GELU gave -0.0 where
  the GPU and an ejected program give -1e-40). C's fesetenv(FE_DFL_ENV)
  clears those bits for this thread, fegetenv/fesetenv put them back after.
  """
  libm = _libm()
  if libm is None:
    yield
    return
  saved = ctypes.create_string_buffer(512)     # fenv_t is 32 bytes on x86-64, 8 on arm64
  if libm.fegetenv(saved) != 0:
    yield
    return
  libm.fesetenv(ctypes.c_void_p(-1))           # FE_DFL_ENV in glibc and musl
  try:
    yield
  finally:
    libm.fesetenv(saved)


_LIBM = []


def _libm():
  if not _LIBM:
    name = ctypes.util.find_library("m")
    try:
      _LIBM.append(ctypes.CDLL(name) if name else None)
    except OSError:
      _LIBM.append(None)
  return _LIBM[0]


def launch(kernel, grid, arrays, owner=None) -> None:
  """Runs an interpreted kernel (`@triton.jit` loaded with the interpret knob on)
  on numpy arrays, in place: each array is one pointer argument, in order.
  `owner`: interpreter_memory.MemoryGuard's, the ref an access indexes.

  numpy's floating-point warnings are off for the launch only: the kernel
  defines those results the GPU's way (a NaN cast to an integer under the
  select that replaces it, inf - inf, x / 0), so "invalid value encountered
  in cast" would only alarm the user about numbers the kernel then handles.
  """
  args = [NumpyArg(a) for a in arrays]
  with InterpreterPatches(), ieee_subnormals(), _memory().MemoryGuard(arrays, owner), \
      np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
    kernel[grid](*args)
