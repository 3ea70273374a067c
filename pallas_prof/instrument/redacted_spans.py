"""Spans with the secrets in their texts masked before an exporter sees them: the OTLP-JSON
file, the Perfetto file and a collector all get the same masked spans.

`tracing(redact=True)` (as `pallas-prof run` asks, unless --no-redact) puts a
RedactingExporter in front of each exporter. Every string of a span is masked
(pallas_prof/redaction): its name, its attributes (the script's path, `code.filepath`,
`pallas.source`, the argv), its events' attributes (a recorded exception's message and
stack trace) and its status description. Numbers, ids and times are left as they are.
"""
from __future__ import annotations

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import Status

from ..redaction import Redactor


def _value(value, redactor: Redactor):
  if isinstance(value, str):
    return redactor.text(value)
  if isinstance(value, (tuple, list)):
    return tuple(_value(v, redactor) for v in value)
  return value


def _attributes(attributes, redactor: Redactor) -> dict:
  return {key: _value(value, redactor) for key, value in (attributes or {}).items()}


def redacted(span: ReadableSpan, redactor: Redactor) -> ReadableSpan:
  """A copy of `span` with every string in it masked."""
  status = span.status
  if status is not None and status.description:
    status = Status(status.status_code, redactor.text(status.description))
  events = tuple(Event(redactor.text(e.name), _attributes(e.attributes, redactor),
                       timestamp=e.timestamp) for e in span.events)
  return ReadableSpan(name=redactor.text(span.name), context=span.context, parent=span.parent,
                      resource=span.resource, attributes=_attributes(span.attributes, redactor),
                      events=events, links=span.links, kind=span.kind, status=status,
                      start_time=span.start_time, end_time=span.end_time,
                      instrumentation_scope=span.instrumentation_scope)


class RedactingExporter(SpanExporter):
  """`inner`, given masked copies of the spans. The environment's secrets are read at each
  export: a script may load them into it while it runs. What else is asked of it (a file
  exporter's `path` and `failure`) is the inner exporter's."""

  def __init__(self, inner: SpanExporter):
    self.inner = inner

  def export(self, spans):
    redactor = Redactor()
    return self.inner.export([redacted(span, redactor) for span in spans])

  def shutdown(self) -> None:
    return self.inner.shutdown()

  def force_flush(self, timeout_millis: int = 30000) -> bool:
    flush = getattr(self.inner, "force_flush", None)
    return flush(timeout_millis) if flush is not None else True

  def __getattr__(self, name):
    return getattr(self.inner, name)
