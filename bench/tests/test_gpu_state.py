"""bench/suite/gpu_state.py: the SM clock a suite column ran at, from NVML samples."""
from __future__ import annotations

import pytest

from bench.suite import gpu_state
from pallas_prof.profiler.timing import nvml


def test_the_summary_keeps_the_clock_power_and_slowdowns_of_the_window():
  samples = [{"t": i * 0.01, "sm_clock_mhz": mhz, "power_w": watts, "temperature_c": 60 + i,
              "reasons": reasons}
             for i, (mhz, watts, reasons) in enumerate([(1980, 500.0, 0x0), (1755, 699.0, 0x4),
                                                          (1710, 700.0, 0x4)])]
  window = nvml.summarize(samples, duration_s=0.03, energy_j=None, max_sm_clock_mhz=1980.0,
                          power_limit_w=700.0, unavailable=[])
  s = gpu_state.summary(window)
  assert s["sm_clock_mhz"] == {"min": 1710.0, "median": 1755.0, "max": 1980.0}
  assert s["power_w"]["max"] == 700.0 and s["power_limit_w"] == 700.0
  assert s["throttle_reasons"] == ["SwPowerCap"] and s["samples"] == 3
  assert "1755" in s["summary"]


def test_without_a_gpu_the_window_records_nothing_and_says_why():
  state = gpu_state.GpuState()
  if state.handle is not None:
    pytest.skip("this machine has a GPU that NVML knows")
  entry = {}
  with state.window(entry):
    ran = True
  assert ran and entry == {} and state.unavailable


@pytest.mark.gpu
def test_on_a_gpu_the_window_samples_the_clock():
  state = gpu_state.GpuState()
  assert state.handle is not None, state.unavailable
  entry = {}
  with state.window(entry):
    import time
    time.sleep(0.1)
  g = entry["gpu_state"]
  assert g["samples"] >= 2 and g["sm_clock_mhz"]["median"] > 0 and g["max_sm_clock_mhz"] > 0
