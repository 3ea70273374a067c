"""How a lowered pallas_call runs, by platform: on the CPU the kernel under Triton's
interpreter in a host callback; on CUDA the compiled kernel (or a workaround's, or the
tuner's choice) in jaxlib's Triton custom call; on ROCm XLA's Triton call of its Triton
IR; and, in the bounds-checked mode, the host callback after the kernel that reads its
flag buffer.

`call` is the lowering's PallasCall (lowering/pallas_call.py), `rec` the kernel's registry
record (kernel_registry.KernelRecord).
"""
from __future__ import annotations

import functools
import json

import jax

from .. import compat, hooks
from ..compiling import triton_compat
from ..compiling.compile import compile_kernel
from ..compiling.failures.workarounds import compile_working_around
from . import bounds_errors, rocm
from .launch import check_avals, cpu_call, gpu_custom_call


def interpreted(ctx, in_nodes, rec, call):
  """The CPU path: the kernel under Triton's interpreter, in a host callback."""
  gk = rec.generated

  def on_launch(rec=rec):
    rec.launches += 1
  fn = cpu_call(gk, ctx.avals_out, call.aliases, on_launch, poison=gk.check_bounds)
  after = _after_kernel(gk)
  if after is not None:
    fn = lambda *args, call=fn: after(call(*args))   # noqa: E731
  return compat.lower_fun(fn, multiple_results=True)(ctx, *in_nodes)


def compiled_for_gpu(rec, call, cp, zeroed, tuned: bool):
  """The CompiledKernel the GPU launches: the kernel, or where Triton fails on it
  another lowering of it; then the selector's choice (hooks.selector(): the tuner's) unless
  `tuned` is false (tuning the bounds-checked debug build would time the checks)."""
  gk = rec.generated
  target = ("cuda", gk.options.compute_capability)
  # jaxlib assembles the PTX
  ck = compile_working_around(gk, target, rec.relower, need_cubin=False)
  if not tuned:
    return ck
  # a cached choice: jaxlib assembles the PTX, as for the default
  return hooks.selector().select(ck, ck.generated or gk, cp, call.lower, target,
                                 compile_fn=lambda g: compile_kernel(g, target, need_cubin=False),
                                 aliases=call.aliases, zeroed=tuple(sorted(zeroed)))


def rocm_arch_without_tf32_dots() -> str | None:
  """The gfx arch the ROCm path compiles for (rocm.gfx_arch) where Triton's backend for it
  takes no tf32 dot (its allowed_dot_input_precisions), else None. None too where Triton
  cannot answer (no AMD backend, an arch name it cannot parse): the gfx compile that
  follows then fails the usual way, at the user's line, with the arch named."""
  arch = rocm.gfx_arch()
  try:
    precisions = triton_compat.hip_dot_input_precisions(arch)
  except Exception:  # noqa: BLE001 - asked again, and reported, by the compile
    return None
  return None if "tf32" in precisions else arch


def launch_on_rocm(ctx, in_nodes, call, gk, zeroed, params):
  """The ROCm path: XLA's Triton custom call of the kernel's Triton IR, as JAX's built-in
  backend emits it (running/rocm.py); what that call cannot run is refused at the call."""
  return rocm.launch(ctx, in_nodes, gk, zeroed, aliases=call.aliases, error=call.error,
                     metadata=_metadata_json(params.get("metadata")),
                     debug=bool(params.get("debug")),
                     tma_asked_at=call.site(gk.name) if getattr(
                         params.get("compiler_params"), "tma", None) else None)


def _metadata_json(metadata) -> str:
  if not metadata:
    return ""
  return json.dumps(dict(metadata))


def custom_call(ctx, in_nodes, rec, call, zeroed, metadata):
  """The GPU path: jaxlib's Triton custom call of the compiled kernel."""
  gk = rec.generated
  results = gpu_custom_call(ctx, in_nodes, rec.compiled, input_output_aliases=call.aliases,
                            zeroed_outputs=tuple(sorted(zeroed)),
                            metadata=_metadata_json(metadata))
  # check mode: the outputs started poisoned (gpu_custom_call aliases them to
  # poisoned starting values), as the interpreter's do
  after = _after_kernel(gk)
  if after is None:
    return results
  avals = list(ctx.avals_out) + check_avals(gk)
  return compat.lower_fun(lambda *r: after(r), multiple_results=True)(
      ctx.replace(avals_in=avals), *results)


def _after_kernel(gk):
  """Bounds-checked mode: a function of the kernel's results (the flag buffer
  last) that reads the flag back in a host callback raising BoundsError.
  None when there is nothing to do (check mode off)."""
  if not any(p.role == "check" for p in gk.params):
    return None
  raise_if = functools.partial(bounds_errors.raise_if_violated, sites=gk.bounds_sites,
                               kernel_name=gk.name, eqns=tuple(gk.eqns),
                               jaxpr_text=gk.jaxpr_text, ref_names=gk.ref_names)

  def after(results):
    results = list(results)
    jax.debug.callback(raise_if, results.pop())
    return results

  return after
