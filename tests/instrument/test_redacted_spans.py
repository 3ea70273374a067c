"""Spans reach their exporters masked under tracing(redact=True) (instrument/redacted_spans.py):
every text of a span, its exception events and status included, the same for each exporter."""
from __future__ import annotations

from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Status, StatusCode

from pallas_prof.instrument.tracer import Tracing

S = "s3cr3t"


class _Kept:
  """An exporter that keeps what it is given."""

  def __init__(self):
    self.spans = []

  def export(self, spans):
    self.spans += list(spans)
    return SpanExportResult.SUCCESS

  def shutdown(self):
    pass

  def force_flush(self, timeout_millis=30000):
    return True


def _texts(span) -> str:
  return repr((span.name, dict(span.attributes), [(e.name, dict(e.attributes))
                                                  for e in span.events],
               span.status.description))


def _traced(redact: bool) -> list:
  kept = _Kept()
  with Tracing(kept, root_span=f"pallas-prof run;token={S}", redact=redact,
               root_attributes={"pallas.script": f"/tmp/API_KEY={S}/script.py",
                                "pallas.lines": (f"password={S}", "ok"), "n": 3}) as t:
    with t.provider.get_tracer("test").start_as_current_span("lower sort") as span:
      span.set_attribute("code.filepath", f"/home/u/admin:{S}@db/k.py")
      try:
        raise ConnectionError(f"postgresql://admin:{S}@db/app Authorization: Bearer {S}")
      except ConnectionError as e:
        span.record_exception(e)
        span.set_status(Status(StatusCode.ERROR, f"token={S}"))
  return kept.spans


def test_every_text_of_a_span_is_masked():
  spans = _traced(redact=True)
  assert len(spans) == 2 and not any(S in _texts(s) for s in spans), [_texts(s) for s in spans]
  root = next(s for s in spans if s.name.startswith("pallas-prof"))
  assert root.attributes["pallas.script"] == "/tmp/API_KEY=***"
  assert root.attributes["pallas.lines"] == ("password=***", "ok") and root.attributes["n"] == 3
  lower = next(s for s in spans if s.name == "lower sort")
  (event,) = lower.events
  assert event.attributes["exception.message"] == \
      "postgresql://admin:***@db/app Authorization: Bearer ***"
  assert lower.parent.span_id == root.context.span_id          # the trace is the same trace
  assert lower.status.description == "token=***"


def test_without_redact_spans_are_as_recorded():
  assert all(S in _texts(s) for s in _traced(redact=False))
