"""Tracer setup: `tracing()`, `enable()`/`disable()`, exporters from arguments or OTEL_* variables.

See the package docstring (pallas_prof/instrument/__init__.py) for the
environment variables and defaults.
"""
from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import socket
import sys
import threading
import warnings
from typing import Any
from urllib.parse import urlparse

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Status, StatusCode

from .. import settings
from ..backend import compat, hooks
from ..version import __version__
from .delivery import DeliveryWatch, otlp_timeout
from .lossless_batch import LosslessBatchSpanProcessor
from .otlp_json import OtlpJsonFileExporter
from .perfetto_trace import PerfettoExporter
from .redacted_spans import RedactingExporter
from . import conventions as cv
from .observer import _OWNERS, SpanObserver, disown_span, own_span

DEFAULT_OTLP_JSON_FILE = "pallas-prof-traces.jsonl"
EXPORTER_NAMES = ("otlp", "otlp_http", "otlp_grpc", "otlp_json", "perfetto", "console", "none")


# --- exporters -------------------------------------------------------------------------------

def _http_endpoint(endpoint: str | None) -> str | None:
  """A base URL gets OTLP/HTTP's trace path, as OTEL_EXPORTER_OTLP_ENDPOINT does."""
  if endpoint is None:
    return None
  if urlparse(endpoint).path in ("", "/"):
    return endpoint.rstrip("/") + "/v1/traces"
  return endpoint


def otlp_exporter(protocol: str | None = None, endpoint: str | None = None) -> SpanExporter:
  """OTLP over HTTP (protobuf) or gRPC; unset values come from OTEL_EXPORTER_OTLP_*."""
  protocol = (protocol or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
              or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").lower()
  timeout = otlp_timeout()        # short, unless the user's OTEL_* variable sets one
  if protocol in ("grpc", "otlp_grpc"):
    # lazy: loads grpc, for OTEL_EXPORTER_OTLP_PROTOCOL=grpc only
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    if endpoint is None:
      return OTLPSpanExporter(timeout=timeout)
    insecure = urlparse(endpoint).scheme != "https"
    return OTLPSpanExporter(endpoint=endpoint, insecure=insecure, timeout=timeout)
  if protocol in ("http/protobuf", "http", "otlp_http"):
    # lazy: only the exporter of the protocol asked for is loaded
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter(endpoint=_http_endpoint(endpoint), timeout=timeout)
  raise ValueError(f"OTLP protocol {protocol!r} is not supported: use grpc or http/protobuf")


def _is_otlp(exporter: SpanExporter) -> bool:
  return type(exporter).__module__.startswith("opentelemetry.exporter.otlp")


def _endpoint_of(exporter: SpanExporter) -> str | None:
  return getattr(exporter, "_endpoint", None) or os.environ.get(
      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")


def exporter_named(name: str, *, path: str | None = None) -> SpanExporter | None:
  name = name.strip().lower()
  if name in ("otlp", "otlp_http", "otlp_grpc"):
    protocol = {"otlp_http": "http/protobuf", "otlp_grpc": "grpc"}.get(name)
    return otlp_exporter(protocol)
  if name in ("otlp_json", "otlp_file", "file"):
    return OtlpJsonFileExporter(path or settings.value("PALLAS_PROF_TRACE_FILE")
                                or DEFAULT_OTLP_JSON_FILE)
  if name == "perfetto":
    return PerfettoExporter(path or settings.value("PALLAS_PROF_PERFETTO")
                            or "pallas-prof-trace.perfetto.json")
  if name == "console":
    return ConsoleSpanExporter(out=sys.stdout)
  if name == "none":
    return None
  raise ValueError(f"unknown span exporter {name!r}; known: {', '.join(EXPORTER_NAMES)}")


def exporters_from_env() -> list[SpanExporter]:
  """The exporters the OTEL_* and PALLAS_PROF_* variables ask for.

  OTEL_TRACES_EXPORTER (comma-separated: otlp, console, none, and
  pallas-prof's otlp_json, perfetto) wins; without it an OTLP endpoint
  variable selects OTLP, and otherwise spans go to an OTLP-JSON file.
  PALLAS_PROF_TRACE_FILE and PALLAS_PROF_PERFETTO add those files.
  """
  names: list[str] = []
  chosen = os.environ.get("OTEL_TRACES_EXPORTER", "").strip()
  if chosen:
    names = [n.strip().lower() for n in chosen.split(",") if n.strip()]
  elif os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
      "OTEL_EXPORTER_OTLP_ENDPOINT"):
    names = ["otlp"]
  else:
    names = ["otlp_json"]
  if settings.value("PALLAS_PROF_TRACE_FILE") and "otlp_json" not in names:
    names.append("otlp_json")
  if settings.value("PALLAS_PROF_PERFETTO") and "perfetto" not in names:
    names.append("perfetto")
  exporters = []
  for name in names:
    exporter = exporter_named(name)
    if exporter is not None:
      exporters.append(exporter)
  return exporters


def _resource(service_name: str | None) -> Resource:
  attributes: dict[str, Any] = {cv.PALLAS_PROF_VERSION: __version__, cv.PROCESS_PID: os.getpid(),
                                cv.HOST_NAME: socket.gethostname()}
  known = compat.distributed_process()
  if known is not None:           # tracing started after jax.distributed.initialize()
    attributes[cv.JAX_PROCESS_INDEX], attributes[cv.JAX_PROCESS_COUNT] = known
  if service_name and not os.environ.get("OTEL_SERVICE_NAME"):
    attributes[cv.SERVICE_NAME] = service_name
  return Resource.create(attributes)


class ProcessStamp(SpanProcessor):
  """Puts the JAX process index and count on each span once jax.distributed is initialized:
  `pallas-prof run` starts tracing before the user's program calls
  jax.distributed.initialize(), when the resource can no longer take them."""

  def on_start(self, span, parent_context=None) -> None:
    known = compat.distributed_process()
    if known is not None:
      span.set_attribute(cv.JAX_PROCESS_INDEX, known[0])
      span.set_attribute(cv.JAX_PROCESS_COUNT, known[1])


# --- tracing() -------------------------------------------------------------------------------

class Tracing(contextlib.ContextDecorator):
  """Records pallas-prof's spans while active; a context manager and a decorator.

      with pallas_prof.tracing(perfetto="trace.json"):
        f(x)                                    # lowering + compile spans

      @pallas_prof.tracing(otlp_endpoint="http://localhost:4318")
      def main(): ...

  Arguments choose the exporters (several may be combined):
    *exporters: SpanExporter objects, or names: "otlp" (protocol from
      OTEL_EXPORTER_OTLP_PROTOCOL, default http/protobuf), "otlp_http",
      "otlp_grpc", "otlp_json", "perfetto", "console".
    otlp_endpoint / otlp_protocol: OTLP to this collector ("grpc" or
      "http/protobuf"; an HTTP base URL gets /v1/traces appended).
    otlp_json: path of an OTLP-JSON lines file (appended to).
    perfetto: path of a Chrome trace-event JSON file for ui.perfetto.dev.
    console: print spans on stdout.
    tracer_provider: an SDK TracerProvider of your own (your pipeline);
      nothing is added to it and it is not shut down.
    redact: mask the secrets in every span's texts before any exporter gets
      it (pallas_prof/redaction; `pallas-prof run` does, unless --no-redact).
  With none of these, the exporters come from the environment
  (`exporters_from_env`). `root_span` names the span that contains the
  whole traced region (None: no root span).

  On exit the spans are flushed (nothing is dropped) and exporters created
  here are shut down (files closed, the Perfetto file written). Exporter
  objects passed in are flushed, not shut down.
  """

  def __init__(self, *exporters: SpanExporter | str, otlp_endpoint: str | None = None,
               otlp_protocol: str | None = None, otlp_json: str | None = None,
               perfetto: str | None = None, console: bool = False,
               tracer_provider: TracerProvider | None = None,
               service_name: str | None = "pallas-prof", root_span: str | None = "pallas-prof",
               root_attributes: dict[str, Any] | None = None, redact: bool = False):
    self._config = dict(exporters=exporters, otlp_endpoint=otlp_endpoint,
                        otlp_protocol=otlp_protocol, otlp_json=otlp_json, perfetto=perfetto,
                        console=console, tracer_provider=tracer_provider,
                        service_name=service_name, root_span=root_span,
                        root_attributes=root_attributes, redact=redact)
    self.provider: TracerProvider | None = None
    self.processors: list[LosslessBatchSpanProcessor] = []
    self.exporters: list[SpanExporter] = []
    self.observer: SpanObserver | None = None
    self.root = None
    self._owns_provider = False
    self._token = None
    self._active = False

  def _recreate_cm(self):
    # each decorated call gets its own pipeline (calls may nest or recurse)
    return Tracing(*self._config["exporters"], **{k: v for k, v in self._config.items()
                                                   if k != "exporters"})

  # building the pipeline -------------------------------------------------------------------
  def _exporters(self) -> list[tuple[SpanExporter, bool]]:
    """(exporter, owned) pairs: owned ones are shut down on exit."""
    c = self._config
    out: list[tuple[SpanExporter, bool]] = []
    for item in c["exporters"]:
      if isinstance(item, str):
        exporter = exporter_named(item)
        if exporter is not None:
          out.append((exporter, True))
      else:
        out.append((item, False))
    if c["otlp_endpoint"] or c["otlp_protocol"]:
      out.append((otlp_exporter(c["otlp_protocol"], c["otlp_endpoint"]), True))
    if c["otlp_json"]:
      out.append((OtlpJsonFileExporter(c["otlp_json"]), True))
    if c["perfetto"]:
      out.append((PerfettoExporter(c["perfetto"]), True))
    if c["console"]:
      out.append((ConsoleSpanExporter(out=sys.stdout), True))
    if not out and c["tracer_provider"] is None:
      out = [(e, True) for e in exporters_from_env()]
    return out

  def start(self) -> "Tracing":
    if self._active:
      raise RuntimeError("this tracing() is already active")
    c = self._config
    if c["tracer_provider"] is not None:
      self.provider = c["tracer_provider"]
      self._owns_provider = False
    else:
      self.provider = TracerProvider(resource=_resource(c["service_name"]),
                                     shutdown_on_exit=False)
      self._owns_provider = True
      self.provider.add_span_processor(ProcessStamp())
    self._owned: list[LosslessBatchSpanProcessor] = []
    for exporter, owned in self._exporters():
      if owned and _is_otlp(exporter):
        exporter = DeliveryWatch(exporter, c["otlp_endpoint"] or _endpoint_of(exporter))
      if c["redact"]:         # outermost: nothing below it sees a span unmasked
        exporter = RedactingExporter(exporter)
      processor = LosslessBatchSpanProcessor(exporter)
      self.provider.add_span_processor(processor)
      self.processors.append(processor)
      self.exporters.append(exporter)
      if owned:
        self._owned.append(processor)
    tracer = self.provider.get_tracer("pallas_prof", __version__)
    self.observer = SpanObserver(tracer)
    if c["root_span"]:
      # inside another tracing's span, this one's trace is its own
      inside_other = trace.get_current_span().get_span_context().span_id in _OWNERS
      self.root = tracer.start_span(c["root_span"], attributes=c["root_attributes"] or {},
                                    context=otel_context.Context() if inside_other else None)
      self._token = otel_context.attach(trace.set_span_in_context(self.root))
      self.observer.root = self.root
      own_span(self.root, self.observer)
    # watches alongside any observer already installed (another tracing, the user's own)
    hooks.add_observer(self.observer)
    self._active = True
    return self

  def stop(self, exc: BaseException | None = None) -> None:
    if not self._active:
      return
    self._active = False
    hooks.remove_observer(self.observer)
    if self.root is not None:
      disown_span(self.root)
      if exc is not None:
        self.root.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300]))
        self.root.record_exception(exc)
      try:
        otel_context.detach(self._token)
      except Exception:  # noqa: BLE001 - stopped from another context (atexit)
        pass
      self.root.end()
    self.flush()
    for processor in self.processors:
      if processor in self._owned:
        processor.shutdown()
      else:
        processor.shutdown_keep_exporter()
    if self._owns_provider:
      self.provider.shutdown()
    for path, error in self.file_failures():
      warnings.warn(f"pallas-prof: the trace file {path} could not be written whole "
                    f"({error.strerror or error}); it holds what was written before, if anything",
                    RuntimeWarning, stacklevel=2)
    for message in self.undelivered():
      warnings.warn(message, RuntimeWarning, stacklevel=2)

  def undelivered(self) -> list[str]:
    """A line for each OTLP collector that did not get all the spans (delivery.py)."""
    watches = [e.inner if isinstance(e, RedactingExporter) else e for e in self.exporters]
    return [m for e in watches if isinstance(e, DeliveryWatch) for m in [e.message()] if m]

  def file_failures(self) -> list[tuple[str, OSError]]:
    """(path, error) of each trace file that could not be written (a full disk): the
    exporters keep only whole lines or whole documents, and say so here."""
    return [(e.path, e.failure) for e in self.exporters if getattr(e, "failure", None)]

  def flush(self) -> bool:
    ok = True
    for processor in self.processors:
      ok = processor.force_flush() and ok
    return ok

  @property
  def active(self) -> bool:
    return self._active

  def __enter__(self) -> "Tracing":
    return self.start()

  def __exit__(self, exc_type, exc, tb) -> bool:
    self.stop(exc)
    return False


def tracing(*exporters, **kwargs) -> Tracing:
  """See `Tracing`."""
  return Tracing(*exporters, **kwargs)


# help() and inspect.signature show Tracing's parameters, not the forwarding ones
tracing.__signature__ = inspect.signature(Tracing).replace(return_annotation="Tracing")


# --- process-wide tracing (PALLAS_PROF_TRACE=1, the CLI) --------------------------------------

_global_lock = threading.Lock()
_global: Tracing | None = None


def enable(*exporters, **kwargs) -> Tracing:
  """Starts tracing for the rest of the process (flushed at exit); returns it."""
  global _global
  with _global_lock:
    if _global is not None and _global.active:
      return _global
    kwargs.setdefault("root_span", None)
    _global = Tracing(*exporters, **kwargs).start()
    return _global


def disable() -> None:
  """Stops process-wide tracing, exporting everything recorded."""
  global _global
  with _global_lock:
    current, _global = _global, None
  if current is not None:
    current.stop()


def enabled() -> bool:
  """Whether an observer records spans now."""
  return bool(hooks.observer().enabled)


def enable_from_env() -> Tracing | None:
  """PALLAS_PROF_TRACE=1: trace the whole process, exporters from the environment."""
  if not settings.value("PALLAS_PROF_TRACE"):
    return None
  script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
  return enable(root_span=settings.value("PALLAS_PROF_TRACE_ROOT") or f"pallas-prof {script}")


atexit.register(disable)
