"""Triton compiles in a worker process.

LLVM inside Triton aborts the whole process on some inputs (JAX users have
lost notebooks to it). pallas-prof therefore runs triton.compile in a
long-lived child process: a crash there becomes a CompileError in the
user's program, which keeps running, and the next compile starts a fresh
worker.

PALLAS_PROF_COMPILE_WORKER=0 compiles in-process instead.

A death is not always Triton's: WorkerCrashed.from_outside says when the
machine ended the worker (a signal Triton never sends itself, a disk that
would not take an answer); compile.py retries such failures, and any crash,
once on a fresh worker (replace()) before believing them.

The worker process runs worker_main.py, by path and without the package; this module is
the parent's side: it starts the worker (in a process group of its own: closing it ends
the worker's children too, and Ctrl-C in the user's terminal does not reach them), sends it
requests (worker_main.py's protocol), reads what a dead one left, and ends it. Each compile's own
stderr comes back with its error (worker_output.py). A worker whose run died ends itself and
removes its folder; a folder left anyway (the worker killed with its run) is removed by the next
start of a worker (remove_stale_folders).
"""
from __future__ import annotations

import atexit
import os
import pickle
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from ... import settings
from ...safe_files import read_regular
from . import worker_output as _output
from . import worker_main
from .triton_run import run_ptxas, run_triton, triton_lock
from .worker_main import ARCH_ENV, STAGE_MARK, WARM_UP_ENV, recv, send

# the worker process's script, run by path
WORKER_SCRIPT = worker_main.__file__


class WorkerCrashed(RuntimeError):
  """The worker (or its child) died during a compile: `how` (worker_output.how_it_ended),
  in `stage`, having written `output_tail`; `from_outside`: ended by the machine (a
  signal Triton never sends itself, a disk that would not take its answer, no worker
  to be had), not by Triton."""

  def __init__(self, how: str, stage: str | None, output_tail: str,
               from_outside: bool | None = None):
    super().__init__(f"compile worker died ({how}) in stage {stage}")
    self.how = how
    self.stage = stage
    self.output_tail = output_tail
    self.from_outside = (_output.ended_from_outside(how) if from_outside is None
                         else from_outside)


def enabled() -> bool:
  return settings.value("PALLAS_PROF_COMPILE_WORKER")


class _Worker:
  def __init__(self):
    self.proc: subprocess.Popen | None = None
    self.workdir: str | None = None
    self.log_path: str | None = None
    self.warm_up_path: str | None = None
    self.lock = threading.Lock()

  def _start(self, warm_up: dict[str, Any] | None = None,
             warm_up_here: dict[str, Any] | None = None) -> None:
    here = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    self._remove_workdir()              # a crashed worker's (its log has been read)
    remove_stale_folders()
    self.workdir = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PALLAS_PROF_TRACE"] = "0"          # spans are made by the parent
    env["JAX_PLATFORMS"] = "cpu"            # the worker never touches a GPU
    # Triton stores every compile in its own cache, which pallas-prof never reads
    # (it keeps its own): in the worker that cache lives and dies with the worker,
    # instead of growing ~/.triton/cache by every kernel's stages
    env["TRITON_CACHE_DIR"] = os.path.join(self.workdir, "triton-cache")
    env[_output.DIR_ENV] = self.workdir
    # Triton's own switch: its backends from its folder, not by reading the entry
    # points of every installed distribution (a visible part of `import triton` where
    # many are installed); the worker compiles for NVIDIA's, which is there
    env.setdefault("TRITON_BACKENDS_IN_TREE", "1")
    env.pop(WARM_UP_ENV, None)
    self.warm_up_path = None
    if warm_up is not None or warm_up_here is not None:
      self.warm_up_path = os.path.join(self.workdir, "warm-up.pickle")
      with open(self.warm_up_path, "wb") as f:
        pickle.dump({"child": warm_up, "here": warm_up_here}, f,
                    protocol=pickle.HIGHEST_PROTOCOL)
      env[WARM_UP_ENV] = self.warm_up_path
      env[ARCH_ENV] = str(int((warm_up or warm_up_here)["target"][1]))
    self.log_path = os.path.join(self.workdir, "worker.log")
    log = open(self.log_path, "w")
    # run as a script, not `-m pallas_prof...`: importing the package would import
    # JAX, which the worker never needs (its start-up delays the first compile)
    self.proc = subprocess.Popen([sys.executable, WORKER_SCRIPT],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                 env=env, close_fds=True, process_group=0)
    log.close()
    _claim(self.workdir, self.proc.pid)

  def close(self) -> None:
    """Ends the worker and removes its folder (at exit, in tests), not waiting for a compile
    in flight (the warm-up's): a short script must not linger at exit for it."""
    holds = self.lock.acquire(timeout=0.05)
    try:
      self._end()
    finally:
      if holds:
        self.lock.release()

  def _end(self) -> None:
    proc, self.proc = self.proc, None
    if proc is not None and proc.poll() is None:
      _kill_group(proc)         # the worker and its children (a warm-up compile in flight)
      try:
        proc.wait(timeout=5)
      except subprocess.TimeoutExpired:
        pass
    self._remove_workdir()

  def replace(self) -> None:
    """Ends the worker once no compile is in flight, so that the next compile starts a
    fresh one (with a folder, and a Triton cache, of its own): a retry must not meet
    what the last worker was left with."""
    with self.lock:
      self._end()

  def _remove_workdir(self) -> None:
    if self.workdir:
      shutil.rmtree(self.workdir, ignore_errors=True)
      self.workdir = None

  def ensure_started(self, warm_up: dict[str, Any] | None = None,
                     warm_up_here: dict[str, Any] | None = None) -> None:
    with self.lock:
      if self.proc is None or self.proc.poll() is not None:
        try:
          self._start(warm_up, warm_up_here)
        except OSError:         # the next compile tries again, and says why if it fails
          self.proc = None
          self._remove_workdir()

  def warm_up_answer(self) -> dict[str, Any] | None:
    """What the worker's warm-up child answered (run_triton's result), once it has."""
    if not self.warm_up_path:
      return None
    try:
      with open(self.warm_up_path + ".answer", "rb") as f:
        return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
      return None

  def call(self, request: dict[str, Any]) -> dict[str, Any]:
    asked = time.time_ns()
    with self.lock:
      queued = time.time_ns() - asked        # behind other compiles (the warm-up's, say)
      if self.proc is None or self.proc.poll() is not None:
        self._start_for_a_request()
      try:
        send(self.proc.stdin, request)
        result = recv(self.proc.stdout)
      except (EOFError, BrokenPipeError, OSError, pickle.UnpicklingError):
        raise self._crashed() from None
      except BaseException:    # Ctrl-C, SIGTERM: its answer would go to the next request
        self._end()
        raise
    result["queued_ns"] = queued
    return result

  def _start_for_a_request(self) -> None:
    """_start(); a worker that cannot be started (no room for its folder, no
    processes left) is the machine's failure, said as a WorkerCrashed."""
    try:
      self._start()
    except OSError as e:
      self.proc = None
      self._remove_workdir()
      raise WorkerCrashed(f"could not be started: {e}", None, "(no output)",
                          from_outside=True) from None

  def _crashed(self) -> WorkerCrashed:
    proc, self.proc = self.proc, None
    try:
      code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      proc.kill()
      code = proc.wait()
    _kill_group(proc)          # a child it left (its group keeps the id until they are gone)
    how = _output.how_it_ended(code)
    text = ""
    try:
      with open(self.log_path) as f:
        text = f.read()
    except OSError:
      pass
    text += _output.left_by_crash(self.workdir)   # what the compile that died had written
    stage = None
    for line in text.splitlines():
      if line.startswith(STAGE_MARK):
        stage = line[len(STAGE_MARK):].strip()
    tail = "\n".join(ln for ln in text.splitlines() if not ln.startswith(STAGE_MARK))[-3000:]
    return WorkerCrashed(how, stage, tail.strip() or "(no output)")


# --- folders of workers whose run died outright ---------------------------------------------

FOLDER_PREFIX = "pallas-prof-worker-"
OWNER_FILE = "owner"        # who made the folder: this machine's identity, then the two pids
_swept: list[str] = []      # the temp folders swept by this process (once each)


def _identity() -> str:
  """This machine and pid namespace: pids are compared only within them (a temp folder may
  be shared by containers, whose pids are not this one's)."""
  try:
    namespace = os.readlink("/proc/self/ns/pid")
  except OSError:
    namespace = "-"
  return f"{socket.gethostname()} {namespace}"


def _claim(workdir: str, worker_pid: int) -> None:
  """Marks `workdir` as this process's and its worker's (best effort: without the mark the
  folder is never swept, only left)."""
  try:
    with open(os.path.join(workdir, OWNER_FILE), "w") as f:
      f.write(f"{_identity()}\n{os.getpid()} {worker_pid}\n")
  except OSError:
    pass


def remove_stale_folders(tmp: str | None = None) -> list[str]:
  """Removes the worker folders in the temp folder that a dead run left (a run killed by
  SIGKILL while its worker compiled: Triton's cache and the cubins stayed for ever); returns
  them. Only folders that are surely such: named as ours, a folder (not a link), owned by
  this user, marked by a process of this machine and pid namespace, and neither that process
  nor its worker alive. Once per temp folder and process."""
  tmp = tmp or tempfile.gettempdir()
  if tmp in _swept:
    return []
  _swept.append(tmp)
  try:
    names = [n for n in os.listdir(tmp) if n.startswith(FOLDER_PREFIX)]
  except OSError:
    return []
  removed = []
  for name in names:
    path = os.path.join(tmp, name)
    if _left_by_the_dead(path):
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
  return removed


def _left_by_the_dead(path: str) -> bool:
  try:
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
      return False
    lines = read_regular(os.path.join(path, OWNER_FILE), 4096).decode().splitlines()
    pids = [int(p) for p in lines[1].split()]
  except (OSError, ValueError, IndexError, UnicodeDecodeError):
    return False            # not ours to judge: kept
  return lines[0] == _identity() and bool(pids) and not any(map(_alive, pids))


def _alive(pid: int) -> bool:
  if pid <= 0:
    return True             # not a process's id: never judged dead
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:           # another user's process has that id now
    return True
  return True


def _kill_group(proc: subprocess.Popen) -> None:
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:      # none left
    pass
  except PermissionError:
    if proc.poll() is None:
      proc.kill()


_worker = _Worker()
atexit.register(_worker.close)


def _forget_parent_worker() -> None:
  """In a forked child: the worker, its pipes and its folder are the parent's.
  Using them would interleave two processes' requests, and the child's exit
  would kill the parent's worker; the child starts a worker of its own instead."""
  _worker.proc = None
  _worker.workdir = None
  _worker.log_path = None
  _worker.warm_up_path = None
  _worker.lock = threading.Lock()       # it may have been held by another thread


if hasattr(os, "register_at_fork"):
  os.register_at_fork(after_in_child=_forget_parent_worker)


def compile(request: dict[str, Any]) -> dict[str, Any]:  # noqa: A001 - the module's verb
  """run_triton(request), in the worker process (or in-process when disabled)."""
  if not enabled():
    with triton_lock():      # file descriptor 2 is the process's: one compile at a time
      return _output.with_output(lambda: run_ptxas(request) if request.get("op") == "ptxas"
                                 else run_triton(request))
  return _worker.call(request)


def replace() -> None:
  """A fresh worker for the next compile (a retry after a failure that may be the
  machine's); nothing to do when compiles run in this process."""
  if enabled():
    _worker.replace()


def compile_many(requests: list[dict[str, Any]], parallel: int | None = None) -> list[Any]:
  """compile() of each request, up to `parallel` (default: the cores, at most 8) at
  once in children of the worker. Each answer is compile()'s, or a WorkerCrashed
  for a compile whose child died (a crash of the worker itself raises)."""
  if not requests:
    return []
  parallel = parallel or min(8, os.cpu_count() or 1)
  if not enabled() or len(requests) == 1 or parallel == 1:
    out: list[Any] = []
    for request in requests:
      try:
        out.append(compile(request))
      except WorkerCrashed as crash:
        out.append(crash)
    return out
  answer = _worker.call({"op": "batch", "requests": list(requests), "parallel": parallel})
  queued = answer.get("queued_ns", 0)
  out = []
  for result in answer["results"]:
    if "crashed" in result:
      out.append(WorkerCrashed(result["crashed"], result.get("stage"),
                               result.get("output") or "(no output)"))
    else:
      result["queued_ns"] = queued
      out.append(result)
  return out


def start(warm_up: dict[str, Any] | None = None,
          warm_up_here: dict[str, Any] | None = None) -> None:
  """Starts the worker process if it is not running, without waiting for it.

  warm_up: a compile request the new worker runs in a child as soon as Triton
  is imported, answering other requests meanwhile (warm_up_answer() says
  what it gave). warm_up_here: one it compiles itself while no request waits,
  stopping at the next stage when one comes (a ping's answer says how far it got)."""
  if enabled():
    _worker.ensure_started(warm_up, warm_up_here)


def warm_up_answer() -> dict[str, Any] | None:
  return _worker.warm_up_answer()
