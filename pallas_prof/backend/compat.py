"""The only module that knows how JAX and Triton differ between versions.

pallas-prof runs on jax 0.10.x (CPU machines, CI) and jax 0.11.x (the GPU
machine), with triton 3.6. Everything that reaches into JAX's or Triton's
private modules goes through here, so a version bump touches one file.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import jax
import numpy as np
from jax._src import core as jax_core
from jax._src import effects as _effects
from jax._src import source_info_util
from jax._src.interpreters import mlir
from jax._src.pallas import core as pallas_core
from jax._src.pallas import pallas_call as _pallas_call_mod
from jax._src.pallas import primitives as pallas_primitives
from jax._src.state import discharge as _state_discharge
from jax._src.state import indexing as state_indexing
from jax._src.state import primitives as state_primitives
from jax._src.state import types as state_types

from .. import settings

JAX_VERSION = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


# the platform a pallas_call is being lowered for ("cpu": Triton's interpreter, "cuda")
_lowering_platform = contextvars.ContextVar("pallas_prof_lowering_platform", default="cpu")


@contextlib.contextmanager
def lowering_for(platform: str):
  """Lowering inside this block is for `platform`: conversions whose rounding XLA's
  backends do not agree on follow that platform's XLA."""
  token = _lowering_platform.set(platform)
  try:
    yield
  finally:
    _lowering_platform.reset(token)


def xla_rounds_tf32_dot_operands() -> bool:
  """Whether XLA, on the platform being lowered for, rounds the float32 operands of a
  TF32 dot to TF32 first: its GPU Triton pipeline does, for JAX's built-in backend
  (RoundF32ToTF32ForTf32DotRewritePass, cvt.rna.tf32.f32), where the tensor cores
  alone would truncate; its CPU computes such a dot in float32, and its ROCm pipeline
  has no such pass (and AMD GPUs no PTX)."""
  return _lowering_platform.get() == "cuda"


def xla_rounds_f64_to_16bit_twice(dtype) -> bool:
  """Whether XLA, on the platform being lowered for (lowering_for), converts
  float64 to a 16-bit float through float32, rounding twice; pallas-prof
  then does too, so a kernel agrees with the XLA beside it.

  It differs by version and by backend: jaxlib 0.10.2's CPU rounds twice for
  both types (1 + 2**-11 + 2**-40 becomes 1.0 in float16, 1 + 2**-8 + 2**-40 1.0
  in bfloat16; rounded once they are 1.001 and 1.008); jaxlib 0.11.2's CPU rounds
  float64 -> float16 once and float64 -> bfloat16 twice, its GPU both once (H200,
  2026-12-02, bench/results/convert_rounding_h200_3c29677.txt). So it is asked of
  that XLA, once per process, platform and type, on such a tie; if that fails,
  by version. Triton rounds once when asked directly (cvt.rn.f16.f64 /
  cvt.rn.bf16.f64 on sm_90, numpy's conversions in its interpreter) and twice
  when given the float32 step."""
  return _xla_rounds_twice(np.dtype(dtype).name, _lowering_platform.get())


@functools.cache
def _xla_rounds_twice(name: str, platform: str) -> bool:
  tie = {"float16": 1 + 2 ** -11 + 2 ** -40, "bfloat16": 1 + 2 ** -8 + 2 ** -40}[name]
  try:
    device = jax.devices("cpu" if platform == "cpu" else "gpu")[0]
    with jax.enable_x64(True):
      x = jax.device_put(np.array([tie], np.float64), device)     # an argument: not folded
      y = jax.jit(lambda v: v.astype(name))(x)
      return float(np.asarray(y).astype(np.float64)[0]) == 1.0
  except Exception:  # noqa: BLE001 - no such backend: what the versions measured did
    return platform == "cpu" and (JAX_VERSION < (0, 11) or name == "bfloat16")

pallas_call_p = _pallas_call_mod.pallas_call_p

# Block dimension kinds of a BlockMapping.
Blocked = pallas_core.Blocked
Squeezed = pallas_core.Squeezed
Element = pallas_core.Element
BoundedSlice = getattr(pallas_core, "BoundedSlice", None)

NDIndexer = state_indexing.NDIndexer
Slice = state_indexing.Slice
AbstractRef = state_types.AbstractRef
Literal = jax_core.Literal
DropVar = jax_core.DropVar
Jaxpr = jax_core.Jaxpr
# jax 0.12 removed ClosedJaxpr (0.11 had folded it into Jaxpr, keeping the name)
JAXPR_TYPES = tuple(t for t in (getattr(jax_core, "ClosedJaxpr", None), Jaxpr) if t is not None)

get_p = state_primitives.get_p
swap_p = state_primitives.swap_p
addupdate_p = state_primitives.addupdate_p
program_id_p = pallas_primitives.program_id_p
num_programs_p = pallas_primitives.num_programs_p
load_p = pallas_primitives.load_p
masked_swap_p = pallas_primitives.swap_p
multiple_of_p = pallas_primitives.multiple_of_p


# --- JAX's own Pallas Triton backend (deprecated since jax 0.11): pallas-prof's own path
# needs none of it (backend/builtin_triton.py reaches it, to compare with it). The rules of
# its Triton-flavoured primitives (atomics, inline asm, ...) are bound once the user's code
# has imported their module (rules/table.py).
TRITON_PRIMITIVES_MODULE = "jax._src.pallas.triton.primitives"


# What pallas-prof's own Triton-flavoured primitives need (backend/triton_primitives.py)
kernel_local_effects = pallas_core.kernel_local_effects
control_flow_allowed_effects = _effects.control_flow_allowed_effects
get_ref_and_transforms = state_primitives.get_ref_and_transforms
swap_abstract_eval = pallas_primitives._swap_abstract_eval
transform_array = _state_discharge.transform_array
pallas_load, pallas_store = pallas_primitives.load, pallas_primitives.store
pallas_dot = getattr(pallas_primitives, "dot", None)
source_info_to_location = mlir.source_info_to_location    # an op's location: name stack, user line


def register_discharge_rule(prim, rule) -> None:
  """rule(in_avals, *operands, **params) -> (new operand values, results) discharges `prim`
  (jax 0.12 hands rules a context holding in_avals, earlier JAX in_avals and out_avals)."""
  if hasattr(_state_discharge, "DischargeContext"):
    wrapped = lambda ctx, *args, **params: rule(ctx.in_avals, *args, **params)  # noqa: E731
  else:
    wrapped = lambda in_avals, _, *args, **params: rule(in_avals, *args, **params)  # noqa: E731
  _state_discharge.register_discharge_rule(prim)(wrapped)


def block_dim_size(dim) -> int:
  return pallas_core._get_block_dim_size(dim)


# --- where did an equation come from ---------------------------------------

_JAX_DIR = os.path.dirname(os.path.dirname(jax.__file__)) + os.sep + "jax" + os.sep
# JAX's own example kernels (softmax, attention, ...) are "user code" for our
# purposes: their lines are where the equations come from.
_JAX_KERNEL_DIRS = (os.path.join(_JAX_DIR, "experimental", "pallas", "ops") + os.sep,)
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@functools.lru_cache(maxsize=4096)
def _is_user_file(path: str) -> bool:
  if path.startswith(_JAX_KERNEL_DIRS):
    return True
  if path.startswith(_JAX_DIR) or path.startswith(_OUR_DIR):
    return False
  return source_info_util.is_user_filename(path)


def user_frame(source_info):
  """The innermost frame of the user's code that produced an equation."""
  traceback = getattr(source_info, "traceback", None)
  if traceback is None:
    return None
  code, lasti = traceback.raw_frames()
  for c, i in zip(code, lasti, strict=True):
    if _is_user_file(c.co_filename):
      return source_info_util.raw_frame_to_frame(c, i)
  return None


# --- lowering registration ---------------------------------------------------

def register_platform_lowering(prim, rule, platform: str) -> None:
  mlir.register_lowering(prim, rule, platform=platform)


def default_pallas_call_lowering():
  """JAX's own (platform-independent) pallas_call lowering rule."""
  return _pallas_call_mod._pallas_call_lowering


def register_backend_lowering_rule(params_cls, rule, platform: str = "gpu") -> None:
  pallas_core.register_lowering_rule(params_cls, rule, platform)


def lower_fun(fun, multiple_results: bool = True):
  return mlir.lower_fun(fun, multiple_results=multiple_results)


def gpu_triton():
  """jaxlib's Triton custom-call bindings (GPU builds only)."""
  from jax._src.lib import gpu_triton as lib
  return lib


def custom_call(*args, **kwargs):
  return mlir.custom_call(*args, **kwargs)


def aval_to_ir_type(module_context, aval):
  return mlir.aval_to_ir_type(module_context, aval)


def ir():
  from jax._src.lib.mlir import ir as _ir
  return _ir


# --- Triton ------------------------------------------------------------------

def triton_version() -> str:
  import triton
  return triton.__version__


def set_triton_interpret(enabled: bool) -> bool:
  """Sets Triton's interpret knob; returns the previous value."""
  import triton
  previous = bool(triton.knobs.runtime.interpret)
  triton.knobs.runtime.interpret = enabled
  return previous


def make_triton_kernel(lib, *, name, num_warps, shared_bytes, ptx, ttir, compute_capability,
                       global_scratch_size=0, global_scratch_align=1):
  """jaxlib's TritonKernel; its constructor grew scratch arguments in jax 0.11."""
  try:
    return lib.TritonKernel(name, num_warps, 1, shared_bytes, ptx, ttir, compute_capability,
                            global_scratch_size, global_scratch_align)
  except TypeError:
    if global_scratch_size:
      raise RuntimeError(
          f"kernel {name} needs {global_scratch_size} bytes of global scratch, which this "
          f"jaxlib cannot allocate; upgrade to jax >= 0.11") from None
    return lib.TritonKernel(name, num_warps, 1, shared_bytes, ptx, ttir, compute_capability)


def gpu_compute_capability(device=None) -> int | None:
  """The compute capability (e.g. 90) of a CUDA device, None without one (or on ROCm)."""
  try:
    devices = [device] if device is not None else jax.local_devices(backend="gpu")
  except RuntimeError:
    return None
  if not devices:
    return None
  cc = str(getattr(devices[0], "compute_capability", None) or "").replace(".", "")
  return int(cc) if cc.isdigit() else None     # an AMD GPU's is its arch: "gfx942"


def backends_initialized() -> bool:
  """Whether JAX has created its XLA backends. Until it has, jax.distributed.initialize()
  may still be called, so nothing before a user's program may ask JAX for devices."""
  from jax._src import xla_bridge
  return bool(getattr(xla_bridge, "_backends", None))


def distributed_process() -> tuple[int, int] | None:
  """(process index, process count) once jax.distributed.initialize() ran, else None;
  reads JAX's state without creating a backend."""
  from jax._src import distributed
  state = distributed.global_state
  if getattr(state, "client", None) is None:
    return None
  return int(state.process_id), int(state.num_processes)


# --- jaxpr shapes that changed in jax 0.11 -------------------------------------------
# jax 0.11 folded ClosedJaxpr into Jaxpr (which now carries its consts and keeps
# a `.jaxpr` property returning itself), renamed closed_call to eval_jaxpr, and
# replaced scan's num_consts/num_carry with flat-tree layouts (ft_in/ft_out).

closed_call_primitives = tuple(p for p in (getattr(jax_core, "closed_call_p", None),
                                           getattr(jax_core, "eval_jaxpr_p", None))
                               if p is not None)


def open_jaxpr(j):
  """(jaxpr, consts) of a ClosedJaxpr (jax 0.10) or a Jaxpr with consts (0.11)."""
  inner = getattr(j, "jaxpr", j)
  consts = getattr(j, "consts", None)
  if consts is None:
    consts = getattr(inner, "consts", ())
  return inner, tuple(consts or ())


def scan_layout(params: dict) -> tuple[int, int]:
  """(num_consts, num_carry) of a scan equation's params, in any JAX version."""
  if "num_consts" in params:
    return int(params["num_consts"]), int(params["num_carry"])
  consts, carry, _ = params["ft_in"].unpack()
  return len(consts), len(carry)


@functools.lru_cache(maxsize=1)
def xla_libdevice_path() -> str | None:
  """The libdevice XLA's GPU compiler links, so that libdevice functions
  (powf among them) compute bit for bit what XLA and JAX's built-in backend
  compute; Triton's wheel ships a different libdevice version. XLA looks in
  --xla_gpu_cuda_data_dir, else in the CUDA directory JAX found (CUDA_ROOT, the
  nvidia-cuda-nvcc wheel), else in /usr/local/cuda. None: use Triton's own.
  PALLAS_PROF_LIBDEVICE=<path> chooses one; PALLAS_PROF_LIBDEVICE=triton keeps Triton's."""
  chosen = settings.value("PALLAS_PROF_LIBDEVICE")
  if chosen:
    return None if chosen == "triton" else chosen
  roots = []
  for flag in os.environ.get("XLA_FLAGS", "").split():
    if flag.startswith("--xla_gpu_cuda_data_dir="):
      roots.append(flag.split("=", 1)[1])
  try:
    from jax._src import lib as jax_lib
    if isinstance(getattr(jax_lib, "cuda_path", None), str):
      roots.append(jax_lib.cuda_path)
  except ImportError:
    pass
  roots.append("/usr/local/cuda")
  for root in roots:
    path = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
    if os.path.isfile(path):
      return path
  return None


def trace_to_jaxpr(fn, in_avals, what: str = "pallas_prof"):
  """(jaxpr, consts) of `fn` traced on abstract values (refs too): for rules
  that rewrite an equation into others and lower those (scan over arrays)."""
  from jax._src import api_util
  from jax._src import linear_util as lu
  from jax._src.interpreters import partial_eval as pe
  info = api_util.debug_info(what, fn, tuple(in_avals), {})
  traced = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=info), list(in_avals))
  jaxpr = traced[0]
  consts = traced[2] if len(traced) > 2 else ()
  return open_jaxpr(jaxpr)[0], tuple(consts) or open_jaxpr(jaxpr)[1]


def eval_jaxpr(jaxpr, consts, *args):
  """core.eval_jaxpr, binding each equation under its own source info (so a
  rewritten equation still points at the user's line)."""
  return jax_core.eval_jaxpr(jaxpr, list(consts), *args)


# --- printing jaxprs (lowering: equation texts that match the kernel's printout) -----

def _pp_settings():
  return jax_core.JaxprPpSettings(source_info=False, print_effects=False)


def _plain(doc) -> str:
  # JAX colours what it prints when stdout is a terminal; these texts are parsed
  # (the marked equation, the refs' names) and shown inside our own styled reports
  return doc.format(use_color=False)


def print_jaxpr(jaxpr):
  """(text, context): `jaxpr` printed as JAX prints it (nested jaxprs in place),
  and the naming context that printed it: pp_equation(eqn, context) then names
  any of its equations, nested ones too, as the text does."""
  dropvars = getattr(jax_core, "_dropvars", None)
  try:
    context = jax_core.JaxprPpContext(dropvars(jaxpr)) if dropvars else jax_core.JaxprPpContext()
  except TypeError:      # a JAX whose context takes no names
    context = jax_core.JaxprPpContext()
  return _plain(jax_core.pp_jaxpr(jaxpr, context, _pp_settings())), context


def equation_lines(jaxpr, text: str, context) -> dict[int, int]:
  """id(equation) -> the line (0-based) of `text` (print_jaxpr's) where it starts,
  for the equations of `jaxpr` and of the jaxprs nested in them. Each
  equation's first printed line is looked for after the previous equation's
  (they print in that order), else anywhere."""
  lines = [line.strip() for line in text.splitlines()]
  found: dict[int, int] = {}
  position = 0

  def locate(first: str):
    for start in (position, 0):
      for i in range(start, len(lines)):
        if lines[i] and (lines[i].startswith(first) or first.startswith(lines[i])):
          return i
    return None

  def visit(j):
    nonlocal position
    for eqn in j.eqns:
      first = pp_equation(eqn, context).splitlines()[0].strip()
      at = locate(first) if first else None
      if at is not None:
        found[id(eqn)] = at
        position = at + 1
      for sub in jax_core.jaxprs_in_params(eqn.params):
        visit(sub)

  visit(jaxpr)
  return found


def name_vars(jaxpr, context) -> None:
  """Names, in order, the variables of a jaxpr `context` has not seen (an index
  map's, a decomposition's), as printing it would."""
  jax_core.pp_jaxpr(jaxpr, context, _pp_settings())


def pp_equation(eqn, context) -> str:
  return _plain(jax_core.pp_eqn(eqn, context, _pp_settings()))


def pp_var(var, context, *, named_only: bool = False) -> str | None:
  if isinstance(var, jax_core.Literal):
    return str(var)
  if named_only and var not in getattr(context, "var_names", ()):
    return None        # naming it now would rename the variables printed after it
  doc = jax_core.pp_var(var, context)
  return doc if isinstance(doc, str) else _plain(doc)


# --- primitives and helpers of JAX's internals the rules need ----------------------

from jax._src import ad_checkpoint as _ad_checkpoint  # noqa: E402
from jax._src import ad_util as _ad_util  # noqa: E402
from jax._src import custom_derivatives as _custom_derivatives  # noqa: E402
from jax._src import debugging as _debugging  # noqa: E402
from jax._src import pjit as _pjit  # noqa: E402
from jax._src.lax import lax as _lax_internal  # noqa: E402

# None where this JAX has no such primitive (rules.table.register skips None)
jit_p = getattr(_pjit, "jit_p", None) or getattr(_pjit, "pjit_p", None)
reshard_p = getattr(_pjit, "reshard_p", None)
custom_jvp_call_p = _custom_derivatives.custom_jvp_call_p
custom_vjp_call_p = getattr(_custom_derivatives, "custom_vjp_call_p", None)
custom_vjp_call_jaxpr_p = getattr(_custom_derivatives, "custom_vjp_call_jaxpr_p", None)
remat_p = _ad_checkpoint.remat_p
add_jaxvals_p = getattr(_ad_util, "add_jaxvals_p", None)
stop_gradient_p = getattr(_ad_util, "stop_gradient_p", None)
copy_p = getattr(_lax_internal, "copy_p", None)
reduce_precision_p = getattr(_lax_internal, "reduce_precision_p", None)
stack_p = getattr(_lax_internal, "stack_p", None)
unstack_p = getattr(_lax_internal, "unstack_p", None)
debug_print_p = _debugging.debug_print_p
merge_callback_args = _debugging.merge_callback_args      # debug_print's operands back in order
reciprocal_p = getattr(pallas_primitives, "reciprocal_p", None)

# Effects of ref operands (the dispatcher's memory-effect analysis)
ReadEffect = state_types.ReadEffect
WriteEffect = state_types.WriteEffect
AccumEffect = state_types.AccumEffect


def erf_inv_lowering_helper():
  """JAX's polynomial for erf_inv (what XLA and JAX's Triton backend compute)."""
  from jax._src.pallas import utils as pallas_utils
  return pallas_utils.erf_inv_lowering_helper


def pattern_match_scan_to_fori_loop(jaxpr, num_consts: int, num_carry: int):
  from jax._src.pallas import utils as pallas_utils
  return pallas_utils.pattern_match_scan_to_fori_loop(jaxpr, num_consts, num_carry)


def lax_special_impl(name: str, broadcast_and_upcast: bool):
  """JAX's lax-level implementation `name` of a special function (what XLA
  compiles), None where this JAX has none."""
  from jax._src.lax import special
  impl = getattr(special, name, None)
  if impl is not None and broadcast_and_upcast:
    impl = special._up_and_broadcast(impl)
  return impl


def sanitize_name(name: str) -> str:
  """A kernel name as JAX's MLIR lowering spells it."""
  return mlir.sanitize_name(name)


def jax_profiler_session_active() -> bool:
  """Whether jax.profiler is tracing (it holds CUPTI, which allows one subscriber)."""
  try:
    from jax._src import profiler as jax_profiler
  except ImportError:
    return False
  state = getattr(jax_profiler, "_profile_state", None)
  # jax 0.10/0.11 call the running session `profile_session`, 0.12 `session`
  for name in ("session", "profile_session"):
    if hasattr(state, name):
      return getattr(state, name) is not None
  _warn_once("jax-profiler-state",
             "pallas-prof cannot tell whether jax.profiler is tracing in this JAX version "
             f"({jax.__version__}): it will not step aside for it, and the two may clash over "
             "CUPTI (stop jax.profiler's trace before pallas-prof profiles)")
  return False


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
  if key not in _warned:
    _warned.add(key)
    import warnings
    warnings.warn(message, RuntimeWarning, stacklevel=3)


# --- how errors reach the user -------------------------------------------------------

# JAX wraps an exception raised while it lowers an equation in an exception of
# this type carrying the user's frames and a copy of the message (printed above
# it: the message twice), unless the exception already is one. A LoweringError
# names the user's line itself, so it is one (backend/errors.py).
ErrorWithUserContext = source_info_util.JaxStackTraceBeforeTransformation


def hide_frames_in_tracebacks(path: str) -> None:
  """Frames of files under `path` leave the tracebacks JAX filters, as JAX's own
  do (JAX_TRACEBACK_FILTERING=off shows them)."""
  from jax._src import traceback_util
  if path not in getattr(traceback_util, "_exclude_paths", ()):
    traceback_util.register_exclusion(path)
