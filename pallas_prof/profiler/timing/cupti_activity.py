"""Kernel durations from CUPTI's activity API, through NVIDIA's cupti-python.

Why this and not Triton's Proton. Proton keeps its own map of the CUDA graphs it saw
made; on triton 3.9, a graph made before Proton started (XLA makes its command
buffers when a function first runs) and launched inside the capture is missing from
that map, and the C++ exception Proton throws on a CUPTI thread ends the process
(`std::out_of_range ... map::at`), which no Python code can catch. CUPTI's activity
records need no such bookkeeping: a kernel launched from a graph arrives as a
CONCURRENT_KERNEL record like any other, with its graph's id, whenever the graph was
made. cupti-python is NVIDIA's own binding of that API, so no struct layout of ours
has to follow CUPTI's record versions.

CUPTI hands records over in buffers, on a thread of its own, whenever a buffer fills
and when asked to flush. One pair of buffer callbacks serves the whole process
(CUPTI takes one registration); they add each record to the capture that is running,
and never raise: an exception on CUPTI's thread has nowhere to go.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

BUFFER_BYTES = 8 << 20      # CUPTI's buffers: a few hundred thousand kernel records each
FLUSH_FORCED = 1            # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: flush buffers not yet full too


class CuptiPythonUnavailable(RuntimeError):
  """cupti-python is missing or cannot load libcupti."""


def load():
  """cupti-python's `cupti` module, loaded with its libcupti; CuptiPythonUnavailable
  saying why not."""
  try:
    # lazy: keeps cupti out of this module's import (start-up time)
    from cupti import cupti
  except Exception as e:  # noqa: BLE001 - a missing wheel or a libcupti that fails to load
    raise CuptiPythonUnavailable(f"cupti-python is not usable here ({type(e).__name__}: {e}); "
                                 "install it with `pip install cupti-python`") from None
  return cupti


class _Router:
  """The process's one pair of CUPTI buffer callbacks, handing records to the
  running capture's sink (a callable taking one record), or dropping them when none
  runs."""

  def __init__(self):
    self.lock = threading.Lock()
    self.sink: Callable[[Any], None] | None = None
    self.registered = False
    self.errors: list[str] = []

  def register(self, cupti) -> None:
    if not self.registered:
      cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
      self.registered = True

  @staticmethod
  def _buffer_requested():
    return BUFFER_BYTES, 0

  def _buffer_completed(self, activities) -> None:
    # on CUPTI's thread an escaping error has nowhere to go: each record's is kept as a
    # note, and the records after it are still counted
    try:
      with self.lock:
        sink = self.sink
        if sink is None:
          return
        for activity in activities:
          try:
            sink(activity)
          except BaseException as e:  # noqa: BLE001
            self._note(e)
    except BaseException as e:  # noqa: BLE001 - the buffer itself could not be read
      self._note(e)

  def _note(self, error: BaseException) -> None:
    if len(self.errors) < 8:
      self.errors.append(f"{type(error).__name__}: {error}")


_router = _Router()


class ActivityCapture:
  """Kernel records of everything launched between start() and stop(), each passed
  to `on_kernel(name, duration_ns, device_id, graph_id)`."""

  def __init__(self, on_kernel: Callable[[str, int, int, int], None]):
    self.on_kernel = on_kernel
    self.records = 0
    self._cupti = None
    self._kinds: tuple = ()
    self._kernel_kinds: set[int] = set()

  def start(self) -> None:
    cupti = load()
    self._kinds = (cupti.ActivityKind.CONCURRENT_KERNEL,)
    self._kernel_kinds = {int(cupti.ActivityKind.CONCURRENT_KERNEL), int(cupti.ActivityKind.KERNEL)}
    with _router.lock:
      if _router.sink is not None:
        raise RuntimeError("another pallas-prof in-situ capture is running in this process")
      _router.sink = self._record
      _router.errors.clear()
    try:
      _router.register(cupti)
      for kind in self._kinds:
        cupti.activity_enable(kind)
    except BaseException:
      with _router.lock:
        _router.sink = None
      raise
    self._cupti = cupti

  def stop(self) -> list[str]:
    """Flushes CUPTI's buffers into the capture and stops it; notes on anything lost."""
    cupti, self._cupti = self._cupti, None
    if cupti is None:
      return []
    notes = []
    try:
      cupti.activity_flush_all(FLUSH_FORCED)
    except Exception as e:  # noqa: BLE001 - what was flushed before stays counted
      notes.append(f"CUPTI could not flush its last records ({type(e).__name__}: {e})")
    finally:
      for kind in self._kinds:
        try:
          cupti.activity_disable(kind)
        except Exception:  # noqa: BLE001 - disabling a kind that is off is harmless
          pass
      with _router.lock:
        _router.sink = None
        errors = list(_router.errors)
    if errors:
      notes.append("some CUPTI records could not be read: " + "; ".join(errors))
    return notes

  def _record(self, activity) -> None:
    if int(activity.kind) not in self._kernel_kinds:     # kinds another tool enabled
      return
    self.records += 1
    name = activity.name
    if isinstance(name, bytes):
      name = name.decode(errors="replace")
    self.on_kernel(name or "?", int(activity.end) - int(activity.start),
                   int(activity.device_id), int(getattr(activity, "graph_id", 0) or 0))
