"""`pytest --pallas-prof`'s baselines and the processes that write them: two pytest
processes updating one baseline at once, a writer killed half-way through a baseline, a
baseline cut short, a baseline folder that cannot be written. Each case: the file left is
whole (or refused by name, never trusted), the process that could not write says so and
what to do, the session goes on, and what a later run reads is a valid baseline."""
from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys

import pytest

from pallas_prof.gate import baseline

from ..gate.pytester_runs import baseline_path, run, user_test
from . import inject

pytest_plugins = ["pytester"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = "test_user.py::test_scale"

# the user's kernel test, waiting where the case says (GATE_ROLE): "first" runs its test
# body only once "second" has finished, so both processes hold the test at once
SYNCED = '''
import os, time

def _wait(name):
  end = time.monotonic() + 240
  while not os.path.exists(name):
    assert time.monotonic() < end, "never came: " + name
    time.sleep(0.05)

def _sync():
  role = os.environ.get("GATE_ROLE")
  if role == "first":
    open("first_started", "w").close()
    _wait("second_done")
  elif role == "second":
    _wait("first_started")
'''
# a second test after the kernel's, to show the session goes on past a failed gate
AND_ANOTHER = "\n\ndef test_after():\n  pass\n"


def _synced_test() -> str:
  return user_test().replace("def test_scale():\n", "def test_scale():\n  _sync()\n") + SYNCED


def _pytest(pytester, role: str, *args) -> subprocess.Popen:
  env = dict(os.environ, GATE_ROLE=role)
  env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  return subprocess.Popen(
      [sys.executable, "-m", "pytest", "-p", "pallas_prof.pytest_plugin", "-p",
       "no:cacheprovider", "-q", "--pallas-prof-repeats", "2", "--pallas-prof-launches", "10",
       *args], cwd=str(pytester.path), env=env, stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True)


def _parts(path: str) -> list[str]:
  """Temporary files of `path`'s writers (write_atomic's names)."""
  return glob.glob(os.path.join(glob.escape(os.path.dirname(path)),
                                glob.escape(f".{os.path.basename(path)}.") + "*.tmp"))


def _version(path: str) -> tuple:
  """The file's bytes and which file it is (a rename puts another in its place)."""
  st = os.stat(path)
  with open(path, "rb") as f:
    return f.read(), st.st_ino, st.st_mtime_ns


def _clean(out: str) -> None:
  assert "Traceback" not in out and "INTERNALERROR" not in out, out


@pytest.mark.fault("concurrent")
def test_two_processes_updating_one_baseline_keep_the_first_whole_and_say_so(pytester):
  pytester.makepyfile(test_user=_synced_test())
  first = _pytest(pytester, "first", "--pallas-prof-update")
  second = _pytest(pytester, "second", "--pallas-prof-update")
  second_out, _ = second.communicate(timeout=300)
  path = baseline_path(pytester)
  written_by_second = _version(path)
  (pytester.path / "second_done").touch()
  first_out, _ = first.communicate(timeout=300)
  assert second.returncode == 0 and "wrote 1 baseline(s)" in second_out, second_out
  assert first.returncode == 0, first_out
  _clean(first_out + second_out)
  # the one that wrote second keeps its hands off, and says whose file is there and what to do
  assert "wrote 0 baseline(s)" in first_out, first_out
  assert (f"not written: 1 baseline(s) another process wrote while these tests ran (theirs "
          f"kept, whole): {NODE}; run --pallas-prof-update again to write this run's"
          in first_out), first_out
  assert _version(path) == written_by_second
  assert _parts(path) == []
  # what a later run reads is a whole baseline of this test
  assert baseline.read(path, NODE).kernels


@pytest.mark.fault("kill_writer", "truncate")
def test_a_writer_killed_half_way_and_a_cut_baseline_are_named_then_replaced(pytester):
  pytester.makepyfile(test_user=user_test() + AND_ANOTHER)
  path = baseline_path(pytester)
  folder = os.path.dirname(os.path.dirname(path))
  with pytest.MonkeyPatch.context() as mp:
    for name, value in inject.killed_in_write_env(folder, after_bytes=300).items():
      mp.setenv(name, value)
    killed = run(pytester, "--pallas-prof-update")
  assert killed.ret == -signal.SIGKILL, killed.stdout.str()       # killed as injected
  [part] = _parts(path)
  half = open(part, "rb").read()
  assert len(half) == 300                    # half-written, and the baseline as it was
  # a writer that wrote in place, killed as this one was, leaves the baseline cut short
  with open(path, "wb") as f:
    f.write(half)
  checked = run(pytester, "--pallas-prof")
  out = checked.stdout.str()
  _clean(out)
  assert checked.ret == 1 and "1 failed, 1 passed" in out, out      # the session went on
  assert f"pallas-prof: baseline {path} is not JSON" in out, out
  assert "it was cut short or edited: run the test with --pallas-prof-update" in out, out
  assert f"removed {part}, a part of its baseline whose writer was stopped" in out, out
  assert open(path, "rb").read() == half and _parts(path) == []    # refused, not replaced
  updated = run(pytester, "--pallas-prof-update")
  out = updated.stdout.str()
  _clean(out)
  assert updated.ret == 0 and "wrote 1 baseline(s)" in out, out
  assert f"{NODE}: replaced its baseline" in out and "which was not JSON" in out, out
  assert baseline.read(path, NODE).kernels and _parts(path) == []


@contextlib.contextmanager
def _unwritable(path: str):
  """`path` a folder this process cannot write: a tmpfs remounted read-only as root (root
  ignores permissions), a folder without write permission otherwise; None if neither."""
  if os.geteuid() != 0:
    os.makedirs(path)
    with inject.read_only(path):
      yield path
    return
  with inject.small_disk(path, size_kb=256) as mounted:
    if mounted is None or subprocess.run(["mount", "-o", "remount,ro", path],
                                         capture_output=True).returncode:
      yield None
      return
    yield path


@pytest.mark.fault("readonly")
def test_a_baseline_folder_that_cannot_be_written_fails_its_test_saying_what_to_do(pytester):
  pytester.makepyfile(test_user=user_test() + AND_ANOTHER)
  with _unwritable(str(pytester.path / "baselines")) as folder:
    if folder is None:
      pytest.skip("root here and no tmpfs to remount read-only: nothing refuses a write")
    updated = run(pytester, "--pallas-prof-update", "--pallas-prof-baseline", folder)
    out = updated.stdout.str()
    _clean(out)
    assert updated.ret == 1 and "1 failed, 1 passed" in out, out     # the session went on
    path = os.path.join(folder, "test_user.py", "test_scale.json")
    assert f"pallas-prof: could not write baseline {path}: " in out, out
    assert "Read-only file system" in out or "Permission denied" in out, out
    assert (f"make {folder} writable or give --pallas-prof-baseline a folder you can write"
            in out), out
    assert os.listdir(folder) == []                                    # nothing written
