"""What both tuners share in choosing (tune/params.py for compiler parameters,
tune/blocks.py for a function's own): the default stays unless another config is
faster by more than the noise, a config counts only if its outputs equal the
default's, and where choices are kept on disk."""
from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np

from .. import serial
from ..backend import cache_files

# a config replaces the default only when faster by more than this: timing noise
# (a few percent between runs on the H200) must not pick a config that is no faster
MIN_GAIN = 0.02


def keep_default_within(default, timed: list, seconds: Callable, min_gain: float):
  """The fastest of `timed`, or `default` (if timed) unless that one beats it by more
  than min_gain of the default's time."""
  best = min(timed, key=seconds)
  if default in timed and seconds(best) > seconds(default) * (1.0 - min_gain):
    return default
  return best


def cache_path(digest: str) -> str:
  return os.path.join(cache_files.root(), "tune", f"{digest}.json")


def store(path: str, record) -> str | None:
  """Keeps a tuning choice, a serial.Saved record (the one way a tuning cache file is
  written), in the cache, whole or not at all, in an owner-only folder (the process's
  stand-in cache where the cache folder cannot be written: cache_files.write).
  Returns the path written; None where no folder at all could take it (the choice then
  lives as long as the process: the next one tunes again)."""
  try:
    return cache_files.write(path, serial.to_json(record, indent=1))
  except OSError:
    return None


def leaves(out) -> list[np.ndarray]:
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


# The unit roundoff of what a dot multiplies, where coarser than float32: TF32 keeps 10 of
# float32's 23 mantissa bits, bfloat16 7, float16 10. A variant may round other values at
# that precision (attention's probabilities, taken against another running maximum, are
# rounded to TF32 for `p @ v`): the H200 saw a block_k change move 4 of 10,485,760 float32
# attention outputs by more than 1e-4 of the largest, each by a few of these units.
_DOT_INPUT_ROUNDOFF = {"tf32": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
_ROUNDINGS_ALLOWED = 4        # a product rounded in each variant, and the sum's own


def dot_rtol(dots) -> float:
  """The rtol (of the output's largest magnitude) float32 outputs take where the kernel's
  dots (backend DotFacts) round their inputs coarser than float32: a few units of the
  coarsest such rounding; 0.0 where every dot multiplies float32 (or float64) exactly."""
  unit = 0.0
  for dot in dots:
    if dot is None:
      continue
    if dot.operand_dtype == "float32":   # None: Triton's default, TF32 on NVIDIA
      rounding = "tf32" if dot.precision in (None, "tf32") else dot.precision
    else:
      rounding = dot.operand_dtype
    unit = max(unit, _DOT_INPUT_ROUNDOFF.get(rounding, 0.0))
  return _ROUNDINGS_ALLOWED * unit


def kernel_dot_rtol(kernels) -> float:
  """dot_rtol over the dots of these GeneratedKernels (None ones skipped)."""
  return dot_rtol(e.dot for gk in kernels if gk is not None for e in gk.eqns)


def _tolerance(dtype, dot_rtol_: float = 0.0) -> tuple[float, float]:
  """(rtol, atol) for outputs that may differ in a reduction's order: rtol of the
  output's largest magnitude (a sum in another order moves every element by about
  the rounding of the largest partial sums, not of the element itself); at least
  `dot_rtol_` for outputs of 32 bits or more (dot_rtol: the kernel's dots round coarser)."""
  dtype = np.dtype(dtype)
  if dtype.kind in "iub":
    return 0.0, 0.0
  if dtype.itemsize <= 2:        # as JAX's own tests compare 16-bit attention outputs
    return 2e-2, 1e-6
  if dtype.itemsize == 4:
    return max(1e-4, dot_rtol_), 1e-12
  return max(1e-10, dot_rtol_), 1e-300


def same_outputs(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                 dot_rtol: float = 0.0) -> str | None:
  """None when the outputs match (bit for bit for integers and booleans; floats to
  _tolerance's, with `dot_rtol` for a kernel whose dots round coarser than float32);
  else what differs."""
  if len(got) != len(want):
    return f"{len(got)} outputs, the default gives {len(want)}"
  for i, (g, w) in enumerate(zip(got, want, strict=True)):
    if g.shape != w.shape or g.dtype != w.dtype:
      return f"output {i}: {g.dtype}{list(g.shape)}, the default gives {w.dtype}{list(w.shape)}"
    rtol, atol = _tolerance(g.dtype, dot_rtol)
    if rtol == 0.0:
      bad = int(np.sum(g != w))
    else:
      g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
      finite = np.isfinite(w64)
      scale = float(np.max(np.abs(w64[finite]))) if finite.any() else 0.0
      same_nonfinite = (~finite) & ((g64 == w64) | (np.isnan(g64) & np.isnan(w64)))
      bad = int(np.sum(~((np.abs(g64 - w64) <= atol + rtol * scale) | same_nonfinite)))
    if bad and rtol:
      return (f"output {i}: {bad} of {g.size} elements differ from the default's by more "
              f"than {rtol:.2g} of its largest magnitude")
    if bad:
      return f"output {i}: {bad} of {g.size} elements differ from the default's"
  return None
