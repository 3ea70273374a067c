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
