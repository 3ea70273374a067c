"""pallas-prof: a Pallas GPU backend you can see into.

    import pallas_prof
    pallas_prof.install()            # every Triton-style pl.pallas_call now goes through pallas-prof
    with pallas_prof.tracing():      # OpenTelemetry spans for every lowering rule and compile stage
        ...

or per call: pl.pallas_call(kernel, ..., compiler_params=pallas_prof.CompilerParams(num_warps=4)).
"""
from __future__ import annotations

from . import settings as _settings
from .version import __version__  # noqa: E402,F401
from .import_errors import PallasProfImportError, reported as _reported  # noqa: E402,F401

with _reported("pallas_prof"):      # the real cause and the versions found, if it fails
  from .backend import CompileError, CompilerParams, LoweringError, install, installed, uninstall
  from .backend import hooks as _hooks, pallas_call_rule as _pallas_call_rule
  from .backend.running.bounds_errors import BoundsError
  from .backend.running.runtime_errors import KernelRuntimeError
  from .backend.lowering.coverage import UncoveredOutputWarning
  _pallas_call_rule._ensure_registered()


class _Tuner(_hooks.Selector):
  """The compile the GPU path launches, as tuning asks (CompilerParams(autotune=...),
  PALLAS_PROF_AUTOTUNE=1, PALLAS_PROF_TUNED): pallas_prof/tune/params.py, imported on
  the first GPU lowering (or by the warm-up thread before it), not with pallas_prof."""

  def prepare(self):
    from .tune import params  # noqa: F401

  def select(self, *args, **kwargs):
    from .tune.params import select
    return select(*args, **kwargs)


_hooks.set_selector(_Tuner())

if _settings.value("PALLAS_PROF_TRACE"):
  from .instrument import enable_from_env as _enable_from_env
  _enable_from_env()      # spans for the whole process, exported at exit


def tracing(*args, **kwargs):
  """Context manager / decorator that records OpenTelemetry spans (see pallas_prof.instrument)."""
  from .instrument import tracing as _tracing
  return _tracing(*args, **kwargs)


def profile(*args, **kwargs):
  """Replays and times the kernels this process compiled (see pallas_prof.profiler)."""
  from .profiler import profile as _profile
  return _profile(*args, **kwargs)


def autotune(configs, key=(), **kwargs):
  """Decorator: the fastest of `configs` (keyword arguments of the function, the first
  the default) per distinct `key`, cached on disk (see pallas_prof.tune.blocks)."""
  from .tune import autotune as _autotune
  return _autotune(configs, key, **kwargs)


def advise(*args, **kwargs):
  """What to change in each kernel of this process, and on a GPU what it saves, measured
  (see pallas_prof.advice.api.advise)."""
  from .advice import advise as _advise
  return _advise(*args, **kwargs)


def __getattr__(name):
  if name == "Autotune":     # CompilerParams(autotune=pallas_prof.Autotune(configs=..., budget_s=...))
    with _reported("pallas_prof.tune.params"):
      from .tune.params import Autotune
    return Autotune
  if name == "ProbeOptions":  # profile(probes=pallas_prof.ProbeOptions(max_programs=..., max_warps=...))
    with _reported("pallas_prof.backend.lowering.features.probes"):
      from .backend.lowering.features.probes import ProbeOptions
    return ProbeOptions
  raise AttributeError(f"module 'pallas_prof' has no attribute {name!r}")


def kernels():
  """The kernels this process lowered (pallas_prof.backend.kernel_registry records)."""
  from .backend import kernel_registry
  return kernel_registry.kernels()


__all__ = ["CompilerParams", "LoweringError", "CompileError", "BoundsError",
           "KernelRuntimeError", "UncoveredOutputWarning", "install",
           "installed", "uninstall", "tracing", "profile", "autotune", "advise", "Autotune",
           "ProbeOptions",
           "kernels",
           "__version__"]
