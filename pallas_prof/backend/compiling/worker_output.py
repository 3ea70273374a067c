"""What a compile in the worker leaves behind: what Triton wrote to stderr, kept
per compile, and how a worker (or a child of it) that died ended.

Triton's C++ writes MLIR's diagnostics, a failed assertion's text and the
reproducer MLIR dumps to file descriptor 2, where its Python error never
says them. The compile worker (compile_worker.py) runs each compile inside
compiler_output(): the text comes back with a failed compile's error, and
what a compile that killed its process had written is found afterwards
(left_by_crash, left_by_child). how_it_ended() names a death, so that the
parent can tell one that came from outside (a signal Triton never sends
itself) from Triton's own crash. Standard library only: the worker loads it
by path.
"""
from __future__ import annotations

import contextlib
import glob
import os
import signal
import sys
import tempfile

DIR_ENV = "PALLAS_PROF_WORKER_DIR"     # the worker's folder: each compile's stderr, while it runs
KEPT_OUTPUT = 1 << 20                  # of a failed compile's stderr, the bytes kept (head and tail)
# Signals that end a process from outside it: a user, a process manager, the kernel's
# out-of-memory killer. Triton's compiler dies by SIGSEGV or SIGABRT (LLVM's abort), never
# by these, so a worker ended by one was ended by the machine, not by Triton.
OUTSIDE_SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")
# a batch child's exit status when its answer could not be written (a full disk, a
# folder it may not write): the machine's failure, not the compile's
ANSWER_NOT_WRITTEN = 75
ANSWER_NOT_WRITTEN_HOW = "could not write its answer (the disk is full or not writable)"
# tests only: "<point>[,<point>...]:<folder>": at each named point (start, or a stage's
# name) the worker writes <folder>/<pid>.<point>.<n> and stops itself (SIGSTOP), so that a
# test can end it from outside at a known point (tests/faults/test_compile_worker.py)
TEST_PAUSE_ENV = "PALLAS_PROF_TEST_WORKER_PAUSE"


def _folder() -> str:
  return os.environ.get(DIR_ENV) or tempfile.gettempdir()


def _path(pid: int) -> str:
  return os.path.join(_folder(), f"compile-{pid}.stderr")


@contextlib.contextmanager
def compiler_output():
  """While Triton compiles here: file descriptor 2 (where its C++ writes MLIR's
  diagnostics, a failed assertion's text and the reproducer MLIR dumps) goes to
  a file of the worker's folder, named by this process; afterwards what came
  is written on to the real stderr (the worker's log, as before) and put in the
  yielded list. A compile that kills the process leaves the file, which the
  parent reads (left_by_crash, left_by_child)."""
  path = _path(os.getpid())
  out: list[str] = []
  try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
  except OSError:             # nowhere to keep it: compile without
    yield out
    return
  sys.stderr.flush()
  saved = os.dup(2)
  os.dup2(fd, 2)
  try:
    yield out
  finally:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
      chunk = os.read(fd, 1 << 16)
      if not chunk:
        break
      chunks.append(chunk)
    os.close(fd)
    try:
      os.unlink(path)
    except OSError:
      pass
    data = b"".join(chunks)
    if data:
      try:
        os.write(2, data)
      except OSError:
        pass
    out.append(_kept(data).decode(errors="replace"))


def _kept(data: bytes) -> bytes:
  """Up to KEPT_OUTPUT bytes of a compile's output: its start and its end (an
  assertion comes first, MLIR's located errors last, a long IR dump between)."""
  if len(data) <= KEPT_OUTPUT:
    return data
  half = KEPT_OUTPUT // 2
  return data[:half] + b"\n... (%d bytes left out) ...\n" % (len(data) - 2 * half) + data[-half:]


def _read_text(path: str) -> str:
  try:
    with open(path, "rb") as f:
      return f.read().decode(errors="replace")
  except OSError:
    return ""


def left_by_crash(workdir: str | None) -> str:
  """What compiles in a dead worker's folder had written (files never moved to its log)."""
  if not workdir:
    return ""
  return "".join(_read_text(p) for p in sorted(glob.glob(os.path.join(workdir,
                                                                      "compile-*.stderr"))))


def left_by_child(pid: int) -> str:
  """What the compile of a child (of this worker) that died had written; the file goes."""
  path = _path(pid)
  text = _read_text(path)
  try:
    os.unlink(path)
  except OSError:
    pass
  return text


def how_it_ended(returncode: int) -> str:
  """A process's end as the parent words it: "signal SIGKILL", "exit code 1"."""
  if returncode == ANSWER_NOT_WRITTEN:
    return ANSWER_NOT_WRITTEN_HOW
  if returncode < 0:
    try:
      return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
      return f"signal {-returncode}"
  return f"exit code {returncode}"


def ended_from_outside(how: str) -> bool:
  """Whether an end (how_it_ended's words) came from outside the compile: a signal
  Triton never sends itself, or an answer the disk would not take."""
  return how == ANSWER_NOT_WRITTEN_HOW or how.removeprefix("signal ") in OUTSIDE_SIGNALS


def pause_for_test(point: str) -> None:
  """Stops this process at `point` when a test asked for it (TEST_PAUSE_ENV)."""
  spec = os.environ.get(TEST_PAUSE_ENV)
  if not spec:
    return
  points, _, folder = spec.partition(":")
  if point not in points.split(","):
    return
  _paused.append(point)         # (a point may come twice in one compile: ttir does)
  with open(os.path.join(folder, f"{os.getpid()}.{point}.{len(_paused)}"), "w"):
    pass
  os.kill(os.getpid(), signal.SIGSTOP)


_paused: list[str] = []


def with_output(run) -> dict:
  """run() (a compile, or ptxas) with its stderr kept: a failed one's error carries it."""
  with compiler_output() as output:
    result = run()
  if "error" in result and output:
    result["error"]["stderr"] = output[0]
  return result
