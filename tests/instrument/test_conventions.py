"""Span names and attribute keys from one module; several observers at once; profile()'s
spans through the backend's hook."""
from __future__ import annotations

import jax.numpy as jnp
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pallas_prof
from pallas_prof import events
from pallas_prof.backend import hooks
from pallas_prof.instrument import conventions as cv
from tests.instrument.spans import by_id, kernel_spans, load_example, lower_fresh, lower_spans


def _softmax(rng):
  softmax = load_example("softmax")
  x = jnp.asarray(rng.standard_normal((8, 100)).astype("float32"))
  return softmax, x


def test_every_span_name_and_key_is_declared(rng):
  softmax, x = _softmax(rng)
  exporter = InMemorySpanExporter()
  with pallas_prof.tracing(exporter):
    lower_fresh(softmax.softmax, x)
    from pallas_prof.backend.compiling.compile import compile_kernel
    from pallas_prof.backend import kernel_registry
    (rec,) = kernel_registry.kernels()
    compile_kernel(rec.generated, ("cuda", 90))
    pallas_prof.profile()
  spans = exporter.get_finished_spans()
  names = {s.name for s in spans}
  assert {cv.pallas_call("softmax_kernel"), cv.lower("exp"), cv.compile_kernel("softmax_kernel"),
          cv.profile("softmax_kernel"), cv.root()} <= names
  assert all(s.name.startswith(cv.SPAN_PREFIXES) for s in spans)
  undeclared = {k for s in spans for k in s.attributes if not cv.declared(k)}
  assert not undeclared, f"attribute keys not in instrument/conventions.py: {undeclared}"
  # a key the backend spells out itself is declared too (it does not import conventions)
  kernel = next(s for s in spans if s.name == cv.pallas_call("softmax_kernel"))
  assert cv.PALLAS_SOURCE_KEY in kernel.attributes and cv.PALLAS_SOURCE_KEY in cv.BACKEND_KEYS


def test_profile_emits_its_spans_through_the_hook(rng):
  """pallas_prof.profile() (not only the CLI) records `profile <kernel>` spans; on this
  machine without a GPU they carry the static verdict and the weights' basis."""
  softmax, x = _softmax(rng)
  lower_fresh(softmax.softmax, x)
  exporter = InMemorySpanExporter()
  with pallas_prof.tracing(exporter):
    report = pallas_prof.profile()
  (kp,) = report.kernels
  (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("profile ")]
  assert span.name == cv.profile("softmax_kernel")
  assert span.attributes[cv.PALLAS_KERNEL] == kp.label
  assert span.attributes[cv.PROFILE_VERDICT] == str(kp.verdict) and kp.verdict
  assert span.attributes[cv.PROFILE_WEIGHT_BASIS] == kp.weight_basis
  # the work model's cost of one launch, which XProf's roofline cannot take for a Triton
  # custom call: pallas-prof's plane in a profile carries it (docs/xprof.md)
  work = {k: span.attributes[cv.PROFILE_WORK_PREFIX + k] for k in cv.PROFILE_WORK}
  assert work == {"flops": kp.work.flops, "bytes": kp.work.bytes,
                  "transcendentals": kp.work.transcendentals, "exact": kp.work.exact}
  assert work["flops"] > 0 and work["bytes"] == 2 * x.nbytes and work["transcendentals"] > 0
  root = next(s for s in exporter.get_finished_spans() if s.name == cv.root())
  assert span.parent.span_id == root.context.span_id
  assert root.start_time <= span.start_time <= span.end_time <= root.end_time
  # without tracing, profile() tells nobody: no observer, no spans
  assert isinstance(hooks.observer(), hooks.NullObserver)
  pallas_prof.profile()


class Recorder(events.Observer):
  """An observer that is not OpenTelemetry: what a progress bar or a test would install."""
  enabled = True

  def __init__(self):
    self.calls = []

  def kernel(self, name, attributes):
    self.calls.append(("kernel", name))
    return hooks.NULL_SPAN

  def equation(self, eqn):
    self.calls.append(("equation", eqn.primitive))
    return hooks.NULL_SPAN

  def compiled(self, record):
    self.calls.append(("compiled", record.kernel))

  def profiled(self, kernel_profile, start_ns, end_ns, device):
    self.calls.append(("profiled", kernel_profile.name))


def test_several_observers_at_once(rng):
  softmax, x = _softmax(rng)
  recorder = Recorder()
  outer, inner = InMemorySpanExporter(), InMemorySpanExporter()
  hooks.add_observer(recorder)
  try:
    with pallas_prof.tracing(outer):
      with pallas_prof.tracing(inner, root_span="inner"):
        assert isinstance(hooks.observer(), hooks.FanOut)
        assert len(hooks.observers()) == 3
        lower_fresh(softmax.softmax, x)
        pallas_prof.profile()
  finally:
    hooks.remove_observer(recorder)
  assert hooks.observers() == ()
  assert ("kernel", "softmax_kernel") in recorder.calls and ("equation", "exp") in recorder.calls
  assert ("profiled", "softmax_kernel") in recorder.calls
  for exporter, root in ((outer, "pallas-prof"), (inner, "inner")):
    spans = exporter.get_finished_spans()
    assert len(kernel_spans(spans)) == 1 and lower_spans(spans)
    assert any(s.name == cv.profile("softmax_kernel") for s in spans)
    # each tracing's spans hang under its own spans, never under the other's
    index = by_id(spans)
    (top,) = [s for s in spans if s.parent is None]
    assert top.name == root
    assert all(s.parent.span_id in index for s in spans if s is not top)
  # the two recorded the same equations
  assert sorted(s.name for s in lower_spans(outer.get_finished_spans())) == \
      sorted(s.name for s in lower_spans(inner.get_finished_spans()))
