"""The advice as spans: `advise <kernel>` with its diagnoses and top action, when traced."""
from __future__ import annotations

from pallas_prof.advice import api
from pallas_prof.instrument import conventions as cv

from tests.instrument.spans import traced

from . import recorded


class _Record:
  """A registry record of a recorded kernel (no GeneratedKernel: a report read back)."""
  def __init__(self, kp):
    self.label, self.name, self.generated, self.compiled = kp.label, kp.name, None, None
    self.in_avals = tuple(kp.in_avals)


def test_an_advise_span_per_kernel():
  kp, rep = recorded.kernel("ka_copy_kernel", "float32[8192,8192]")
  softmax, _ = recorded.kernel("softmax_kernel")
  rep.kernels.append(softmax)
  with traced() as exporter:
    advice = api.for_report([_Record(kp), _Record(softmax)], rep)
  spans = {s.attributes[cv.PALLAS_KERNEL]: s for s in exporter.get_finished_spans()
           if s.name.startswith("advise ")}
  assert set(spans) == {kp.label, softmax.label}
  copy = spans[kp.label]
  assert copy.name == "advise ka_copy_kernel"
  assert copy.attributes[cv.ADVICE_TOP_ACTION].startswith("num_warps 8 -> 16")
  assert copy.attributes[cv.ADVICE_TOP_KIND] == "a"
  assert copy.attributes[cv.ADVICE_MEASURED] == "not measured: `pallas-prof advise` tries it on the GPU"
  assert "registers spill: 72 bytes of spill stores and loads at 255 registers per thread" in \
      copy.attributes[cv.ADVICE_DIAGNOSES]
  assert copy.attributes[cv.ADVICE_SUMMARY] == advice[0].summary
  roof = spans[softmax.label]
  assert roof.attributes[cv.ADVICE_AT_ROOF] is True and cv.ADVICE_TOP_ACTION not in roof.attributes
  assert all(cv.declared(k) for s in spans.values() for k in s.attributes)


def test_the_advice_reaches_any_enabled_observer_through_its_typed_method():
  """advise tells observer().advised() whenever the observer is enabled: events.Observer
  gives every observer that method (a no-op unless overridden), so nothing asks whether
  the observer has it."""
  from pallas_prof.backend import hooks
  from pallas_prof.events import Observer

  class Watching(Observer):
    enabled = True

    def __init__(self):
      self.seen = []

    def advised(self, advice, start_ns, end_ns):
      self.seen.append((advice.label, start_ns <= end_ns))

  class Silent(Observer):        # enabled, and watching other events only
    enabled = True

  kp, rep = recorded.kernel("ka_copy_kernel", "float32[8192,8192]")
  for observer, expected in ((Watching(), [(kp.label, True)]), (Silent(), None)):
    hooks.add_observer(observer)
    try:
      (advice,) = api.for_report([_Record(kp)], rep)
    finally:
      hooks.remove_observer(observer)
    assert advice.label == kp.label
    if expected is not None:
      assert observer.seen == expected
