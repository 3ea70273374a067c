"""Telling GPUs apart in an in-situ capture.

With more than one GPU, in-situ capture asks Proton for a trace rather than a
tree: Proton's tree (triton 3.6) merges a kernel's launches on every device
into one node with a single device id (seen on two H200s: 4 launches, 2 per
GPU, reported as 4 on GPU 1). Its Chrome-trace output keeps every launch, as
one JSON document per CUDA stream, which does not say which device the stream
belongs to.

So, before the capture ends, pallas-prof marks XLA's streams: through JAX (so
on the very streams XLA launches the program's kernels on) it runs a tiny
kernel, `pallas_prof_device_marker`, exactly d + 1 times on GPU d. A stream
whose document holds k marker launches belongs to GPU k - 1; launches on
streams without marks are counted but attributed to no device (the report
says so). The marker records are dropped from the registry and the counts.
"""
from __future__ import annotations

import sys

from ...backend import kernel_registry

NAME = "pallas_prof_device_marker"


def marks_for(device: int) -> int:
  """Marker launches on GPU `device`."""
  return device + 1


def device_of_document(marker_launches: int, device_count: int) -> int | None:
  """The GPU a Proton trace document (a stream) belongs to, from its marker launches."""
  device = marker_launches - 1
  return device if 0 <= device < device_count else None


def mark_jax_devices() -> str:
  """Runs the marker on each of JAX's GPUs; '' when done, else why not."""
  if "jax" not in sys.modules:
    return "the program did not use JAX"
  # lazy: keeps jax and numpy out of this module's import (start-up time)
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.experimental import pallas as pl

  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ...backend.pallas_call_rule import CompilerParams
  from ...backend import compat
  if not compat.backends_initialized():
    return "JAX never started a backend"
  gpus = [d for d in jax.devices() if d.platform == "gpu"]
  if not gpus:
    return "JAX has no GPU"

  def marker(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  call = jax.jit(pl.pallas_call(marker, out_shape=jax.ShapeDtypeStruct((16,), jnp.int32),
                                name=NAME, compiler_params=CompilerParams(num_warps=1)))
  try:
    for device in gpus:
      x = jax.device_put(np.zeros(16, np.int32), device)
      for _ in range(marks_for(getattr(device, "local_hardware_id", None) or device.id)):
        call(x).block_until_ready()
  finally:
    kernel_registry.forget(NAME)
  return ""
