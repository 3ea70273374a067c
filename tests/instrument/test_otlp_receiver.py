"""OTLP export to a real receiver (Arize Phoenix), over HTTP and gRPC, read back
through its REST API.

Phoenix is a large install, so it lives in its own virtual environment (its
dependencies cannot disturb ours): PALLAS_PROF_PHOENIX names its `phoenix`
executable; without it the tests install arize-phoenix once into
$XDG_CACHE_HOME/pallas-prof/phoenix-venv (~/.cache when XDG_CACHE_HOME is unset, as
for the kernel cache; about 850 MB and a few minutes on a fresh machine; CI does this
on every clean run). PALLAS_PROF_NO_RECEIVER_INSTALL=1 skips instead of
installing (the skip is reported, never counted as a pass).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from pallas_prof.backend.compiling import compile as backend_compile
from testkit.helpers import random_array
from tests.instrument.spans import lines_containing, load_example, lower_fresh

pytestmark = pytest.mark.otlp_receiver

STARTUP_SECONDS = 180
INGEST_SECONDS = 60


PHOENIX_VERSION = "20.26.1"


def _phoenix_executable() -> str:
  path = os.environ.get("PALLAS_PROF_PHOENIX")
  if path:
    if not os.access(path, os.X_OK):
      pytest.fail(f"PALLAS_PROF_PHOENIX={path} is not an executable")
    return path
  if os.environ.get("PALLAS_PROF_NO_RECEIVER_INSTALL") == "1":
    pytest.skip("no OTLP receiver: PALLAS_PROF_NO_RECEIVER_INSTALL=1 and no PALLAS_PROF_PHOENIX")
  return _installed_phoenix()


def phoenix_venv() -> str:
  """Where the receiver is installed: the user's cache directory, as the XDG base
  directories name it (not PALLAS_PROF_CACHE_DIR, which the tests point at a fresh
  directory per run: the install is meant to outlive the run)."""
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
  return os.path.join(cache, "pallas-prof", "phoenix-venv")


def test_the_receiver_installs_under_xdg_cache_home(monkeypatch, tmp_path):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  assert phoenix_venv() == str(tmp_path / "pallas-prof" / "phoenix-venv")
  monkeypatch.delenv("XDG_CACHE_HOME")
  assert phoenix_venv() == os.path.expanduser("~/.cache/pallas-prof/phoenix-venv")


def _installed_phoenix() -> str:
  """arize-phoenix in a private venv, installed once (under a lock: xdist workers)."""
  import fcntl
  import sys
  root = phoenix_venv()
  exe = os.path.join(root, "bin", "phoenix")
  os.makedirs(os.path.dirname(root), exist_ok=True)
  with open(root + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.access(exe, os.X_OK):
      subprocess.run([sys.executable, "-m", "venv", root], check=True)
      result = subprocess.run([os.path.join(root, "bin", "pip"), "install", "-q",
                               f"arize-phoenix=={PHOENIX_VERSION}"],
                              capture_output=True, text=True, timeout=1500)
      if result.returncode != 0:
        pytest.fail("could not install the OTLP receiver (arize-phoenix) for this test:\n"
                    + result.stderr[-2000:])
  return exe


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _get(url: str, timeout: float = 10):
  with urllib.request.urlopen(url, timeout=timeout) as response:
    return response.status, response.read().decode()


@pytest.fixture
def phoenix(tmp_path_factory):
  # free ports are picked before phoenix binds them, so another process (an
  # xdist worker's sockets) can take one in between: then start again on others
  for attempt in range(3):
    workdir = tmp_path_factory.mktemp("phoenix")
    process, log, base, grpc = _start_phoenix(workdir)
    try:
      outcome = _wait_until_healthy(process, base, workdir)
      if outcome == "port taken" and attempt < 2:
        continue
      if outcome != "up":
        pytest.fail(outcome)
      yield {"http": base, "grpc": grpc}
      return
    finally:
      _stop(process)
      log.close()


def _start_phoenix(workdir):
  executable = _phoenix_executable()
  http_port = _free_port()
  grpc_port = _free_port()
  while grpc_port == http_port:
    grpc_port = _free_port()
  env = dict(os.environ, PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(http_port),
             PHOENIX_GRPC_PORT=str(grpc_port), PHOENIX_WORKING_DIR=str(workdir),
             PHOENIX_TELEMETRY_ENABLED="false")
  log = open(workdir / "phoenix.log", "w")
  process = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
  return process, log, f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{grpc_port}"


def _wait_until_healthy(process, base: str, workdir) -> str:
  """"up", "port taken", or why phoenix did not come up."""
  deadline = time.time() + STARTUP_SECONDS
  while True:
    if process.poll() is not None:
      text = (workdir / "phoenix.log").read_text()
      if "address already in use" in text.lower() or "errno 98" in text.lower():
        return "port taken"
      return f"phoenix exited ({process.returncode}):\n" + text[-3000:]
    try:
      if _get(f"{base}/healthz", timeout=2)[0] == 200:
        return "up"
    except OSError:
      pass
    if time.time() > deadline:
      return "phoenix did not start:\n" + (workdir / "phoenix.log").read_text()[-3000:]
    time.sleep(0.5)


def _stop(process) -> None:
  if process.poll() is None:
    process.terminate()
  try:
    process.wait(timeout=30)
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait(timeout=30)


def _spans_of(base: str, project: str, expected: int) -> list[dict]:
  """All spans of `project`, once `expected` of them have arrived (ingestion is asynchronous)."""
  deadline = time.time() + INGEST_SECONDS
  spans: list[dict] = []
  while time.time() < deadline:
    spans, cursor = [], None
    try:
      while True:
        url = f"{base}/v1/projects/{project}/spans?limit=1000"
        if cursor:
          url += f"&cursor={cursor}"
        status, body = _get(url)
        page = json.loads(body)
        spans += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
          break
    except OSError:            # the project appears with its first span
      spans = []
    if len(spans) >= expected:
      return spans
    time.sleep(0.5)
  return spans


def test_otlp_http_and_grpc_reach_a_real_receiver(phoenix, rng, monkeypatch):
  # one test for both protocols: one receiver start (~15 s), even under pytest-xdist
  for protocol in ("http/protobuf", "grpc"):
    _export_and_read_back(phoenix, protocol, rng, monkeypatch)


def _export_and_read_back(phoenix, protocol, rng, monkeypatch):
  project = f"pallas-prof-{protocol.split('/')[0]}-{uuid.uuid4().hex[:8]}"
  monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={project}")
  endpoint = phoenix["http"] if protocol == "http/protobuf" else phoenix["grpc"]
  module = load_example("flash_attention")
  q, k, v = (random_array(rng, (1, 64, 2, 32), jnp.float16) for _ in range(3))
  fn = jax.jit(lambda q, k, v: module.flash_attention(q, k, v, causal=True, block_q=32,
                                                      block_k=32))
  with pallas_prof.tracing(otlp_endpoint=endpoint, otlp_protocol=protocol) as t:
    (gk,) = lower_fresh(fn, q, k, v)
    backend_compile.clear_memory_cache()
    ck = backend_compile.compile_kernel(gk, use_disk_cache=False)
  (processor,) = t.processors
  assert processor.failed == 0
  expected = 1 + 1 + len(gk.eqns) + 1 + 5       # root, pallas_call, equations, compile + stages
  # (+ `compile wait` when this compile had to wait for the worker to start)
  waits = processor.exported - expected
  assert waits in (0, 1), processor.exported
  expected += waits
  spans = _spans_of(phoenix["http"], project, expected)
  assert len(spans) == expected, protocol
  assert len([s for s in spans if s["name"] == "compile wait"]) == waits
  assert {s["context"]["trace_id"] for s in spans} == {format(t.root.context.trace_id, "032x")}
  by_id = {s["context"]["span_id"]: s for s in spans}
  (kernel,) = [s for s in spans if s["name"] == f"pallas_call {gk.name}"]
  lowers = [s for s in spans if s["name"].startswith("lower ")]
  assert sorted(s["attributes"]["jaxpr.eqn_index"] for s in lowers) == list(range(len(gk.eqns)))
  for s in lowers:
    eqn = gk.eqns[s["attributes"]["jaxpr.eqn_index"]]
    parent = by_id[s["parent_id"]]
    if eqn.parent is None:
      assert parent is kernel
    else:
      assert parent["attributes"]["jaxpr.eqn_index"] == eqn.parent
  exp_lines = {s["attributes"]["code.lineno"] for s in lowers
               if s["attributes"]["jaxpr.primitive"] == "exp"}
  assert exp_lines == set(lines_containing(module.__file__, "jnp.exp("))
  (comp,) = [s for s in spans if s["name"] == f"compile {gk.name}"]
  assert comp["attributes"]["triton.shared_bytes"] == ck.metadata["shared"]
  stages = [s for s in spans if s["parent_id"] == comp["context"]["span_id"]
            and s["name"] != "compile wait"]
  assert sorted(s["attributes"]["triton.stage"] for s in stages) == sorted(
      ["ttir", "ttgir", "llir", "ptx", "cubin"])
