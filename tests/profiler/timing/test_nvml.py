"""NVML sampler logic against a stand-in for pynvml (the GPU check reads a real one).

The stand-in returns scripted readings so the decoding and summarising can
be checked exactly; nothing here is presented as a measurement.
"""
from __future__ import annotations

import itertools
import time
import types

import pytest

from pallas_prof.profiler.timing import nvml


class NotSupported(Exception):
  pass


def scripted_nvml(sm_clocks, reasons, power_mw, energy_mj, temperature=None):
  sm = itertools.cycle(sm_clocks)
  rs = itertools.cycle(reasons)
  pw = itertools.cycle(power_mw)
  en = iter(energy_mj)
  calls = {"set": 0}

  def not_supported(*_):
    raise NotSupported("NVML_ERROR_NOT_SUPPORTED")

  m = types.SimpleNamespace(
      NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
      nvmlDeviceGetClockInfo=lambda h, kind: next(sm) if kind == 1 else 2619,
      nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980,
      nvmlDeviceGetPowerUsage=lambda h: next(pw),
      nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
      nvmlDeviceGetTemperature=(lambda h, s: temperature) if temperature else not_supported,
      nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=97, memory=60),
      nvmlDeviceGetCurrentClocksEventReasons=lambda h: next(rs),
      nvmlDeviceGetTotalEnergyConsumption=lambda h: next(en),
      # a sampler must only read: any setter called is a bug
      nvmlDeviceSetApplicationsClocks=lambda *a: calls.__setitem__("set", calls["set"] + 1),
  )
  return m, calls


def test_decode_reasons():
  assert nvml.decode_reasons(0) == []
  assert nvml.decode_reasons(0x1) == ["GpuIdle"]
  assert nvml.decode_reasons(0x4 | 0x40) == ["SwPowerCap", "HwThermalSlowdown"]
  assert nvml.decode_reasons(0x1000) == ["0x1000"]


def test_sampler_summarises_a_throttled_window():
  fake, calls = scripted_nvml(sm_clocks=[1980, 1755, 1830], reasons=[0x0, 0x4, 0x1],
                              power_mw=[650_000, 699_000], energy_mj=[1_000_000, 1_250_000],
                              temperature=None)
  s = nvml.Sampler("handle", nvml=fake, interval_s=0.001)
  s.start()
  time.sleep(0.03)
  w = s.stop()
  assert w.samples >= 3
  assert w.sm_clock_mhz.min == 1755 and w.sm_clock_mhz.max == 1980
  assert w.max_sm_clock_mhz == 1980 and w.mem_clock_mhz.median == 2619
  assert w.power_w.max == pytest.approx(699.0) and w.power_limit_w == pytest.approx(700.0)
  assert w.energy_j == pytest.approx(250.0)
  assert w.gpu_util_pct.median == 97
  assert w.throttle_reasons == ["SwPowerCap"]            # GpuIdle is not a slowdown
  assert w.throttled
  assert "THROTTLED: SwPowerCap (power cap)" in w.summary
  assert w.unavailable == ["temperature_c"] and w.temperature_c.median is None
  assert calls["set"] == 0


def test_sampler_unthrottled_window_says_so():
  fake, _ = scripted_nvml(sm_clocks=[1980], reasons=[0x0], power_mw=[120_000],
                          energy_mj=[5_000, 5_100], temperature=41)
  s = nvml.Sampler("handle", nvml=fake, interval_s=0.001)
  s.start()
  w = s.stop()
  assert not w.throttled and w.throttle_reasons == []
  assert w.summary.endswith("no throttling")
  assert "SM 1980 MHz of max 1980" in w.summary and "41 C" in w.summary


def test_handle_falls_back_to_pci_bus_id():
  def by_uuid(uuid):
    raise NotSupported("not found")

  fake = types.SimpleNamespace(nvmlDeviceGetHandleByUUID=by_uuid,
                               nvmlDeviceGetHandleByPciBusId=lambda bus: ("handle", bus))
  assert nvml.handle_for(fake, "GPU-1", "0000:3B:00.0") == ("handle", b"0000:3B:00.0")
  fake.nvmlDeviceGetHandleByPciBusId = by_uuid
  with pytest.raises(nvml.NvmlUnavailable, match="by UUID GPU-1.*by PCI bus id"):
    nvml.handle_for(fake, "GPU-1", "0000:3B:00.0")


def test_nvml_without_gpu_is_unavailable():
  try:
    api = nvml.init()
  except nvml.NvmlUnavailable as e:
    assert "nvmlInit failed" in str(e) or "not installed" in str(e)
    return
  nvml.shutdown(api)
  pytest.skip("NVML works here (a GPU machine)")


def test_series_thins_the_samples_and_keeps_dips_peaks_and_slowdowns():
  samples = [{"t": 10.0 + i * 0.01, "sm_clock_mhz": 1980, "power_w": 300.0, "reasons": 0}
             for i in range(1000)]
  samples[517].update(sm_clock_mhz=1500, power_w=700.0, reasons=0x4 | 0x1)   # one capped read
  s = nvml.series(samples, points=100)
  assert len(s["t_s"]) == 100 and s["t_s"][0] == 0.0 and s["t_s"][-1] == pytest.approx(9.9)
  hit = [i for i, r in enumerate(s["slowdown"]) if r]
  assert hit == [51] and s["slowdown"][51] == ["SwPowerCap"]          # GpuIdle is not a slowdown
  assert s["sm_clock_mhz"][51] == 1500 and s["power_w"][51] == 700.0
  assert set(s["sm_clock_mhz"]) == {1980, 1500}
  assert nvml.series([]) == {}


def test_a_window_carries_its_series():
  fake, _ = scripted_nvml(sm_clocks=[1980, 1755], reasons=[0x0, 0x4], power_mw=[650_000],
                          energy_mj=[1_000, 2_000])
  s = nvml.Sampler("handle", nvml=fake, interval_s=0.001)
  s.start()
  time.sleep(0.02)
  w = s.stop().to_dict()
  assert len(w["series"]["t_s"]) == w["samples"]
  assert 1755 in w["series"]["sm_clock_mhz"] and ["SwPowerCap"] in w["series"]["slowdown"]
