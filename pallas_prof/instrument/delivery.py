"""Spans sent to an OTLP collector that may not be there.

An unreachable collector made OpenTelemetry's exporter retry each batch with a growing
backoff until its ten-second deadline, print a raw line for every retry, and end the run
without a word that the spans never arrived. Here:

- `otlp_timeout()`: a short deadline for pallas-prof's own OTLP exporters, unless
  OTEL_EXPORTER_OTLP_TIMEOUT or OTEL_EXPORTER_OTLP_TRACES_TIMEOUT sets the user's;
- `DeliveryWatch`: wraps such an exporter; after the first batch that fails, the rest are
  not sent (one unreachable collector costs one deadline, not one per batch, and none at
  exit); the exporter's own log lines are kept off the terminal while it exports; and
  `message()` says once how many spans were not delivered, where (the endpoint without its
  credentials, path or query) and what to do.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Sequence
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

OTLP_TIMEOUT_S = 3.0        # a collector that is there answers far sooner
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
OTLP_LOGGERS = "opentelemetry.exporter.otlp"


def otlp_timeout() -> float | None:
  """The deadline of an export, in seconds: None (the exporter reads the user's variable)
  where one is set, else OTLP_TIMEOUT_S."""
  return None if any(os.environ.get(v) for v in TIMEOUT_VARIABLES) else OTLP_TIMEOUT_S


def shown_endpoint(endpoint: str | None) -> str:
  """The endpoint as a message may show it: scheme, host and port only (a URL's user and
  password, its path and query can hold a token)."""
  if not endpoint:
    return "the endpoint OTEL_EXPORTER_OTLP_ENDPOINT names"
  text = endpoint if "://" in endpoint else "//" + endpoint
  try:
    parts = urlsplit(text)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
  except ValueError:
    return "an endpoint that is not a URL"
  host = f"[{host}]" if ":" in host else host
  return f"{parts.scheme + '://' if parts.scheme else ''}{host}{port}"


class _Heard(logging.Filter):
  """Keeps the OTLP exporters' records off the terminal while a DeliveryWatch exports in
  this thread, and keeps their words for the reason it gives; other threads' records (the
  user's own exporters) pass."""

  def __init__(self):
    super().__init__()
    self.local = threading.local()

  def filter(self, record: logging.LogRecord) -> bool:
    heard = getattr(self.local, "heard", None)
    if heard is None:
      return True
    heard.append(record.getMessage())
    return False


_HEARD = _Heard()


def _listen_to_otlp_loggers() -> None:
  for name in list(logging.root.manager.loggerDict):
    if name.startswith(OTLP_LOGGERS):
      logger = logging.getLogger(name)
      if _HEARD not in logger.filters:
        logger.addFilter(_HEARD)


class DeliveryWatch(SpanExporter):
  """An OTLP exporter that stops sending after its first failed batch and says so once."""

  def __init__(self, exporter: SpanExporter, endpoint: str | None):
    self.exporter = exporter
    self.endpoint = shown_endpoint(endpoint)
    self._target = endpoint
    self.delivered = 0
    self.undelivered = 0
    self.reason: str | None = None

  def _quietly(self, call):
    _listen_to_otlp_loggers()
    heard: list[str] = []
    _HEARD.local.heard = heard
    try:
      return call(), heard
    finally:
      _HEARD.local.heard = None

  def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
    if self.reason is not None:
      self.undelivered += len(spans)
      return SpanExportResult.FAILURE
    try:
      result, heard = self._quietly(lambda: self.exporter.export(spans))
    except Exception as e:  # noqa: BLE001 - an exporter's failure is said, never raised here
      result, heard = SpanExportResult.FAILURE, [f"{type(e).__name__}: {e}"]
    if result == SpanExportResult.SUCCESS:
      self.delivered += len(spans)
      return result
    self.undelivered += len(spans)
    self.reason = _reason(self._target, " ".join(heard))
    return SpanExportResult.FAILURE

  def force_flush(self, timeout_millis: int = 30000) -> bool:
    return self._quietly(lambda: self.exporter.force_flush(timeout_millis))[0]

  def shutdown(self) -> None:
    self._quietly(self.exporter.shutdown)

  def message(self) -> str | None:
    """One line on the spans not delivered, or None when all were."""
    if not self.undelivered:
      return None
    sent = f" ({self.delivered} were)" if self.delivered else ""
    return (f"pallas-prof: {self.undelivered} span(s) were not delivered to the OTLP "
            f"collector at {self.endpoint}{sent}: {self.reason}; pallas-prof stopped sending "
            "after the first failure. Start the collector there, or give the right endpoint "
            "(--otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT); a slow one may need a longer "
            f"OTEL_EXPORTER_OTLP_TIMEOUT (pallas-prof waits {OTLP_TIMEOUT_S:g} s by default)")


PROBE_S = 1.0      # the connection that says why a batch failed: refused is at once


def _reason(endpoint: str | None, heard: str) -> str:
  """Why a batch failed, in words: a connection to the endpoint's host and port says
  (refused, silent, a name that does not resolve) where the exporter's log does not (its
  own text is not shown: it may quote the full URL)."""
  address = _address(endpoint)
  if address is not None:
    try:
      with socket.create_connection(address, timeout=PROBE_S):
        pass
    except ConnectionRefusedError:
      return "the connection was refused (no collector listens there)"
    except socket.gaierror:
      return "its host name does not resolve"
    except (socket.timeout, TimeoutError):
      return "it did not answer in time"
    except OSError as e:
      return f"it cannot be reached ({e.strerror or type(e).__name__})"
  text = heard.lower()
  if "timed out" in text or "timeout" in text or "deadline" in text:
    return "it did not answer in time"
  if "ssl" in text or "certificate" in text:
    return "the TLS connection failed"
  return "the collector did not take them"


DEFAULT_PORTS = {"http": 80, "https": 443, "": 4317}     # no scheme: gRPC's usual port


def _address(endpoint: str | None) -> tuple[str, int] | None:
  if not endpoint:
    return None
  try:
    parts = urlsplit(endpoint if "://" in endpoint else "//" + endpoint)
    port = parts.port or DEFAULT_PORTS.get(parts.scheme)
  except ValueError:
    return None
  return (parts.hostname, port) if parts.hostname and port else None
