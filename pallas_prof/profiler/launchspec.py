"""What the replay launches: a kernel's cubin, grid and parameters, serialisable
(the profiler's child processes, ncu and the sampler, load it from a directory)."""
from __future__ import annotations

import numpy as np

# One launch spec for the run directory, these child processes and eject: the
# backend's artifact (one save/load with a schema), its parameters the lowering's.
from ..backend.artifacts import KernelParam  # noqa: F401
from ..backend.running.launch_spec import LaunchSpec, ptx_param_count  # noqa: F401
from .driver import ProfilerError


def own_param(name: str, dtype: str, shape: tuple[int, ...], role: str, index: int) -> KernelParam:
  """A parameter of one of the profiler's own kernels (no lowering made it)."""
  return KernelParam(name=name, label=name, dtype=dtype, shape=tuple(shape), role=role,
                     index=index)


def np_dtype(name: str) -> np.dtype:
  """numpy dtype of a JAX dtype name; the narrow floats and ints (bfloat16, float8_*,
  int4) from ml_dtypes, which JAX's own dtypes are, so a child process needs no JAX."""
  try:
    return np.dtype(name)
  except TypeError:
    # lazy: keeps ml_dtypes out of this module's import (start-up time)
    import ml_dtypes
    try:
      return np.dtype(getattr(ml_dtypes, name))
    except AttributeError:
      raise ProfilerError(f"unknown dtype {name!r}") from None


def is_floating(dtype) -> bool:
  dtype = np.dtype(dtype)
  if dtype.kind in "fc":
    return dtype.kind == "f"
  # lazy: keeps ml_dtypes out of this module's import (start-up time)
  import ml_dtypes
  try:
    ml_dtypes.finfo(dtype)
    return True
  except (TypeError, ValueError):
    return False


def is_integer(dtype) -> bool:
  dtype = np.dtype(dtype)
  if dtype.kind in "iu":
    return True
  # lazy: keeps ml_dtypes out of this module's import (start-up time)
  import ml_dtypes
  try:
    ml_dtypes.iinfo(dtype)
    return True
  except (TypeError, ValueError):
    return False


