"""The CUDA driver through NVIDIA's cuda-bindings, every return code checked.

Only the profiler's own launches use this (replay, ceilings); JAX programs
keep running through XLA. A failing call raises CudaError naming the call
and CUDA's own error name and text.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from .schema import DeviceInfo


class ProfilerError(RuntimeError):
  """A profiling step that cannot go on; the message says why and what to do."""


class NoGpu(ProfilerError):
  """No usable NVIDIA GPU (no driver, no device, or no cuda-bindings)."""


class CudaError(ProfilerError):
  def __init__(self, call: str, code: int, name: str, text: str):
    self.call, self.code, self.name, self.text = call, code, name, text
    super().__init__(f"{call} failed: {name} ({code}): {text}")


class BadDevice(ProfilerError, ValueError):
  pass


def nvidia_driver_loaded() -> bool:
  """Whether this machine has NVIDIA's kernel driver loaded (a GPU to talk to)."""
  return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def _driver():
  try:
    # lazy: optional: cuda.bindings may be absent
    from cuda.bindings import driver
  except ImportError:
    try:
      from cuda import cuda as driver     # cuda-python < 12.6 layout
    except ImportError:
      if not nvidia_driver_loaded():
        # the pip hint would mislead on a machine that has no GPU to replay on
        raise NoGpu("this machine has none (no NVIDIA driver is loaded)") from None
      raise NoGpu("cuda-bindings is not installed: pip install 'pallas-prof[gpu]' "
                  "(NVIDIA's cuda-bindings) to replay kernels on the GPU") from None
  return driver


def call(name: str, *args) -> Any:
  """Calls driver.<name>(*args), raises CudaError unless it returned CUDA_SUCCESS."""
  d = _driver()
  fn = getattr(d, name)
  result = fn(*args)
  if not isinstance(result, tuple):
    result = (result,)
  err, values = result[0], result[1:]
  code = int(err)
  if code != 0:
    raise CudaError(name, code, _error_name(err), _error_text(err))
  if not values:
    return None
  return values[0] if len(values) == 1 else values


def _error_name(err) -> str:
  try:
    r = _driver().cuGetErrorName(err)
    return r[1].decode() if int(r[0]) == 0 else str(err)
  except Exception:  # noqa: BLE001
    return str(err)


def _error_text(err) -> str:
  try:
    r = _driver().cuGetErrorString(err)
    return r[1].decode() if int(r[0]) == 0 else ""
  except Exception:  # noqa: BLE001
    return ""


_initialized = {"done": False, "error": None}


def init() -> None:
  """cuInit(0); NoGpu with the reason when there is no driver or no device."""
  if _initialized["done"]:
    return
  if _initialized["error"] is not None:
    raise NoGpu(_initialized["error"])
  d = _driver()
  try:
    err = d.cuInit(0)
  except Exception as e:  # noqa: BLE001 - cuda-bindings raises when libcuda is missing
    _initialized["error"] = f"no NVIDIA driver (libcuda) on this machine: {e}"
    raise NoGpu(_initialized["error"]) from None
  err = err[0] if isinstance(err, tuple) else err
  if int(err) != 0:
    name = _error_name(err)
    _initialized["error"] = f"cuInit failed: {name}: {_error_text(err)}"
    raise NoGpu(_initialized["error"])
  _initialized["done"] = True


def device_count() -> int:
  init()
  return int(call("cuDeviceGetCount"))


def check_index(index: int) -> None:
  if not isinstance(index, int) or isinstance(index, bool):
    raise BadDevice(f"device index must be an int, not {index!r}")
  n = device_count()
  if n == 0:
    raise NoGpu("the NVIDIA driver sees no GPU")
  if not 0 <= index < n:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    extra = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
    raise BadDevice(f"device index {index} is out of range: this process sees {n} CUDA "
                    f"device(s), indices 0..{n - 1}{extra}")


def _attr(dev, name: str) -> int:
  d = _driver()
  return int(call("cuDeviceGetAttribute", getattr(d.CUdevice_attribute, name), dev))


def uuid_string(raw: bytes) -> str:
  """16 UUID bytes -> NVML's 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'."""
  h = bytes(raw).hex()
  return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def device_info(index: int) -> DeviceInfo:
  check_index(index)
  dev = call("cuDeviceGet", index)
  name = call("cuDeviceGetName", 256, dev)
  name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
  uuid = call("cuDeviceGetUuid", dev)
  raw = getattr(uuid, "bytes", uuid)
  if isinstance(raw, str):
    raw = raw.encode("latin-1")
  bus = call("cuDeviceGetPCIBusId", 64, dev)
  bus = bus.split(b"\0", 1)[0].decode() if isinstance(bus, bytes) else str(bus)
  major = _attr(dev, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
  minor = _attr(dev, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
  return DeviceInfo(index=index, name=name, uuid=uuid_string(raw), pci_bus_id=bus,
                    compute_capability=major * 10 + minor,
                    sm_count=_attr(dev, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                    l2_bytes=_attr(dev, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
                    memory_bytes=int(call("cuDeviceTotalMem", dev)),
                    driver_version=int(call("cuDriverGetVersion")))


@dataclasses.dataclass
class Context:
  """The device's primary context, made current on this thread while in use."""
  index: int
  device: Any
  context: Any

  def attribute(self, name: str) -> int:
    return _attr(self.device, name)


@contextlib.contextmanager
def primary_context(index: int):
  """Retains device `index`'s primary context (the one JAX/XLA use too) and
  pushes it on this thread; pops and releases it on exit."""
  check_index(index)
  dev = call("cuDeviceGet", index)
  ctx = call("cuDevicePrimaryCtxRetain", dev)
  try:
    call("cuCtxPushCurrent", ctx)
    try:
      yield Context(index, dev, ctx)
    finally:
      call("cuCtxPopCurrent")
  finally:
    call("cuDevicePrimaryCtxRelease", dev)


class DeviceBuffer:
  """cuMemAlloc'd memory, freed on close()."""

  def __init__(self, nbytes: int):
    self.nbytes = max(int(nbytes), 1)
    self.ptr = int(call("cuMemAlloc", self.nbytes))

  def close(self) -> None:
    if self.ptr:
      call("cuMemFree", self.ptr)
      self.ptr = 0


def free_memory() -> tuple[int, int]:
  free, total = call("cuMemGetInfo")
  return int(free), int(total)


def gpu_status() -> tuple[bool, str]:
  """(present, reason): whether this machine has a GPU we can drive."""
  try:
    n = device_count()
  except ProfilerError as e:
    return False, str(e)
  if n == 0:
    return False, "the NVIDIA driver sees no GPU"
  return True, f"{n} CUDA device(s)"
