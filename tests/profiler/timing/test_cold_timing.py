"""Cold and sustained timing, the L2 flush and the throttle guard, without a GPU.

The driver is the host-memory stand-in (fake_cuda.py) and NVML a scripted
reader: event times and clocks are inputs the tests choose, so what is
checked is the replay's logic (what is launched in which order, which
samples are kept, what the report says), never a measurement.
"""
from __future__ import annotations

import json
import types

import pytest

from pallas_prof.profiler import driver
from pallas_prof.profiler.timing import l2flush, nvml, policy, replayer, runner, throttle
from pallas_prof.profiler.launchspec import LaunchSpec
from pallas_prof.profiler.timing.throttle import Reading, ThrottleGuard




def scripted_guard(readings, **kwargs):
  """A guard over scripted (clock MHz, reasons) readings of a 1980 MHz GPU; sleeps recorded."""
  it = iter(readings)
  slept = []
  guard = ThrottleGuard(lambda: Reading(*next(it)), 1980.0, sleep=slept.append, **kwargs)
  return guard, slept


COOL = (1980, [])
CAPPED = (1455, ["SwPowerCap"])      # the H200's power-capped clock during sustained matmul


# --- the throttle decision ---------------------------------------------------------------------

def test_is_throttled_needs_a_low_clock_and_a_slowdown_reason():
  assert not throttle.is_throttled(1980, 1980, 0.9, ["SwPowerCap"])
  assert not throttle.is_throttled(1782, 1980, 0.9, ["SwPowerCap"])       # exactly 0.90
  assert throttle.is_throttled(1781, 1980, 0.9, ["SwPowerCap"])
  assert throttle.is_throttled(1455, 1980, 0.9, ["HwThermalSlowdown"])
  # low for a reason that is not a slowdown (idle, application clocks): not throttled
  assert not throttle.is_throttled(1455, 1980, 0.9, [])
  assert not throttle.is_throttled(1455, 1980, 0.9, ["GpuIdle", "ApplicationsClocksSetting"])
  # reasons unknown: the clock alone decides
  assert throttle.is_throttled(1455, 1980, 0.9, None)
  assert not throttle.is_throttled(1455, None, 0.9, None)
  # nvbench's 0.75 would have kept the H200's 1455 MHz only by 1.5 points
  assert throttle.is_throttled(1455, 1980, 0.75, None) and throttle.THRESHOLD == 0.95


def test_guard_discards_a_throttled_batch_after_a_recovery_sleep():
  guard, slept = scripted_guard([COOL, CAPPED, (1900, ["SwPowerCap"]), COOL])
  assert [guard.keep(6) for _ in range(4)] == [True, False, True, True]
  assert slept == [throttle.RECOVERY_DELAY_S]
  s = guard.summary()
  assert (s.checks, s.throttled_checks, s.recoveries, s.discarded_launches) == (4, 1, 1, 6)
  assert s.min_sm_clock_mhz == 1455 and s.max_sm_clock_mhz == 1980
  assert s.reasons == ["SwPowerCap"] and s.available and s.note == ""


def test_guard_stops_discarding_when_the_recovery_budget_is_spent():
  guard, slept = scripted_guard([CAPPED] * 6, recovery_delay_s=0.05, max_recovery_s=0.15)
  assert [guard.keep(2) for _ in range(6)] == [False] * 3 + [True] * 3
  assert len(slept) == 3
  s = guard.summary()
  assert s.recoveries == 3 and s.recovery_s == pytest.approx(0.15)
  assert s.discarded_launches == 6 and s.kept_throttled_launches == 6
  assert "throttling persisted" in s.note


def test_guard_turns_itself_off_on_an_nvml_error():
  def read():
    raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
  guard = ThrottleGuard(read, 1980.0, sleep=lambda s: pytest.fail("slept"))
  assert guard.keep(3) and guard.keep(3)
  assert "NVML error" in guard.summary().note and guard.summary().checks == 0


def test_guard_without_nvml_is_off_and_says_why(monkeypatch):
  def unavailable(*a):
    raise nvml.NvmlUnavailable("nvmlInit failed: no driver")
  monkeypatch.setattr(nvml, "init", unavailable)
  guard = throttle.for_device(0)
  assert guard.keep(10)
  s = guard.summary()
  assert not s.available and s.checks == 0 and "NVML unavailable" in s.note


def test_guard_reads_the_sm_clock_and_reasons_through_nvml(monkeypatch):
  from .test_nvml import scripted_nvml
  fake, calls = scripted_nvml(sm_clocks=[1980, 1455], reasons=[0x0, 0x4], power_mw=[600_000],
                              energy_mj=[0])
  released = []
  monkeypatch.setattr(nvml, "init", lambda nvml=None: fake)
  monkeypatch.setattr(nvml, "shutdown", lambda api=None: released.append(api))
  monkeypatch.setattr(nvml, "handle_for", lambda api, uuid, pci: "h")
  monkeypatch.setattr(driver, "device_info", lambda i: types.SimpleNamespace(uuid="u", pci_bus_id="p"))
  guard = throttle.for_device(0)
  guard.sleep = lambda s: None
  assert guard.keep(1) and not guard.keep(1)
  assert guard.summary().reasons == ["SwPowerCap"] and guard.summary().max_sm_clock_mhz == 1980
  guard.close()
  assert released == [fake] and calls["set"] == 0          # read-only


# --- pure planning -----------------------------------------------------------------------------

def test_enough_bounds_each_mode():
  assert not policy.enough(99, 1.0, 50, 100, 0.2, 10.0)             # min_launches first
  assert policy.enough(100, 0.2, 100, 100, 0.2, 0.1)                # launches and seconds
  assert not policy.enough(100, 0.1, 200, 100, 0.2, 0.1)            # not yet min_seconds
  assert policy.enough(100, 0.1, 200, 100, 0.2, policy.MAX_SECONDS)  # wall-time cap
  assert policy.enough(policy.MAX_LAUNCHES, 0.0, 10**9, 10**9, 9.0, 0.0)


def test_check_batch_is_about_three_ms_of_launches():
  assert policy.check_batch(1.5e-3) == 2                 # a 1.5 ms matmul (+ flush)
  assert policy.check_batch(1e-4) == 30
  assert policy.check_batch(1e-6) == policy.BATCH
  assert policy.check_batch(0.5) == 1
  assert policy.check_batch(0.0) == policy.BATCH


def test_check_mode():
  assert policy.check_mode("both") == ("cold", "sustained")
  assert policy.check_mode("cold") == ("cold",)
  assert policy.check_mode("sustained") == ("sustained",)
  with pytest.raises(driver.ProfilerError, match="timing mode 'hot'"):
    policy.check_mode("hot")


# --- the flush kernel --------------------------------------------------------------------------

def test_flush_kernel_reads_twice_the_l2_and_writes_one_value():
  l2 = 60 * 2**20
  spec = l2flush.flush_spec(90, l2)
  assert spec.name == l2flush.NAME and spec.ptx_param_count == 4     # src, out + 2 scratch
  assert spec.params[0].nbytes == l2flush.scratch_bytes(l2) >= 2 * l2
  assert spec.launch_grid == (spec.params[0].nbytes // (4 * l2flush.BLOCK), 1, 1)
  ptx = l2flush._compiled(90).asm["ptx"]
  assert "ld.global" in ptx and "atom.global" in ptx
  assert "st.global" not in ptx                       # read-only: no dirty lines but one word


# --- cold and sustained on the stand-in --------------------------------------------------------

def timed_ops(fake, start: int) -> list[str]:
  """The ops issued from fake.order[start:], memsets left out."""
  return [op for op in fake.order[start:] if op != "memset"]


def test_cold_launches_the_flush_before_each_timed_launch(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake = fake_driver(ck.generated, event_ms=1.0, after_kernel_ms=0.5)
  guard, _ = scripted_guard([COOL] * 1000)
  with runner.Replayer(LaunchSpec.from_compiled(ck), 0, seed=1) as r:
    r.prepare(n_sets=3)
    first = len(fake.order)
    cold = r.time_cold(min_launches=10, min_seconds=0.0, guard=guard, warmup_seconds=0.0)
    ops = timed_ops(fake, first)
    assert ops == ["flush", "record", "kernel", "record"] * (len(ops) // 4)
    assert len(fake.flushes) == cold["warmup_launches"] + len(cold["times_s"])
    middle = len(fake.order)
    sustained = r.time_launches(min_launches=10, min_seconds=0.0, warmup_seconds=0.0)
    assert timed_ops(fake, middle) == ["record", "kernel", "record"] * (len(timed_ops(fake, middle)) // 3)
    assert len(fake.flushes) == cold["warmup_launches"] + len(cold["times_s"])   # none added
  # events hold only the timed launch: the scripted 1 ms; back-to-back adds the scripted 0.5
  assert cold["times_s"] == [pytest.approx(1e-3)] * len(cold["times_s"])
  assert sustained["times_s"][1:] == [pytest.approx(1.5e-3)] * (len(sustained["times_s"]) - 1)
  assert cold["mode"] == "cold" and sustained["mode"] == "sustained"
  flush_grid, block, args = fake.flushes[0]
  assert flush_grid[0] * 4096 * 4 >= 2 * fake.l2_bytes and block == (256, 1, 1)
  assert fake.allocations == {}                       # the flush's buffers were freed too


def test_cold_redoes_throttled_batches_then_paces_launches(fake_driver, softmax_kernel,
                                                           monkeypatch):
  _, ck = softmax_kernel
  fake = fake_driver(ck.generated, event_ms=1.0)
  paced = []
  monkeypatch.setattr(replayer.time, "sleep", paced.append)
  guard, slept = scripted_guard([COOL, CAPPED, CAPPED] + [COOL] * 1000)
  with runner.Replayer(LaunchSpec.from_compiled(ck), 0, seed=1) as r:
    r.prepare(n_sets=3)
    r._warm_up = lambda pool, cold, s, n: ([1e-3] * 3, 6e-4)      # 5 launches per check
    cold = r.time_cold(min_launches=20, min_seconds=0.0, guard=guard)
  s = guard.summary()
  # a cool batch of 5 kept; a capped batch of 5 redone, and from then on one launch at a
  # time after an idle gap: the next (capped) launch redone too, then 15 kept
  assert len(cold["times_s"]) == 20 and len(slept) == 2
  assert s.discarded_launches == 6 and s.recoveries == 2 and s.checks == 18
  assert len(fake.flushes) == 26
  assert cold["pace_s"] == policy.pacing_gap(1e-3) == pytest.approx(0.01)
  assert paced == [pytest.approx(0.01)] * 16
  assert runner.timing_stats(cold).paced_gap_s == pytest.approx(0.01)


def test_pacing_gap_is_ten_kernel_times_within_2_to_20_ms():
  assert policy.pacing_gap(1.5e-3) == pytest.approx(0.015)
  assert policy.pacing_gap(10e-6) == 0.002
  assert policy.pacing_gap(0.5) == 0.02


def test_cold_without_throttling_never_paces(fake_driver, softmax_kernel, monkeypatch):
  _, ck = softmax_kernel
  fake_driver(ck.generated, event_ms=1.0)
  paced = []
  monkeypatch.setattr(replayer.time, "sleep", paced.append)
  guard, _ = scripted_guard([COOL] * 1000)
  with runner.Replayer(LaunchSpec.from_compiled(ck), 0, seed=1) as r:
    r.prepare(n_sets=3)
    cold = r.time_cold(min_launches=20, min_seconds=0.0, guard=guard, warmup_seconds=0.0)
  assert paced == [] and cold["pace_s"] == 0.0


def test_replay_both_modes_reports_cold_as_the_headline(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake_driver(ck.generated, event_ms=1.0, after_kernel_ms=0.25)
  released = []
  guard, _ = scripted_guard([COOL] * 10_000, release=lambda: released.append("caller's"))
  stats = runner.replay(ck, min_launches=20, min_seconds=0.0, throttle=guard)
  assert released == []                               # the caller's guard stays the caller's
  assert stats.mode == "cold" and stats.cold.mode == "cold"
  assert stats.median_s == stats.cold.median_s == pytest.approx(1e-3)
  assert stats.sustained.median_s == pytest.approx(1.25e-3)
  assert stats.launches == stats.cold.launches >= 20 and stats.sustained.launches >= 20
  assert stats.throttle.checks > 0 and stats.throttle.discarded_launches == 0
  assert stats.l2_flush_bytes >= 2 * stats.l2_bytes
  data = json.loads(json.dumps(stats.to_dict()))
  assert data["cold"]["median_s"] == data["median_s"] and data["sustained"]["mode"] == "sustained"


def test_replay_sustained_only_never_flushes(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake = fake_driver(ck.generated, event_ms=1.0, after_kernel_ms=0.25)
  stats = runner.replay(ck, min_launches=20, min_seconds=0.0, mode="sustained",
                        throttle=ThrottleGuard(lambda: pytest.fail("read NVML"), 1980.0))
  assert fake.flushes == [] and stats.mode == "sustained"
  assert stats.cold is None and stats.throttle is None and stats.l2_flush_bytes is None
  assert stats.median_s == stats.sustained.median_s == pytest.approx(1.25e-3)


def test_replay_cold_only_without_nvml_notes_the_guard_is_off(fake_driver, softmax_kernel,
                                                               monkeypatch):
  _, ck = softmax_kernel
  fake_driver(ck.generated, event_ms=1.0)
  released = []
  monkeypatch.setattr(throttle, "for_device", lambda d: ThrottleGuard(
      None, None, note="throttle guard off: NVML unavailable (x)",
      release=lambda: released.append("ours")))
  stats = runner.replay(ck, min_launches=10, min_seconds=0.0, mode="cold")
  assert released == ["ours"]                         # replay's own guard released NVML
  assert stats.sustained is None and stats.mode == "cold"
  assert not stats.throttle.available
  assert any("throttle guard off: NVML unavailable" in n for n in stats.notes)


def test_sampler_watches_the_sustained_window(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake = fake_driver(ck.generated, event_ms=1.0)
  seen = []
  sampler = types.SimpleNamespace(start=lambda: seen.append(("start", len(fake.flushes))),
                                  stop=lambda: seen.append(("stop", len(fake.flushes))))
  runner.replay(ck, min_launches=10, min_seconds=0.0, sampler=sampler, throttle=False)
  (start, flushes_at_start), (stop, flushes_at_stop) = seen
  assert (start, stop) == ("start", "stop") and flushes_at_start == flushes_at_stop > 0


def test_runner_cli_plain_mode_does_not_flush(fake_driver, softmax_kernel, tmp_path, capsys,
                                              monkeypatch):
  # ncu runs the runner's default mode and flushes the caches itself
  _, ck = softmax_kernel
  fake = fake_driver(ck.generated)
  LaunchSpec.from_compiled(ck).save(str(tmp_path))
  assert runner.main([str(tmp_path), "--launches", "5", "--warmup", "2"]) == 0
  assert fake.flushes == [] and json.loads(capsys.readouterr().out)["launches"] == 7
  monkeypatch.setattr(throttle, "for_device", lambda d: ThrottleGuard.off("test"))
  assert runner.main([str(tmp_path), "--launches", "5", "--mode", "cold",
                      "--min-seconds", "0"]) == 0
  out = json.loads(capsys.readouterr().out)
  assert out["mode"] == "cold" and out["cold"]["launches"] >= 5 and fake.flushes


def test_the_profilers_own_kernels_leave_triton_no_default_to_warn_about():
  """Triton 3.9 warns (once a process) when a compile leaves fp fusion to its default,
  which 3.10 changes; the profiler's own kernels name it. Triton 3.6 has no such warning."""
  import warnings
  import triton
  warn_once = getattr(getattr(triton, "_utils", None), "warn_once", None)
  if warn_once is not None and hasattr(warn_once, "cache_clear"):
    warn_once.cache_clear()          # fired already in this process: let it fire again
  l2flush._compiled.cache_clear()
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    l2flush._compiled(90)
