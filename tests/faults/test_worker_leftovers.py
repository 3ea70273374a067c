"""A run killed outright (SIGKILL) while its compile worker compiled (issue 48, item 6): the
worker died on a broken pipe when it wrote its answer, and its folder (Triton's cache, the
cubins) stayed in the temp folder for ever. Now the worker ends quietly on a parent that is
gone, removing its folder; and a folder left anyway (a worker killed with its run) is
removed by the next start of a worker, when the processes that made it are surely gone."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

from pallas_prof.backend.compiling import compile_worker, worker_output
from . import inject
from .test_run_writes import _env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ASKS = """\
from pallas_prof.backend.compiling import compile_worker as w
w._worker.ensure_started()
print(w._worker.proc.pid, w._worker.workdir, flush=True)
w.compile({'op': 'ping'})
print("answered", flush=True)
"""


PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def _adopting_orphans():
  """This process adopts the orphans of its children (Linux's child subreaper): the worker
  of a killed run becomes this test's child, whose exit status it can read. (Adopted by
  init instead, the worker, stopped for the test in its own process group, would be sent
  SIGHUP as an orphaned stopped group is.)"""
  libc = ctypes.CDLL(None, use_errno=True)
  if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    pytest.fail(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
  try:
    yield
  finally:
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _exit_status(pid: int, timeout: float = 120) -> int:
  end = time.monotonic() + timeout
  while time.monotonic() < end:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
      return os.waitstatus_to_exitcode(status)
    time.sleep(0.05)
  os.kill(pid, signal.SIGKILL)
  raise AssertionError("the worker outlived its run")


@pytest.mark.fault("kill_writer")
def test_a_worker_whose_run_was_killed_mid_compile_ends_quietly_and_removes_its_folder(
    tmp_path):
  pauses = tmp_path / "pauses"
  pauses.mkdir()
  env = _env(tmp_path, str(tmp_path / "cache"))
  env[worker_output.TEST_PAUSE_ENV] = f"start:{pauses}"     # the worker stops before its loop
  with _adopting_orphans():
    run = subprocess.Popen([sys.executable, "-c", ASKS], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    worker_pid, workdir = run.stdout.readline().split()
    worker_pid = int(worker_pid)
    end = time.monotonic() + 60
    while not os.listdir(pauses) and time.monotonic() < end:
      time.sleep(0.01)
    inject.wait_stopped(worker_pid)
    time.sleep(0.5)                         # the request is in the pipe, the run waits for it
    run.kill()                              # the run dies outright, as under SIGKILL
    run.communicate(timeout=30)
    assert os.path.isdir(workdir)
    os.kill(worker_pid, signal.SIGCONT)     # the worker answers into a pipe nobody reads
    code = _exit_status(worker_pid)
  log = os.path.join(workdir, "worker.log")
  said = open(log).read() if os.path.exists(log) else ""
  assert code == 0 and "Traceback" not in said, (code, said)     # quietly
  assert not os.path.exists(workdir), os.listdir(workdir)        # and nothing left


def _dead_pid() -> int:
  done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  return int(done.stdout)


def _folder(tmp, name: str, owner_text: str | None) -> str:
  path = os.path.join(tmp, compile_worker.FOLDER_PREFIX + name)
  os.makedirs(os.path.join(path, "triton-cache"))
  with open(os.path.join(path, "triton-cache", "kernel.cubin"), "wb") as f:
    f.write(b"\0" * 64)
  if owner_text is not None:
    with open(os.path.join(path, compile_worker.OWNER_FILE), "w") as f:
      f.write(owner_text)
  return path


@pytest.mark.fault("kill_writer")
def test_the_next_start_removes_only_the_folders_of_dead_runs(tmp_path):
  tmp = str(tmp_path)
  me = compile_worker._identity()
  dead, other_dead = _dead_pid(), _dead_pid()
  left = _folder(tmp, "left", f"{me}\n{dead} {other_dead}\n")
  live_run = _folder(tmp, "live-run", f"{me}\n{os.getpid()} {dead}\n")
  live_worker = _folder(tmp, "live-worker", f"{me}\n{dead} {os.getpid()}\n")
  elsewhere = _folder(tmp, "other-namespace", f"other-host pid:[1]\n{dead} {other_dead}\n")
  unmarked = _folder(tmp, "unmarked", None)                   # an older version's: kept
  damaged = _folder(tmp, "damaged", "garbage")
  not_ours = os.path.join(tmp, "someone-elses")
  os.makedirs(not_ours)
  link = os.path.join(tmp, compile_worker.FOLDER_PREFIX + "link")
  os.symlink(left, link)
  removed = compile_worker.remove_stale_folders(tmp)
  assert removed == [left]
  assert not os.path.exists(left)
  for kept in (live_run, live_worker, elsewhere, unmarked, damaged, not_ours):
    assert os.path.isdir(kept), kept
  assert os.path.islink(link)
  assert compile_worker.remove_stale_folders(tmp) == []       # once per process and folder
  if os.geteuid() == 0:                                       # another user's, though dead
    theirs = _folder(tmp, "theirs", f"{me}\n{dead} {other_dead}\n")
    os.chown(theirs, 12345, 12345)
    compile_worker._swept.clear()
    assert compile_worker.remove_stale_folders(tmp) == [] and os.path.isdir(theirs)


@pytest.mark.fault("kill_writer")
def test_a_worker_marks_its_folder_and_its_start_sweeps(tmp_path, monkeypatch):
  """Through the worker's own start: the folder it makes names both processes, and the
  folder a dead run left beside it goes."""
  monkeypatch.setattr(compile_worker, "_swept", [])
  monkeypatch.setenv("TMPDIR", str(tmp_path))
  monkeypatch.setattr(compile_worker.tempfile, "tempdir", None)
  left = _folder(str(tmp_path), "left", f"{compile_worker._identity()}\n{_dead_pid()}\n")
  worker = compile_worker._Worker()
  try:
    worker._start()
    assert not os.path.exists(left)
    with open(os.path.join(worker.workdir, compile_worker.OWNER_FILE)) as f:
      assert f.read().splitlines()[1] == f"{os.getpid()} {worker.proc.pid}"
  finally:
    worker.close()
