"""The public API behind `pallas_prof.install`, `pallas_prof.CompilerParams`, ...: what
`import pallas_prof` loaded before it became light. pallas_prof/__init__.py imports this
module on the first use of one of its names (PEP 562), because it imports JAX and Triton
and the CLI's commands that only read a run (--help, show, report, diff) must not.
"""
from __future__ import annotations

import importlib

from .import_errors import reported as _reported

with _reported("pallas_prof"):      # the real cause and the versions found, if it fails
  from .backend import CompileError, CompilerParams, LoweringError, install, installed, uninstall
  from .backend.errors import KernelError
  from .backend.running.bounds_errors import BoundsError
  from .backend.running.runtime_errors import KernelRuntimeError
  from .backend.lowering.coverage import RevisitedOutputWarning, UncoveredOutputWarning
  from .backend import kernel_registry
  from .backend.targets import as_target
  from .backend.compiling import for_targets
  from .backend.lowering.features.probes import ProbeOptions
  from .tune.params import Autotune


def kernels():
  """The kernels this process lowered (pallas_prof.backend.kernel_registry records)."""
  return kernel_registry.kernels()


def compile_for(kernel, target, *, use_disk_cache: bool = True):
  """`kernel` compiled for another GPU than this process's: a TargetOutcome, compiled
  (`.figures()`: registers, spills, shared memory/LDS), refused (the kernel uses what
  the target lacks: `.error` at your line, with what to do) or failed (`.error`).

  kernel: a record of pallas_prof.kernels(), a GeneratedKernel, or a kernel's name or
  label ("softmax_kernel", "softmax_kernel#1f22e0") among those this process lowered.
  target: "sm_80", "gfx942", "cuda:80", a Target, or ("cuda", 80); an unknown one raises
  UnknownTarget (a ValueError) naming the nearest known target."""
  target = as_target(target)          # a typo is said before the kernel is looked for
  record = _kernel_record(kernel)
  gk, relower = (record.generated, record.relower) if hasattr(record, "generated") \
      else (record, None)
  return for_targets.compile_for(gk, target, relower=relower, use_disk_cache=use_disk_cache)


def _kernel_record(kernel):
  """A KernelRecord or GeneratedKernel as given; a name or label, the one record of
  this process's kernels it names."""
  if not isinstance(kernel, str):
    if not hasattr(kernel, "generated") and not hasattr(kernel, "eqns"):
      raise TypeError(f"compile_for takes a kernel of pallas_prof.kernels(), a "
                      f"GeneratedKernel or a kernel's name, not {type(kernel).__name__}")
    return kernel
  hits = kernel_registry.find(kernel)
  if len(hits) == 1:
    return hits[0]
  known = ", ".join(r.label for r in kernel_registry.kernels()) or "none yet"
  what = "several kernels: give a full label" if hits else "no kernel this process lowered"
  raise ValueError(f"compile_for: {kernel!r} names {what} (lowered: {known}); lower the "
                   "kernel first (call the function, or jax.jit(f).lower(*args))")


# The functions these names give live in modules that JAX alone does not need (the
# spans' OpenTelemetry, the profiler, advice, tuning): imported on first use (PEP 562),
# and given as they are, so that help() and inspect.signature show their own parameters.
_LOADED_ON_USE = {"tracing": ("pallas_prof.instrument.tracer", "tracing"),
                  "profile": ("pallas_prof.profiler.api", "profile"),
                  "advise": ("pallas_prof.advice.api", "advise"),
                  "autotune": ("pallas_prof.tune.blocks", "autotune")}


def __getattr__(name):
  if name in _LOADED_ON_USE:
    module, attribute = _LOADED_ON_USE[name]
    with _reported(module):
      return getattr(importlib.import_module(module), attribute)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CompilerParams", "KernelError", "LoweringError", "CompileError", "BoundsError",
           "KernelRuntimeError", "UncoveredOutputWarning", "RevisitedOutputWarning", "install",
           "installed", "uninstall", "tracing", "profile", "autotune", "advise", "Autotune",
           "ProbeOptions", "kernels", "compile_for"]
