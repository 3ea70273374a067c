"""From a Pallas kernel's jaxpr to a running Triton kernel. Knows nothing of OpenTelemetry.

The registration (and with it JAX) is imported on first use, not with the
package: the profiler's child processes load artifacts.py (a LaunchSpec)
with no JAX in the process.
"""
from .errors import LoweringError, Unsupported

__all__ = ["CompilerParams", "LoweringError", "Unsupported", "install", "installed", "uninstall"]

_REGISTRATION = ("CompilerParams", "install", "installed", "uninstall")


def __getattr__(name: str):
  if name in _REGISTRATION:
    from . import registration
    return getattr(registration, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
