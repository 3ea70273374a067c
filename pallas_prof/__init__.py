"""pallas-prof: a Pallas GPU backend you can see into.

    import pallas_prof
    pallas_prof.install()            # every Triton-style pl.pallas_call now goes through pallas-prof
    with pallas_prof.tracing():      # OpenTelemetry spans for every lowering rule and compile stage
        ...

or per call: pl.pallas_call(kernel, ..., compiler_params=pallas_prof.CompilerParams(num_warps=4)).

The names above live in pallas_prof/api.py, loaded on the first use of any of them: it
imports JAX and Triton, which the CLI's commands that only read a saved run do not need,
and every module of the package, the CLI's among them, is imported through this one.
"""
from __future__ import annotations

from . import settings as _settings
from .version import __version__  # noqa: F401
from .import_errors import PallasProfImportError  # noqa: F401
from .backend import hooks as _hooks      # the standard library only: no JAX


class _Tuner(_hooks.Selector):
  """The compile the GPU path launches, as tuning asks (CompilerParams(autotune=...),
  PALLAS_PROF_AUTOTUNE=1, PALLAS_PROF_TUNED): pallas_prof/tune/params.py, imported on
  the first GPU lowering (or by the warm-up thread before it), not with pallas_prof."""

  def prepare(self):
    from .tune import params  # noqa: F401

  def select(self, *args, **kwargs):
    # lazy: at the top it would load numpy whenever this module is imported
    from .tune.params import select
    return select(*args, **kwargs)


# set here, not in api.py: a program may reach the backend through pallas_prof.backend alone
_hooks.set_selector(_Tuner())

# how a ProfileReport prints itself (the profiler imports no view: profiler/presentation.py);
# profile_view imports nothing heavy until a report is drawn
from .profiler import presentation as _presentation  # noqa: E402
from .cli.terminal import profile_view as _profile_view  # noqa: E402
_presentation.set_view(_profile_view)

__all__ = ["CompilerParams", "KernelError", "LoweringError", "CompileError", "BoundsError",
           "KernelRuntimeError", "UncoveredOutputWarning", "RevisitedOutputWarning", "install",
           "installed", "uninstall", "tracing", "profile", "autotune", "advise", "Autotune",
           "ProbeOptions",
           "kernels", "compile_for",
           "__version__"]


def _api():
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from . import api
  return api


def __getattr__(name: str):
  if name in __all__:
    return getattr(_api(), name)
  raise AttributeError(f"module 'pallas_prof' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(__all__))


if _settings.value("PALLAS_PROF_TRACE"):
  _api()                  # as before the API was loaded lazily: the backend, then the spans
  from .instrument import enable_from_env as _enable_from_env
  _enable_from_env()      # spans for the whole process, exported at exit
