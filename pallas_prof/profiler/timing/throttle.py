"""Throttle guard for cold timing (after nvbench's --throttle-threshold and
--throttle-recovery-delay).

Sustained back-to-back launches of a power-hungry kernel push the GPU into
its power cap: on an H200 a replayed 8192^3 bf16 matmul ran well below its
maximum SM clock (SwPowerCap) and took longer than Nsight Compute's isolated
launches (bench/results/archive/comment_figures.md has the figures). Cold timing wants the time the kernel takes on a GPU that
is not throttled, so after each short batch of timed launches the guard reads
the SM clock through NVML; when the GPU is throttled it sleeps a recovery
delay (the GPU idles, power falls, the clock comes back) and the batch's
samples are discarded and redone.

Threshold: THRESHOLD of the maximum SM clock, with a slowdown reason (power cap,
thermal, hardware slowdown) active when NVML reports reasons. nvbench uses
0.75 of the default clock; that would have let the H200's power-capped clock
through, barely. With 0.90 and checks further apart, an 8192^3 bf16 matmul
replay on an H200 still kept samples between the cap and the maximum clock:
its cold median stayed above ncu's, although its p10 matched ncu. Hence
THRESHOLD, a check after each batch of policy.CHECK_INTERVAL_S, and a recovery
of RECOVERY_DELAY_S (the power controller averages over tens of ms). Requiring a
slowdown reason as well keeps the guard quiet where the clock is low for a
reason that is not throttling (application clocks set lower, a clock still
ramping up from idle), which ncu would see just the same.

Bounded: at most `max_recovery_s` of sleeping in all; after that samples are
kept and the summary says so. Without NVML (not installed, no permission,
a device NVML does not know) the guard is off and says so; timing goes on.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from .. import driver
from ..schema import ThrottleStats

THRESHOLD = 0.95
RECOVERY_DELAY_S = 0.1       # twice nvbench's default; see the docstring
MAX_RECOVERY_S = 4.0         # 40 recoveries at most per cold measurement


def is_throttled(clock_mhz: float, max_clock_mhz: float, threshold: float = THRESHOLD,
                 reasons: list[str] | None = None) -> bool:
  """Whether a reading is throttled: clock below threshold x max, and (when reasons
  are known) a slowdown reason among them."""
  # lazy: at the top it would load numpy whenever this module is imported
  from .nvml import SLOWDOWNS
  if not max_clock_mhz or clock_mhz >= threshold * max_clock_mhz:
    return False
  return reasons is None or any(r in SLOWDOWNS for r in reasons)


@dataclasses.dataclass
class Reading:
  clock_mhz: float
  reasons: list[str] | None       # None: the device does not report them


class ThrottleGuard:
  """Decides after each batch of cold samples whether to keep them."""

  def __init__(self, read: Callable[[], Reading] | None, max_clock_mhz: float | None, *,
               threshold: float = THRESHOLD, recovery_delay_s: float = RECOVERY_DELAY_S,
               max_recovery_s: float = MAX_RECOVERY_S, sleep: Callable[[float], Any] = time.sleep,
               note: str = "", release: Callable[[], Any] | None = None):
    self.read = read if max_clock_mhz else None
    self.stats = ThrottleStats(
        available=self.read is not None, threshold=threshold, recovery_delay_s=recovery_delay_s,
        max_sm_clock_mhz=max_clock_mhz, note=note or ("" if max_clock_mhz else
                                                      "no maximum SM clock: guard off"))
    self.max_recovery_s = max_recovery_s
    self.sleep = sleep
    self._release = release

  @classmethod
  def off(cls, why: str) -> "ThrottleGuard":
    return cls(None, None, note=f"throttle guard off: {why}")

  def keep(self, samples: int) -> bool:
    """Called after a batch of `samples` timed launches: True to keep them; False when
    the GPU was throttled, after sleeping the recovery delay (the caller redoes them)."""
    reading = self._read()
    if reading is None:
      return True
    s = self.stats
    s.checks += 1
    if s.min_sm_clock_mhz is None or reading.clock_mhz < s.min_sm_clock_mhz:
      s.min_sm_clock_mhz = reading.clock_mhz
    if not is_throttled(reading.clock_mhz, s.max_sm_clock_mhz, s.threshold, reading.reasons):
      return True
    s.throttled_checks += 1
    for r in reading.reasons or []:
      if r not in s.reasons:
        s.reasons.append(r)
    if s.recovery_s + s.recovery_delay_s > self.max_recovery_s + 1e-9:
      s.kept_throttled_launches += samples
      return True
    self.sleep(s.recovery_delay_s)
    s.recoveries += 1
    s.recovery_s += s.recovery_delay_s
    s.discarded_launches += samples
    return False

  def _read(self) -> Reading | None:
    if self.read is None:
      return None
    try:
      return self.read()
    except Exception as e:  # noqa: BLE001 - NVMLError and friends: timing goes on unguarded
      self.read = None
      self.stats.note = f"throttle guard off after an NVML error: {e}"
      return None

  def close(self) -> None:
    """Releases NVML (when this guard initialised it)."""
    if self._release is not None:
      self._release()
      self._release = None

  def summary(self) -> ThrottleStats:
    s = self.stats
    if s.kept_throttled_launches:
      s.note = (f"throttling persisted past {self.max_recovery_s:g} s of recovery sleeps: "
                f"{s.kept_throttled_launches} throttled launches kept")
    return s


def for_device(device: int, **options) -> ThrottleGuard:
  """A guard reading device `device` through NVML, or one that is off (and says why);
  options: ThrottleGuard's threshold, recovery_delay_s, max_recovery_s."""
  # lazy: at the top it would load numpy whenever this module is imported
  from . import nvml
  try:
    api = nvml.init()
  except nvml.NvmlUnavailable as e:
    return ThrottleGuard.off(f"NVML unavailable ({e})")
  try:
    info = driver.device_info(device)
    handle = nvml.handle_for(api, info.uuid, info.pci_bus_id)
    max_clock = float(api.nvmlDeviceGetMaxClockInfo(handle, api.NVML_CLOCK_SM))
  except Exception as e:  # noqa: BLE001
    nvml.shutdown(api)
    return ThrottleGuard.off(f"NVML cannot read this GPU's clocks ({e})")
  return ThrottleGuard(_reader(api, handle), max_clock, release=lambda: nvml.shutdown(api),
                       **options)


def _reader(api, handle) -> Callable[[], Reading]:
  # lazy: at the top it would load numpy whenever this module is imported
  from . import nvml
  state = {"reasons": True}

  def read() -> Reading:
    clock = float(api.nvmlDeviceGetClockInfo(handle, api.NVML_CLOCK_SM))
    reasons = None
    if state["reasons"]:
      try:
        reasons = nvml.decode_reasons(nvml._clock_reasons(api, handle))
      except Exception:  # noqa: BLE001 - not supported: decide on the clock alone
        state["reasons"] = False
    return Reading(clock, reasons)
  return read
