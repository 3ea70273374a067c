"""Files that pallas-prof writes and later reads back, handled as data that may have
been damaged: written whole or not at all, in folders only their owner can enter, and
read back only when they are what they claim to be.

Everything pallas-prof persists (the cache, tuning files, run directories) goes
through here, so that a full disk, a killed process or an edited file leaves the same
trace everywhere: either the old file or the new one, never half of one.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile


class UnsafeFile(OSError):
  """A file that is not what a reader may trust: not a regular file, or too large."""


def private_dir(path: str) -> str:
  """`path` as a folder, made (with its parents) readable by its owner only: a cache
  holds code that later runs, so no other user may put files there. Folders that
  exist already keep their mode."""
  missing, head = [], os.path.abspath(path)
  while not os.path.isdir(head):
    missing.append(head)
    parent = os.path.dirname(head)
    if parent == head:
      break
    head = parent
  # one level at a time: os.makedirs gives the parents it makes the umask's mode
  for folder in reversed(missing):
    try:
      os.mkdir(folder, 0o700)
    except FileExistsError:
      if not os.path.isdir(folder):
        raise
  return path


def write_atomic(path: str, data: bytes | str, *, mode: int = 0o600) -> str:
  """Writes `data` to `path` through a temporary file in the same folder, flushed to
  disk before it is renamed over `path`: a reader sees the old file or the whole new
  one. On failure (a full disk, a read-only folder) the temporary file is removed and
  the error raised; `path` is left as it was."""
  folder = os.path.dirname(os.path.abspath(path))
  raw = data.encode() if isinstance(data, str) else data
  fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(raw)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
  except BaseException:
    try:
      os.unlink(tmp)
    except OSError:
      pass
    raise
  _sync_folder(folder)
  return path


def _sync_folder(folder: str) -> None:
  # the rename itself is durable only once the folder's entry is on disk; a file system
  # that cannot sync folders (some network mounts) loses nothing more than it did before
  try:
    fd = os.open(folder, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (a named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def special_kind(path: str) -> str | None:
  """What `path` is where it exists and is not a regular file ("a FIFO (a named pipe)", "a
  character device", "a folder", ...); None where it is one (a link to one too) or is not
  there. Every path pallas-prof writes to is refused when it is such a thing: opening a FIFO
  nobody reads blocks for ever (PALLAS_PROF_TRACE_FILE did, at `import pallas_prof`), a
  device takes the bytes somewhere else, and a rename over one replaces what the user made."""
  try:
    mode = os.stat(path).st_mode
  except (OSError, ValueError):
    return None
  if stat.S_ISREG(mode):
    return None
  return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def refuse_special(path: str, what: str) -> None:
  """UnsafeFile naming `what` (the setting or the file's role) and `path` when `path` is
  not a regular file (special_kind)."""
  kind = special_kind(path)
  if kind is not None:
    raise UnsafeFile(f"{what} {path} is {kind}, not a regular file: pallas-prof writes only "
                     "regular files there; name a regular file, or a new one")


def open_for_append(path: str, mode: int = 0o644) -> int:
  """A descriptor appending to the trace file `path` (created if missing), a regular file:
  never blocks on a FIFO nobody reads, nor writes into a device (UnsafeFile instead)."""
  refuse_special(path, "the trace file")
  try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, mode)
  except OSError as e:
    if e.errno == errno.ENXIO:        # a FIFO made since the check, with no reader
      raise UnsafeFile(f"the trace file {path} is a FIFO (a named pipe), not a regular file: "
                       "name a regular file, or a new one") from None
    raise
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    refuse_special(path, "the trace file")
    raise UnsafeFile(f"the trace file {path} is not a regular file: name a regular file")
  return fd


def read_regular(path: str, max_bytes: int) -> bytes:
  """The bytes of `path` if it is a regular file (a link is not followed, a FIFO or
  device never blocks the reader) of at most `max_bytes`; else UnsafeFile."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
  except OSError as e:
    if e.errno == errno.ELOOP:
      raise UnsafeFile(errno.ELOOP, "a symbolic link, not followed", path) from None
    raise
  try:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
      raise UnsafeFile(errno.EINVAL, "not a regular file", path)
    if info.st_size > max_bytes:
      raise UnsafeFile(errno.EFBIG, f"{info.st_size} bytes, more than the {max_bytes} allowed",
                       path)
    chunks, left = [], max_bytes + 1
    while left > 0:
      chunk = os.read(fd, min(left, 1 << 20))
      if not chunk:
        break
      chunks.append(chunk)
      left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
      raise UnsafeFile(errno.EFBIG, f"more than the {max_bytes} bytes allowed", path)
    return data
  finally:
    os.close(fd)
