"""Plugging pallas-prof into pl.pallas_call.

Importing this module (which pallas_prof.CompilerParams and pallas_prof.install do)
registers one lowering rule for pallas_call on CPU, CUDA and ROCm (running/rocm.py).
The rule lowers with pallas-prof when the call asks for it
(`compiler_params=pallas_prof.CompilerParams(...)`) or when `install()` is in
effect (then also for JAX's own Triton CompilerParams and for calls without
params); everything else (interpret=True, Mosaic GPU params) goes to JAX's own
rule unchanged. `uninstall()` ends the takeover.

This module routes: which rule lowers a call (pallas-prof's, JAX's own, JAX's built-in
Triton backend for comparison), the takeover's switches, and the steps of pallas-prof's
rule, the one place that ties backend/'s rooms together. The steps are elsewhere: what the
call asks (compiler_params.py), the call read from its equation and lowered
(lowering/pallas_call.py), and how the kernel then runs on each platform
(running/platform_paths.py).
"""
from __future__ import annotations

import functools
import os
import warnings

import jax

from .. import settings
from . import builtin_triton, compat, kernel_registry, triton_primitives
from .compiler_params import CompilerParams, lowering_options, num_warps_stages
from .compiling.warmup import start_warmup
from .equation_text import Aval
from .lowering import coverage
from .lowering.features import bounds
from .lowering.lower import kernel_name_of
from .lowering.pallas_call import PallasCall
from .running import platform_paths, runtime_errors, xla_names
from .running.launch import no_programs
from .tma_note import TmaFallbackWarning

_takeover = {"active": False}


def install(check_bounds: bool | None = None) -> None:
  """Routes every Triton-style pallas_call (GPU and CPU) through pallas-prof.

  `check_bounds=True`: the bounds-checked debug mode (also PALLAS_PROF_CHECK=bounds):
  every load and store checks its indices against its ref, an access outside
  raises BoundsError (after the kernel, naming the equation and your line)
  instead of reading or writing past the buffer, and outputs start poisoned
  (NaN, or all ones) so elements nothing writes show up. Slower; for debugging.

  A PALLAS_PROF_* variable with a value pallas-prof cannot use is said here, at your line
  (pallas_prof/settings.py), and goes on as if unset."""
  settings.warn_about_environment()
  _ensure_registered()
  _takeover["active"] = True
  if check_bounds is not None:
    bounds.set_check_bounds(bool(check_bounds))
  # asking JAX for devices creates its backends, after which the user's program can no
  # longer call jax.distributed.initialize(): before that, NVML says what the GPU is,
  # asked in the warm-up's thread (NVML's start is the driver's: install() need not wait)
  start_warmup(compat.gpu_compute_capability() if compat.backends_initialized()
               else _nvml_capability)


def _nvml_capability() -> int | None:
  """The first GPU's compute capability through NVML (read-only; JAX untouched), or None."""
  try:
    # lazy: keeps pynvml out of this module's import (start-up time)
    import pynvml
    pynvml.nvmlInit()
  except Exception:  # noqa: BLE001 - no NVML, no GPU: no warm-up
    return None
  try:
    if pynvml.nvmlDeviceGetCount() < 1:
      return None
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(0))
    return int(major) * 10 + int(minor)
  except Exception:  # noqa: BLE001
    return None
  finally:
    try:
      pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
      pass


def uninstall() -> None:
  """Restores JAX's own Pallas backends for calls that did not ask for pallas-prof (on a
  JAX without its Triton backend, a GPU call that would have gone there says so)."""
  _takeover["active"] = False


def installed() -> bool:
  return _takeover["active"]


_registered = {"done": False}
_compare_with_builtin = {"active": False}


def route_to_builtin(active: bool) -> None:
  """Benchmarking aid: send every Triton-style call, pallas-prof's own
  CompilerParams included, to JAX's built-in Triton backend (same num_warps
  and num_stages), to compare the two on the same program. A RuntimeError
  where this JAX has no such backend."""
  if active:
    _builtin_triton("route_to_builtin(True)")
  _compare_with_builtin["active"] = active


def _builtin_triton(what: str):
  """(CompilerParams class, pallas_call lowering) of JAX's own Triton backend, or an error
  saying that this JAX has none."""
  builtin = builtin_triton.lowering(triton_primitives)
  if builtin is None:
    raise RuntimeError(
        f"{what} needs JAX's built-in Pallas Triton backend, which this JAX does not have "
        f"(jax {jax.__version__}: jax._src.pallas.triton cannot be imported; JAX "
        "deprecated it in 0.11). pallas-prof itself does not need it: pass "
        "compiler_params=pallas_prof.CompilerParams(...) or call pallas_prof.install()")
  return builtin


def _lower_with_builtin(ctx, in_nodes, params, platform: str = "cuda"):
  cp = params.get("compiler_params")
  options = lowering_options(cp, platform) if platform == "rocm" else None
  warps, stages = (options.num_warps, options.num_stages) if options else num_warps_stages(cp)
  params_cls, lowering = _builtin_triton("comparing with JAX's built-in backend")
  params = dict(params, compiler_params=params_cls(num_warps=warps, num_stages=stages))
  return lowering(ctx, *in_nodes, **params)


def _ensure_registered() -> None:
  if _registered["done"]:
    return
  compat.register_platform_lowering(compat.pallas_call_p, _lower_cpu, "cpu")
  compat.register_platform_lowering(compat.pallas_call_p, _lower_cuda, "cuda")
  compat.register_platform_lowering(compat.pallas_call_p, _lower_rocm, "rocm")
  compat.register_backend_lowering_rule(CompilerParams, _lower_cuda_explicit, "gpu")
  # the lowering's frames are not the user's: out of JAX's filtered tracebacks
  compat.hide_frames_in_tracebacks(os.path.dirname(os.path.abspath(__file__)))
  # a kernel's failure in a host callback reaches the caller as itself
  runtime_errors.install()
  _registered["done"] = True


def _wants_us(params: dict) -> bool:
  if params.get("interpret"):
    return False
  cp = params.get("compiler_params")
  if isinstance(cp, CompilerParams):
    return True
  if not _takeover["active"]:
    return False
  if cp is None:
    return params.get("mesh") is None
  return _is_builtin_triton_params(cp)


def _is_builtin_triton_params(cp) -> bool:
  builtin = builtin_triton.compiler_params_class()      # None: JAX's never imported
  return builtin is not None and isinstance(cp, builtin)


def _lower(ctx, in_nodes, params, platform: str):
  # an AMD GPU without TF32 dots: a float32 dot that allows TF32 multiplies in float32 there
  call = PallasCall.of(params, platform, platform_paths.rocm_arch_without_tf32_dots()
                       if platform == "rocm" else None)
  _refuse_unsupported(call, params)
  cp = params.get("compiler_params")
  check = bounds.check_bounds_enabled()
  options = lowering_options(cp, platform, check, debug=bool(params.get("debug")))
  gk = call.lower(options)
  uncovered, revisited = _warn_about(call, gk)
  rec = kernel_registry.record(kernel_registry.KernelRecord(
      name=gk.name, generated=gk, platform=platform,
      in_avals=tuple(map(Aval.of, ctx.avals_in)), out_avals=tuple(map(Aval.of, ctx.avals_out)),
      input_output_aliases=call.aliases, cost_estimate=params.get("cost_estimate"),
      uncovered_outputs=tuple(uncovered), revisited_outputs=tuple(revisited),
      relower=call.relowerer(options)))
  if platform == "cpu" or check:
    runtime_errors.callbacks_lowered()      # its failures come back through a host callback
  scope = xla_names.scope_name(rec.label, call.site(gk.name))
  if platform == "cpu":
    return platform_paths.interpreted(xla_names.named(ctx, scope), in_nodes, rec, call)
  if 0 in gk.launch_grid:     # no program to run: CUDA refuses a launch of none
    return compat.lower_fun(no_programs(ctx.avals_out, call.aliases, poison=check),
                            multiple_results=True)(ctx, *in_nodes)
  zeroed = set(getattr(cp, "zero_outputs", ()) or ()) | set(gk.zeroed_outputs(call.aliases))
  with xla_names.located(ctx, scope):      # XProf names the kernel's op as the report does
    if platform == "rocm":
      return platform_paths.launch_on_rocm(ctx, in_nodes, call, gk, zeroed, params)
    rec.compiled = platform_paths.compiled_for_gpu(rec, call, cp, zeroed, tuned=not check)
    return platform_paths.custom_call(ctx, in_nodes, rec, call, zeroed,
                                      params.get("metadata"))


def _refuse_unsupported(call: PallasCall, params: dict) -> None:
  """What the call as a whole asks for that pallas-prof does not lower."""
  if params.get("mesh") is not None:
    raise call.error("pallas_call with a mesh", "use a grid instead of a mesh")
  if call.jaxpr.constvars:
    raise call.error("the kernel closes over array constants",
                     "pass arrays as pallas_call inputs")


def _warn_about(call: PallasCall, gk) -> tuple[list, list]:
  """Warnings at the user's line: loads TMA was asked for and could not serve, outputs
  with elements no program writes, output blocks several programs read and write. Returns
  those outputs (coverage.UncoveredOutput, coverage.RevisitedOutput)."""
  if gk.tma_notes:
    warn_tma_fallbacks(gk)
  labels = [p.label for p in gk.params if p.role in ("input", "output")]
  uncovered = coverage.uncovered_outputs(call.grid_mapping, gk.grid, labels, call.aliases)
  if uncovered:
    coverage.warn_uncovered(uncovered, gk.name, call.site(gk.name))
  revisited = coverage.revisited_outputs(call.grid_mapping, gk.grid, labels,
                                         functools.partial(_first_read, gk))
  if revisited:
    coverage.warn_revisited(revisited, gk.name, call.site(gk.name))
  return uncovered, revisited


# the equations that read a ref's memory and use what they read (an atomic's read is its
# own: concurrent atomics are how programs share a block)
_PLAIN_READS = frozenset({"get", "masked_load", "addupdate"})


def _first_read(gk, label: str) -> tuple[str | None, int | None] | None:
  """Where the kernel first reads ref `label` (its file and line), None where it does not."""
  for e in gk.eqns:
    if e.primitive in _PLAIN_READS and e.operand == label and not e.region.startswith(
        "index_map"):
      return (e.file, e.line)
  return None


def warn_tma_fallbacks(gk) -> None:
  """One warning per load that TMA was asked for and could not serve, at the user's line."""
  for note in gk.tma_notes:
    warnings.warn_explicit(f"kernel `{gk.name}`: TMA not used for {note}; that access stays "
                           "a plain one (same results)", TmaFallbackWarning,
                           note.file or "an unknown line", note.line or 0)


def _delegate(ctx, in_nodes, params):
  if params.get("interpret"):
    _note_interpreted_by_jax(params)
  return compat.default_pallas_call_lowering()(ctx, *in_nodes, **params)


def _note_interpreted_by_jax(params: dict) -> None:
  """Keeps the kernel's name and the user's line of a call JAX's interpreter runs, for the
  run to say why it is missing. What JAX does is left as it is: a call this cannot
  describe goes unsaid rather than fail the user's program."""
  try:
    call = PallasCall.of(params, "cpu")
    site = call.site()
    where = f"{site.file}:{site.line}" if site.file else "an unknown line"
    kernel_registry.note_interpreted_by_jax(kernel_name_of(call.jaxpr, call.name), where)
  except Exception:  # noqa: BLE001 - a note, never the user's failure
    pass


def _lower_cpu(ctx, *in_nodes, **params):
  if not _wants_us(params):
    return _delegate(ctx, in_nodes, params)
  return _lower(ctx, in_nodes, params, "cpu")


def _lower_cuda(ctx, *in_nodes, **params):
  return _lower_gpu(ctx, in_nodes, params, "cuda")


def _lower_rocm(ctx, *in_nodes, **params):
  return _lower_gpu(ctx, in_nodes, params, "rocm")


def _lower_gpu(ctx, in_nodes, params, platform: str):
  if _compare_with_builtin["active"] and not params.get("interpret") and _is_triton_style(params):
    return _lower_with_builtin(ctx, in_nodes, params, platform)
  if not _wants_us(params):
    try:
      return _delegate(ctx, in_nodes, params)
    except Exception:
      # a plain call after uninstall() on a JAX without its Triton backend: say so
      # rather than JAX's words (which ask for a GPU jaxlib)
      if (params.get("compiler_params") is None and not params.get("interpret")
          and builtin_triton.lowering() is None):
        _builtin_triton("a pl.pallas_call without compiler_params, pallas-prof not installed,")
      raise
  return _lower(ctx, in_nodes, params, platform)


def _lower_cuda_explicit(ctx, *in_nodes, **params):
  if _compare_with_builtin["active"]:
    return _lower_with_builtin(ctx, in_nodes, params)
  return _lower(ctx, in_nodes, params, "cuda")


def _is_triton_style(params: dict) -> bool:
  cp = params.get("compiler_params")
  if cp is None or isinstance(cp, CompilerParams):
    return params.get("mesh") is None
  return _is_builtin_triton_params(cp)


# JAX knows the rule as soon as CompilerParams can be had, by whichever import: the package
# used to register it when imported, but it no longer imports this module (JAX is heavy)
_ensure_registered()
