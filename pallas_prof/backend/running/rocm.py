"""Running a generated kernel on an AMD GPU (JAX's `rocm` platform).

JAX's built-in Pallas Triton backend, in every JAX pallas-prof supports (0.10.2 to
0.12), lowers a pallas_call for `rocm` (and for `cuda`) to XLA's own Triton custom
call, `__gpu$xla.gpu.triton`. Its backend_config (api_version 4, which JAX writes as a
dictionary `mhlo.backend_config` under the default version) carries the kernel's Triton
IR (TTIR, as MLIR bytecode), its name, num_warps, num_stages (1 on ROCm unless asked),
the grid and a debug flag; XLA compiles that IR for the GPU it runs on. pallas-prof
emits the same call on ROCm, field for field, with the TTIR that Triton's own front end
made from the generated kernel when compiling it for a gfx target (docs/rocm.md). That
compile is every other one's (compiling/for_targets.py): in the compile worker, so a crash
of Triton's AMD backend is a CompileError and the user's program lives on.

What differs from pallas-prof's CUDA path (launch.py), and why:
- the IR goes to XLA, which compiles it with the Triton inside jaxlib: the hsaco compiled
  here is what Triton makes of the kernel, kept to check that it compiles for AMD and for
  reading, not the binary that runs;
- XLA's call zeroes nothing and allocates no global scratch: kernels that need either
  (atomics, zero_outputs, the bounds-checked mode, global scratch) are refused with what
  to do instead; TMA, which is NVIDIA's, is lowered as plain accesses;
- no tuner: it times kernels through CUDA.

None of this has been run on AMD hardware: the tests lower for ROCm on the CPU and compare
the custom call with the built-in's (tests/backend/running/test_rocm_launch.py).
"""
from __future__ import annotations

import dataclasses
import io
import threading
import warnings
from typing import Any

import jax

from .. import compat
from ..artifacts import GeneratedKernel
from ..compiling import for_targets, triton_compat
from ..errors import CompileError
from ..tma_note import TmaFallbackWarning

# XLA's Triton custom call: what JAX's built-in backend emits for ROCm and CUDA alike
XLA_TRITON_TARGET = "__gpu$xla.gpu.triton"
XLA_TRITON_API_VERSION = 4
# MI300 (CDNA3): the arch compiled for when neither a device nor an abstract mesh says one
DEFAULT_GFX_ARCH = "gfx942"
NOT_CHECKED = "not checked on AMD hardware"


@dataclasses.dataclass(frozen=True)
class AmdKernel:
  """A generated kernel compiled by Triton for one gfx arch."""
  name: str
  arch: str
  ttir: str
  hsaco: bytes
  metadata: dict


class UnreadableIR(Exception):
  """The kernel's TTIR cannot be read by the Triton inside jaxlib (ttir_bytecode)."""


_compiled: dict[tuple[str, str, int, int], AmdKernel] = {}
_compiled_lock = threading.Lock()


def gfx_arch() -> str:
  """The gfx arch to compile for: the abstract mesh's device (jax.sharding.use_abstract_mesh
  with an AbstractDevice of kind `gfx...`), else the first ROCm device's, else gfx942."""
  device = getattr(jax.sharding.get_abstract_mesh(), "abstract_device", None)
  kind = str(getattr(device, "device_kind", "") or "")
  if kind.startswith("gfx"):
    return kind.split(":")[0]
  if compat.backends_initialized():
    try:
      devices = jax.devices()
    except RuntimeError:
      devices = []
    for d in devices:
      cc = getattr(d, "compute_capability", None)
      if isinstance(cc, str) and cc.startswith("gfx"):
        return cc.split(":")[0]           # the feature flags (":sramecc+") are no arch
  return DEFAULT_GFX_ARCH


def compile_for_gfx(gk: GeneratedKernel, arch: str) -> AmdKernel:
  """`gk` compiled for AMD `arch` as every other compile is (for_targets.compile_for): in
  the compile worker, so that a crash of Triton's AMD backend ends the worker, not the
  user's program; through the compile cache, which checks what it reads; never from
  Triton's own cache. Once per kernel and arch in this process.

  Raises the compile's CompileError (naming the kernel, its stage and the equations it
  points at); a compile that failed is not remembered."""
  key = (gk.key, arch, gk.num_warps, gk.num_stages)
  with _compiled_lock:
    if key in _compiled:
      return _compiled[key]
  outcome = for_targets.compile_for(gk, ("hip", arch))
  if outcome.error is not None:
    raise outcome.error
  compiled = outcome.compiled
  metadata = dict(compiled.metadata)
  kernel = AmdKernel(name=str(metadata.get("name", gk.name)), arch=arch,
                     ttir=compiled.asm["ttir"], hsaco=bytes(compiled.asm.get("hsaco", b"")),
                     metadata={k: v for k, v in metadata.items()
                               if isinstance(v, (int, str, bool, float, type(None)))})
  with _compiled_lock:
    _compiled[key] = kernel
  return kernel


def ttir_bytecode(kernel: AmdKernel) -> bytes:
  """The kernel's TTIR as MLIR bytecode, read by the Triton dialect inside jaxlib (the one
  XLA compiles with), as the built-in backend ships it. UnreadableIR, naming the kernel,
  both Triton versions and the parser's words, when that Triton cannot read it."""
  # lazy: keeps jaxlib out of this module's import (start-up time)
  from jaxlib.mlir import ir
  from jaxlib.triton import dialect
  context = ir.Context()
  dialect.register_dialect(context)
  context.load_all_available_dialects()
  with context:
    try:
      module = ir.Module.parse(kernel.ttir)
    except Exception as e:  # noqa: BLE001 - MLIRError, re-raised with what to do
      import jax
      raise UnreadableIR(
          f"the Triton IR of kernel `{kernel.name}` (made by triton "
          f"{triton_compat.triton_release()}) cannot be read by the Triton inside jaxlib "
          f"{jax.__version__}, which XLA compiles it with on ROCm: "
          f"{str(e).strip().splitlines()[-1][:300]}") from e
    out = io.BytesIO()
    module.operation.write_bytecode(out)
  return out.getvalue()


def refusal(gk: GeneratedKernel, zeroed, kernel: AmdKernel | None = None
            ) -> tuple[str, str] | None:
  """(reason, hint) where XLA's Triton custom call cannot run the kernel as pallas-prof
  built it; None where it can."""
  via = ("pallas-prof's ROCm launch (XLA's Triton custom call, as JAX's built-in backend "
         "uses) zeroes no buffer before the kernel")
  if any(p.role == "check" for p in gk.params):
    return ("the bounds-checked mode on ROCm: its record of out-of-bounds accesses must "
            f"start at zero, and {via}",
            "check bounds on the CPU (JAX_PLATFORMS=cpu: Triton's interpreter) or on an "
            "NVIDIA GPU, then run unchecked on ROCm")
  if zeroed:
    labels = {p.index: p.label for p in gk.params if p.role == "output"}
    names = ", ".join(f"output {i} ({labels.get(i, '?')})" for i in sorted(zeroed))
    return (f"{names} must start at zero (atomics, or CompilerParams(zero_outputs=...)), "
            f"and {via}",
            "pass a zero-filled array as an input and alias it to that output "
            "(pallas_call(..., input_output_aliases={INPUT_INDEX: OUTPUT_INDEX}))")
  scratch = int((kernel.metadata.get("global_scratch_size") or 0) if kernel else 0)
  if scratch:
    return (f"the kernel needs {scratch} bytes of global scratch, which XLA's Triton "
            "custom call does not allocate on ROCm",
            "simplify the kernel (scratch comes from device-side tensor descriptors or "
            "Triton's own lowering of some operations), or run it on the CPU or an NVIDIA GPU")
  return None


def launch(ctx, in_nodes, gk: GeneratedKernel, zeroed, *, aliases, error, metadata: str = "",
           debug: bool = False, tma_asked_at=None):
  """The kernel's custom call on ROCm; `error(reason, hint)` makes the exception raised
  where the kernel cannot run there (pallas_call_rule's LoweringError at the user's line).
  `tma_asked_at`: the user's line of a call that asked for TMA, which is NVIDIA's."""
  if tma_asked_at is not None:
    warnings.warn_explicit(f"kernel `{gk.name}`: TMA is NVIDIA's (sm_90 or newer); on ROCm "
                           "every access stays a plain one (same results)", TmaFallbackWarning,
                           tma_asked_at.file or "an unknown line", tma_asked_at.line or 0)
  kernel = None
  if refusal(gk, zeroed) is None:
    arch = gfx_arch()
    try:
      kernel = compile_for_gfx(gk, arch)
    except CompileError as e:
      raise _at_the_call(e, arch, error) from None
    except Exception as e:  # noqa: BLE001 - pallas-prof's own failure, with the kernel and arch
      raise error(f"the kernel could not be compiled for AMD {arch}: "
                  f"{type(e).__name__}: {str(e).strip()[:500]}",
                  "`pallas-prof show KERNEL` prints the generated code; the same kernel on "
                  "the CPU (JAX_PLATFORMS=cpu) tells the kernel's faults from the AMD "
                  f"backend's ({NOT_CHECKED})") from e
  refused = refusal(gk, zeroed, kernel)
  if refused is not None:
    raise error(*refused)
  try:
    return custom_call(ctx, in_nodes, gk, kernel, input_output_aliases=aliases,
                       metadata=metadata, debug=debug)
  except UnreadableIR as e:
    raise error(str(e), "use the triton release this jaxlib's Triton matches (the one JAX "
                "names for its own Triton backend), or run on the CPU") from e


def _at_the_call(e: CompileError, arch: str, error) -> CompileError:
  """The compile's error with the arch it was for and, where it names no equation of the
  kernel (a pass of Triton's failed, the worker died), the user's pallas_call line."""
  details = {"target": f"AMD {arch}, for XLA's Triton custom call on ROCm ({NOT_CHECKED})"}
  if e.eqn is None:
    call = error(e.reason, e.hint).eqn         # the LoweringError's: at the pallas_call
    if call is not None and call.file is not None:
      details["pallas_call"] = f"{call.file}:{call.line}"
  return e.with_details(details)


def custom_call(ctx, in_nodes, gk: GeneratedKernel, kernel: AmdKernel, *,
                input_output_aliases, metadata: str = "", debug: bool = False):
  """XLA's Triton custom call of `kernel`, as JAX's built-in backend emits it."""
  ir = compat.ir()
  i32 = ir.IntegerType.get_signless(32)
  gx, gy, gz = gk.launch_grid
  config: dict[str, Any] = dict(
      name=ir.StringAttr.get(kernel.name), ir=ir.StringAttr.get(ttir_bytecode(kernel)),
      num_stages=ir.IntegerAttr.get(i32, gk.num_stages),
      num_warps=ir.IntegerAttr.get(i32, gk.num_warps),
      grid_x=ir.IntegerAttr.get(i32, gx), grid_y=ir.IntegerAttr.get(i32, gy),
      grid_z=ir.IntegerAttr.get(i32, gz), debug=ir.BoolAttr.get(bool(debug)))
  if metadata:
    config["serialized_metadata"] = ir.StringAttr.get(metadata)
  layouts = lambda avals: [list(reversed(range(len(a.shape)))) for a in avals]  # noqa: E731
  return compat.custom_call(
      call_target_name=XLA_TRITON_TARGET,
      result_types=[compat.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out],
      operands=list(in_nodes), backend_config=config, api_version=XLA_TRITON_API_VERSION,
      operand_layouts=layouts(ctx.avals_in), result_layouts=layouts(ctx.avals_out),
      operand_output_aliases=dict(input_output_aliases)).results

