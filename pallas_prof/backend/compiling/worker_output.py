"""What Triton writes to stderr while it compiles, kept per compile.

Triton's C++ writes MLIR's diagnostics, a failed assertion's text and the
reproducer MLIR dumps to file descriptor 2, where its Python error never
says them. The compile worker (compile_worker.py) runs each compile inside
compiler_output(): the text comes back with a failed compile's error, and
what a compile that killed its process had written is found afterwards
(left_by_crash, left_by_child). Standard library only: the worker loads it
by path.
"""
from __future__ import annotations

import contextlib
import glob
import os
import sys
import tempfile

DIR_ENV = "PALLAS_PROF_WORKER_DIR"     # the worker's folder: each compile's stderr, while it runs
KEPT_OUTPUT = 1 << 20                  # of a failed compile's stderr, the bytes kept (head and tail)


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
