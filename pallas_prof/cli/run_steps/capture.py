"""What watches the user's script while it runs: the run's tracing (its OTLP-JSON and
Perfetto files), CUPTI's in-situ capture of the kernels' launches (GPU only), and the
recording of its pallas_calls that the advice traces again at other block shapes.

Each is started before the script and stopped after it by cli/run.py; one that cannot
start leaves the run going without it, and a note says why."""
from __future__ import annotations

import contextlib
import os

from ... import run_layout
from ...advice import recipes
from ...instrument import conventions, tracing
from ...profiler import driver
from ...profiler.timing import insitu
from ..script_args import RunOptions
from .entries import recorded

# JSON Lines (one ExportTraceServiceRequest a line), named as the Collector's
# otlpjsonfile receiver expects; runs before this name wrote trace.otlp.json
# and say so in their report's "traces"
OTLP_JSON_FILE = run_layout.OTLP_JSON
PERFETTO_FILE = run_layout.PERFETTO

XPROF_HOLDS_CUPTI = ("--xprof: JAX's profiler holds CUPTI while the script runs, so its kernel "
                     "launches were not captured in place (the replay still times each kernel; "
                     "XProf's timeline shows the launches)")


# OpenTelemetry's own variables, read as every OTLP exporter reads them: the traces' first
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# what a script run by python writes its spans to; a run writes them into its own folder
FILE_VARIABLES = ("PALLAS_PROF_TRACE_FILE", "PALLAS_PROF_PERFETTO")


def otlp_endpoint(args: RunOptions) -> str | None:
  """--otlp-endpoint, else the endpoint OpenTelemetry's variables name (the run's spans go
  where the user's environment sends every other program's)."""
  if args.otlp_endpoint:
    return args.otlp_endpoint
  return next((os.environ[v] for v in ENDPOINT_VARIABLES if os.environ.get(v, "").strip()), None)


def file_variables_note(args: RunOptions) -> str | None:
  """A note for PALLAS_PROF_TRACE_FILE / PALLAS_PROF_PERFETTO set around `pallas-prof run`:
  the run writes its traces into its folder, not there (it says where, not nothing)."""
  named = [v for v in FILE_VARIABLES if os.environ.get(v, "").strip()]
  if not named or args.no_trace:
    return None
  return (f"{' and '.join(named)} {'is' if len(named) == 1 else 'are'} for a script run by python "
          f"(PALLAS_PROF_TRACE=1); pallas-prof run writes its traces into the run's folder "
          f"({OTLP_JSON_FILE}, {PERFETTO_FILE}): copy them from there")


def _tracing(args: RunOptions, out_dir: str):
  if args.no_trace:
    return contextlib.nullcontext(None)
  return tracing(otlp_json=os.path.join(out_dir, OTLP_JSON_FILE),
                 perfetto=os.path.join(out_dir, PERFETTO_FILE),
                 otlp_endpoint=otlp_endpoint(args),
                 root_span=conventions.root(os.path.basename(args.script)),
                 redact=not args.no_redact,
                 root_attributes={conventions.PALLAS_SCRIPT: os.path.abspath(args.script),
                                  conventions.PALLAS_ARGV: " ".join(recorded(args,
                                                                             args.script_args))})


def start_tracing(args, files, running):
  """The run's tracing (None with --no-trace, or where its file cannot be opened: the run
  goes on without, and says so)."""
  try:
    return running.enter_context(_tracing(args, files.root))
  except OSError as e:
    for name in (OTLP_JSON_FILE, PERFETTO_FILE):
      files.lost(os.path.join(files.root, name), e)
    return None


def gpu_present() -> bool:
  return driver.gpu_status()[0]


def start_insitu(enabled: bool, notes: list[str], xprof: bool = False):
  """Starts CUPTI capture of the script's kernel launches (GPU only); None if not. Under
  --xprof it does not start: two CUPTI subscribers in one process leave one of them empty."""
  if not enabled:
    return None
  try:
    if not driver.gpu_status()[0]:
      return None
    if xprof:
      notes.append(XPROF_HOLDS_CUPTI)
      return None
    cap = insitu.capture()
    cap.__enter__()
    return cap
  except Exception as e:  # noqa: BLE001 - in-situ capture is optional; say why it is off
    notes.append(f"in-situ capture off: {e}")
    return None


def stop_insitu(cap, notes: list[str]):
  if cap is None:
    return None
  try:
    cap.__exit__(None, None, None)
    return cap
  except Exception as e:  # noqa: BLE001
    notes.append(f"in-situ capture failed: {e}")
    return None


def recording_calls():
  """While the script runs, its pallas_calls are recorded (advice/recipes.py), so that the
  advice can trace a kernel again at another block shape."""
  recipes.clear()
  return recipes.capture()
