"""The GPU's SM clock, power and temperature while the suite times a column (NVML,
read-only: pallas-prof's own sampler, profiler/timing/nvml.py).

Why: the suite's ratios compare columns timed minutes apart in one run, so a GPU that
holds a lower clock under load moves them all alike; an absolute figure does not cancel
that. On the shared H200 the 8192^3 matmul ran at 732.7 TFLOP/s in one run and 660.2
in another on the same code, with the built-in and XLA slower by the same 8-10 %
(bench/results/archive/README.md). The clock each column ran at says which it was.
"""
from __future__ import annotations

import contextlib


class GpuState:
  """Samples GPU 0 (the suite's device) around a timing window; does nothing where
  NVML or the GPU is missing, and says why once (`unavailable`)."""

  def __init__(self):
    self.handle, self.unavailable = None, None
    try:
      from pallas_prof.profiler.timing import nvml
      self.handle = nvml.device_handle(0)
    except Exception as e:  # noqa: BLE001 - the suite runs on without clocks
      self.unavailable = f"{type(e).__name__}: {str(e)[:200]}"

  @contextlib.contextmanager
  def window(self, entry: dict):
    """Samples while the body runs; entry["gpu_state"] gets the window's summary."""
    if self.handle is None:
      yield
      return
    from pallas_prof.profiler.timing import nvml
    sampler = nvml.Sampler(self.handle, interval_s=0.01)
    sampler.start()
    try:
      yield
    finally:
      entry["gpu_state"] = summary(sampler.stop())


def summary(window) -> dict:
  """What a suite record keeps of an NvmlWindow: medians and extremes, no series."""
  def stat(s):
    return None if s.median is None else {"min": s.min, "median": s.median, "max": s.max}
  return {"sm_clock_mhz": stat(window.sm_clock_mhz), "max_sm_clock_mhz": window.max_sm_clock_mhz,
          "power_w": stat(window.power_w), "power_limit_w": window.power_limit_w,
          "temperature_c": stat(window.temperature_c), "throttle_reasons": window.throttle_reasons,
          "samples": window.samples, "summary": window.summary}


_shared: list[GpuState] = []


def shared() -> GpuState:
  """One GpuState for the run (NVML is initialised once)."""
  if not _shared:
    _shared.append(GpuState())
  return _shared[0]


def why_unavailable() -> str | None:
  """Why the run's GpuState could not sample (None: it could, or none was made: no GPU run)."""
  return _shared[0].unavailable if _shared else None
