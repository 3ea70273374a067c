"""Exporters: OTLP-JSON lines, Perfetto trace events, console, environment
selection, lossless batching, export at process exit."""
from __future__ import annotations

import base64
import errno
import json
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import jsonschema
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

import pallas_prof
from pallas_prof import instrument
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.instrument import lossless_batch, otlp_json, perfetto_trace
from testkit.helpers import random_array
from tests.instrument.spans import ROOT, load_example, lower_fresh

# --- OTLP/JSON ------------------------------------------------------------------------------------


def _sample_spans():
  exporter = InMemorySpanExporter()
  provider = TracerProvider()
  provider.add_span_processor(SimpleSpanProcessor(exporter))
  tracer = provider.get_tracer("pallas_prof", "0.1.0")
  with tracer.start_as_current_span("pallas_call k", attributes={"pallas.grid": "(2,)"}) as root:
    with tracer.start_as_current_span("lower add", attributes={
        "jaxpr.eqn_index": 3, "jaxpr.in_avals": ["float32[8]", "float32[8]"],
        "code.lineno": 12, "x.ratio": 0.5, "x.flag": True, "x.ints": [1, -2]}) as span:
      span.add_event("note", {"k": "v"})
      span.set_status(Status(StatusCode.ERROR, "boom"))
    root_ctx = root.get_span_context()
  with tracer.start_as_current_span("compile k", links=[Link(root_ctx, {"pallas.link": "lowering"})]):
    pass
  return exporter.get_finished_spans()


def _hex_ids_to_base64(obj):
  """OTLP/JSON writes ids in hex; protobuf's JSON mapping expects base64."""
  if isinstance(obj, dict):
    out = {}
    for k, v in obj.items():
      if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
        out[k] = base64.b64encode(bytes.fromhex(v)).decode()
      else:
        out[k] = _hex_ids_to_base64(v)
    return out
  if isinstance(obj, list):
    return [_hex_ids_to_base64(v) for v in obj]
  return obj


def test_otlp_json_encodes_what_the_official_encoder_encodes():
  spans = _sample_spans()
  request = otlp_json.otlp_json_request(spans)
  text = json.dumps(request)
  decoded = json.loads(text)
  first = decoded["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
  assert len(first["traceId"]) == 32 and len(first["spanId"]) == 16   # hex, as OTLP/JSON says
  assert isinstance(first["kind"], int)                                 # enums as integers
  parsed = json_format.ParseDict(_hex_ids_to_base64(decoded), ExportTraceServiceRequest())
  assert parsed == encode_spans(spans)


def test_otlp_json_file_one_request_per_line(tmp_path):
  path = tmp_path / "spans.jsonl"
  exporter = otlp_json.OtlpJsonFileExporter(str(path))
  spans = _sample_spans()
  exporter.export(spans[:2])
  exporter.export(spans[2:])
  exporter.shutdown()
  lines = path.read_text().splitlines()
  assert len(lines) == 2
  for line in lines:
    json_format.ParseDict(_hex_ids_to_base64(json.loads(line)), ExportTraceServiceRequest())
  assert [s["name"] for s in otlp_json.read_otlp_json(str(path))] == [s.name for s in spans]


def _disk_fills_after(monkeypatch, room: int):
  """os.write that writes only `room` bytes more, part of a call included, then ENOSPC."""
  real_write, left = os.write, [room]

  def write(fd, data):
    if left[0] <= 0:
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    n = real_write(fd, bytes(data[:left[0]]))
    left[0] -= n
    return n

  monkeypatch.setattr(otlp_json.os, "write", write)


def test_otlp_json_file_on_a_full_disk_keeps_whole_lines_and_says_why(tmp_path, monkeypatch):
  path = tmp_path / "spans.jsonl"
  path.write_text('{"earlier": "run"}\n')            # appended to: what was there stays
  exporter = otlp_json.OtlpJsonFileExporter(str(path))
  spans = _sample_spans()
  first = len(json.dumps(otlp_json.otlp_json_request(spans[:1]), separators=(",", ":"))) + 1
  _disk_fills_after(monkeypatch, first + 10)          # the second line only partly fits
  assert exporter.export(spans[:1]) is SpanExportResult.SUCCESS
  assert exporter.export(spans[1:]) is SpanExportResult.FAILURE
  assert exporter.export(spans[1:]) is SpanExportResult.FAILURE   # stopped, not retried
  exporter.shutdown()
  lines = path.read_text().splitlines()
  assert len(lines) == 2 and json.loads(lines[0]) == {"earlier": "run"}
  assert [s["name"] for s in otlp_json.read_otlp_json(str(path))] == [spans[0].name]
  assert exporter.failure is not None and exporter.failure.errno == errno.ENOSPC


def test_perfetto_file_on_a_full_disk_keeps_the_last_whole_one(tmp_path, monkeypatch):
  from pallas_prof import safe_files
  path = tmp_path / "trace.json"
  exporter = perfetto_trace.PerfettoExporter(str(path))
  spans = _sample_spans()
  exporter.export(spans[:1])
  exporter.force_flush()
  whole = path.read_bytes()
  exporter.export(spans[1:])
  real_fdopen = safe_files.os.fdopen

  def full(fd, *args, **kwargs):
    f = real_fdopen(fd, *args, **kwargs)
    f.write = lambda data: (_ for _ in ()).throw(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    return f

  monkeypatch.setattr(safe_files.os, "fdopen", full)
  exporter.shutdown()                                  # no exception out of the shutdown
  assert exporter.failure is not None and exporter.failure.errno == errno.ENOSPC
  assert path.read_bytes() == whole and os.listdir(tmp_path) == ["trace.json"]   # no temp
  # tracing() that owns such an exporter ends whole, and says it once
  with pytest.warns(RuntimeWarning, match="trace.json could not be written whole") as said:
    with pallas_prof.tracing(perfetto=str(path), root_span="run"):
      pass
  assert len([w for w in said if issubclass(w.category, RuntimeWarning)]) == 1
  assert path.read_bytes() == whole


def test_hundred_thousand_spans_all_exported(tmp_path):
  """Batched, and nothing lost: 100,000 spans produced as fast as possible."""
  path = tmp_path / "many.jsonl"
  n = 100_000
  with pallas_prof.tracing(otlp_json=str(path), root_span=None) as t:
    tracer = t.provider.get_tracer("load")
    for i in range(n):
      tracer.start_span("lower add", attributes={"jaxpr.eqn_index": i}).end()
  spans = otlp_json.read_otlp_json(str(path))
  assert len(spans) == n
  assert len({s["spanId"] for s in spans}) == n
  assert sorted(int(s["attributes"][0]["value"]["intValue"]) for s in spans) == list(range(n))
  assert len(path.read_text().splitlines()) > 1          # it really was batched
  (processor,) = t.processors
  assert processor.exported == n and processor.failed == 0


def test_batching_blocks_instead_of_dropping():
  """A slow exporter and a tiny queue: the producer waits, no span is dropped."""
  import time

  class Slow(InMemorySpanExporter):
    def export(self, spans):
      time.sleep(0.002)
      return super().export(spans)

  slow = Slow()
  processor = lossless_batch.LosslessBatchSpanProcessor(slow, max_queue_size=16, max_export_batch_size=4)
  provider = TracerProvider()
  provider.add_span_processor(processor)
  tracer = provider.get_tracer("t")
  for i in range(500):
    tracer.start_span(f"s{i}").end()
  processor.shutdown()
  assert sorted(s.name for s in slow.get_finished_spans()) == sorted(f"s{i}" for i in range(500))


# --- Perfetto -------------------------------------------------------------------------------------

# The Trace Event Format (the JSON that ui.perfetto.dev and chrome://tracing read).
TRACE_EVENT_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "ph", "pid", "tid"],
                "properties": {
                    "name": {"type": "string"},
                    "cat": {"type": "string"},
                    "ph": {"enum": ["X", "B", "E", "i", "I", "M", "C"]},
                    "pid": {"type": "integer"},
                    "tid": {"type": "integer"},
                    "ts": {"type": "number", "minimum": 0},
                    "dur": {"type": "number", "minimum": 0},
                    "s": {"enum": ["g", "p", "t"]},
                    "args": {"type": "object"},
                },
                "allOf": [
                    {"if": {"properties": {"ph": {"const": "X"}}},
                     "then": {"required": ["ts", "dur"]}},
                    {"if": {"properties": {"ph": {"const": "i"}}},
                     "then": {"required": ["ts"]}},
                    {"if": {"properties": {"ph": {"const": "M"}}},
                     "then": {"required": ["args"],
                              "properties": {"name": {"enum": ["process_name", "thread_name",
                                                               "thread_sort_index",
                                                               "process_sort_index"]}}}},
                ],
            },
        },
    },
}


def _trace_two_kernels(rng, perfetto_path):
  softmax = load_example("softmax")
  layer_norm = load_example("layer_norm")
  x = random_array(rng, (8, 100), jnp.float32)
  w = random_array(rng, (100,), jnp.float32)
  with pallas_prof.tracing(perfetto=str(perfetto_path)):
    gks = lower_fresh(softmax.softmax, x) + lower_fresh(layer_norm.layer_norm, x, w, w)
    for gk in gks:
      backend_compile.clear_memory_cache()
      backend_compile.compile_kernel(gk, use_disk_cache=False)
  return gks


def _check_nesting(slices):
  """Slices of one track nest properly (each inside the one below it on the stack)."""
  stack = []
  ns = 1e-3     # times are microseconds with nanosecond digits
  for s in sorted(slices, key=lambda s: (s["ts"], -s["dur"])):
    while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - ns:
      stack.pop()
    if stack:
      parent = stack[-1]
      assert s["ts"] + s["dur"] <= parent["ts"] + parent["dur"] + 1e-3, (s["name"], parent["name"])
    stack.append(s)


def test_perfetto_trace_is_valid_and_has_a_track_per_kernel(rng, tmp_path):
  path = tmp_path / "trace.json"
  gks = _trace_two_kernels(rng, path)
  document = json.loads(path.read_text())
  jsonschema.validate(document, TRACE_EVENT_SCHEMA)
  events = document["traceEvents"]
  names = {e["tid"]: e["args"]["name"] for e in events
           if e["ph"] == "M" and e["name"] == "thread_name"}
  for gk in gks:
    (tid,) = [t for t, name in names.items() if name == f"kernel {gk.name}"]
    track = [e for e in events if e["ph"] == "X" and e["tid"] == tid]
    _check_nesting(track)
    (call,) = [e for e in track if e["name"] == f"pallas_call {gk.name}"]
    (comp,) = [e for e in track if e["name"] == f"compile {gk.name}"]
    lowers = [e for e in track if e["name"].startswith("lower ")]
    stages = [e for e in track if e["cat"] == "compile" and e is not comp
              and e["name"] != "compile wait"]     # (a wait for the worker to start)
    assert len(lowers) == len(gk.eqns)
    assert [e["args"]["triton.stage"] for e in sorted(stages, key=lambda e: e["ts"])] == \
        ["ttir", "ttgir", "llir", "ptx", "cubin"]
    assert all(call["ts"] <= e["ts"] and e["ts"] + e["dur"] <= call["ts"] + call["dur"] + 1e-3
               for e in lowers)
    assert all(comp["ts"] <= e["ts"] and e["ts"] + e["dur"] <= comp["ts"] + comp["dur"] + 1e-3
               for e in stages)
    assert all("code.lineno" in e["args"] for e in lowers if e["args"].get("code.filepath"))
  # the root span is on the main track, kernels each on their own
  assert names[perfetto_trace.MAIN_TID] == "pallas-prof"
  assert len([n for n in names.values() if n.startswith("kernel ")]) == len(gks) == 2


# --- console and environment --------------------------------------------------------------------


def test_console_exporter(rng, capsys):
  softmax = load_example("softmax")
  with pallas_prof.tracing(console=True):
    (gk,) = lower_fresh(softmax.softmax, random_array(rng, (8, 100), jnp.float32))
  out = capsys.readouterr().out
  assert out.count('"name": "lower ') == len(gk.eqns)
  assert f'"name": "pallas_call {gk.name}"' in out


def test_exporters_from_environment(monkeypatch, tmp_path):
  from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
  from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http
  for var in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
              "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "PALLAS_PROF_TRACE_FILE",
              "PALLAS_PROF_PERFETTO"):
    monkeypatch.delenv(var, raising=False)
  monkeypatch.chdir(tmp_path)
  (default,) = instrument.exporters_from_env()
  assert isinstance(default, otlp_json.OtlpJsonFileExporter)
  assert default.path == str(tmp_path / "pallas-prof-traces.jsonl")
  default.shutdown()

  monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
  (http,) = instrument.exporters_from_env()
  assert isinstance(http, Http) and http._endpoint == "http://127.0.0.1:4318/v1/traces"
  monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
  (grpc,) = instrument.exporters_from_env()
  assert isinstance(grpc, Grpc)

  monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,perfetto")
  monkeypatch.setenv("PALLAS_PROF_TRACE_FILE", str(tmp_path / "x.jsonl"))
  chosen = instrument.exporters_from_env()
  assert [type(e) for e in chosen] == [ConsoleSpanExporter, perfetto_trace.PerfettoExporter,
                                       otlp_json.OtlpJsonFileExporter]
  monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
  monkeypatch.delenv("PALLAS_PROF_TRACE_FILE")
  assert instrument.exporters_from_env() == []
  monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
  with pytest.raises(ValueError, match="zipkin"):
    instrument.exporters_from_env()


SCRIPT = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
import pallas_prof

def kernel(x_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) * 2.0

f = jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32),
                           compiler_params=pallas_prof.CompilerParams()))
print(float(f(jnp.arange(16, dtype=jnp.float32) / 16).sum()))
"""


def test_env_var_traces_a_plain_script_and_exports_at_exit(tmp_path):
  script = tmp_path / "script.py"
  script.write_text(textwrap.dedent(SCRIPT))
  env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
  env.update(PALLAS_PROF_TRACE="1", PYTHONPATH=ROOT, JAX_PLATFORMS="cpu",
             PALLAS_PROF_PERFETTO=str(tmp_path / "trace.perfetto.json"))
  env.pop("PALLAS_PROF_TRACE_FILE", None)
  result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  # the default exporter: OTLP-JSON lines in the current directory
  spans = otlp_json.read_otlp_json(str(tmp_path / "pallas-prof-traces.jsonl"))
  names = [s["name"] for s in spans]
  assert names.count("pallas_call kernel") == 1
  assert sorted(n for n in names if n.startswith("lower ")) == \
      ["lower exp", "lower get", "lower mul", "lower swap"]
  (root,) = [s for s in spans if s["name"] == "pallas-prof script.py"]
  assert all(s["traceId"] == root["traceId"] for s in spans)
  (exp,) = [s for s in spans if s["name"] == "lower exp"]
  attrs = {a["key"]: a["value"] for a in exp["attributes"]}
  assert attrs["code.filepath"]["stringValue"] == str(script)
  assert int(attrs["code.lineno"]["intValue"]) == SCRIPT.splitlines().index(
      "  o_ref[...] = jnp.exp(x_ref[...]) * 2.0") + 1
  perfetto = json.loads((tmp_path / "trace.perfetto.json").read_text())
  jsonschema.validate(perfetto, TRACE_EVENT_SCHEMA)
  assert any(e["name"] == "lower exp" for e in perfetto["traceEvents"])


def test_decorator_form(rng):
  exporter = InMemorySpanExporter()
  softmax = load_example("softmax")

  @pallas_prof.tracing(exporter, root_span="decorated")
  def run():
    return lower_fresh(softmax.softmax, random_array(rng, (8, 100), jnp.float32))

  (gk,) = run()
  (gk2,) = run()                     # a second call traces again (fresh pipeline)
  spans = exporter.get_finished_spans()
  assert [s.name for s in spans].count("decorated") == 2
  assert len([s for s in spans if s.name.startswith("lower ")]) == 2 * len(gk.eqns)
