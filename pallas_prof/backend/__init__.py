"""From a Pallas kernel's jaxpr to a running Triton kernel. Knows nothing of OpenTelemetry.

Its rooms, along the data flow: lowering/ (jaxpr -> GeneratedKernel), compiling/
(-> CompiledKernel), running/ (the kernel inside the JAX program); none imports a room
downstream of it. What they share stays here (artifacts, errors, options, compat, hooks,
the kernel registry), and pallas_call_rule.py, the rule JAX calls, ties them together.

Nothing that imports JAX is imported with the package, only on first use: the
pallas_call rule, and the errors (LoweringError derives from a JAX exception class,
so that JAX shows it once, at the user's line). The profiler's child processes
load artifacts.py (a LaunchSpec) with no JAX in the process.
"""
import importlib

from ..import_errors import reported

__all__ = ["CompilerParams", "CompileError", "LoweringError", "Unsupported", "install",
           "installed", "uninstall"]

_LAZY = {"CompilerParams": "pallas_call_rule", "install": "pallas_call_rule",
         "installed": "pallas_call_rule", "uninstall": "pallas_call_rule",
         "LoweringError": "errors", "CompileError": "errors", "Unsupported": "errors"}


def __getattr__(name: str):
  module = _LAZY.get(name)
  if module is None:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  # an AttributeError from inside that import would reach the user as "cannot import
  # name {name!r}": reported() says what it was, and the versions found
  with reported(f"{__name__}.{module}"):
    loaded = importlib.import_module(f"{__name__}.{module}")
  return getattr(loaded, name)
