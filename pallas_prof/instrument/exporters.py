"""Where spans go: OTLP-JSON lines, Perfetto trace events, and a batch
processor that never drops a span.

- `OtlpJsonFileExporter`: one ExportTraceServiceRequest per line in the
  OTLP/JSON encoding (hex trace/span ids, integer enums, 64-bit integers as
  strings), the format the OpenTelemetry Collector's `otlpjsonfile` receiver
  reads. Written straight from the SDK's spans: the protobuf round trip
  through `json_format` is ten times slower, and a run may have 10^5 spans.
- `PerfettoExporter`: Chrome trace-event JSON (opens in ui.perfetto.dev and
  chrome://tracing): one track (thread) per kernel, with the kernel's
  `pallas_call` slice and its nested `lower` slices, then its `compile`
  slice and the five stage slices under it.
- `LosslessBatchSpanProcessor`: batches like the SDK's BatchSpanProcessor
  but blocks the producer instead of dropping spans when the queue is full,
  and drains everything on flush and shutdown.
"""
from __future__ import annotations

import base64
import collections
import json
import os
import threading
import weakref
from typing import Any, Sequence

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from ..safe_files import write_atomic

# --- OTLP/JSON ------------------------------------------------------------------------------

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
    self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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


# --- Perfetto / Chrome trace events ------------------------------------------------------------

PID = 1
MAIN_TID = 1


def _is_kernel_root(span) -> bool:
  # a kernel's lowering, or its whole compile (stage spans carry no compile key)
  return span["name"].startswith("pallas_call ") or (
      span["name"].startswith("compile ") and "triton.compile_key" in span["args"])


class PerfettoExporter(SpanExporter):
  """Collects spans and writes Chrome trace-event JSON on flush and shutdown.

  Tracks: spans under a kernel's `pallas_call` or `compile <kernel>` span go
  on that kernel's track (one per generated kernel, keyed by its source
  hash); any other span (the `pallas-prof` root, the user's own) goes on the
  main track. Slices are complete events ("ph": "X"), nested by time.
  """

  def __init__(self, path: str, process_name: str = "pallas-prof"):
    self.path = os.path.abspath(path)
    self.process_name = process_name
    self._spans: list[dict[str, Any]] = []
    self._lock = threading.Lock()
    self._closed = False
    self.failure: OSError | None = None    # the last write's, when it could not be written

  def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
    compact = [_compact(s) for s in spans]
    with self._lock:
      if self._closed:
        return SpanExportResult.FAILURE
      self._spans.extend(compact)
    return SpanExportResult.SUCCESS

  def force_flush(self, timeout_millis: int = 30000) -> bool:
    self.write()
    return True

  def shutdown(self) -> None:
    self.write()
    with self._lock:
      self._closed = True

  def write(self) -> None:
    with self._lock:
      if self._closed:
        return
      spans = list(self._spans)
    document = trace_events(spans, self.process_name)
    try:
      directory = os.path.dirname(self.path)
      if directory:
        os.makedirs(directory, exist_ok=True)
      # whole or not at all: the file a viewer opens is never half a document
      write_atomic(self.path, json.dumps(document, separators=(",", ":")), mode=0o644)
      self.failure = None
    except OSError as e:
      self.failure = e


def _compact(span: ReadableSpan) -> dict[str, Any]:
  args = {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}
  status = span.status.status_code
  if status is StatusCode.ERROR:
    args["otel.status"] = "ERROR"
    if span.status.description:
      args["otel.status_description"] = span.status.description
  return {"id": span.get_span_context().span_id,
          "parent": span.parent.span_id if span.parent is not None else None,
          "name": span.name, "start": span.start_time, "end": span.end_time, "args": args,
          "events": [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events]}


def _track_key(span, by_id, memo) -> Any:
  """The kernel track a span belongs on, or None for the main track."""
  chain = []
  current = span
  key = None
  while current is not None:
    cached = memo.get(current["id"])
    if cached is not None:
      key = cached
      break
    chain.append(current)
    if _is_kernel_root(current):
      args = current["args"]
      key = ("kernel", args.get("pallas.source_key") or current["id"],
             args.get("pallas.kernel") or current["name"].split(" ", 1)[1])
      break
    current = by_id.get(current["parent"])
  key = key or ("main",)
  for s in chain:
    memo[s["id"]] = key
  return key


def trace_events(spans: list[dict[str, Any]], process_name: str = "pallas-prof") -> dict[str, Any]:
  """The trace-event document for compact spans (see `_compact`)."""
  by_id = {s["id"]: s for s in spans}
  memo: dict[int, Any] = {}
  tids: dict[Any, int] = {("main",): MAIN_TID}
  events: list[dict[str, Any]] = [
      {"name": "process_name", "ph": "M", "pid": PID, "tid": MAIN_TID,
       "args": {"name": process_name}},
      {"name": "thread_name", "ph": "M", "pid": PID, "tid": MAIN_TID,
       "args": {"name": "pallas-prof"}},
  ]
  slices = []
  # microseconds from the first span: absolute epoch times would lose
  # sub-microsecond precision in a double and blur the nesting
  base = min((s["start"] for s in spans), default=0)
  for span in sorted(spans, key=lambda s: (s["start"], -(s["end"] - s["start"]))):
    key = _track_key(span, by_id, memo)
    if key not in tids:
      tids[key] = len(tids) + 1
      events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tids[key],
                     "args": {"name": f"kernel {key[2]}"}})
      events.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tids[key],
                     "args": {"sort_index": tids[key]}})
    tid = tids[key]
    category = span["name"].split(" ", 1)[0]
    slices.append({"name": span["name"], "cat": category, "ph": "X", "pid": PID, "tid": tid,
                   "ts": (span["start"] - base) / 1000.0,
                   "dur": max(span["end"] - span["start"], 0) / 1000.0,
                   "args": _json_safe(span["args"])})
    for name, ts, attrs in span["events"]:
      slices.append({"name": name, "cat": "event", "ph": "i", "s": "t", "pid": PID, "tid": tid,
                     "ts": max(ts - base, 0) / 1000.0, "args": _json_safe(attrs)})
  return {"traceEvents": events + slices, "displayTimeUnit": "ns",
          "otherData": {"trace_start_unix_ns": base}}


def _json_safe(args: dict[str, Any]) -> dict[str, Any]:
  out = {}
  for k, v in args.items():
    if isinstance(v, (str, int, float, bool)) or v is None:
      out[k] = v
    elif isinstance(v, (list, tuple)):
      out[k] = [x if isinstance(x, (str, int, float, bool)) else str(x) for x in v]
    else:
      out[k] = str(v)
  return out


# --- batching without loss ---------------------------------------------------------------------

class LosslessBatchSpanProcessor(SpanProcessor):
  """Exports ended spans in batches from a worker thread; never drops one.

  The SDK's BatchSpanProcessor drops spans when its queue is full; a trace
  with holes in it misleads, so here a full queue makes the producer wait
  (lowering a kernel produces spans far slower than any exporter takes
  them, so in practice nobody waits). `force_flush` and `shutdown` export
  everything queued, and the exporter's own flush is called after.
  """

  def __init__(self, exporter: SpanExporter, *, max_queue_size: int = 65536,
               max_export_batch_size: int = 2048, schedule_delay_millis: float = 1000.0):
    self.exporter = exporter
    self._max_queue = max_queue_size
    self._batch = max_export_batch_size
    self._delay = schedule_delay_millis / 1000.0
    self._queue: collections.deque = collections.deque()
    self._cond = threading.Condition()
    self._export_lock = threading.Lock()
    self._shutdown = False
    self.exported = 0
    self.failed = 0
    self._worker = threading.Thread(target=self._run, name="pallas-prof-span-export", daemon=True)
    self._worker.start()
    if hasattr(os, "register_at_fork"):
      reinit = weakref.WeakMethod(self._after_fork)

      def after_fork_in_child():
        method = reinit()
        if method is not None:
          method()

      os.register_at_fork(after_in_child=after_fork_in_child)

  def _after_fork(self):
    self._queue = collections.deque()
    self._cond = threading.Condition()
    self._export_lock = threading.Lock()
    if not self._shutdown:
      self._worker = threading.Thread(target=self._run, name="pallas-prof-span-export",
                                      daemon=True)
      self._worker.start()

  def on_start(self, span, parent_context=None) -> None:
    pass

  def on_end(self, span: ReadableSpan) -> None:
    if not span.context.trace_flags.sampled:
      return
    with self._cond:
      if self._shutdown:
        # the tracing this processor served has ended (e.g. it was added to
        # the caller's provider, which lives on): later spans are not ours
        return
      while len(self._queue) >= self._max_queue:
        self._cond.notify_all()
        self._cond.wait(0.05)
      self._queue.append(span)
      if len(self._queue) >= self._batch:
        self._cond.notify_all()

  def _take(self, limit: int) -> list[ReadableSpan]:
    batch = []
    while self._queue and len(batch) < limit:
      batch.append(self._queue.popleft())
    return batch

  def _run(self) -> None:
    while True:
      with self._cond:
        if not self._queue and not self._shutdown:
          self._cond.wait(self._delay)
        if self._shutdown and not self._queue:
          return
        batch = self._take(self._batch)
        self._cond.notify_all()       # room in the queue again
      if batch:
        self._export_now(batch)

  def _export_now(self, batch: list[ReadableSpan]) -> None:
    with self._export_lock:
      try:
        result = self.exporter.export(batch)
      except Exception:  # noqa: BLE001 - an exporter failure must not break lowering
        result = SpanExportResult.FAILURE
      if result is SpanExportResult.SUCCESS:
        self.exported += len(batch)
      else:
        self.failed += len(batch)

  def _drain(self) -> None:
    while True:
      with self._cond:
        batch = self._take(self._batch)
        self._cond.notify_all()
      if not batch:
        return
      self._export_now(batch)

  def force_flush(self, timeout_millis: int = 30000) -> bool:
    self._drain()
    # the worker may hold a batch it took before we drained: wait for it
    with self._export_lock:
      pass
    flush = getattr(self.exporter, "force_flush", None)
    if flush is not None:
      try:
        return bool(flush(timeout_millis))
      except TypeError:
        return bool(flush())
    return True

  def shutdown(self) -> None:
    """Exports everything queued, stops the worker and shuts the exporter down."""
    if self._stop():
      self.exporter.shutdown()

  def shutdown_keep_exporter(self) -> None:
    """Like shutdown, but flushes the exporter instead (it belongs to the caller)."""
    if self._stop():
      flush = getattr(self.exporter, "force_flush", None)
      if flush is not None:
        flush()

  def _stop(self) -> bool:
    with self._cond:
      if self._shutdown:
        return False
      self._shutdown = True
      self._cond.notify_all()
    self._worker.join()
    self._drain()
    return True
