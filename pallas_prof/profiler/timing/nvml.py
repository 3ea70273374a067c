"""NVML readings beside each kernel's time (nvidia-ml-py): read-only.

A Sampler thread polls clocks, power, temperature, utilisation and the
clock-event (throttle) reasons every few milliseconds during a window, and
reads the energy counter at its ends; `window()` summarises the readings
so a slow run that the GPU throttled says so. Nothing here changes a clock
or a setting.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from .. import driver
from ..schema import NvmlWindow, Stat

# nvmlClocksEventReason* bits (nvml.h); GpuIdle is not a slowdown.
REASONS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
SLOWDOWNS = {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown",
             "HwPowerBrakeSlowdown", "SyncBoost"}
EXPLAIN = {
    "SwPowerCap": "power cap", "HwSlowdown": "hardware slowdown",
    "SwThermalSlowdown": "thermal (software)", "HwThermalSlowdown": "thermal (hardware)",
    "HwPowerBrakeSlowdown": "power brake", "SyncBoost": "sync boost",
    "ApplicationsClocksSetting": "application clocks set", "DisplayClockSetting": "display clock",
}


def decode_reasons(mask: int) -> list[str]:
  """Names of the set bits of a clock-event-reasons mask (unknown bits by value)."""
  names = [name for bit, name in REASONS.items() if mask & bit]
  unknown = mask & ~sum(REASONS)
  if unknown:
    names.append(f"0x{unknown:x}")
  return names


class NvmlUnavailable(RuntimeError):
  pass


def _pynvml():
  try:
    # lazy: optional: pynvml may be absent
    import pynvml
  except ImportError:
    raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
  return pynvml


_init_lock = threading.Lock()
_init_count = {"n": 0}


def init(nvml=None):
  nvml = nvml or _pynvml()
  with _init_lock:
    if _init_count["n"] == 0:
      try:
        nvml.nvmlInit()
      except Exception as e:  # noqa: BLE001 - NVMLError subclasses
        raise NvmlUnavailable(f"nvmlInit failed: {e}") from None
    _init_count["n"] += 1
  return nvml


def shutdown(nvml=None) -> None:
  nvml = nvml or _pynvml()
  with _init_lock:
    if _init_count["n"] > 0:
      _init_count["n"] -= 1
      if _init_count["n"] == 0:
        try:
          nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
          pass


def device_handle(index: int):
  """NVML's handle of CUDA device `index` (NVML initialised for it): NvmlUnavailable, or
  the driver's error, where there is none."""
  info = driver.device_info(index)
  return handle_for(init(), info.uuid, info.pci_bus_id)


def handle_for(nvml, uuid: str | None = None, pci_bus_id: str | None = None):
  """The NVML handle of the GPU the CUDA driver calls `uuid` (CUDA ordinals and
  NVML indices differ under CUDA_VISIBLE_DEVICES, so match by identity)."""
  errors = []
  if uuid:
    try:
      return nvml.nvmlDeviceGetHandleByUUID(uuid.encode())     # bytes: every pynvml takes it
    except Exception as e:  # noqa: BLE001
      errors.append(f"by UUID {uuid}: {e}")
  if pci_bus_id:
    try:
      return nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
    except Exception as e:  # noqa: BLE001
      errors.append(f"by PCI bus id {pci_bus_id}: {e}")
  raise NvmlUnavailable("NVML does not know this GPU: " + "; ".join(errors or ["no id given"]))


def _clock_reasons(nvml, handle) -> int:
  # "event reasons" is the newer name of the same bits; older drivers know only "throttle"
  newer = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
  if newer is not None:
    try:
      return int(newer(handle))
    except Exception:  # noqa: BLE001
      pass
  return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


READINGS = {
    "sm_clock_mhz": lambda n, h: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
    "mem_clock_mhz": lambda n, h: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
    "power_w": lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1000.0,
    "temperature_c": lambda n, h: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
    "gpu_util_pct": lambda n, h: n.nvmlDeviceGetUtilizationRates(h).gpu,
    "mem_util_pct": lambda n, h: n.nvmlDeviceGetUtilizationRates(h).memory,
    "reasons": _clock_reasons,
}


class Sampler:
  """Samples one GPU in a thread between start() and stop()."""

  def __init__(self, handle, *, nvml=None, interval_s: float = 0.005):
    self.nvml = nvml or _pynvml()
    self.handle = handle
    self.interval_s = interval_s
    self.samples: list[dict[str, Any]] = []
    self.unavailable: set[str] = set()
    self._thread: threading.Thread | None = None
    self._stop = threading.Event()
    self._energy = (None, None)
    self._t = (0.0, 0.0)

  def read(self) -> dict[str, Any]:
    """One sample; a reading the device does not support is left out (and noted)."""
    sample = {"t": time.perf_counter()}
    for name, fn in READINGS.items():
      if name in self.unavailable:
        continue
      try:
        sample[name] = fn(self.nvml, self.handle)
      except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
        self.unavailable.add(name)
    return sample

  def _energy_mj(self) -> float | None:
    if "energy" in self.unavailable:
      return None
    try:
      return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
    except Exception:  # noqa: BLE001
      self.unavailable.add("energy")
      return None

  def start(self) -> None:
    self.samples = []
    self._stop.clear()
    self._energy = (self._energy_mj(), None)
    self._t = (time.perf_counter(), 0.0)
    self.samples.append(self.read())
    self._thread = threading.Thread(target=self._run, name="pallas-prof-nvml", daemon=True)
    self._thread.start()

  def _run(self) -> None:
    while not self._stop.wait(self.interval_s):
      self.samples.append(self.read())

  def stop(self) -> NvmlWindow:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
      self._thread = None
    self.samples.append(self.read())
    self._energy = (self._energy[0], self._energy_mj())
    self._t = (self._t[0], time.perf_counter())
    return self.window()

  def window(self) -> NvmlWindow:
    energy = None
    if self._energy[0] is not None and self._energy[1] is not None:
      energy = (self._energy[1] - self._energy[0]) / 1000.0
    return summarize(self.samples, duration_s=self._t[1] - self._t[0], energy_j=energy,
                     max_sm_clock_mhz=self._static("max_sm"),
                     power_limit_w=self._static("power_limit"),
                     unavailable=sorted(self.unavailable))

  def _static(self, what: str) -> float | None:
    try:
      if what == "max_sm":
        return float(self.nvml.nvmlDeviceGetMaxClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
      return float(self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle)) / 1000.0
    except Exception:  # noqa: BLE001
      return None

  def sample_for(self, seconds: float) -> NvmlWindow:
    """Readings over `seconds` of whatever the GPU is doing (e.g. idle)."""
    self.start()
    time.sleep(seconds)
    return self.stop()


def _stat(values) -> Stat:
  v = [float(x) for x in values if x is not None]
  if not v:
    return Stat(None, None, None)
  return Stat(min(v), float(np.median(v)), max(v))


def summarize(samples: list[dict[str, Any]], *, duration_s: float, energy_j: float | None,
              max_sm_clock_mhz: float | None, power_limit_w: float | None,
              unavailable: list[str]) -> NvmlWindow:
  def col(name):
    return [s[name] for s in samples if name in s]

  reasons: list[str] = []
  for mask in col("reasons"):
    for name in decode_reasons(int(mask)):
      if name != "GpuIdle" and name not in reasons:
        reasons.append(name)
  throttled = any(r in SLOWDOWNS for r in reasons)
  w = NvmlWindow(
      samples=len(samples), duration_s=duration_s, sm_clock_mhz=_stat(col("sm_clock_mhz")),
      mem_clock_mhz=_stat(col("mem_clock_mhz")), max_sm_clock_mhz=max_sm_clock_mhz,
      power_w=_stat(col("power_w")), power_limit_w=power_limit_w,
      temperature_c=_stat(col("temperature_c")), gpu_util_pct=_stat(col("gpu_util_pct")),
      mem_util_pct=_stat(col("mem_util_pct")), energy_j=energy_j, throttle_reasons=reasons,
      throttled=throttled, summary="", unavailable=list(unavailable), series=series(samples))
  w.summary = describe(w)
  return w


SERIES_POINTS = 240


def series(samples: list[dict[str, Any]], points: int = SERIES_POINTS) -> dict[str, list]:
  """The samples over time, in at most `points` buckets: a bucket keeps its lowest SM clock,
  its highest power and every slowdown reason seen in it, so thinning hides no dip or cap."""
  if not samples:
    return {}
  t0 = samples[0]["t"]
  size = -(-len(samples) // points)
  out: dict[str, list] = {"t_s": [], "sm_clock_mhz": [], "power_w": [], "slowdown": []}
  for start in range(0, len(samples), size):
    bucket = samples[start:start + size]
    clocks = [s["sm_clock_mhz"] for s in bucket if s.get("sm_clock_mhz") is not None]
    powers = [s["power_w"] for s in bucket if s.get("power_w") is not None]
    slow = sorted({r for s in bucket for r in decode_reasons(int(s.get("reasons") or 0))
                   if r in SLOWDOWNS})
    out["t_s"].append(round(bucket[0]["t"] - t0, 6))
    out["sm_clock_mhz"].append(min(clocks) if clocks else None)
    out["power_w"].append(max(powers) if powers else None)
    out["slowdown"].append(slow)
  return out


def describe(w: NvmlWindow) -> str:
  parts = []
  if w.sm_clock_mhz.median is not None:
    clock = f"SM {w.sm_clock_mhz.median:.0f} MHz"
    if w.sm_clock_mhz.min != w.sm_clock_mhz.max:
      clock += f" ({w.sm_clock_mhz.min:.0f}-{w.sm_clock_mhz.max:.0f})"
    if w.max_sm_clock_mhz:
      clock += f" of max {w.max_sm_clock_mhz:.0f}"
    parts.append(clock)
  if w.mem_clock_mhz.median is not None:
    parts.append(f"memory {w.mem_clock_mhz.median:.0f} MHz")
  if w.power_w.median is not None:
    p = f"{w.power_w.median:.0f} W"
    if w.power_w.max is not None and w.power_w.max != w.power_w.median:
      p += f" (peak {w.power_w.max:.0f})"
    if w.power_limit_w:
      p += f" of {w.power_limit_w:.0f} W cap"
    parts.append(p)
  if w.temperature_c.max is not None:
    parts.append(f"{w.temperature_c.max:.0f} C")
  if w.gpu_util_pct.median is not None:
    parts.append(f"utilisation {w.gpu_util_pct.median:.0f}%")
  if w.throttled:
    slow = [r for r in w.throttle_reasons if r in SLOWDOWNS]
    parts.append("THROTTLED: " + ", ".join(f"{r} ({EXPLAIN.get(r, r)})" for r in slow))
  elif w.throttle_reasons:
    parts.append("clock events: " + ", ".join(w.throttle_reasons))
  else:
    parts.append("no throttling")
  return ", ".join(parts)
