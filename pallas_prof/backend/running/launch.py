"""Running a generated kernel inside a JAX program.

GPU: an XLA custom call through jaxlib's gpu_triton (`triton_kernel_call_ffi`),
carrying the PTX that triton.compile produced for the device's compute
capability. CPU: the same generated kernel run by Triton's interpreter
behind jax.pure_callback.

For the interpreter we hand Triton small numpy adapters rather than torch
tensors: Triton's interpreter only needs `data_ptr()`, `dtype` and a
storage object, and a 20-line adapter avoids a multi-gigabyte dependency.
The adapters and the interpreter's patches live in interpreter_runtime.py,
which ejected programs carry too.
"""
from __future__ import annotations

import os
import re
import sys
import zlib

import jax
import jax.numpy as jnp
import numpy as np

from ... import settings
from .. import compat
from . import interpreter_memory, interpreter_runtime, long_runs
from ..artifacts import CompiledKernel, GeneratedKernel
from ..lowering.codegen import is_packed4
from .bounds_errors import BoundsError
from .runtime_errors import KernelRuntimeError, remember
from .generated_modules import load_module
from ..compiling.triton_run import triton_lock


# --- CPU: Triton's interpreter ------------------------------------------------------

def run_interpreted(gk: GeneratedKernel, inputs, out_shapes, input_output_aliases=(),
                    poison: bool = False):
  """Runs `gk` under Triton's interpreter on numpy inputs; returns the outputs
  (and last, for a bounds-checked kernel, its flag buffer).

  `poison`: outputs start as NaN (integers: all ones) instead of zeros, so
  elements the kernel never writes show up (outputs updated with atomics
  still start from zero, as on the GPU)."""
  module = load_module(gk, interpret=True)
  fn = getattr(module, gk.name)
  # Private C-ordered copies: the kernel may write through any pointer (an
  # input ref it stores to, an atomic), and JAX's callback buffers are not
  # ours to change. (np.ascontiguousarray would also turn 0-d arrays into 1-d.)
  arrays = [np.array(a, order="C", copy=True) for a in inputs]
  # int4/uint4: numpy holds one per byte; kernels (like XLA on a GPU) two
  arrays = [pack4(a) if is_packed4(a.dtype) else a for a in arrays]
  aliases = dict(input_output_aliases)
  zeroed = gk.zeroed_outputs(input_output_aliases)     # atomics: from zero, as on the GPU
  outputs = []
  for i, (shape, dtype) in enumerate(out_shapes):
    aliased = [k for k, v in aliases.items() if v == i]
    if aliased:
      # one buffer behind both refs, as on the GPU (XLA passes the same pointer)
      outputs.append(arrays[aliased[0]])
    else:
      fill = poison_value(dtype) if poison and i not in zeroed else 0
      out = np.full(shape, fill, dtype=dtype)
      outputs.append(pack4(out) if is_packed4(dtype) else out)
  flags = [np.zeros(p.shape, np.int32) for p in gk.params if p.role == "check"]
  # check mode: an output's starting values are a parameter of their own (the
  # same buffer, as on the GPU, where the launcher aliases them)
  initial = [outputs[p.index] for p in gk.params if p.role == "initial"]
  with triton_lock(), long_runs.watched(gk):
    try:
      interpreter_runtime.launch(fn, gk.launch_grid, arrays + initial + outputs + flags,
                                 owner=access_owner(gk, arrays, outputs))
    except Exception as e:  # noqa: BLE001 - re-raised with the equation that failed
      if not long_runs.abandoned(e):
        raise interpreter_error(gk, e) from e
      # the process is exiting (long_runs.py): the only one waiting for these outputs is
      # JAX's clean-up at exit, which an error would make print a traceback
  return [unpack4(o, shape, dtype) if is_packed4(dtype) else o
          for o, (shape, dtype) in zip(outputs, out_shapes, strict=True)] + flags


def access_owner(gk: GeneratedKernel, inputs, outputs):
  """For MemoryGuard: a function that, called inside an interpreted access, gives the ref
  that access indexes (its name and buffer), found from the generated line running it and
  that line's equation; None where that is not known (a scratch ref, no equation)."""
  buffers = {}
  for p in gk.params:
    if p.role in ("input", "output"):
      buffers[p.label] = (inputs if p.role == "input" else outputs)[p.index]

  def owner():
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != gk.path:
      frame = frame.f_back
    eqn = gk.eqn_at_line(frame.f_lineno) if frame is not None else None
    label = getattr(eqn, "operand", None)
    return (label, buffers[label]) if label in buffers else None
  return owner


def poison_value(dtype):
  """What check mode fills unwritten outputs with: NaN, or all bits set."""
  import ml_dtypes   # its iinfo knows int4/uint4, whose numpy kind is 'V' (void)
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return True
  if np.issubdtype(dtype, np.floating) or dtype.kind == "V" and dtype.name.startswith(
      ("bfloat16", "float")):
    return np.nan
  if np.issubdtype(dtype, np.signedinteger) or dtype.name == "int4":
    return np.array(-1).astype(dtype)
  return ml_dtypes.iinfo(dtype).max


def pack4(a: np.ndarray) -> np.ndarray:
  """int4/uint4 values (one per byte) to XLA's packed layout: element 2k in the
  low nibble of byte k, in row-major order."""
  nibbles = a.reshape(-1).view(np.uint8).astype(np.uint8) & 0xF
  if nibbles.size % 2:
    nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
  return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def unpack4(packed: np.ndarray, shape, dtype) -> np.ndarray:
  n = int(np.prod(shape, dtype=np.int64))
  nibbles = np.empty(packed.size * 2, np.uint8)
  nibbles[0::2] = packed & 0xF
  nibbles[1::2] = packed >> 4
  values = nibbles[:n].astype(np.int8)
  if np.dtype(dtype).name == "int4":
    values = ((values ^ 8) - 8).astype(np.int8)
  return values.astype(dtype).reshape(shape)


def interpreter_error(gk: GeneratedKernel, error: BaseException) -> Exception:
  """A failure under Triton's interpreter as a run-time error at the generated line and
  its equation: an access outside every buffer the kernel was given is a BoundsError
  (without the bounds-checked mode's ref and index: its hint says how to get them)."""
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
  code = gk.code_lines()
  text = code[line - 1].strip() if line and line <= len(code) else None
  details = {"generated line": f"{gk.path}:{line}: {text}"} if line else {}
  outside = isinstance(cause or error, interpreter_memory.OutOfBuffers)
  where = "Triton's interpreter on the CPU"
  if outside:
    what = eqn.primitive if eqn is not None else None
    found = str(cause or error).split(" (on a GPU")[0].replace("the kernel ", "it ", 1)
    return remember(BoundsError(
        f"the kernel failed under Triton's interpreter: {found}",
        kernel=gk.name, eqn=eqn, details=details, jaxpr_text=gk.jaxpr_text, where=where,
        ref_names=gk.ref_names,
        hint=f"an index of this {'`' + what + '` ' if what else ''}lies outside its ref: "
             "PALLAS_PROF_CHECK=bounds (or pallas_prof.install(check_bounds=True)) names the "
             "ref, its shape and the index range, or, where the block itself lies outside "
             "the array, the BlockSpec's line, the program and the block index. On a GPU "
             "this access is an illegal address, which ends the process's CUDA context"))
  return remember(KernelRuntimeError(
      f"the kernel failed under Triton's interpreter: {type(cause or error).__name__}: "
      f"{cause or error}",
      kernel=gk.name, eqn=eqn, details=details, jaxpr_text=gk.jaxpr_text, where=where,
      cause=cause or error, ref_names=gk.ref_names,
      hint="this is a pallas-prof bug if the kernel is valid Pallas (please report it with "
           "the kernel); `pallas-prof show KERNEL` prints the generated code, and "
           "PALLAS_PROF_TRACEBACK=1 keeps the interpreter's traceback"))


def cpu_call(gk: GeneratedKernel, out_avals, input_output_aliases, on_launch=None,
             poison: bool = False):
  """A function of jax arrays that runs `gk` on the host through pure_callback
  (a bounds-checked kernel's flag buffer is one more result, last)."""
  out_shapes = [(tuple(a.shape), np.dtype(a.dtype)) for a in out_avals]
  result_shapes = [jax.ShapeDtypeStruct(s, d) for s, d in out_shapes]
  result_shapes += [jax.ShapeDtypeStruct(p.shape, np.int32) for p in gk.params
                    if p.role == "check"]

  def host(*arrays):
    if on_launch is not None:
      on_launch()
    return run_interpreted(gk, arrays, out_shapes, input_output_aliases, poison)

  def call(*args):
    return jax.pure_callback(host, result_shapes, *args)

  return call


# --- GPU: jaxlib's Triton custom call -----------------------------------------------

JAXLIB_PTX_ENV = "PALLAS_PROF_JAXLIB_PTX"     # "whole": hand jaxlib the PTX as Triton wrote it
_LINE_INFO_DIRECTIVE = re.compile(r"^\s*\.(loc|file)\s")      # the whole token: not .local
_DEBUG_SECTION = re.compile(r"^\s*\.section\s+\.debug_\w+\s*(\{.*\})?\s*$")


def jaxlib_ptx(ptx: str) -> str:
  """The kernel's PTX as jaxlib needs it: the same code without line info.

  jaxlib's custom call (triton_kernel_call_ffi) rebuilds its kernel from the
  payload on every launch: it copies the PTX and TTIR strings and hashes and
  compares the whole PTX to find its module image (jaxlib/gpu/triton_kernels.cc,
  TritonKernelCallFfi -> KernelCall::FromProto -> GetModuleImage). So every
  character of the payload costs on every call. Triton's PTX carries `.file`
  and `.loc` directives, DWARF `.section .debug_*` blocks and a comment on
  most lines, which only make a line table; the profiler reads the line table
  of its own cubin (the CompiledKernel's PTX, untouched). Removed here: lines
  whose first token is exactly `.loc` or `.file`, the `.section .debug_*`
  blocks, and comments outside string literals; nothing else. Anything
  unexpected (another section, an unbalanced block) gives the PTX back whole.
  tests/backend/running/test_jaxlib_payload.py runs both texts through ptxas and
  compares the machine code. JAX_TRITON_PTXAS_EXTRA_FLAGS asking jaxlib's
  ptxas for line info (-lineinfo, -g), JAX_TRITON_PTXAS_DEVICE_DEBUG, or
  PALLAS_PROF_JAXLIB_PTX=whole hand jaxlib the PTX whole.
  """
  flags = set(os.environ.get("JAX_TRITON_PTXAS_EXTRA_FLAGS", "").split())
  if {"-lineinfo", "--generate-line-info", "-g", "--device-debug"} & flags or \
      os.environ.get("JAX_TRITON_PTXAS_DEVICE_DEBUG") in ("1", "true") or \
      settings.value(JAXLIB_PTX_ENV) == "whole":
    return ptx
  out = []
  lines = iter(ptx.splitlines())
  for line in lines:
    stripped = line.strip()
    if stripped.startswith(".section"):
      if not _DEBUG_SECTION.match(stripped):
        return ptx                              # a section we do not know: leave it all
      if not stripped.endswith("}"):            # its block follows: `{` ... `}`
        if next(lines, "").strip() != "{":
          return ptx
        for inner in lines:
          if inner.strip() == "}":
            break
          if "{" in inner or "}" in inner:      # nested or odd: not a DWARF byte list
            return ptx
        else:
          return ptx
      continue
    if _LINE_INFO_DIRECTIVE.match(line):
      continue
    code = _without_comment(line).rstrip()
    if code.strip():
      out.append(code)
  return "\n".join(out) + "\n"


def _without_comment(line: str) -> str:
  """`line` without a `//` comment; a `//` inside a string literal ("...") stays."""
  if "//" not in line:
    return line
  quoted = False
  for i, ch in enumerate(line):
    if ch == '"':
      quoted = not quoted
    elif not quoted and line.startswith("//", i):
      return line[:i]
  return line


def _avals_to_layouts(avals):
  return [list(reversed(range(len(a.shape)))) for a in avals]


# jaxlib's custom call that launches a Triton kernel (what jax.export must be told to allow)
CUSTOM_CALL_TARGET_NAME = "triton_kernel_call_ffi"


def triton_kernel_call(ck: CompiledKernel, zeroed_outputs=()):
  """jaxlib's TritonKernelCall for a compiled kernel."""
  lib = compat.gpu_triton()
  gk = ck.generated
  md = ck.metadata
  kernel = compat.make_triton_kernel(
      lib, name=ck.name, num_warps=ck.num_warps, shared_bytes=ck.shared_bytes,
      # jaxlib compiles the PTX and only keeps the TTIR (it copies both on every
      # launch): the code without line info, and no TTIR. (bf75fd8 stripped `.local`
      # declarations too, taking them for `.loc`: ptxas rejected those kernels.)
      ptx=jaxlib_ptx(ck.ptx), ttir="", compute_capability=ck.target[1],
      global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
      global_scratch_align=int(md.get("global_scratch_align", 1) or 1))
  params = []
  for p in gk.params:
    nbytes = 0
    if (p.role == "output" and p.index in zeroed_outputs) or p.role == "check":
      nbytes = int(np.prod(p.shape, dtype=np.int64)) * np.dtype(p.dtype).itemsize
    params.append(lib.create_array_parameter(nbytes, 16))
  gx, gy, gz = gk.launch_grid
  return lib.TritonKernelCall(kernel, gx, gy, gz, params)


def gpu_custom_call(ctx, in_nodes, ck: CompiledKernel, *, input_output_aliases,
                    zeroed_outputs=(), metadata: str = ""):
  initial = [p for p in ck.generated.params if p.role == "initial"]
  if initial:
    ctx, in_nodes, input_output_aliases = _with_initial_values(
        ctx, in_nodes, initial, input_output_aliases, zeroed_outputs)
  call = triton_kernel_call(ck, zeroed_outputs)
  ir = compat.ir()
  out_avals = list(ctx.avals_out) + check_avals(ck.generated)
  result_types = [compat.aval_to_ir_type(ctx.module_context, aval) for aval in out_avals]
  opaque = zlib.compress(call.to_proto(ck.name, metadata.encode()))
  return compat.custom_call(
      call_target_name=CUSTOM_CALL_TARGET_NAME,
      result_types=result_types,
      operands=list(in_nodes),
      backend_config=dict(name=ir.StringAttr.get(ck.name), opaque=ir.StringAttr.get(opaque)),
      operand_layouts=_avals_to_layouts(ctx.avals_in),
      result_layouts=_avals_to_layouts(out_avals),
      operand_output_aliases=dict(input_output_aliases),
  ).results


def _with_initial_values(ctx, in_nodes, initial, input_output_aliases, zeroed_outputs):
  """Check mode: the outputs' starting values as operands after the inputs, each
  aliased to its output (XLA hands the kernel that buffer for both), filled with
  poison, or zeros for the outputs that must start at zero (atomics)."""
  avals = [compat.jax_core.ShapedArray(p.shape, np.dtype(p.dtype)) for p in initial]

  def starting_values():
    return [jnp.zeros(a.shape, a.dtype) if p.index in zeroed_outputs else
            jnp.full(a.shape, poison_value(a.dtype), a.dtype)
            for p, a in zip(initial, avals, strict=True)]

  nodes = compat.lower_fun(starting_values, multiple_results=True)(
      ctx.replace(avals_in=[], avals_out=avals))
  n_in = len(in_nodes)
  aliases = tuple(input_output_aliases) + tuple((n_in + j, p.index)
                                                for j, p in enumerate(initial))
  return (ctx.replace(avals_in=list(ctx.avals_in) + avals), list(in_nodes) + list(nodes),
          aliases)


def no_programs(out_avals, input_output_aliases, poison: bool):
  """The outputs of a launch of no program (a grid with an empty dimension),
  which CUDA would refuse: an aliased output is its input, the others are
  zeros, or poison in check mode (what the interpreter's run of no program
  leaves)."""
  source = {int(o): int(i) for i, o in input_output_aliases}

  def outputs(*args):
    return [args[source[k]] if k in source else
            jnp.full(a.shape, poison_value(a.dtype) if poison else 0, a.dtype)
            for k, a in enumerate(out_avals)]

  return outputs


def check_avals(gk: GeneratedKernel) -> list:
  """The avals of a bounds-checked kernel's flag buffer (none otherwise)."""
  return [compat.jax_core.ShapedArray(p.shape, np.dtype(np.int32)) for p in gk.params
          if p.role == "check"]
