"""Secrets stay out of traces (issue 38, item 7): a run given `--api-token=s3cr3t`,
`--password s3cr3t` and `API_KEY=s3cr3t` as the script's arguments, and an OTLP
endpoint with `user:s3cr3t@` in it, records none of them: not in any file of the run
(report.json, report.html, both traces), not on the terminal, not in the span the
collector gets, not in the cache. The script still gets its arguments as given and the
collector its credentials; `--no-redact` records them as given.
"""
from __future__ import annotations

import base64
import http.server
import json
import os
import threading

import pytest

from tests.faults.cli_runs import pallas_prof

SECRET = "s3cr3t"

SCRIPT = """
import json, sys
# what the script was given, kept outside the run (the marker's path is its last argument)
with open(sys.argv[-1], "w") as f:
  json.dump(sys.argv[1:-1], f)
"""


class _Collector(http.server.BaseHTTPRequestHandler):
  """An OTLP/HTTP collector that keeps what it is sent."""
  received: list = []

  def do_POST(self):
    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
    self.received.append((dict(self.headers), body))
    self.send_response(200)
    self.send_header("Content-Type", "application/x-protobuf")
    self.end_headers()

  def log_message(self, *args):
    pass


@pytest.fixture
def collector():
  received = []
  handler = type("Collector", (_Collector,), {"received": received})
  server = http.server.HTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield server.server_address[1], received
  server.shutdown()
  server.server_close()


def _files_holding(folder, text: str) -> list[str]:
  found = []
  for here, _, files in os.walk(folder):
    for name in files:
      with open(os.path.join(here, name), "rb") as f:
        if text.encode() in f.read():
          found.append(os.path.relpath(os.path.join(here, name), folder))
  return sorted(found)


def _run(tmp_path, port, *options):
  script = tmp_path / "script.py"
  script.write_text(SCRIPT)
  marker, out, cache = tmp_path / "given.json", tmp_path / "out", tmp_path / "cache"
  args = ["--api-token=" + SECRET, "--password", SECRET, "API_KEY=" + SECRET, str(marker)]
  done = pallas_prof("run", "--out", str(out), "--otlp-endpoint",
                     f"http://user:{SECRET}@127.0.0.1:{port}", *options, str(script), *args,
                     cache_dir=cache, timeout=300)
  assert done.returncode == 0, done.stdout + done.stderr
  # the script got its arguments as given
  assert json.loads(marker.read_text()) == args[:-1]
  assert json.loads((out / "report.json").read_text())["exit_code"] == 0   # the run's report
  return done, out, cache


@pytest.mark.fault("secret")
def test_secrets_are_recorded_nowhere(tmp_path, collector):
  port, received = collector
  done, out, cache = _run(tmp_path, port)
  assert _files_holding(out, SECRET) == []
  assert {"report.json", "report.html", "trace.otlp.jsonl", "trace.perfetto.json"} <= \
      set(os.listdir(out))
  assert SECRET not in done.stdout + done.stderr
  # the collector got the run's spans, masked, and the endpoint's credentials to check
  assert received and not any(SECRET.encode() in body for _, body in received)
  assert any(b"--api-token=***" in body for _, body in received)
  assert all(headers.get("Authorization") == "Basic " + base64.b64encode(
      f"user:{SECRET}".encode()).decode() for headers, _ in received)
  report = json.loads((out / "report.json").read_text())
  assert f"http://user:***@127.0.0.1:{port}" in report["command"]
  assert ["--password", "***", "API_KEY=***"] == report["command"][-4:-1]
  # nothing of them is kept for later: the cache, and the run printed again
  assert _files_holding(cache, SECRET) == []
  again = pallas_prof("report", str(out), cache_dir=cache)
  assert again.returncode == 0 and SECRET not in again.stdout + again.stderr


@pytest.mark.fault("secret")
def test_no_redact_records_them_as_given(tmp_path, collector):
  port, received = collector
  _, out, _ = _run(tmp_path, port, "--no-redact")
  assert {"report.json", "report.html", "trace.otlp.jsonl", "trace.perfetto.json"} <= \
      set(_files_holding(out, SECRET))
  assert any(SECRET.encode() in body for _, body in received)
