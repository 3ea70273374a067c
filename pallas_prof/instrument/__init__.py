"""OpenTelemetry for pallas-prof: spans for every lowering rule and compile stage,
exporters, and annotated lowering-error reports.

Tracing is off unless asked for. Off, the backend talks to hooks.NullObserver
and no OpenTelemetry code runs at all; on or off, the generated Triton source
and the compiled PTX are byte-identical.

Turning it on:
  - `with pallas_prof.tracing(...):` / `@pallas_prof.tracing(...)` (see Tracing)
  - `pallas_prof.instrument.enable(...)` for the rest of the process
  - `PALLAS_PROF_TRACE=1` in the environment: enabled when pallas_prof is
    imported, flushed and exported at exit (atexit)
  - the CLI (`pallas-prof run`)

Spans (docs/tracing.md; names and attribute keys in
conventions.py): `pallas_call <kernel>` per lowering, `lower <primitive>` per
equation (nested under the control-flow equation containing it), `compile
<kernel>` with `compile ttir|ttgir|llir|ptx|cubin` children (linked to the
kernel's `pallas_call` span), `profile <kernel>` from pallas_prof.profile(),
and a root span (`pallas-prof` / `pallas-prof <script>`) around the traced
region. All of them reach the SpanObserver through the backend's hook
(backend/hooks.py); several tracing() regions, and observers of other kinds,
may watch at once (hooks.add_observer), each with spans under its own root.

Where spans go when no exporter is passed (PALLAS_PROF_TRACE=1, or
`tracing()` without arguments), from the standard variables first:
  OTEL_TRACES_EXPORTER   comma-separated: otlp, console, none, and
                         pallas-prof's otlp_json, perfetto
  OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
                         if set (and OTEL_TRACES_EXPORTER is not), OTLP to it
  OTEL_EXPORTER_OTLP_PROTOCOL / _TRACES_PROTOCOL
                         grpc or http/protobuf (default http/protobuf)
  OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _CERTIFICATE, ...: as the
                         OpenTelemetry SDK reads them; OTEL_SERVICE_NAME,
                         OTEL_RESOURCE_ATTRIBUTES likewise
  PALLAS_PROF_TRACE_FILE also write OTLP-JSON lines to this file
  PALLAS_PROF_PERFETTO   also write a Perfetto / Chrome trace-event JSON here
With none of them set, spans are appended to `pallas-prof-traces.jsonl` in
the current directory: OTLP-JSON, one ExportTraceServiceRequest per line,
which an OpenTelemetry Collector's `otlpjsonfile` receiver can replay into
any backend, and which needs no server running. Spans are batched in a
background thread and never dropped; everything is flushed on exit.

Error reports: `render_error(err)` prints a LoweringError annotated with the
user's source, the jaxpr with the failing equation marked, avals, block
shapes, the rule, the underlying error and a hint; `error_text(err)` returns
the same as plain text.
"""
from __future__ import annotations

from .errors import error_text, render_error
from .lossless_batch import LosslessBatchSpanProcessor
from .otlp_json import OtlpJsonFileExporter, read_otlp_json
from .perfetto_trace import PerfettoExporter
from .observer import SpanObserver
from .tracer import (Tracing, disable, enable, enable_from_env, enabled, exporters_from_env,
                     otlp_exporter, tracing)

__all__ = ["tracing", "Tracing", "enable", "disable", "enabled", "enable_from_env",
           "exporters_from_env", "otlp_exporter", "OtlpJsonFileExporter", "PerfettoExporter",
           "LosslessBatchSpanProcessor", "SpanObserver", "read_otlp_json", "render_error",
           "error_text"]
