"""`pallas-prof run` and the tracing variables of the environment around it: OpenTelemetry's
endpoint variables send the run's spans where they send every other program's (what the
undelivered-spans warning tells the user to set), and PALLAS_PROF_TRACE_FILE /
PALLAS_PROF_PERFETTO, which a script run by python writes to, are said not to be used
(the run's traces are in its folder) instead of being dropped without a word."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from pallas_prof.cli.run_steps import capture
from pallas_prof.cli.script_args import RunOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def no_endpoint_variables(monkeypatch):
  for name in (*capture.ENDPOINT_VARIABLES, *capture.FILE_VARIABLES, "OTEL_TRACES_EXPORTER"):
    monkeypatch.delenv(name, raising=False)


def test_the_option_wins_then_the_traces_variable_then_the_general_one(monkeypatch,
                                                                       no_endpoint_variables):
  assert capture.otlp_endpoint(RunOptions(script="s.py")) is None
  monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318")
  assert capture.otlp_endpoint(RunOptions(script="s.py")) == "http://general:4318"
  monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/v1/traces")
  assert capture.otlp_endpoint(RunOptions(script="s.py")) == "http://traces:4318/v1/traces"
  given = RunOptions(script="s.py", otlp_endpoint="http://option:4318")
  assert capture.otlp_endpoint(given) == "http://option:4318"
  monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "  ")      # blank: not a setting
  assert capture.otlp_endpoint(RunOptions(script="s.py")) == "http://general:4318"


def test_no_note_without_the_file_variables_or_without_traces(monkeypatch, no_endpoint_variables):
  assert capture.file_variables_note(RunOptions(script="s.py")) is None
  monkeypatch.setenv("PALLAS_PROF_PERFETTO", "/tmp/x.json")
  assert capture.file_variables_note(RunOptions(script="s.py", no_trace=True)) is None
  said = capture.file_variables_note(RunOptions(script="s.py"))
  assert said.startswith("PALLAS_PROF_PERFETTO is for a script run by python")


def _closed_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_a_run_uses_the_environments_endpoint_and_names_the_file_variables_it_does_not(
    tmp_path, no_endpoint_variables):
  script = tmp_path / "plain.py"
  script.write_text("print('ran')\n")
  trace_file, perfetto = tmp_path / "spans.jsonl", tmp_path / "trace.json"
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{_closed_port()}",
             OTEL_EXPORTER_OTLP_TIMEOUT="1",
             PALLAS_PROF_TRACE_FILE=str(trace_file), PALLAS_PROF_PERFETTO=str(perfetto))
  env.pop("PALLAS_PROF_TRACE", None)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", str(tmp_path / "run"),
                         str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                        timeout=300)
  text = done.stdout + done.stderr
  assert done.returncode == 0, text
  # the spans were sent to the variable's endpoint (nobody listens there, and the run says so)
  assert "not delivered" in text and "127.0.0.1" in text, text
  # the file variables are named, with where the traces are instead
  assert "PALLAS_PROF_TRACE_FILE and PALLAS_PROF_PERFETTO are for a script run by python" in \
      " ".join(text.split()), text
  assert not trace_file.exists() and not perfetto.exists()
  assert (tmp_path / "run" / capture.OTLP_JSON_FILE).exists()
