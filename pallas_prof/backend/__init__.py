"""From a Pallas kernel's jaxpr to a running Triton kernel. Knows nothing of OpenTelemetry."""
from .errors import LoweringError, Unsupported
from .registration import CompilerParams, install, installed, uninstall

__all__ = ["CompilerParams", "LoweringError", "Unsupported", "install", "installed", "uninstall"]
