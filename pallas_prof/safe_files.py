"""Files that pallas-prof writes and later reads back, handled as data that may have
been damaged: written whole or not at all, in folders only their owner can enter, and
read back only when they are what they claim to be.

Everything pallas-prof persists (the cache, tuning files, run directories) goes
through here, so that a full disk, a killed process or an edited file leaves the same
trace everywhere: either the old file or the new one, never half of one.
"""
from __future__ import annotations

import errno
import grp
import os
import pwd
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


def others_can_write(path: str) -> str | None:
  """Why a user other than this one could put files in the folder `path` (or swap it for
  one of theirs), None where none can: `path` must be this user's and writable by no one
  else; each folder above it, and each link on the way, this user's or root's, and
  writable by others only with the sticky bit (as /tmp: then only an entry's owner may
  rename or remove it). A folder that does not exist yet is judged by the folders above
  it, where it will be made."""
  me = os.geteuid()
  full = os.path.abspath(path)
  head = full
  while not os.path.lexists(head) and os.path.dirname(head) != head:
    head = os.path.dirname(head)
  # a link on the way may be replaced by its owner: it must be ours or root's
  step = full
  while step != os.path.dirname(step):
    if os.path.islink(step) and os.lstat(step).st_uid not in (me, 0):
      return f"{step} is a link owned by another user (uid {os.lstat(step).st_uid})"
    step = os.path.dirname(step)
  real, target = os.path.realpath(head), head == full
  folder = real
  while True:
    try:
      info = os.stat(folder)
    except OSError:
      return None          # gone meanwhile: the cache's own errors say so
    writable = info.st_mode & (stat.S_IWOTH | (0 if _group_is_mine(info.st_gid)
                                               else stat.S_IWGRP))
    who = "group" if info.st_mode & stat.S_IWOTH == 0 else "all users"
    if folder == real and target:
      if info.st_uid != me:
        return f"{folder} is owned by another user (uid {info.st_uid})"
      if writable:
        return f"{folder} is writable by {who} (mode {stat.S_IMODE(info.st_mode):o})"
    else:
      if info.st_uid not in (me, 0):
        return f"{folder}, above it, is owned by another user (uid {info.st_uid})"
      if writable and not info.st_mode & stat.S_ISVTX:
        return (f"{folder}, above it, is writable by {who} without the sticky bit (mode "
                f"{stat.S_IMODE(info.st_mode):o})")
    parent = os.path.dirname(folder)
    if parent == folder:
      return None
    folder = parent


def _group_is_mine(gid: int) -> bool:
  """A group no other user is in: this user's own (a user private group, as many systems
  give each user), whose write permission lets no one else in."""
  if gid != os.getegid():
    return False
  try:
    me = pwd.getpwuid(os.geteuid()).pw_name
    members = grp.getgrgid(gid).gr_mem
    others = [u.pw_name for u in pwd.getpwall() if u.pw_gid == gid and u.pw_name != me]
  except KeyError:
    return False
  return not others and all(m == me for m in members)


def write_atomic(path: str, data: bytes | str, *, mode: int = 0o600) -> str:
  """Writes `data` to `path` through a temporary file in the same folder, flushed to
  disk before it is renamed over `path`: a reader sees the old file or the whole new
  one. On failure (a full disk, a read-only folder) the temporary file is removed and
  the error raised; `path` is left as it was. The null device (/dev/null: the user asked
  that it be thrown away) takes nothing and is never renamed over."""
  if is_null_device(path):
    return path
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


def is_null_device(path: str) -> bool:
  """Whether `path` is (or links to) the null device, os.devnull: a user who names it as a
  file pallas-prof writes asks that what goes there be thrown away. It never blocks and
  holds nothing, so it is the one special file taken as an output (write_atomic writes
  nothing there and never renames over it)."""
  try:
    info = os.stat(path)
    null = os.stat(os.devnull)
  except (OSError, ValueError):
    return False
  return stat.S_ISCHR(info.st_mode) and stat.S_ISCHR(null.st_mode) and \
      info.st_rdev == null.st_rdev


def refuse_special(path: str, what: str) -> None:
  """UnsafeFile naming `what` (the setting or the file's role) and `path` when `path` is
  not a regular file (special_kind), except the null device (is_null_device: discarded)."""
  if is_null_device(path):
    return
  kind = special_kind(path)
  if kind is not None:
    raise UnsafeFile(f"{what} {path} is {kind}, not a regular file: pallas-prof writes only "
                     "regular files there; name a regular file, or a new one")


def open_for_append(path: str, mode: int = 0o644) -> int:
  """A descriptor appending to the trace file `path` (created if missing), a regular file
  or the null device: never blocks on a FIFO nobody reads, nor writes into another device
  (UnsafeFile instead).""" 
  refuse_special(path, "the trace file")
  try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, mode)
  except OSError as e:
    if e.errno == errno.ENXIO:        # a FIFO made since the check, with no reader
      raise UnsafeFile(f"the trace file {path} is a FIFO (a named pipe), not a regular file: "
                       "name a regular file, or a new one") from None
    raise
  if not stat.S_ISREG(os.fstat(fd).st_mode) and not is_null_device(path):
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
