"""A stop (Ctrl-C, SIGTERM) that lands while the program imports a module takes effect when
the import is over, never inside it. CI saw why: a Ctrl-C during the script's `import jax`
raised KeyboardInterrupt in Python that jaxlib's C++ initialiser had called (nanobind makes
its enums with Python's enum module), C++ could not pass the exception on, and the process
aborted (std::terminate, exit -6) with no report. A module body stands in for that
initialiser here: with the stop raised inside it, its last line never runs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from pallas_prof.cli.report import RunReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SLOW_MODULE = """\
import time
print("importing", flush=True)
time.sleep(1.5)          # the signal lands here
print("imported", flush=True)
"""

CHILD = """\
import sys, time
sys.path.insert(0, {folder!r})
from pallas_prof.cli import processes
print("ready", flush=True)
with processes.terminate_as_exception():
  try:
    import slow_module
    time.sleep(5)
    print("not stopped", flush=True)
  except (KeyboardInterrupt, processes.Terminated) as stop:
    print("stopped by", type(stop).__name__, processes.received, flush=True)
"""


def _env() -> dict:
  env = dict(os.environ)
  env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  return env


def _signal_after(proc: subprocess.Popen, line: str, signum: int) -> list[str]:
  seen = []
  while True:
    got = proc.stdout.readline()
    assert got, f"the child ended before printing {line!r}: {seen}"
    seen.append(got.strip())
    if got.strip() == line:
      proc.send_signal(signum)
      return seen


@pytest.mark.fault("signal")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_during_an_import_lands_after_it(tmp_path, signum):
  (tmp_path / "slow_module.py").write_text(SLOW_MODULE)
  proc = subprocess.Popen([sys.executable, "-c", CHILD.format(folder=str(tmp_path))],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=_env(), cwd=ROOT)
  seen = _signal_after(proc, "importing", signum)
  stdout, stderr = proc.communicate(timeout=60)
  lines = seen + stdout.split("\n")
  stop = {signal.SIGINT: "KeyboardInterrupt", signal.SIGTERM: "Terminated"}[signum]
  assert "imported" in lines, (lines, stderr)          # the module's body ran to its end
  assert f"stopped by {stop} [{int(signum)}]" in lines, (lines, stderr)   # noted once
  assert lines.index("imported") < lines.index(f"stopped by {stop} [{int(signum)}]")
  assert "not stopped" not in lines
  assert proc.returncode == 0, stderr


SCRIPT = """\
import sys, time
sys.path.insert(0, {folder!r})
import slow_module
time.sleep(5)
print("not stopped", flush=True)
"""


@pytest.mark.fault("signal")
def test_a_ctrl_c_during_the_scripts_import_ends_the_run_with_its_report(tmp_path):
  """Through `pallas-prof run`: 130, the import whole, the report written and saying the
  script was stopped."""
  (tmp_path / "slow_module.py").write_text(SLOW_MODULE)
  script = tmp_path / "script.py"
  script.write_text(SCRIPT.format(folder=str(tmp_path)))
  out = str(tmp_path / "out")
  env = _env()
  env.update(PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
  proc = subprocess.Popen([sys.executable, "-m", "pallas_prof", "run", "--out", out,
                           str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=ROOT)
  seen = _signal_after(proc, "importing", signal.SIGINT)
  stdout, stderr = proc.communicate(timeout=300)
  lines = seen + stdout.split("\n")
  assert proc.returncode == 130, textwrap.shorten(stdout + stderr, 2000)
  assert "imported" in lines and "not stopped" not in lines, (lines, stderr)
  notes = " ".join(RunReport.load(out).notes)
  assert "KeyboardInterrupt" in notes, notes
