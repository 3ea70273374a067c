"""SIGHUP (a closed terminal, a dropped ssh session), SIGUSR1, SIGUSR2 and SIGALRM during a
run (issue 48, item 1). By default each ends a process at once: the run lost its report,
left its `.pallas-prof-writing` marker, and the kernels already run were never reported.
Now each ends the run as SIGTERM does: the report written, the exit code the shell's
128 + the signal. Unless the run was told otherwise: a SIGHUP ignored when the run started
(nohup) stays ignored, and a handler the script sets for a signal is the script's."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from pallas_prof.cli.report import RunReport
from . import inject
from .test_run_writes import SCRIPT, _assert_no_worker_left, _command, _env, _leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENDING = ["SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM"]


@pytest.mark.fault("hangup")
def test_a_hangup_during_the_script_ends_the_run_with_its_report(tmp_path):
  """`pallas-prof run` sent SIGHUP while its script runs: 129, report.json whole and saying
  SIGHUP stopped it, the kernels that ran listed, no marker and no worker left."""
  script = tmp_path / "tiny.py"
  script.write_text(SCRIPT)
  out = str(tmp_path / "out")
  proc = subprocess.Popen(_command(out, str(script), "30"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT,
                          env=_env(tmp_path, str(tmp_path / "cache")))
  assert proc.stdout.readline().strip() == "ran"
  proc.send_signal(signal.SIGHUP)
  stdout, stderr = proc.communicate(timeout=300)
  inject.assert_alive(proc.returncode, stderr)       # not the default action's death
  assert proc.returncode == 128 + signal.SIGHUP, stdout + stderr
  inject.assert_report(out)
  report = RunReport.load(out)
  notes = " ".join(report.notes)
  assert "SIGHUP" in notes, notes
  assert {"double", "shift"} <= {k.name for k in report.kernels}, report.kernels
  assert not _leftovers(out), _leftovers(out)
  _assert_no_worker_left(tmp_path)


CHILD = """\
import os, signal, sys, time
from pallas_prof.cli import processes
with processes.terminate_as_exception():
  {inside}
  try:
    print("ready", flush=True)
    time.sleep({seconds})
    print("not stopped", flush=True)
  except processes.Terminated as stop:
    print("stopped by", stop.signum.name, stop.code, processes.received, flush=True)
"""


def _child(inside: str = "pass", *, seconds: float = 20):
  env = dict(os.environ)
  env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  return subprocess.Popen([sys.executable, "-c", CHILD.format(inside=inside, seconds=seconds)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=ROOT)


def _signal_when_ready(proc, signum: int) -> tuple[str, str]:
  line = proc.stdout.readline()
  assert line.strip() == "ready", (line, proc.communicate(timeout=60))
  proc.send_signal(signum)
  return proc.communicate(timeout=60)


@pytest.mark.fault("hangup")
@pytest.mark.parametrize("name", ENDING)
def test_each_ending_signal_stops_the_run_as_sigterm_does(name):
  """Terminated carries the signal and 128 + it, and the signal is noted, for each of them."""
  signum = getattr(signal, name)
  proc = _child()
  stdout, stderr = _signal_when_ready(proc, signum)
  inject.assert_alive(proc.returncode, stderr)
  assert f"stopped by {name} {128 + signum} [{signum}]" in stdout, stdout + stderr
  assert proc.returncode == 0


@contextlib.contextmanager
def _hangup_ignored():
  """Children started meanwhile inherit SIGHUP ignored, as under nohup."""
  before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
  try:
    yield
  finally:
    signal.signal(signal.SIGHUP, before)


@pytest.mark.fault("hangup")
def test_a_hangup_ignored_under_nohup_stays_ignored_and_the_others_still_stop_the_run():
  """nohup starts the run with SIGHUP ignored: the user asked the run to outlive its
  terminal, and it does; SIGUSR1 after it still ends the run with its report."""
  with _hangup_ignored():
    proc = _child(seconds=20)
  assert proc.stdout.readline().strip() == "ready"
  proc.send_signal(signal.SIGHUP)          # discarded as it is sent: it is ignored
  proc.send_signal(signal.SIGUSR1)
  stdout, stderr = proc.communicate(timeout=60)
  inject.assert_alive(proc.returncode, stderr)
  assert f"stopped by SIGUSR1 {128 + signal.SIGUSR1} [{int(signal.SIGUSR1)}]" in stdout, \
      stdout + stderr
  assert proc.returncode == 0, stderr


@pytest.mark.fault("hangup")
def test_a_handler_the_script_sets_is_the_scripts():
  """A script that handles SIGUSR1 itself gets it, as it would without pallas-prof; SIGUSR2,
  which it left alone, ends the run with its report."""
  proc = _child(inside="signal.signal(signal.SIGUSR1, lambda s, f: print('the script "
                       "handled it', flush=True))")
  assert proc.stdout.readline().strip() == "ready"
  proc.send_signal(signal.SIGUSR1)
  assert proc.stdout.readline().strip() == "the script handled it"
  proc.send_signal(signal.SIGUSR2)
  stdout, stderr = proc.communicate(timeout=60)
  inject.assert_alive(proc.returncode, stderr)
  assert f"stopped by SIGUSR2 {128 + signal.SIGUSR2} [{int(signal.SIGUSR2)}]" in stdout, \
      stdout + stderr
  assert proc.returncode == 0, stderr


WORKER_UNDER_NOHUP = """\
import os, signal, time
from pallas_prof.backend.compiling import compile_worker as w
pid = w.compile({'op': 'ping'})['pid']
os.kill(pid, signal.SIGHUP)
end = time.monotonic() + 30
while w._worker.proc.poll() is None and time.monotonic() < end:
  time.sleep(0.05)
print("worker", w._worker.proc.poll(), flush=True)
"""


@pytest.mark.fault("hangup")
def test_the_compile_worker_of_a_run_under_nohup_still_ends_on_sighup(tmp_path):
  """The worker does not inherit nohup's ignored SIGHUP: one sent to it ends it (a process
  manager's stop; the worker's own group never gets the terminal's)."""
  env = _env(tmp_path, str(tmp_path / "cache"))
  with _hangup_ignored():
    done = subprocess.run([sys.executable, "-c", WORKER_UNDER_NOHUP], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
  assert done.returncode == 0, done.stderr
  assert f"worker {-signal.SIGHUP}" in done.stdout, done.stdout + done.stderr
  _assert_no_worker_left(tmp_path)
