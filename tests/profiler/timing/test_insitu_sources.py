"""Which source in-situ capture uses, and the cupti-python source's bookkeeping.

CUPTI needs a GPU: a stand-in `cupti` module does what cupti-python does (buffer
callbacks registered once, records handed over when a buffer is flushed, possibly on
another thread). The GPU test of the real thing is test_capture_gpu.py.
"""
from __future__ import annotations

import sys
import threading
import types

import pytest

from pallas_prof.profiler.timing import cupti_activity, insitu, proton_capture

CONCURRENT_KERNEL, KERNEL, MEMCPY = 10, 3, 1


class FakeCupti:
  """cupti-python's activity API as far as capture uses it."""

  class ActivityKind:
    CONCURRENT_KERNEL = CONCURRENT_KERNEL
    KERNEL = KERNEL

  def __init__(self, records=(), fail_on=None, on_thread=False):
    self.records = list(records)
    self.enabled: set[int] = set()
    self.callbacks = None
    self.registrations = 0
    self.fail_on = fail_on
    self.on_thread = on_thread

  def get_version(self):
    return 130000

  def activity_register_callbacks(self, requested, completed):
    self.registrations += 1
    self.callbacks = (requested, completed)

  def activity_enable(self, kind):
    if self.fail_on == "enable":
      raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
    self.enabled.add(kind)

  def activity_disable(self, kind):
    self.enabled.discard(kind)

  def activity_flush_all(self, flag):
    requested, completed = self.callbacks
    assert requested()[0] > 0
    batch, self.records = self.records, []
    if self.on_thread:      # CUPTI hands buffers over on a thread of its own
      t = threading.Thread(target=completed, args=(batch,))
      t.start()
      t.join()
    else:
      completed(batch)


def record(name, start, end, device=0, kind=CONCURRENT_KERNEL, graph=0):
  return types.SimpleNamespace(kind=kind, name=name, start=start, end=end, device_id=device,
                               graph_id=graph)


@pytest.fixture
def fake_cupti(monkeypatch):
  def install(fake):
    module = types.ModuleType("cupti")
    module.cupti = fake
    monkeypatch.setitem(sys.modules, "cupti", module)
    monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
    monkeypatch.setattr(cupti_activity, "_router", cupti_activity._Router())
    return fake
  return install


def test_cupti_source_counts_kernels_per_name_and_device(fake_cupti):
  fake = fake_cupti(FakeCupti([
      record("softmax_kernel", 100, 350, device=0, graph=7),     # launched from a CUDA graph
      record("softmax_kernel", 400, 700, device=1),
      record("loop_add_fusion", 800, 810, device=0),
      record("memcpy", 0, 5000, kind=MEMCPY),                   # another tool's kind: not a kernel
  ], on_thread=True))
  with insitu.capture() as cap:
    assert fake.enabled == {CONCURRENT_KERNEL}
  assert fake.enabled == set()                                   # stopped
  result = cap.result
  assert result.source == "cupti" and result.notes == []
  soft = result.kernels["softmax_kernel"]
  assert (soft.launches, soft.total_ns) == (2, 550.0)
  assert soft.launches_by_device == {0: 1, 1: 1} and sorted(soft.device_ids) == [0, 1]
  assert set(result.kernels) == {"softmax_kernel", "loop_add_fusion"}
  stats = result.stats_for("softmax_kernel", device=1)
  assert stats.launches == 1 and stats.total_s == pytest.approx(300e-9)


def test_callbacks_are_registered_once_for_many_captures(fake_cupti):
  fake = fake_cupti(FakeCupti())
  for i in range(5):
    fake.records = [record("k", 0, 10 * (i + 1))]
    with insitu.capture() as cap:
      pass
    assert cap.result.kernels["k"].total_ns == 10 * (i + 1)     # nothing carried over
  assert fake.registrations == 1


def test_records_flushed_between_captures_reach_no_capture(fake_cupti):
  fake = fake_cupti(FakeCupti())
  with insitu.capture():
    pass
  fake.records = [record("late", 0, 99)]
  fake.activity_flush_all(1)                                     # no capture running
  fake.records = [record("k", 0, 5)]
  with insitu.capture() as cap:
    pass
  assert set(cap.result.kernels) == {"k"}


def test_an_unreadable_record_becomes_a_note_not_an_exception(fake_cupti):
  fake = fake_cupti(FakeCupti([record("k", 0, 10), types.SimpleNamespace(kind=CONCURRENT_KERNEL),
                               record("k", 20, 25)], on_thread=True))
  errors = []
  threading.excepthook, old = (lambda args: errors.append(args)), threading.excepthook
  try:
    with insitu.capture() as cap:
      pass
  finally:
    threading.excepthook = old
  assert errors == []                                            # nothing escaped CUPTI's thread
  assert cap.result.kernels["k"].launches == 2                   # the record after it counted
  assert any("could not be read" in n and "AttributeError" in n for n in cap.result.notes)
  assert fake.enabled == set()


def test_a_second_capture_inside_the_first_is_refused_plainly(fake_cupti):
  fake_cupti(FakeCupti())
  with insitu.capture():
    with pytest.raises(insitu.InsituUnavailable, match="another pallas-prof in-situ capture"):
      with insitu.capture(source="cupti"):
        pass


def test_without_cupti_python_the_capture_is_refused_with_its_reason(monkeypatch):
  monkeypatch.setitem(sys.modules, "cupti", None)                 # `import cupti` fails
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  for release in ("3.6", "3.9"):
    monkeypatch.setattr(proton_capture, "triton_release", lambda: release)
    with pytest.raises(insitu.InsituUnavailable) as info:
      with insitu.capture():
        pass
    text = str(info.value)
    assert "cupti-python" in text and "pip install cupti-python" in text
    assert f"Proton is not used on triton {release}" in text and "ends the process" in text


def test_proton_is_chosen_only_for_a_release_proven_safe(monkeypatch):
  monkeypatch.setitem(sys.modules, "cupti", None)
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  assert proton_capture.PROVEN_SAFE == ()         # none yet: the probe found none
  started = []
  monkeypatch.setattr(proton_capture.ProtonSession, "start", lambda self: started.append(self))
  monkeypatch.setattr(proton_capture, "PROVEN_SAFE", ("3.99",))
  monkeypatch.setattr(proton_capture, "triton_release", lambda: "3.99")
  cap = insitu.capture(devices=1)
  cap.__enter__()
  assert cap.source == "proton" and len(started) == 1


def test_asking_for_cupti_without_it_says_how_to_get_it(monkeypatch):
  monkeypatch.setitem(sys.modules, "cupti", None)
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  with pytest.raises(insitu.InsituUnavailable, match="pip install cupti-python"):
    with insitu.capture(source="cupti"):
      pass
  with pytest.raises(ValueError, match="source must be one of"):
    insitu.capture(source="nsys")


def test_the_tuners_clock_falls_back_to_the_wall_when_no_safe_source(monkeypatch):
  from pallas_prof.tune import calltime
  monkeypatch.setitem(sys.modules, "cupti", None)
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  monkeypatch.setattr(proton_capture, "triton_release", lambda: "3.9")
  with pytest.raises(calltime.ClockError, match="in-situ capture is off"):
    calltime.gpu_kernels(lambda: None, 1)
