"""Making the L2 cache cold before a timed launch, without leaving dirty lines.

Nsight Compute (`--cache-control all`, its default) flushes and invalidates
the caches before each measured launch, outside the measured time. The
replay's cold mode does the nearest thing a program can: before each timed
launch, on the same stream, a tiny Triton kernel (_ceiling_kernels.
pallas_prof_l2_flush) reads a scratch buffer of at least twice the L2 size
and adds the sum to one int32. Reading, not writing: a memset would fill L2
with dirty lines whose write-back would then compete with the timed kernel,
the very effect cold timing is meant to remove. After the flush kernel, L2
holds only clean lines of the scratch buffer: the timed kernel finds none of
its data there and has nothing of anyone else's to write back.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import driver
from ..driver import ProfilerError, call
from ..launchspec import own_param
from .own_kernels import compile_own_kernel, own_launch_spec

BLOCK = 4096                 # int32 per program: 16 KiB
NUM_WARPS = 8
L2_MULTIPLE = 2              # scratch = this many times the L2 size
NAME = "pallas_prof_l2_flush"


def scratch_bytes(l2_bytes: int, multiple: int = L2_MULTIPLE) -> int:
  """Bytes the flush kernel reads: `multiple` x L2, whole programs, at least one."""
  per_program = BLOCK * 4
  return max(1, -(-int(multiple * l2_bytes) // per_program)) * per_program


@functools.cache
def _compiled(cc: int):
  # lazy: at the top it would load triton whenever this module is imported
  from ._ceiling_kernels import pallas_prof_l2_flush
  return compile_own_kernel(pallas_prof_l2_flush, {"src": "*i32", "out": "*i32",
                                                   "BLOCK": "constexpr"},
                            {"BLOCK": BLOCK}, cc, NUM_WARPS)


def flush_spec(cc: int, l2_bytes: int):
  """The flush kernel's LaunchSpec for an L2 of `l2_bytes` on sm_`cc`."""
  n = scratch_bytes(l2_bytes) // 4
  return own_launch_spec(_compiled(cc), (n // BLOCK, 1, 1), NUM_WARPS,
                         [own_param("src", "int32", (n,), "input", 0),
                          own_param("out", "int32", (1,), "output", 0)])


class L2Flush:
  """The flush kernel loaded in the current context, with its scratch buffer."""

  def __init__(self, cc: int, l2_bytes: int, stream):
    self.spec = flush_spec(cc, l2_bytes)
    if self.spec.global_scratch_size or self.spec.profile_scratch_size:
      raise ProfilerError("the L2 flush kernel unexpectedly asks for Triton scratch memory")
    image = np.frombuffer(self.spec.cubin, dtype=np.uint8).copy()
    self.module = call("cuModuleLoadData", image.ctypes.data)
    self.buffers: list[driver.DeviceBuffer] = []
    try:
      self.function = call("cuModuleGetFunction", self.module, self.spec.name.encode())
      src = self._buffer(self.spec.params[0].nbytes)
      out = self._buffer(256)
      # defined contents (on the replay's stream: it does not wait for the legacy default
      # stream); this memset's dirty lines are written back during warm-up, before timing
      call("cuMemsetD8Async", src.ptr, 0, src.nbytes, stream)
    except BaseException:
      self.close()
      raise
    self._holders = [np.array([p], dtype=np.uint64) for p in (src.ptr, out.ptr, 0, 0)]
    self._args = np.array([h.ctypes.data for h in self._holders], dtype=np.uint64)

  def _buffer(self, nbytes: int) -> driver.DeviceBuffer:
    buf = driver.DeviceBuffer(nbytes)
    self.buffers.append(buf)
    return buf

  @property
  def nbytes(self) -> int:
    return self.spec.params[0].nbytes

  def launch(self, stream) -> None:
    gx, gy, gz = self.spec.launch_grid
    call("cuLaunchKernel", self.function, gx, gy, gz, NUM_WARPS * 32, 1, 1, self.spec.shared,
         stream, self._args.ctypes.data, 0)

  def close(self) -> None:
    for buf in self.buffers:
      buf.close()
    self.buffers = []
    if self.module is not None:
      call("cuModuleUnload", self.module)
      self.module = None
