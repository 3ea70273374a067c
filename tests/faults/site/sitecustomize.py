"""Injected into a test's child Python process (tests/faults/inject.enospc_env): writes to
files under PALLAS_PROF_TEST_ENOSPC_UNDER fail with ENOSPC, as on a full disk, once
PALLAS_PROF_TEST_ENOSPC_AFTER bytes have been written to that file. Covers Python's
open() (text and binary), os.open + os.write and os.fdopen, which is how pallas-prof and its
libraries write files. With PALLAS_PROF_TEST_KILL_IN_WRITE set the process is killed
(SIGKILL) instead, once the budget's bytes are on disk: a writer killed half-way
(tests/faults/inject.killed_in_write_env)."""
import builtins
import errno
import io
import os
import signal

_UNDER = os.environ.get("PALLAS_PROF_TEST_ENOSPC_UNDER")
_AFTER = int(os.environ.get("PALLAS_PROF_TEST_ENOSPC_AFTER") or 0)
_KILL = bool(os.environ.get("PALLAS_PROF_TEST_KILL_IN_WRITE"))


def _inside(path) -> bool:
  try:
    p = os.path.abspath(os.fsdecode(path))
  except TypeError:
    return False
  return p == _UNDER or p.startswith(_UNDER.rstrip(os.sep) + os.sep)


def _full(path):
  return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fsdecode(path))


class _Budget:
  def __init__(self, path):
    self.path, self.left = path, _AFTER

  def take(self, n, fd=None, data=b""):
    if n > self.left:
      if _KILL and fd is not None:
        _os_write(fd, bytes(data[:self.left]))      # what fits is on disk, then the end
        os.kill(os.getpid(), signal.SIGKILL)
      self.left = 0
      raise _full(self.path)
    self.left -= n


class _FullFile(io.RawIOBase):
  """A raw file whose writes stop at the budget; reads pass through."""

  def __init__(self, fd, path):
    self._fd, self._budget, self.name = fd, _Budget(path), path

  def writable(self):
    return True

  def readable(self):
    return True

  def seekable(self):
    return True

  def write(self, b):
    self._budget.take(len(b), self._fd, b)
    return os.write(self._fd, b)

  def readinto(self, b):
    data = os.read(self._fd, len(b))
    b[:len(data)] = data
    return len(data)

  def seek(self, pos, whence=0):
    return os.lseek(self._fd, pos, whence)

  def fileno(self):
    return self._fd

  def close(self):
    if not self.closed:
      os.close(self._fd)
    super().close()


if _UNDER:
  _open, _os_open, _os_write = builtins.open, os.open, os.write
  _budgets: dict[int, _Budget] = {}

  def open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None,
           closefd=True, opener=None):
    if isinstance(file, int) or not any(c in mode for c in "wax+") or not _inside(file):
      return _open(file, mode, buffering, encoding, errors, newline, closefd, opener)
    flags = os.O_CREAT | (os.O_RDWR if "+" in mode else os.O_WRONLY)
    flags |= {"w": os.O_TRUNC, "a": os.O_APPEND, "x": os.O_EXCL}.get(
        next((c for c in mode if c in "wax"), ""), 0)
    raw = _FullFile(_os_open(file, flags, 0o666), os.fsdecode(file))
    buffered = io.BufferedRandom(raw) if "+" in mode else io.BufferedWriter(raw)
    if "b" in mode:
      return buffered
    return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors,
                            newline=newline, write_through=True)

  def os_open(path, flags, mode=0o777, *, dir_fd=None):
    fd = _os_open(path, flags, mode, dir_fd=dir_fd)
    if flags & (os.O_WRONLY | os.O_RDWR) and _inside(path):
      _budgets[fd] = _Budget(os.fsdecode(path))
    return fd

  def os_write(fd, data):
    budget = _budgets.get(fd)
    if budget is not None:
      budget.take(len(data), fd, data)
    return _os_write(fd, data)

  _fdopen = os.fdopen

  def fdopen(fd, mode="r", buffering=-1, encoding=None, *args, **kwargs):
    budget = _budgets.get(fd)
    if budget is None or not any(c in mode for c in "wax+"):
      return _fdopen(fd, mode, buffering, encoding, *args, **kwargs)
    raw = _FullFile(fd, budget.path)
    raw._budget = budget
    buffered = io.BufferedRandom(raw) if "+" in mode else io.BufferedWriter(raw)
    if "b" in mode:
      return buffered
    return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", write_through=True)

  _os_close = os.close

  def os_close(fd):
    # the number is free again: a file opened later under it (outside the folder) must
    # not inherit this one's budget
    _budgets.pop(fd, None)
    return _os_close(fd)

  builtins.open = open
  io.open = open
  os.open = os_open
  os.write = os_write
  os.fdopen = fdopen
  os.close = os_close
