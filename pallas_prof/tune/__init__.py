"""Tuning: the fastest of several configs of a Pallas program, chosen by measurement.

blocks.py tunes a function's own parameters (block sizes, warps, splits) by timing
whole calls: `pallas_prof.autotune(configs=[...], key=[...])`.
"""
from .blocks import Candidate, Tuning, TuningError, autotune, same_outputs, tune

__all__ = ["Candidate", "Tuning", "TuningError", "autotune", "same_outputs", "tune"]
