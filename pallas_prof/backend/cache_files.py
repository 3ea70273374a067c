"""The cache folder and the files pallas-prof keeps in it, handled as data that an
earlier run, a full disk or an editor may have damaged: the cache holds code that
later runs, so nothing in it is used because it is there.

- Written whole or not at all (safe_files.write_atomic), in owner-only folders.
- Checked when read: a kernel module against the source its name stands for
  (kernel_files.py), a folder entry (a compiled kernel) against the manifest of
  sizes and SHA-256 digests sealed into it when it was stored, a small record
  against the digest written with it.
- A file or entry that fails its check is moved aside to `<name>.bad-<time>-<pid>-<n>`,
  where it neither runs nor blocks its rebuilding, with one warning per process.
- Where the cache folder cannot be written (read-only, full, a file in the way),
  this process keeps its cache in a temporary folder instead, removed when it exits,
  with one warning naming the folder and what to do.
- Where another user could write into the cache folder (it is theirs, or writable by
  others, or a folder above it lets others swap it: safe_files.others_can_write), what
  they put there would run as this user: the cache is kept in `user-<uid>`, a folder only
  this user can write, inside it (a shared folder with the sticky bit, as /tmp), else in
  a temporary folder; one warning names the folder and why (home()).
"""
from __future__ import annotations

import atexit
import errno
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from typing import Any, Callable

from .. import settings
from ..safe_files import others_can_write, private_dir, read_regular, write_atomic

ENV = "PALLAS_PROF_CACHE_DIR"
MANIFEST = "manifest.json"
MAX_RECORD_BYTES = 1 << 20       # a sealed record or a manifest: small by construction
MAX_ENTRY_FILE_BYTES = 1 << 30   # one file of a compiled kernel (its LLVM IR is the largest)


class CacheWarning(UserWarning):
  """pallas-prof's cache could not be used as it was: damaged files set aside, or a
  folder that cannot be written replaced by a temporary one for this process."""


_lock = threading.RLock()
_stand_ins: dict[str, str] = {}   # the configured cache folder -> this process's stand-in
_homes: dict[str, str] = {}       # the configured cache folder -> the private folder used there
_warned: set[str] = set()
_asides = itertools.count()       # two damaged copies of one file in one second keep both


def configured() -> str:
  """The cache folder the environment names: PALLAS_PROF_CACHE_DIR, else
  $XDG_CACHE_HOME/pallas-prof, else ~/.cache/pallas-prof."""
  where = settings.value(ENV) or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pallas-prof")
  return os.path.abspath(where)


def root() -> str:
  """The folder this process keeps its cache in: home(), or its stand-in once that could
  not be written."""
  where = configured()
  base = home()
  with _lock:
    return _stand_ins.get(where, base)


def home() -> str:
  """The configured cache folder where no other user can write into it; else this user's
  private folder inside it, or a temporary one (see the module's docstring), said once."""
  where = configured()
  with _lock:
    got = _homes.get(where)
    if got is None:
      got = _homes[where] = _private_home(where)
  return got


def _private_home(where: str) -> str:
  try:
    private_dir(where)        # made now, so that it is judged as it is, not as it will be
  except OSError:
    pass                      # cannot be written: write() finds a stand-in
  why = others_can_write(where)
  if why is None:
    return where
  mine = os.path.join(where, f"user-{os.geteuid()}")
  made = not os.path.lexists(mine)
  try:
    private_dir(mine)
    if others_can_write(mine) is None:
      _warn_once(f"shared {where}", _shared_warning(where, why, f"keeps its cache in {mine}, "
                                                                "a folder only you can write, "
                                                                "inside it"))
      return mine
    if made:
      os.rmdir(mine)          # (made here, and of no use: others could swap it)
  except OSError:
    pass
  stand_in = tempfile.mkdtemp(prefix="pallas-prof-cache-")
  atexit.register(shutil.rmtree, stand_in, True)
  _warn_once(f"shared {where}", _shared_warning(
      where, why, f"keeps this process's cache in {stand_in} instead, removed when it exits "
      "(the next run lowers and compiles its kernels again)"))
  return stand_in


def _shared_warning(where: str, why: str, instead: str) -> str:
  return (f"pallas-prof does not use the cache folder {where} as it is: {why}, so another "
          f"user could put code there that this process would run. It {instead}. Set {ENV} "
          "to a folder only you can write (mode 700) to keep the cache there.")


def folder(*parts: str) -> str:
  """root()/parts as an owner-only folder (made where missing); in the stand-in
  cache where the cache folder cannot be written."""
  path = os.path.join(root(), *parts)
  try:
    return private_dir(path)
  except OSError as e:
    return private_dir(_relocated(path, e))


def write(path: str, data: bytes | str) -> str:
  """Writes `path`, a file of the cache, whole or not at all, in an owner-only folder.
  Where the cache folder cannot be written, writes the file's place in the stand-in
  cache instead. Returns the path written; OSError only when neither could be."""
  try:
    private_dir(os.path.dirname(path))
    return write_atomic(path, data)
  except OSError as e:
    moved = _relocated(path, e)
  private_dir(os.path.dirname(moved))
  return write_atomic(moved, data)


def read(path: str, max_bytes: int) -> bytes | None:
  """The bytes of a cache file; None when there is none. A file that cannot be one
  pallas-prof wrote (a link, a FIFO, a folder, larger than `max_bytes`, unreadable)
  is moved aside and reads as none."""
  try:
    return read_regular(path, max_bytes)
  except (FileNotFoundError, NotADirectoryError):   # (a file in the way of its folder)
    return None
  except OSError as e:
    move_aside(path, e.strerror or str(e))
    return None


def move_aside(path: str, why: str) -> str | None:
  """Moves a damaged file or entry of the cache to `<path>.bad-<time>-<pid>-<n>` beside it,
  so that it is neither used nor in the way of its rebuilding; one warning per process.
  Returns where it went (None where it could not be renamed: a read-only folder)."""
  aside = f"{path}.bad-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(_asides)}"
  try:
    os.rename(path, aside)
  except FileNotFoundError:
    return None                    # another process moved or replaced it first
  except OSError:
    aside = None
  where = f"moved it to {aside}" if aside else "could not move it aside (the folder is read-only)"
  _warn_once("damaged", f"pallas-prof found a damaged file in its cache and did not use it: "
                        f"{path} ({why}); {where}, and rebuilt what it held. Nothing to do; if "
                        f"this recurs, look for what else writes to {configured()} or for a "
                        "failing disk.")
  return aside


def discard(path: str) -> None:
  """Removes a cache entry (a file or folder) that is to be replaced: renamed away first,
  so that no reader finds half of it while it is deleted."""
  gone = f"{path}.old-{os.getpid()}-{threading.get_ident()}"
  try:
    os.rename(path, gone)
  except OSError:
    return
  if os.path.isdir(gone):
    shutil.rmtree(gone, ignore_errors=True)
  else:
    try:
      os.unlink(gone)
    except OSError:
      pass


# --- small records sealed with their digest ----------------------------------------------

def write_sealed(path: str, value: str) -> str:
  """Writes `value` with its SHA-256, so that read_sealed can tell it whole from damaged."""
  return write(path, json.dumps({"sha256": _digest(value.encode()), "value": value}))


def read_sealed(path: str) -> str | None:
  """The value write_sealed wrote; None when there is none, or when the file is not
  whole (moved aside)."""
  data = read(path, MAX_RECORD_BYTES)
  if data is None:
    return None
  try:
    record = json.loads(data)
    value = record["value"]
    if isinstance(value, str) and record["sha256"] == _digest(value.encode()):
      return value
  except (ValueError, TypeError, KeyError):
    pass
  move_aside(path, "its content does not match the digest written with it")
  return None


# --- folder entries sealed with a manifest -----------------------------------------------

def store_entry(directory: str, fill: Callable[[str], Any]) -> str | None:
  """Stores a folder entry whole: fill(folder) writes its files into a new folder beside
  `directory`, which is sealed with a manifest of them and renamed into place. An entry
  there already (another process stored it first) stays. Where the cache folder cannot
  be written, stores it in the stand-in. Returns where the entry is, None if it could
  not be stored (not fatal: it is built again next time)."""
  try:
    return _store_entry(directory, fill)
  except OSError as e:
    try:
      return _store_entry(_relocated(directory, e), fill)
    except OSError:
      return None


def load_entry(directory: str, load: Callable[[str], Any]) -> Any:
  """load(directory) of an entry that store_entry stored, once every file it sealed is
  as it was; None when there is none. An entry that is not whole, or that `load`
  refuses (OSError, ValueError, KeyError, TypeError), is moved aside and reads as none."""
  if not os.path.lexists(directory):
    return None
  why = entry_damage(directory)
  if why is None:
    try:
      return load(directory)
    except (OSError, ValueError, KeyError, TypeError) as e:
      why = f"it could not be read back: {e}"
  if os.path.lexists(directory):   # (not replaced by another process in the meantime)
    move_aside(directory, why)
  return None


def entry_files(directory: str) -> set[str]:
  """The files an entry's manifest lists (none where it has no readable manifest)."""
  files = _manifest(directory)
  return set(files) if isinstance(files, dict) else set()


def entry_damage(directory: str) -> str | None:
  """What is wrong with a stored entry, None if every file its manifest lists is there
  with the size and digest it was stored with."""
  if not os.path.isdir(directory) or os.path.islink(directory):
    return "not a folder"
  files = _manifest(directory)
  if not isinstance(files, dict) or not files:
    return f"its {MANIFEST} is missing or unreadable"
  for name, sealed in files.items():
    if not isinstance(sealed, dict) or os.path.basename(name) != name or name == MANIFEST:
      return f"its {MANIFEST} is not one pallas-prof wrote"
    try:
      data = read_regular(os.path.join(directory, name),
                          min(int(sealed["bytes"]), MAX_ENTRY_FILE_BYTES))
    except (OSError, KeyError, TypeError, ValueError) as e:
      return f"{name}: {getattr(e, 'strerror', None) or e}"
    if len(data) != sealed["bytes"]:
      return f"{name} has {len(data)} bytes; {sealed['bytes']} were stored"
    if _digest(data) != sealed.get("sha256"):
      return f"{name} holds other bytes than were stored"
  return None


def _manifest(directory: str):
  try:
    return json.loads(read_regular(os.path.join(directory, MANIFEST), MAX_RECORD_BYTES))["files"]
  except (OSError, ValueError, TypeError, KeyError):
    return None


def _store_entry(directory: str, fill: Callable[[str], Any]) -> str:
  private_dir(os.path.dirname(directory))
  tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(directory)}.", suffix=".tmp",
                         dir=os.path.dirname(directory))
  try:
    fill(tmp)
    _seal(tmp)
    os.rename(tmp, directory)
  except OSError as e:
    shutil.rmtree(tmp, ignore_errors=True)
    if e.errno in (errno.ENOTEMPTY, errno.EEXIST) and os.path.isdir(directory):
      return directory             # another process stored it first
    raise
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return directory


def _seal(directory: str) -> None:
  """Writes the manifest of a new entry's files, each flushed to disk first: the entry is
  renamed into place only once all of it is."""
  files = {}
  for name in sorted(os.listdir(directory)):
    with open(os.path.join(directory, name), "rb") as f:
      data = f.read()
      os.fsync(f.fileno())
    files[name] = {"bytes": len(data), "sha256": _digest(data)}
  write_atomic(os.path.join(directory, MANIFEST), json.dumps({"files": files}, indent=1))


def _digest(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


# --- the stand-in for a cache folder that cannot be written ------------------------------

def _relocated(path: str, error: OSError) -> str:
  """`path`'s place in this process's stand-in cache, after `error` from the configured
  cache folder (made on the first such error, with one warning). Raises `error` where
  `path` is not in the configured folder (already the stand-in's, or elsewhere)."""
  where = configured()
  relative = os.path.relpath(os.path.abspath(path), home())
  if relative == os.pardir or relative.startswith(os.pardir + os.sep):
    raise error
  with _lock:
    stand_in = _stand_ins.get(where)
    if stand_in is None:
      stand_in = _stand_ins[where] = tempfile.mkdtemp(prefix="pallas-prof-cache-")
      atexit.register(shutil.rmtree, stand_in, True)
      reason = ("a file is in the way of a folder" if error.errno in (errno.EEXIST, errno.ENOTDIR)
                else error.strerror or str(error))
      _warn_once(f"stand-in {where}",
                 f"pallas-prof cannot write to its cache folder {where} ({reason}: "
                 f"{error.filename or path}); this process keeps its cache in {stand_in} "
                 "instead, removed when it exits, so the next run lowers and compiles its "
                 f"kernels again. Make {where} writable (or free space on its disk), or set "
                 f"{ENV} to a folder you can write.")
  return os.path.join(stand_in, relative)


def _warn_once(topic: str, message: str) -> None:
  with _lock:
    if topic in _warned:
      return
    _warned.add(topic)
  warnings.warn(message, CacheWarning, stacklevel=3)
