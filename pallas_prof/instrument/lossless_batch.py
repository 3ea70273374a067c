"""`LosslessBatchSpanProcessor`: batches spans like the SDK's BatchSpanProcessor, but
blocks the producer instead of dropping spans when the queue is full, and drains
everything on flush and shutdown. It serves every exporter tracing() sets up
(otlp_json.py, perfetto_trace.py, the OTLP exporters of the SDK)."""
from __future__ import annotations

import collections
import os
import threading
import weakref

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


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
