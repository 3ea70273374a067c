"""Spans as Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

`PerfettoExporter` collects the spans and writes the whole document on flush and
shutdown: one track (thread) per kernel, with the kernel's `pallas_call` slice and its
nested `lower` slices, then its `compile` slice and the five stage slices under it;
every other span on the main track. `trace_events` builds the document.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from ..safe_files import refuse_special, write_atomic
from .conventions import (OTEL_STATUS, OTEL_STATUS_DESCRIPTION, PALLAS_KERNEL, PALLAS_SOURCE_KEY,
                          TRITON_COMPILE_KEY)


PID = 1
MAIN_TID = 1


def _is_kernel_root(span) -> bool:
  # a kernel's lowering, or its whole compile (stage spans carry no compile key)
  return span["name"].startswith("pallas_call ") or (
      span["name"].startswith("compile ") and TRITON_COMPILE_KEY in span["args"])


class PerfettoExporter(SpanExporter):
  """Collects spans and writes Chrome trace-event JSON on flush and shutdown.

  Tracks: spans under a kernel's `pallas_call` or `compile <kernel>` span go
  on that kernel's track (one per generated kernel, keyed by its source
  hash); any other span (the `pallas-prof` root, the user's own) goes on the
  main track. Slices are complete events ("ph": "X"), nested by time.
  """

  def __init__(self, path: str, process_name: str = "pallas-prof"):
    self.path = os.path.abspath(path)
    # refused as the OTLP-JSON file is: its rename would replace a FIFO or device of the user's
    refuse_special(self.path, "the Perfetto trace file")
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
    args[OTEL_STATUS] = "ERROR"
    if span.status.description:
      args[OTEL_STATUS_DESCRIPTION] = span.status.description
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
      key = ("kernel", args.get(PALLAS_SOURCE_KEY) or current["id"],
             args.get(PALLAS_KERNEL) or current["name"].split(" ", 1)[1])
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
