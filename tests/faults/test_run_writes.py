"""Faults while `pallas-prof run` writes its folder (issue 38, item 5): a disk that fills at
several points, a read-only folder, two runs on one --out, SIGINT and SIGTERM at several
points of a run. Each case runs `pallas-prof run` of a tiny script in a subprocess and
asserts: the run ends with the script's exit code (or 130/143) and a message naming the
folder and what is missing, never a traceback; no file of the folder is a part of one
(every file there is whole: its bytes are a normal run's, its JSON parses), no temp file,
marker or worker folder is left, and a later run is whole again; the report exists (where
the disk can hold it) and says what was lost.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from pallas_prof.cli.report import RunReport
from . import inject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.sysconf("SC_PAGE_SIZE")

SCRIPT = """\
import sys, time
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0

def shift(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1.0

x = jnp.arange(256, dtype=jnp.float32)
spec = pl.BlockSpec((128,), lambda i: (i,))
for kernel, want in ((double, 10.0), (shift, 6.0)):
  out = pl.pallas_call(kernel, grid=(2,), in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  assert float(out[5]) == want
print("ran", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
print("done", flush=True)
"""
WORKER_DIR_ENV = b"PALLAS_PROF_WORKER_DIR="


def _env(tmp_path, cache: str, env: dict | None = None) -> dict:
  private_tmp = tmp_path / "tmp"
  private_tmp.mkdir(exist_ok=True)
  env = dict(os.environ if env is None else env)
  env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  env.update(TMPDIR=str(private_tmp), PALLAS_PROF_CACHE_DIR=cache, COLUMNS="200")
  return env


def _command(out: str, script: str, *script_args: str, options=()) -> list[str]:
  return [sys.executable, "-m", "pallas_prof", "run", *options, "--out", out, script,
          *script_args]


def _run(out, script, env, *script_args, options=()) -> subprocess.CompletedProcess:
  return subprocess.run(_command(str(out), script, *script_args, options=options),
                        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


def _files(folder: str) -> dict[str, bytes]:
  out = {}
  for here, dirs, names in os.walk(folder):
    for name in names:
      path = os.path.join(here, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = f.read()
  return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """A run on a normal disk, its cache warm as the cases' are (a cold cache's run traces
  the compiles too): the files a whole run has, and their bytes."""
  base = tmp_path_factory.mktemp("reference")
  script = base / "tiny.py"
  script.write_text(SCRIPT)
  cache = str(base / "cache")
  for out in ("cold", "out"):
    done = _run(base / out, str(script), _env(base, cache))
    assert done.returncode == 0, done.stdout + done.stderr
  return {"script": str(script), "cache": cache, "files": _files(str(base / "out"))}


def _leftovers(folder: str) -> list[str]:
  """Temp files, the run's marker or its held room: every name pallas-prof writes that
  starts with a dot, none of which a finished run leaves."""
  return [os.path.join(here, n) for here, dirs, names in os.walk(folder)
          for n in names + dirs if n.startswith(".")]


def _workers_of(tmp_dir: str) -> list[str]:
  """Compile workers (and their folders) started by a run whose TMPDIR was `tmp_dir`."""
  left = [os.path.join(tmp_dir, n) for n in os.listdir(tmp_dir)
          if n.startswith("pallas-prof-worker-")]
  mark = WORKER_DIR_ENV + tmp_dir.encode()
  for pid in filter(str.isdigit, os.listdir("/proc")):
    with contextlib.suppress(OSError):
      with open(f"/proc/{pid}/environ", "rb") as f:
        if mark in f.read():
          left.append(f"process {pid}")
  return left


def _assert_no_worker_left(tmp_path) -> None:
  tmp_dir = str(tmp_path / "tmp")
  for _ in range(50):                 # a dead parent's worker notices within a moment
    if not _workers_of(tmp_dir):
      return
    time.sleep(0.2)
  assert not _workers_of(tmp_dir), "the run left its compile worker or its temp folder"


def _assert_whole(out: str, reference) -> tuple[dict | None, set[str]]:
  """Every file in `out` is whole (a normal run's bytes, or JSON that parses); returns
  report.json (None if absent) and the files a whole run has that `out` lacks."""
  assert not _leftovers(out), _leftovers(out)
  present = _files(out)
  for rel, data in present.items():
    if rel.endswith(".jsonl"):
      for line in data.decode().splitlines():
        json.loads(line)
    elif rel.endswith(".json"):
      json.loads(data)
    elif rel.startswith("kernels"):
      assert data == reference["files"][rel], f"{rel} is not the whole file"
  missing = set(reference["files"]) - set(present)
  report = None
  if "report.json" in present:
    report = json.loads(present["report.json"])
    RunReport.load(out)               # a later `pallas-prof report` reads it
    if any("was still writing" in n for n in report["notes"]):
      # the first version, which the disk had no room to replace: it says it may list
      # files that are not there (the closing line says so too: _assert_missing_told)
      return report, missing
    for k in report["kernels"]:       # what it lists is there
      for rel in k["files"].values():
        assert rel in present, f"report.json lists {rel}, which is not in the folder"
    for rel in (report["traces"] or {}).values():
      assert rel is None or rel in present
  return report, missing


def _assert_missing_told(out: str, done, report, missing: set[str]) -> None:
  """The closing line names the folder and the count; the report's notes, each file."""
  assert "Traceback" not in done.stderr, done.stderr
  if not missing:
    return
  line = [ln for ln in done.stderr.splitlines() if "of its files are missing" in ln]
  assert len(line) == 1, done.stderr
  assert f"the run is in {out}/" in line[0]
  count = int(re.search(r"but (\d+) of its files are missing", line[0]).group(1))
  assert count >= len(missing)
  if report is None:
    assert "Without a report.json" in line[0]
  elif "was still writing" not in " ".join(report["notes"]):
    notes = " ".join(report["notes"])
    for rel in missing - {"report.json"}:
      assert rel in notes, f"{rel} is missing, and report.json's notes do not say so"
  else:
    assert "Its report.json was written before them" in line[0]


def _assert_later_run_whole(tmp_path, reference) -> None:
  """A run after the fault, on a normal disk and the same cache, writes every file."""
  later = tmp_path / "later"
  done = _run(later, reference["script"], _env(tmp_path, reference["cache"]))
  assert done.returncode == 0, done.stdout + done.stderr
  report, missing = _assert_whole(str(later), reference)
  assert not missing and report is not None and not report["notes"], (missing, report)


def _pages(n: int) -> int:
  return math.ceil(n / PAGE)


def _disk_pages(reference, point: str) -> int:
  """A disk that fills at `point`, from the sizes of a whole run's files (and the marker,
  the report's held room: see cli/run_writes.py)."""
  files = reference["files"]
  size = {rel: _pages(len(data)) for rel, data in files.items()}
  marker, report = 1, size["report.json"]
  traces = size["trace.otlp.jsonl"] + size["trace.perfetto.json"]
  room = _pages(len(files["report.json"]) + 4096)
  kernels = sum(n for rel, n in size.items() if rel.startswith("kernels"))
  before_kernels = marker + traces + report + room
  return {"traces": marker + size["trace.otlp.jsonl"] - 1,
          "before_report": marker + report - 1,
          "report_first": marker + size["trace.otlp.jsonl"] + report - 1,
          "kernels": before_kernels + kernels // 2,
          "html": before_kernels + kernels + size["report.html"] // 2}[point]


@pytest.mark.fault("enospc")
@pytest.mark.parametrize("point", ["traces", "before_report", "report_first", "kernels", "html"])
def test_a_disk_that_fills_during_a_run_loses_only_what_it_cannot_hold(tmp_path, reference,
                                                                        point):
  pages = _disk_pages(reference, point)
  disk = str(tmp_path / "disk")
  with inject.small_disk(disk, size_kb=pages * PAGE // 1024) as mounted:
    out = os.path.join(disk, "out")
    env = _env(tmp_path, reference["cache"])
    if mounted is None:               # no tmpfs here: each file gets as many bytes
      env = inject.enospc_env(disk, after_bytes=pages * PAGE, env=env)
    done = _run(out, reference["script"], env)
    assert done.returncode == 0, done.stdout + done.stderr      # the script's own code
    assert "ran" in done.stdout and "done" in done.stdout
    report, missing = _assert_whole(out, reference)
    assert missing, "the disk was meant to fill"
    _assert_missing_told(out, done, report, missing)
    if mounted is not None:
      _assert_point(point, report, missing, done.stderr)
  _assert_no_worker_left(tmp_path)
  _assert_later_run_whole(tmp_path, reference)


def _assert_point(point: str, report, missing: set[str], stderr: str) -> None:
  """Where the disk filled, as the sizes chose it."""
  kernel_files = {rel for rel in missing if rel.startswith("kernels")}
  if point in ("traces", "before_report"):
    assert report is None and "report.json" in missing
  if point == "traces":
    assert "trace.otlp.jsonl" in missing
  if point == "report_first":
    assert report is not None, stderr
  if point == "kernels":
    assert report is not None and "was still writing" not in " ".join(report["notes"])
    assert kernel_files and "report.html" in missing
  if point == "html":
    assert missing == {"report.html"}, missing
    assert report is not None and any("report.html" in n for n in report["notes"])


@pytest.mark.fault("enospc")
@pytest.mark.parametrize("after_bytes", [1000, 6000, 25000])
def test_writes_that_fail_with_enospc_are_told_and_leave_no_part(tmp_path, reference,
                                                                 after_bytes):
  """ENOSPC injected (each file stops at `after_bytes`): whatever the machine can mount."""
  disk = tmp_path / "disk"
  disk.mkdir()
  out = str(disk / "out")
  env = inject.enospc_env(str(disk), after_bytes=after_bytes,
                          env=_env(tmp_path, reference["cache"]))
  done = _run(out, reference["script"], env)
  assert done.returncode == 0, done.stdout + done.stderr
  report, missing = _assert_whole(out, reference)
  too_big = {rel for rel, data in reference["files"].items() if len(data) > after_bytes}
  assert too_big - {"trace.perfetto.json", "trace.otlp.jsonl"} <= missing
  assert (report is not None) == (len(reference["files"]["report.json"]) + 4096 < after_bytes)
  _assert_missing_told(out, done, report, missing)
  _assert_no_worker_left(tmp_path)
  _assert_later_run_whole(tmp_path, reference)


@contextlib.contextmanager
def _read_only_disk(path: str):
  """A tmpfs remounted read-only (root ignores a folder's permissions); None if none."""
  with inject.small_disk(path, size_kb=1024) as mounted:
    if mounted is None:
      yield None
      return
    if subprocess.run(["mount", "-o", "remount,ro", path], capture_output=True).returncode:
      yield None
      return
    yield path


@pytest.mark.fault("readonly")
def test_a_read_only_out_is_refused_before_the_script_runs(tmp_path, reference):
  disk = str(tmp_path / "ro")
  with _read_only_disk(disk) as ro:
    if ro is None:
      if os.geteuid() == 0:
        pytest.skip("root here and no tmpfs to remount read-only: nothing refuses a write")
      ro = disk
    with (inject.read_only(ro) if ro == disk and os.geteuid() != 0
          else contextlib.nullcontext()):
      out = os.path.join(ro, "out")
      done = _run(out, reference["script"], _env(tmp_path, reference["cache"]))
      assert done.returncode == 2, done.stdout + done.stderr
      assert "ran" not in done.stdout                      # refused before the script ran
      assert f"cannot write in {ro}" in done.stderr or f"cannot write in {out}" in done.stderr
      assert "give --out a folder you can write" in done.stderr
      assert "Traceback" not in done.stderr
      assert os.listdir(ro) == []                          # nothing written
  _assert_no_worker_left(tmp_path)
  _assert_later_run_whole(tmp_path, reference)


@pytest.mark.fault("readonly")
def test_an_out_made_read_only_during_the_run_ends_with_the_scripts_code(tmp_path, reference):
  disk = str(tmp_path / "disk")
  with inject.small_disk(disk, size_kb=4096) as mounted:
    if mounted is None:
      pytest.skip("no tmpfs to remount read-only during the run (the ENOSPC cases cover "
                  "writes that fail)")
    out = os.path.join(disk, "out")
    # no trace: a file open for writing would keep the disk from being remounted
    proc = subprocess.Popen(_command(out, reference["script"], "2", options=("--no-trace",)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=_env(tmp_path, reference["cache"]))
    assert proc.stdout.readline().strip() == "ran"
    assert subprocess.run(["mount", "-o", "remount,ro", disk]).returncode == 0
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stdout + stderr
    assert "Traceback" not in stderr
    line = [ln for ln in stderr.splitlines() if "of its files are missing" in ln]
    assert line and f"the run is in {out}/" in line[0]
    assert "Read-only file system" in line[0]
    assert "give --out a folder you can write" in line[0].lower()
    assert "Without a report.json" in line[0]
    # the folder keeps only whole files, and its marker: the next run is told of it
    assert [os.path.basename(p) for p in _leftovers(out)] == [".pallas-prof-writing"]
    for rel, data in _files(out).items():
      if rel.endswith(".jsonl"):
        for text in data.decode().splitlines():
          json.loads(text)
    subprocess.run(["mount", "-o", "remount,rw", disk], check=True)
    again = _run(out, reference["script"], _env(tmp_path, reference["cache"]))
    assert again.returncode == 2 and "a run that did not finish" in again.stderr
  _assert_no_worker_left(tmp_path)
  _assert_later_run_whole(tmp_path, reference)


@pytest.mark.fault("concurrent")
def test_two_runs_at_once_on_one_out_do_not_mix(tmp_path, reference):
  out = tmp_path / "shared"
  out.mkdir()                          # an empty folder the user made: both may take it
  env = _env(tmp_path, reference["cache"])
  procs = [subprocess.Popen(_command(str(out), reference["script"], "2"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env) for _ in range(2)]
  outputs = [p.communicate(timeout=300) for p in procs]
  codes = sorted(p.returncode for p in procs)
  assert codes == [0, 2], outputs
  winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
  refused = outputs[loser][1]
  assert f"--out {out}" in refused and "Traceback" not in refused
  assert re.search(r"being written by another pallas-prof run|taken by another pallas-prof "
                   r"run|is not empty", refused), refused
  assert "ran" not in outputs[loser][0]                   # its script never ran
  report, missing = _assert_whole(str(out), reference)
  assert not missing and report["origin"]["process.pid"] == procs[winner].pid
  _assert_no_worker_left(tmp_path)


@pytest.mark.fault("concurrent")
def test_force_is_refused_while_another_run_writes_the_folder(tmp_path, reference):
  out = tmp_path / "out"
  env = _env(tmp_path, reference["cache"])
  first = subprocess.Popen(_command(str(out), reference["script"], "3"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=ROOT, env=env)
  assert first.stdout.readline().strip() == "ran"
  second = _run(out, reference["script"], env, options=("--force",))
  assert second.returncode == 2, second.stdout + second.stderr
  assert f"--out {out} is being written by another pallas-prof run (process {first.pid}" \
      in second.stderr
  stdout, stderr = first.communicate(timeout=300)
  assert first.returncode == 0, stdout + stderr
  report, missing = _assert_whole(str(out), reference)
  assert not missing and report["origin"]["process.pid"] == first.pid
  assert [p for p in os.listdir(tmp_path) if ".pallas-prof-" in p] == []  # no folder aside
  _assert_no_worker_left(tmp_path)


def _wait_for(predicate, timeout: float = 120) -> None:
  end = time.monotonic() + timeout
  while not predicate():
    assert time.monotonic() < end, "the run never got there"
    time.sleep(0.01)


SIGNAL_POINTS = ["starting", "script", "after_script"]


@pytest.mark.fault("signal")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", SIGNAL_POINTS)
def test_a_signal_at_any_point_ends_the_run_with_its_report(tmp_path, rng, signum, point):
  """130 or 143, report.json written and valid, no temp folder or worker left. A cold
  cache: the kernels' compile after the script takes long enough to be hit."""
  script = tmp_path / "tiny.py"
  script.write_text(SCRIPT)
  out = str(tmp_path / "out")
  env = _env(tmp_path, str(tmp_path / "cache"))
  sleep = "3" if point == "script" else "0"
  proc = subprocess.Popen(_command(out, str(script), sleep), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
  if point == "starting":
    _wait_for(lambda: os.path.isdir(out))
    time.sleep(rng.uniform(0, 0.3))
  else:
    assert proc.stdout.readline().strip() == "ran"
    if point == "after_script":
      assert proc.stdout.readline().strip() == "done"
    time.sleep(rng.uniform(0.05, 1.5) if point == "script" else rng.uniform(0, 0.3))
  assert proc.poll() is None, "the run ended before the signal"
  proc.send_signal(signum)
  stdout, stderr = proc.communicate(timeout=300)
  code = {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
  assert proc.returncode == code, stdout + stderr
  assert not _leftovers(out), _leftovers(out)
  report = RunReport.load(out)                     # there, whole, and a report
  notes = " ".join(report.notes)
  name = signal.Signals(signum).name
  # "starting" sends the signal soon after the run made its folder; on a loaded machine
  # the script may already run by then, and a Ctrl-C there is the script's, as in Python
  in_script = point == "script" or (point == "starting" and "KeyboardInterrupt" in notes)
  if point == "starting" and not (in_script and signum == signal.SIGINT) \
      or (point == "script" and signum == signal.SIGTERM):
    assert name in notes, notes
  if in_script and signum == signal.SIGINT:
    assert "KeyboardInterrupt" in notes            # as Python says a Ctrl-C in the script
  other = ({"SIGINT", "SIGTERM"} - {name}).pop()
  assert f"stopped by {other}" not in notes
  assert "Traceback" not in stderr or signum == signal.SIGINT and in_script
  _assert_no_worker_left(tmp_path)


@pytest.mark.fault("signal")
def test_a_worker_whose_program_was_killed_removes_its_folder(tmp_path):
  """Outside `pallas-prof run` SIGTERM ends a program at once (nothing of pallas-prof
  runs): its compile worker sees its parent gone, removes its folder and ends."""
  code = ("from pallas_prof.backend.compiling import compile_worker as w\n"
          "w.compile({'op': 'ping'})\n"
          "print(w._worker.workdir, flush=True)\n"
          "import time; time.sleep(120)\n")
  env = _env(tmp_path, str(tmp_path / "cache"))
  proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                          env=env, cwd=ROOT)
  workdir = proc.stdout.readline().strip()
  assert workdir.startswith(str(tmp_path / "tmp")) and os.path.isdir(workdir)
  proc.send_signal(signal.SIGTERM)
  proc.wait(timeout=60)
  assert proc.returncode == -signal.SIGTERM        # the program died as it would have
  _assert_no_worker_left(tmp_path)
  # a later program's worker starts and answers as before
  again = subprocess.run([sys.executable, "-c", code.replace("120", "0")], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
  assert again.returncode == 0, again.stderr
  _assert_no_worker_left(tmp_path)


@pytest.mark.fault("signal")
def test_a_compile_stopped_by_a_signal_ends_its_worker_and_the_next_starts_afresh(monkeypatch):
  """Ctrl-C or SIGTERM while the worker answers: that answer would be read as the next
  request's; the worker goes, with its folder, and the next compile starts another."""
  from pallas_prof.backend.compiling import compile_worker
  first = compile_worker.compile({"op": "ping"})
  proc, workdir = compile_worker._worker.proc, compile_worker._worker.workdir
  assert first["pid"] == proc.pid and os.path.isdir(workdir)

  def stopped_while_waiting(stream):
    raise KeyboardInterrupt()          # what SIGINT raises (SIGTERM's Terminated: the same path)

  monkeypatch.setattr(compile_worker, "recv", stopped_while_waiting)
  with pytest.raises(KeyboardInterrupt):
    compile_worker.compile({"op": "ping"})
  monkeypatch.undo()
  assert proc.wait(timeout=10) is not None and not os.path.exists(workdir)
  again = compile_worker.compile({"op": "ping"})
  assert again["pid"] != proc.pid and again["pid"] == compile_worker._worker.proc.pid


DROPS_ITS_INTERRUPT = """\
import gc, os, signal, time

class Sends:
  def __del__(self):
    os.kill(os.getpid(), signal.SIGINT)   # the KeyboardInterrupt lands here, in a finalizer,
    time.sleep(0.2)                       # where Python prints it and drops it
Sends()
gc.collect()
print("went on", flush=True)
"""


@pytest.mark.fault("signal")
def test_an_interruption_python_drops_still_ends_the_run_as_stopped(tmp_path):
  """A SIGINT whose KeyboardInterrupt lands in a finalizer is dropped by Python ("Exception
  ignored in ..."): the run once went on and exited 0, as if never asked to stop (seen
  once when the signal came while the run was starting). It ends 130, and says so."""
  script = tmp_path / "drops.py"
  script.write_text(DROPS_ITS_INTERRUPT)
  out = tmp_path / "out"
  done = _run(out, str(script), _env(tmp_path, str(tmp_path / "cache")))
  assert "went on" in done.stdout                 # the script did go on (Python dropped it)
  assert done.returncode == 130, done.stdout + done.stderr
  assert "Traceback" not in done.stderr, done.stderr      # the note says it, not Python
  report = RunReport.load(str(out))
  assert any("SIGINT" in n for n in report.notes), report.notes


SIGNALLED_IN_A_CALLBACK = """\
import os, signal, time
import jax, jax.numpy as jnp

def host(x):
  os.kill(os.getpid(), signal.{name})    # lands here, in XLA's host callback
  time.sleep(0.5)
  return x

f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
try:
  jax.block_until_ready(f(jnp.ones(4)))
except Exception as e:                     # what JAX makes of it: a JaxRuntimeError
  print("script caught", type(e).__name__, flush=True)
print("went on", flush=True)
"""


@pytest.mark.fault("signal")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_that_lands_in_a_host_callback_stops_the_run(tmp_path, signum):
  """A Ctrl-C during a kernel's launch on the CPU (Triton's interpreter runs in XLA's host
  callback) came back as JaxRuntimeError: two tracebacks, exit 1, and the run went on to
  compile and profile as if the script had failed on its own (found by a newcomer's trial,
  and by this suite's 'starting' cases on a loaded machine)."""
  name = signal.Signals(signum).name
  script = tmp_path / "callback.py"
  script.write_text(SIGNALLED_IN_A_CALLBACK.replace("{name}", name))
  out = tmp_path / "out"
  done = _run(out, str(script), _env(tmp_path, str(tmp_path / "cache")))
  assert done.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], \
      done.stdout + done.stderr
  assert "Traceback" not in done.stderr, done.stderr
  report = RunReport.load(str(out))
  assert any(f"stopped by {name}" in n for n in report.notes), report.notes


@pytest.mark.fault("signal")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_that_a_callback_turned_into_the_scripts_error_is_the_reports_exit(
    tmp_path, signum):
  """The same signal, the JaxRuntimeError it became left uncaught: the report's header said
  "exit 1" (the script's error) where the process exited 128 + the signal."""
  name = signal.Signals(signum).name
  script = tmp_path / "callback.py"
  body = SIGNALLED_IN_A_CALLBACK.replace("{name}", name).split("try:")[0]
  script.write_text(body + "jax.block_until_ready(f(jnp.ones(4)))\nprint('went on')\n")
  out = tmp_path / "out"
  done = _run(out, str(script), _env(tmp_path, str(tmp_path / "cache")))
  code = {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
  assert done.returncode == code, done.stdout + done.stderr
  assert "went on" not in done.stdout
  report = RunReport.load(str(out))
  assert report.exit_code == code, (report.exit_code, report.notes)
  assert f"exit {code}" in done.stdout, done.stdout


def _report_with_diffs():
  import types
  from pallas_prof.advice.schema import Action
  actions = [Action("e", "split", "long_reduction", {"split": 4}, diff="--- a/x.py\n+++ b/x.py\n"),
             Action("a", "warps", "too_few_warps", {"num_warps": 4}),
             Action("c", "step", "loop_step", {"keyword": "k", "to": 8}, diff="--- a/y.py\n")]
  return types.SimpleNamespace(advice=[types.SimpleNamespace(label="k#1a2b", actions=actions)])


def test_the_advices_diffs_are_whole_or_missing_with_the_reason(tmp_path, monkeypatch):
  """run_directory.save_diffs: each diff whole; a disk that fills, or a diffs/ that cannot be
  made (a file of that name in the way), leaves the diff missing with its reason in the run's
  notes, no part of a file, and no exception."""
  import errno
  from pallas_prof.cli import run_directory, run_writes
  report = _report_with_diffs()
  files = run_writes.RunFiles(str(tmp_path))
  run_directory.save_diffs(files.root, report, files.attempt, files.write)
  assert sorted(os.listdir(tmp_path / "diffs")) == ["k-1a2b-1-long_reduction.diff",
                                                  "k-1a2b-3-loop_step.diff"]
  assert (tmp_path / "diffs" / "k-1a2b-3-loop_step.diff").read_text() == "--- a/y.py\n"
  assert files.missing == {}
  # a file where the folder would be
  blocked = tmp_path / "blocked"
  blocked.mkdir()
  (blocked / "diffs").write_text("not a folder")
  files = run_writes.RunFiles(str(blocked))
  run_directory.save_diffs(files.root, report, files.attempt, files.write)
  assert sorted(files.missing) == ["diffs/k-1a2b-1-long_reduction.diff",
                                   "diffs/k-1a2b-3-loop_step.diff"]
  assert any("missing" in n for n in files.notes())
  # a full disk at the write: nothing of the file is left
  full = tmp_path / "full"
  full.mkdir()
  files = run_writes.RunFiles(str(full))

  def no_space(path, data, mode=None):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
  monkeypatch.setattr(run_writes, "write_atomic", no_space)
  run_directory.save_diffs(files.root, report, files.attempt, files.write)
  assert set(files.missing.values()) == {os.strerror(errno.ENOSPC)}
  assert os.listdir(full / "diffs") == []


def test_a_secret_in_a_diff_is_masked_in_its_file(tmp_path):
  """A diff quotes the user's source: a token written in the kernel's file is masked in the
  saved .diff as in report.json (save_diffs writes from the masked report)."""
  from pallas_prof.advice.schema import Action, KernelAdvice
  from pallas_prof.cli import run_directory, run_writes
  from pallas_prof.redaction import Redactor
  import types
  token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
  diff = f"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-TOKEN = '{token}'\n+TOKEN = '{token}'  # split\n"
  advice = KernelAdvice("k#1", "k", actions=[Action("e", "split", "long_reduction", {}, diff=diff)])
  masked = Redactor()(types.SimpleNamespace(advice=(advice,)).advice)
  files = run_writes.RunFiles(str(tmp_path))
  run_directory.save_diffs(files.root, types.SimpleNamespace(advice=masked), files.attempt,
                           files.write)
  saved = (tmp_path / "diffs" / "k-1-1-long_reduction.diff").read_text()
  assert token not in saved and saved.startswith("--- a/x.py")
