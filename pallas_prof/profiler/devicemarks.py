"""Telling GPUs apart in an in-situ capture.

With more than one GPU, in-situ capture asks Proton for a trace rather than a
tree: Proton's tree (triton 3.6) merges a kernel's launches on every device
into one node with a single device id (seen on two H200s: 4 launches, 2 per
GPU, reported as 4 on GPU 1). Its Chrome-trace output keeps every launch, but
as one JSON document per device that does not say which device it is.

So the capture marks the devices first: on device d it launches a tiny kernel,
`pallas_prof_device_marker`, exactly d + 1 times. The document holding k
marker launches is device k - 1; the markers are then dropped from the counts.
"""
from __future__ import annotations

import functools

import numpy as np

from . import driver
from .driver import call

NAME = "pallas_prof_device_marker"


@functools.cache
def _compiled(cc: int):
  from ._ceiling_kernels import pallas_prof_device_marker
  from .ceilings import compile_own_kernel
  return compile_own_kernel(pallas_prof_device_marker, {"out": "*i32"}, {}, cc, 1)


def marks_for(device: int) -> int:
  """Marker launches on `device`."""
  return device + 1


def mark_devices(count: int) -> None:
  """Launches the marker marks_for(d) times on each of the first `count` devices."""
  driver.init()
  for index in range(count):
    with driver.primary_context(index) as ctx:
      cc = (10 * ctx.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
            + ctx.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
      _launch(_compiled(cc), marks_for(index))


def _launch(compiled, times: int) -> None:
  image = np.frombuffer(compiled.asm["cubin"], dtype=np.uint8).copy()
  module = call("cuModuleLoadData", image.ctypes.data)
  out = driver.DeviceBuffer(256)
  try:
    function = call("cuModuleGetFunction", module, compiled.metadata.name.encode())
    # the kernel's pointer, then Triton 3.6's global and profile scratch (none)
    holders = [np.array([p], dtype=np.uint64) for p in (out.ptr, 0, 0)]
    args = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
    for _ in range(times):
      call("cuLaunchKernel", function, 1, 1, 1, 32, 1, 1, int(compiled.metadata.shared), 0,
           args.ctypes.data, 0)
    call("cuCtxSynchronize")
  finally:
    out.close()
    call("cuModuleUnload", module)


def device_of_document(marker_launches: int, device_count: int) -> int | None:
  """The device a Proton trace document belongs to, from its marker launches."""
  device = marker_launches - 1
  return device if 0 <= device < device_count else None
