"""A stand-in for cuda.bindings.driver on host memory, to test the replay runner's logic.

"Device" memory is host memory (numpy buffers; a device pointer is the host
address), so copies and memsets are ctypes calls. A launch decodes the
kernel parameters exactly as the driver would (an array of pointers to the
argument values), and runs the kernel's generated Triton code under the CPU
interpreter on that memory. Event times are scripted by the test: they are
inputs to the timing logic, never presented as measurements.
"""
from __future__ import annotations

import ctypes
import enum
import types

import numpy as np


class CUresult(enum.IntEnum):
  CUDA_SUCCESS = 0
  CUDA_ERROR_INVALID_VALUE = 1
  CUDA_ERROR_OUT_OF_MEMORY = 2
  CUDA_ERROR_INVALID_DEVICE = 101
  CUDA_ERROR_NOT_FOUND = 500


class _Handle(int):
  pass


FLUSH = "pallas_prof_l2_flush"


def _decode(params: int, n: int) -> list[int]:
  """The values behind a cuLaunchKernel parameter array of n pointers."""
  pointers = np.ctypeslib.as_array(ctypes.cast(params, ctypes.POINTER(ctypes.c_uint64)), (n,))
  return [ctypes.c_uint64.from_address(int(p)).value for p in pointers]


class FakeDriver:
  def __init__(self, gk=None, *, devices=1, event_ms=0.5, free_bytes=8 * 2**30,
               l2_bytes=1 << 20, write_fraction=1.0, interpret_launches=2, after_kernel_ms=0.0,
               memo_outputs=False):
    self.gk = gk
    # True: a launch on inputs an earlier launch had writes that launch's outputs, not the
    # interpreter's again (the kernel is deterministic): a replayer's warm-up relaunches one
    # input set hundreds of times, each an interpreted run of tens of milliseconds
    self.memo_outputs = memo_outputs
    self._outputs_of: dict[tuple, list] = {}
    self.devices = devices
    self.event_ms = event_ms
    self.free_bytes = free_bytes
    self.l2_bytes = l2_bytes
    self.write_fraction = write_fraction     # < 1: the "kernel" leaves some outputs unwritten
    self.interpret_launches = interpret_launches   # launches that run the kernel (the poison
                                                   # check's two); later ones are only recorded
    self.after_kernel_ms = after_kernel_ms   # scripted extra time of a timed launch issued right
                                             # after the kernel itself (no flush in between)
    self.allocations: dict[int, np.ndarray] = {}
    self.launches: list[tuple] = []          # launches of the kernel under test (and memcpys)
    self.flushes: list[tuple] = []           # launches of the L2 flush kernel
    self.context_stack: list[int] = []
    self.events: dict[int, int] = {}         # event -> launches (kernel + flush) before it
    self.penalty: dict[int, float] = {}      # start event -> scripted extra ms
    self.calls: list[str] = []
    self.functions: dict[int, str] = {}      # function handle -> kernel name
    self.order: list[str] = []               # "memset", "flush", "kernel", "record" in issue order
    self._next = 1
    self.CUresult = CUresult
    self.CUdevice_attribute = types.SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE="l2",
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN="optin",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms")
    self.CUfunction_attribute = types.SimpleNamespace(
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES="static",
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="dynamic")
    self.CUfunc_cache = types.SimpleNamespace(CU_FUNC_CACHE_PREFER_SHARED=1)
    self.CUstream_flags = types.SimpleNamespace(CU_STREAM_NON_BLOCKING=1)
    self.CUevent_flags = types.SimpleNamespace(CU_EVENT_DEFAULT=0)

  def _handle(self) -> _Handle:
    self._next += 1
    return _Handle(self._next)

  def __getattr__(self, name):
    raise AttributeError(f"the fake driver has no {name}")

  # -- errors, init, devices --------------------------------------------------------------
  def cuGetErrorName(self, err):
    return CUresult.CUDA_SUCCESS, CUresult(int(err)).name.encode()

  def cuGetErrorString(self, err):
    return CUresult.CUDA_SUCCESS, b"fake error"

  def cuInit(self, flags):
    return (CUresult.CUDA_SUCCESS,)

  def cuDeviceGetCount(self):
    return CUresult.CUDA_SUCCESS, self.devices

  def cuDeviceGet(self, ordinal):
    if not 0 <= ordinal < self.devices:
      return CUresult.CUDA_ERROR_INVALID_DEVICE, None
    return CUresult.CUDA_SUCCESS, _Handle(1000 + ordinal)

  def cuDeviceGetAttribute(self, attr, dev):
    values = {"l2": self.l2_bytes, "optin": 232448, "major": 9, "minor": 0, "sms": 132}
    return CUresult.CUDA_SUCCESS, values[attr]

  def cuDeviceGetName(self, length, dev):
    return CUresult.CUDA_SUCCESS, b"Stand-in GPU\0\0\0"

  def cuDeviceGetUuid(self, dev):
    return CUresult.CUDA_SUCCESS, types.SimpleNamespace(bytes=bytes(range(16)))

  def cuDeviceGetPCIBusId(self, length, dev):
    return CUresult.CUDA_SUCCESS, b"0000:3B:00.0\0"

  def cuDeviceTotalMem(self, dev):
    return CUresult.CUDA_SUCCESS, 2 * self.free_bytes

  def cuDriverGetVersion(self):
    return CUresult.CUDA_SUCCESS, 13000

  def cuMemcpyDtoDAsync(self, dst, src, n, stream):
    self._check_range(int(dst), n)
    self._check_range(int(src), n)
    ctypes.memmove(int(dst), int(src), n)
    self.launches.append(("memcpy", n))
    return (CUresult.CUDA_SUCCESS,)

  def cuDevicePrimaryCtxRetain(self, dev):
    return CUresult.CUDA_SUCCESS, _Handle(2000 + int(dev))

  def cuDevicePrimaryCtxRelease(self, dev):
    return (CUresult.CUDA_SUCCESS,)

  def cuCtxPushCurrent(self, ctx):
    self.context_stack.append(int(ctx))
    return (CUresult.CUDA_SUCCESS,)

  def cuCtxPopCurrent(self):
    return CUresult.CUDA_SUCCESS, self.context_stack.pop()

  # -- modules ----------------------------------------------------------------------------
  def cuModuleLoadData(self, image):
    assert isinstance(image, int) and image != 0
    return CUresult.CUDA_SUCCESS, self._handle()

  def cuModuleGetFunction(self, module, name):
    assert isinstance(name, bytes)
    if self.gk is not None and name.decode() not in (self.gk.name, FLUSH):
      return CUresult.CUDA_ERROR_NOT_FOUND, None
    handle = self._handle()
    self.functions[int(handle)] = name.decode()
    return CUresult.CUDA_SUCCESS, handle

  def cuModuleUnload(self, module):
    return (CUresult.CUDA_SUCCESS,)

  def cuFuncGetAttribute(self, attr, fn):
    return CUresult.CUDA_SUCCESS, 0

  def cuFuncSetCacheConfig(self, fn, config):
    return (CUresult.CUDA_SUCCESS,)

  def cuFuncSetAttribute(self, fn, attr, value):
    self.calls.append(f"cuFuncSetAttribute {attr} {value}")
    return (CUresult.CUDA_SUCCESS,)

  def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, block_threads, dynamic_shared):
    # an H100-like SM: 2,048 threads, 32 blocks, 228 KiB of shared memory (1 KiB of it
    # reserved per block); registers not modelled
    by_smem = 233472 // (int(dynamic_shared) + 1024)
    return CUresult.CUDA_SUCCESS, max(0, min(32, 2048 // int(block_threads), by_smem))

  # -- memory -----------------------------------------------------------------------------
  def cuMemGetInfo(self):
    return CUresult.CUDA_SUCCESS, self.free_bytes, 2 * self.free_bytes

  def cuMemAlloc(self, nbytes):
    buf = np.zeros(nbytes + 256, dtype=np.uint8)
    addr = (buf.ctypes.data + 255) // 256 * 256        # cudaMalloc aligns to 256
    self.allocations[addr] = (buf, nbytes)
    return CUresult.CUDA_SUCCESS, _Handle(addr)

  def cuMemFree(self, ptr):
    if int(ptr) not in self.allocations:
      return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    del self.allocations[int(ptr)]
    return (CUresult.CUDA_SUCCESS,)

  def _check_range(self, ptr: int, n: int):
    for base, (_, size) in self.allocations.items():
      if base <= ptr and ptr + n <= base + size:
        return
    raise AssertionError(f"device range {ptr:#x}+{n} is outside every allocation")

  def cuMemcpyHtoD(self, dst, src, n):
    self._check_range(int(dst), n)
    ctypes.memmove(int(dst), int(src), n)
    return (CUresult.CUDA_SUCCESS,)

  def cuMemcpyDtoH(self, dst, src, n):
    self._check_range(int(src), n)
    ctypes.memmove(int(dst), int(src), n)
    return (CUresult.CUDA_SUCCESS,)

  def cuMemsetD8Async(self, dst, value, n, stream):
    self._check_range(int(dst), n)
    self.order.append("memset")
    ctypes.memset(int(dst), value, n)
    return (CUresult.CUDA_SUCCESS,)

  # -- streams, events, launches -------------------------------------------------------------
  def cuStreamCreate(self, flags):
    return CUresult.CUDA_SUCCESS, self._handle()

  def cuStreamDestroy(self, stream):
    return (CUresult.CUDA_SUCCESS,)

  def cuStreamSynchronize(self, stream):
    return (CUresult.CUDA_SUCCESS,)

  def cuEventCreate(self, flags):
    return CUresult.CUDA_SUCCESS, self._handle()

  def cuEventDestroy(self, event):
    return (CUresult.CUDA_SUCCESS,)

  def cuEventRecord(self, event, stream):
    last_op = next((op for op in reversed(self.order) if op in ("kernel", "flush")), None)
    self.penalty[int(event)] = self.after_kernel_ms if last_op == "kernel" else 0.0
    self.order.append("record")
    self.events[int(event)] = len(self.launches) + len(self.flushes)
    return (CUresult.CUDA_SUCCESS,)

  def cuEventSynchronize(self, event):
    return (CUresult.CUDA_SUCCESS,)

  def cuEventElapsedTime(self, start, end):
    # a flush between the events would count as a launch: the time would double
    launches = self.events[int(end)] - self.events[int(start)]
    return CUresult.CUDA_SUCCESS, self.event_ms * launches + self.penalty[int(start)]

  def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    assert isinstance(params, int) and extra == 0
    if self.functions.get(int(fn)) == FLUSH:
      return self._flush(params, (gx, gy, gz), (bx, by, bz))
    self.order.append("kernel")
    n = len(self.gk.params) + 2 if self.gk is not None else 4
    args = _decode(params, n)
    self.launches.append(((gx, gy, gz), (bx, by, bz), shared, args))
    if self.gk is not None and len(self.launches) <= self.interpret_launches:
      self._run(args)
    return (CUresult.CUDA_SUCCESS,)

  def _flush(self, params, grid, block):
    # the L2 flush kernel: src, out, two null scratch pointers; src must be allocated
    args = _decode(params, 4)
    self._check_range(args[0], grid[0] * 4096 * 4)
    self._check_range(args[1], 4)
    assert args[2:] == [0, 0]
    self.order.append("flush")
    self.flushes.append((grid, block, args))
    return (CUresult.CUDA_SUCCESS,)

  def _run(self, args):
    from pallas_prof.backend.running.launch import run_interpreted
    from pallas_prof.profiler.launchspec import np_dtype
    gk = self.gk
    views = []
    for p, ptr in zip(gk.params, args):
      dtype = np_dtype(p.dtype)
      nbytes = int(np.prod(p.shape)) * dtype.itemsize
      self._check_range(ptr, nbytes)
      raw = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_uint8)), (nbytes,))
      views.append(raw.view(dtype).reshape(p.shape))
    inputs = [v.copy() for v, p in zip(views, gk.params) if p.role == "input"]
    shapes = [(p.shape, np_dtype(p.dtype)) for p in gk.outputs]
    key = tuple(x.tobytes() for x in inputs)
    outs = self._outputs_of.get(key) if self.memo_outputs else None
    if outs is None:
      outs = run_interpreted(gk, inputs, shapes)
      if self.memo_outputs:
        self._outputs_of[key] = [o.copy() for o in outs]
    out_views = [v for v, p in zip(views, gk.params) if p.role == "output"]
    for view, out in zip(out_views, outs):
      flat, src = view.reshape(-1), out.reshape(-1)
      k = int(round(self.write_fraction * flat.size))
      flat[:k] = src[:k]


def script_probe_replay(fake: FakeDriver, kernel_name: str, n_params: int, words: int, fill,
                        probed_ms: float = 1.0, plain_ms: float = 1.0) -> list[str]:
  """Makes the stand-in run probing.measure's two kernels of `kernel_name` (the probed
  variant is loaded first, then the plain one): each probed launch hands its probe buffer
  (the last of the `n_params` arrays, `words` uint64) and the launch's dynamic shared
  memory to `fill(buffer, shared)`; the events time a probed launch at `probed_ms`, a
  plain one at `plain_ms`, the L2 flush at 0. Returns the launches' kinds in issue order
  (probed | plain | flush)."""
  kernels, kinds = [], []
  get_function = fake.cuModuleGetFunction

  def cuModuleGetFunction(module, name):
    result, handle = get_function(module, name)
    if name == kernel_name.encode():
      kernels.append(int(handle))
    return result, handle

  def cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    if fake.functions.get(int(fn)) != kernel_name:
      kinds.append("flush")
      return fake._flush(params, (gx, gy, gz), (bx, by, bz))
    kind = "probed" if int(fn) == kernels[0] else "plain"
    kinds.append(kind)
    fake.launches.append(((gx, gy, gz), (bx, by, bz), shared, []))
    if kind == "probed":
      args = _decode(params, n_params + 2)
      buffer = np.ctypeslib.as_array(ctypes.cast(args[n_params - 1],
                                                 ctypes.POINTER(ctypes.c_uint64)), (words,))
      fill(buffer, shared)
    return (CUresult.CUDA_SUCCESS,)

  def cuEventElapsedTime(start, end):
    spans = kinds[fake.events[int(start)]:fake.events[int(end)]]
    return CUresult.CUDA_SUCCESS, sum({"plain": plain_ms, "probed": probed_ms, "flush": 0.0}[k]
                                      for k in spans)

  fake.cuModuleGetFunction = cuModuleGetFunction
  fake.cuLaunchKernel = cuLaunchKernel
  fake.cuEventElapsedTime = cuEventElapsedTime
  return kinds
