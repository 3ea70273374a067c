"""Tuning: the fastest of several configs of a Pallas program, chosen by measurement.

blocks.py tunes a function's own parameters (block sizes, warps, splits) by timing
whole calls: `pallas_prof.autotune(configs=[...], key=[...])`.

Its names are loaded on first use (PEP 562): blocks.py imports NumPy, and `pallas-prof
--help` imports this package for the parser of `pallas-prof tune` (cli.py).
"""
__all__ = ["Candidate", "Tuning", "TuningError", "autotune", "same_outputs", "tune"]


def __getattr__(name: str):
  if name not in __all__:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  # lazy: at the top it would load numpy whenever this module is imported
  from . import blocks
  return getattr(blocks, name)
