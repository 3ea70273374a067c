"""Spans as OTLP/JSON lines: the format the OpenTelemetry Collector's `otlpjsonfile`
receiver reads, written and read back.

- `OtlpJsonFileExporter`: one ExportTraceServiceRequest per line in the OTLP/JSON
  encoding (hex trace/span ids, integer enums, 64-bit integers as strings). Written
  straight from the SDK's spans: the protobuf round trip through `json_format` is ten
  times slower, and a run may have 10^5 spans.
- `otlp_json_request`: that encoding of a batch of spans.
- `read_otlp_json`: a file's spans back, flattened.
"""
from __future__ import annotations

import base64
import json
import os
import threading
from typing import Any, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from ..safe_files import open_for_append

# Span.SpanKind in the OTLP protobuf: the SDK's enum starts at INTERNAL = 0,
# the wire format at UNSPECIFIED = 0.
_KIND = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4,
         SpanKind.CONSUMER: 5}
_FLAG_HAS_IS_REMOTE = 0x100
_FLAG_IS_REMOTE = 0x200


def _any_value(value) -> dict[str, Any]:
  # bool before int: bool is an int in Python
  if isinstance(value, bool):
    return {"boolValue": value}
  if isinstance(value, int):
    return {"intValue": str(value)}
  if isinstance(value, float):
    return {"doubleValue": value}
  if isinstance(value, str):
    return {"stringValue": value}
  if isinstance(value, bytes):
    return {"bytesValue": base64.b64encode(value).decode()}
  if isinstance(value, (list, tuple)):
    return {"arrayValue": {"values": [_any_value(v) for v in value]}}
  if isinstance(value, dict):
    return {"kvlistValue": {"values": _attributes(value)}}
  return {"stringValue": str(value)}


def _attributes(attributes) -> list[dict[str, Any]]:
  if not attributes:
    return []
  return [{"key": k, "value": _any_value(v)} for k, v in attributes.items()]


def _flags(parent) -> int:
  flags = _FLAG_HAS_IS_REMOTE
  if parent is not None and parent.is_remote:
    flags |= _FLAG_IS_REMOTE
  return flags


def _span_json(span: ReadableSpan) -> dict[str, Any]:
  ctx = span.get_span_context()
  out: dict[str, Any] = {"traceId": f"{ctx.trace_id:032x}", "spanId": f"{ctx.span_id:016x}"}
  if ctx.trace_state:
    out["traceState"] = ",".join(f"{k}={v}" for k, v in ctx.trace_state.items())
  if span.parent is not None:
    out["parentSpanId"] = f"{span.parent.span_id:016x}"
  out["flags"] = _flags(span.parent)
  out["name"] = span.name
  out["kind"] = _KIND[span.kind]
  out["startTimeUnixNano"] = str(span.start_time)
  out["endTimeUnixNano"] = str(span.end_time)
  out["attributes"] = _attributes(span.attributes)
  if span.dropped_attributes:
    out["droppedAttributesCount"] = span.dropped_attributes
  if span.events:
    out["events"] = [_event_json(e) for e in span.events]
  if span.dropped_events:
    out["droppedEventsCount"] = span.dropped_events
  if span.links:
    out["links"] = [_link_json(link) for link in span.links]
  if span.dropped_links:
    out["droppedLinksCount"] = span.dropped_links
  status: dict[str, Any] = {}
  if span.status.description:
    status["message"] = span.status.description
  if span.status.status_code is not StatusCode.UNSET:
    status["code"] = span.status.status_code.value
  out["status"] = status
  return out


def _event_json(event) -> dict[str, Any]:
  out = {"timeUnixNano": str(event.timestamp), "name": event.name,
         "attributes": _attributes(event.attributes)}
  if event.dropped_attributes:
    out["droppedAttributesCount"] = event.dropped_attributes
  return out


def _link_json(link) -> dict[str, Any]:
  out = {"traceId": f"{link.context.trace_id:032x}", "spanId": f"{link.context.span_id:016x}",
         "attributes": _attributes(link.attributes), "flags": _flags(link.context)}
  if link.dropped_attributes:
    out["droppedAttributesCount"] = link.dropped_attributes
  return out


def _scope_json(scope) -> dict[str, Any]:
  if scope is None:
    return {}
  out: dict[str, Any] = {"name": scope.name}
  if scope.version:
    out["version"] = scope.version
  if getattr(scope, "attributes", None):
    out["attributes"] = _attributes(scope.attributes)
  return out


def otlp_json_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
  """An ExportTraceServiceRequest in OTLP/JSON: spans grouped by resource and scope."""
  # grouped by identity: hashing an SDK Resource serializes it, every time
  grouped: dict[int, tuple[Any, dict[int, tuple[Any, list]]]] = {}
  for span in spans:
    resource, scope = span.resource, span.instrumentation_scope
    scopes = grouped.setdefault(id(resource), (resource, {}))[1]
    scopes.setdefault(id(scope), (scope, []))[1].append(_span_json(span))
  resource_spans = []
  for resource, scopes in grouped.values():
    scope_spans = []
    for scope, encoded in scopes.values():
      entry: dict[str, Any] = {"scope": _scope_json(scope), "spans": encoded}
      if scope is not None and scope.schema_url:
        entry["schemaUrl"] = scope.schema_url
      scope_spans.append(entry)
    entry = {"resource": {"attributes": _attributes(resource.attributes)},
             "scopeSpans": scope_spans}
    if resource.schema_url:
      entry["schemaUrl"] = resource.schema_url
    resource_spans.append(entry)
  return {"resourceSpans": resource_spans}


class OtlpJsonFileExporter(SpanExporter):
  """Appends one OTLP/JSON ExportTraceServiceRequest per export call, one per line.

  A line that cannot be written whole (a full disk) is cut off again: the file keeps
  only whole lines, stops growing, and `failure` says why."""

  def __init__(self, path: str):
    self.path = os.path.abspath(path)
    directory = os.path.dirname(self.path)
    if directory:
      os.makedirs(directory, exist_ok=True)
    # a regular file only: a FIFO nobody reads would block here for ever
    self._fd: int | None = open_for_append(self.path, 0o644)
    self._whole = os.fstat(self._fd).st_size       # the end of the last whole line
    self.failure: OSError | None = None
    self._lock = threading.Lock()

  def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
    if not spans:
      return SpanExportResult.SUCCESS
    line = (json.dumps(otlp_json_request(spans), separators=(",", ":")) + "\n").encode()
    with self._lock:
      if self._fd is None:
        return SpanExportResult.FAILURE
      try:
        _write_all(self._fd, line)
      except OSError as e:
        self._give_up(e)
        return SpanExportResult.FAILURE
      self._whole += len(line)
    return SpanExportResult.SUCCESS

  def _give_up(self, error: OSError) -> None:
    self.failure = error
    try:
      os.ftruncate(self._fd, self._whole)       # no half line at the end
    except OSError:
      pass
    os.close(self._fd)
    self._fd = None

  def force_flush(self, timeout_millis: int = 30000) -> bool:
    return True                                  # each line is written when exported

  def shutdown(self) -> None:
    with self._lock:
      if self._fd is not None:
        os.close(self._fd)
        self._fd = None


def _write_all(fd: int, data: bytes) -> None:
  view = memoryview(data)
  while view:
    view = view[os.write(fd, view):]


def read_otlp_json(path: str) -> list[dict[str, Any]]:
  """The spans of an OTLP-JSON lines file, flattened (each with its resource's attributes)."""
  spans = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        continue
      request = json.loads(line)
      for rs in request.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
          spans.extend(ss.get("spans", []))
  return spans
