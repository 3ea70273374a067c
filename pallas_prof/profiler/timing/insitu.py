"""In-situ runtimes: the user's program as it really ran, captured with CUPTI.

Every kernel launched in the process while a capture runs is recorded, including
the pallas-prof kernels XLA launches through its Triton custom call, and those
launched from CUDA graphs XLA made before the capture began. Kernels are matched to
the registry's records by name:

    with insitu.capture() as cap:
      run_the_program()
    cap.result.kernels["softmax_kernel"].launches

The records come from CUPTI's activity API through NVIDIA's cupti-python
(cupti_activity.py). Where cupti-python is missing the capture is refused with the
reason, and callers fall back (the tuner to the wall clock, `run` to no in-situ
numbers): Triton's Proton, the source before it, ends the process or loses launches
over CUDA graphs (proton_capture.py), and is used only when asked for by name.

CUPTI's activity records have one consumer per process: jax.profiler traces, Nsight
Compute and Nsight Systems hold it while they run. `capture()` checks for them first
and raises CuptiBusy saying which one, rather than recording nothing.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Any, Iterable

from . import proton_capture
from .cupti_activity import ActivityCapture
from .. import driver
from ..driver import ProfilerError
from ..schema import InsituStats


class CuptiBusy(ProfilerError):
  """Another tool holds CUPTI."""


class InsituUnavailable(ProfilerError):
  pass


@dataclasses.dataclass
class KernelTimes:
  name: str
  launches: int
  total_ns: float
  device_ids: list[int]
  # per device, where the capture could tell devices apart (a trace with device marks)
  launches_by_device: dict[int, int] = dataclasses.field(default_factory=dict)
  ns_by_device: dict[int, float] = dataclasses.field(default_factory=dict)
  from_graphs: int = 0      # launches that came from a CUDA graph (known from cupti only)

  @property
  def mean_s(self) -> float:
    return self.total_ns / 1e9 / self.launches if self.launches else 0.0

  def add(self, dur_ns: float, device: int | None) -> None:
    self.launches += 1
    self.total_ns += dur_ns
    if device is None:
      return
    self.launches_by_device[device] = self.launches_by_device.get(device, 0) + 1
    self.ns_by_device[device] = self.ns_by_device.get(device, 0.0) + dur_ns
    if device not in self.device_ids:
      self.device_ids.append(device)


@dataclasses.dataclass
class InsituResult:
  kernels: dict[str, KernelTimes]
  devices: dict[str, Any]          # Proton's device info (arch, SMs, clocks); {} from cupti
  path: str | None
  notes: list[str]
  source: str = "cupti"            # which of SOURCES recorded it

  def stats_for(self, name: str, shared_with: Iterable[str] = (),
                device: int | None = None) -> InsituStats | None:
    """The kernel's in-situ numbers; with `device`, its launches on that device
    alone where the capture told devices apart."""
    k = self.kernels.get(name)
    if k is None:
      return None
    if device is not None and k.launches_by_device:
      n = k.launches_by_device.get(device, 0)
      ns = k.ns_by_device.get(device, 0.0)
      return InsituStats(name=name, launches=n, total_s=ns / 1e9, mean_s=ns / 1e9 / n if n else 0.0,
                         device_ids=[device] if n else [], shared_name_with=list(shared_with),
                         launches_by_device=dict(k.launches_by_device))
    return InsituStats(name=name, launches=k.launches, total_s=k.total_ns / 1e9, mean_s=k.mean_s,
                       device_ids=k.device_ids, shared_name_with=list(shared_with),
                       launches_by_device=dict(k.launches_by_device))


# --- who holds CUPTI --------------------------------------------------------------------------

def cupti_holders(environ=None) -> list[str]:
  """Tools that hold (or will hold) CUPTI in this process, in plain words."""
  environ = os.environ if environ is None else environ
  holders = []
  if _jax_trace_active():
    holders.append("a jax.profiler trace is running (jax.profiler.start_trace / trace())")
  for variable in ("CUDA_INJECTION64_PATH", "LD_PRELOAD"):
    text = environ.get(variable, "")
    low = text.lower()
    if not low:
      continue
    if "nsight-compute" in low or "treelauncher" in low or "/ncu" in low:
      holders.append(f"Nsight Compute (ncu) injected itself ({variable}={text})")
    elif "nsys" in low or "nsight-systems" in low or "toolsinjection" in low:
      holders.append(f"Nsight Systems (nsys) injected itself ({variable}={text})")
    elif "sanitizer" in low:
      holders.append(f"compute-sanitizer injected itself ({variable}={text})")
    elif variable == "CUDA_INJECTION64_PATH":
      holders.append(f"a CUDA injection library is loaded ({variable}={text})")
  if environ.get("NSYS_PROFILING_SESSION_ID") and not any("nsys" in h for h in holders):
    holders.append("Nsight Systems (nsys) session "
                   f"{environ.get('NSYS_PROFILING_SESSION_ID')} is running")
  return holders


def _jax_trace_active() -> bool:
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ...backend import compat
  return compat.jax_profiler_session_active()


# --- Proton's output (kept for the Proton path and its tests) -------------------------------

def parse_hatchet(data) -> tuple[dict[str, KernelTimes], dict[str, Any]]:
  return proton_capture.parse_hatchet(data, _empty)


def parse_chrome_traces(text: str, device_count: int) -> tuple[dict[str, KernelTimes], list[str]]:
  return proton_capture.parse_chrome_traces(text, device_count, _empty)


def _empty(name: str) -> KernelTimes:
  return KernelTimes(name, 0, 0.0, [])


def visible_gpus() -> int:
  try:
    driver.init()
    return driver.device_count()
  except Exception:  # noqa: BLE001 - no driver: the capture will say so
    return 0


# --- the capture ------------------------------------------------------------------------------

SOURCES = ("cupti", "proton")


class capture:
  """Context manager: records the kernels the program launches inside it.

  source: "cupti" (cupti-python), "proton" (only by name: proton_capture.py says why),
  or None for the first that can run safely here. `result.source` says which one
  recorded."""

  def __init__(self, directory: str | None = None, keep: bool = False,
               devices: int | None = None, source: str | None = None):
    if source not in (None, *SOURCES):
      raise ValueError(f"source must be one of {SOURCES} or None, not {source!r}")
    self.directory = directory
    self.keep = keep or directory is not None
    self.devices = devices          # visible GPUs (None: ask the driver); Proton's layout
    self.source = source
    self.result: InsituResult | None = None
    self._kernels: dict[str, KernelTimes] = {}
    self._activity = None
    self._proton = None
    self._tmp = None

  def __enter__(self) -> "capture":
    holders = cupti_holders()
    if holders:
      raise CuptiBusy("in-situ kernel times need CUPTI, which allows one subscriber per "
                      "process, and " + "; ".join(holders) + ". Stop that tool (or run "
                      "pallas-prof without it) to capture in-situ times.")
    reasons = []
    if self.source in (None, "cupti"):
      try:
        self._start_cupti()
        return self
      except Exception as e:  # noqa: BLE001 - say why, then try Proton where it is safe
        reasons.append(str(e))
        if self.source == "cupti":
          raise _explain(e) from None
    unsafe = proton_capture.why_unsafe() if self.source is None else None
    if unsafe:
      reasons.append(unsafe)
      raise InsituUnavailable("in-situ capture is off: " + "; ".join(reasons))
    self._start_proton()
    return self

  def _start_cupti(self) -> None:
    activity = ActivityCapture(self._add)
    activity.start()
    self._activity = activity
    self.source = "cupti"

  def _start_proton(self) -> None:
    self._tmp = self.directory or tempfile.mkdtemp(prefix="pallas-prof-insitu-")
    os.makedirs(self._tmp, exist_ok=True)
    if self.devices is None:
      self.devices = visible_gpus()
    session = proton_capture.ProtonSession(self._tmp, self.devices)
    try:
      session.start()
    except Exception as e:  # noqa: BLE001
      raise _explain(e) from e
    self._proton = session
    self.source = "proton"

  def _add(self, name: str, duration_ns: int, device: int, graph_id: int) -> None:
    k = self._kernels.get(name)
    if k is None:
      k = self._kernels[name] = KernelTimes(name, 0, 0.0, [])
    k.add(float(duration_ns), device)
    if graph_id:
      k.from_graphs += 1

  def __exit__(self, exc_type, exc, tb) -> None:
    if self._activity is not None:
      activity, self._activity = self._activity, None
      notes = activity.stop()
      self._finish(dict(self._kernels), {}, None, notes)
      return None
    if self._proton is None:
      return None
    session, self._proton = self._proton, None
    try:
      kernels, devices, notes, path = session.stop(_empty)
    except Exception as e:  # noqa: BLE001
      if exc_type is None:
        raise _explain(e) from e
      return None
    self._finish(kernels, devices, path if self.keep else None, notes)
    if not self.keep:
      shutil.rmtree(self._tmp, ignore_errors=True)
    return None

  def _finish(self, kernels, devices, path, notes) -> None:
    if not kernels:
      notes.append("CUPTI recorded no kernel: nothing ran on the GPU inside the capture, or "
                   "another tool took CUPTI (a jax.profiler trace started inside it?)")
    self.result = InsituResult(kernels, devices, path, notes, self.source)


def _explain(error: Exception) -> ProfilerError:
  text = str(error)
  if "MULTIPLE_SUBSCRIBERS" in text.upper() or "subscriber" in text.lower():
    return CuptiBusy("CUPTI refused the capture: another subscriber (jax.profiler, ncu, nsys) "
                     f"holds it in this process ({text})")
  return InsituUnavailable(f"in-situ capture failed: {type(error).__name__}: {text}")


def match(result: InsituResult, records, device: int | None = None) -> dict[str, InsituStats]:
  """Record label -> its in-situ stats, matched by kernel name (on `device` alone
  when given and the capture told devices apart). Records that share a name
  share the numbers (listed in shared_name_with)."""
  by_name: dict[str, list[str]] = {}
  for rec in records:
    by_name.setdefault(rec.name, []).append(rec.label)
  out = {}
  for rec in records:
    others = [label for label in by_name[rec.name] if label != rec.label]
    stats = result.stats_for(rec.name, others, device)
    if stats is not None:
      out[rec.label] = stats
  return out
