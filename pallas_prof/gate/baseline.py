"""Baseline files: one readable JSON file per test, sorted keys, written whole or not at all.

A baseline is what an earlier run left: data to check, never trusted blindly. A file
that is not JSON, of another schema, written for another test, or with a field of the
wrong kind is refused with a BaselineError naming the file, the field and what to do.

Two pytest processes may gate one folder at once: a baseline is written under a lock on
its folder, and only if no other process wrote it since this test started (else
WrittenMeanwhile: the other's file is kept). A writer killed between its temporary file
and the rename leaves that temporary file, which the next one removes and names.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import zlib

from ..safe_files import UnsafeFile, private_dir, read_regular, write_atomic
from ..serial import Misfit, from_fields, plain
from .figures import SCHEMA, Baseline

MAX_BYTES = 4 << 20           # a baseline of a few kernels is kilobytes; more is not one
MAX_NAME = 120                # a file name's characters before it is cut and hashed
UPDATE = "run the test with --pallas-prof-update to write it again"


class BaselineError(Exception):
  """A baseline file that cannot be used; the message names the file and what to do,
  `problem` what is wrong with it."""

  def __init__(self, message: str, problem: str = ""):
    super().__init__(message)
    self.problem = problem or message


class WrittenMeanwhile(Exception):
  """Another process wrote the baseline after this test started; its file was kept."""


def state(path: str) -> tuple[int, int, int] | None:
  """What tells one version of a file from the next (each write renames a new file into
  place); None where there is none."""
  try:
    st = os.lstat(path)
  except OSError:
    return None
  return st.st_ino, st.st_mtime_ns, st.st_size


def path_for(folder: str, nodeid: str) -> str:
  """The file of the test `nodeid`: its module's path as folders, the test's name (with
  its parameters) as the file name, characters a file system may refuse replaced."""
  module, _, name = nodeid.partition("::")
  parts = [_safe(p) for p in module.replace("\\", "/").split("/") if p not in ("", ".", "..")]
  return os.path.join(folder, *parts, _safe(name.replace("::", ".") or "module") + ".json")


def _safe(name: str) -> str:
  safe = re.sub(r"[^\w.\-\[\]=,+]", "_", name)
  if len(safe) > MAX_NAME:
    safe = f"{safe[:MAX_NAME]}-{zlib.crc32(name.encode()):08x}"
  return safe


_ANY = object()


def write(path: str, baseline: Baseline, *, expected=_ANY) -> str:
  """Writes `baseline` whole to `path`; with `expected` (state() when the test started),
  only if the file is still that one, else WrittenMeanwhile."""
  private_dir(os.path.dirname(path))
  text = json.dumps(plain(baseline.to_dict()), indent=1, sort_keys=True, ensure_ascii=False)
  with _locked(os.path.dirname(path)):
    if expected is not _ANY and state(path) != expected:
      raise WrittenMeanwhile(path)
    return write_atomic(path, text + "\n", mode=0o644)


def remove_stale_parts(path: str) -> tuple[list[str], list[str]]:
  """(removed, kept): the temporary files of `path`'s writers that were stopped before
  their rename (a killed process), removed; those that could not be, with why. Under the
  folder's lock no writer is half-way, so every such file found is stale."""
  folder = os.path.dirname(path)
  pattern = os.path.join(glob.escape(folder), glob.escape(f".{os.path.basename(path)}.")
                         + "*.tmp")
  if not glob.glob(pattern):
    return [], []
  removed, kept = [], []
  try:
    with _locked(folder):
      for part in glob.glob(pattern):
        try:
          os.unlink(part)
          removed.append(part)
        except OSError as e:
          kept.append(f"{part} ({e.strerror or e})")
  except OSError as e:             # the folder could not be opened to lock it
    kept += [f"{part} ({e.strerror or e})" for part in glob.glob(pattern) if part not in removed]
  return removed, kept


@contextlib.contextmanager
def _locked(folder: str):
  """An exclusive lock on `folder` itself (no lock file to commit with the baselines),
  held by this process until the block ends or the process dies."""
  try:
    # lazy: optional: fcntl may be absent
    import fcntl
  except ImportError:              # no flock (Windows): writes are still whole, unordered
    yield
    return
  fd = os.open(folder, os.O_RDONLY)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield
  finally:
    os.close(fd)                   # closing the last descriptor releases the lock


def read(path: str, nodeid: str) -> Baseline | None:
  """The baseline of `nodeid` in `path`; None where there is none; BaselineError where the
  file is damaged, foreign or of another schema."""
  if not os.path.lexists(path):
    return None
  try:
    raw = read_regular(path, MAX_BYTES)
  except UnsafeFile as e:
    raise BaselineError(f"pallas-prof: baseline {path} is {e.strerror}; remove it and "
                        f"{UPDATE}", f"was {e.strerror}") from None
  except OSError as e:
    raise BaselineError(f"pallas-prof: baseline {path} cannot be read ({e.strerror}); "
                        "check its permissions") from None
  try:
    data = json.loads(raw.decode("utf-8"))
  except (UnicodeDecodeError, ValueError, RecursionError) as e:
    raise BaselineError(f"pallas-prof: baseline {path} is not JSON ({e}); it was cut short or "
                        f"edited: {UPDATE}", f"was not JSON ({e})") from None
  if not isinstance(data, dict) or data.get("schema") != SCHEMA:
    found = data.get("schema") if isinstance(data, dict) else None
    raise BaselineError(f"pallas-prof: {path} is not a pallas-prof baseline of schema {SCHEMA} "
                        f"(its schema: {found!r}); {UPDATE}", f"was of schema {found!r}")
  try:
    baseline = from_fields(Baseline, data, "baseline")
  except Misfit as e:
    raise BaselineError(f"pallas-prof: baseline {path} is damaged: {e.describe()}; "
                        f"{UPDATE}", f"was damaged ({e.describe()})") from None
  if baseline.test != nodeid:
    raise BaselineError(f"pallas-prof: baseline {path} is the baseline of {baseline.test!r}, "
                        f"not of this test {nodeid!r}; {UPDATE}",
                        f"was the baseline of {baseline.test!r}")
  for key, kernel in baseline.kernels.items():
    bad = _negative(kernel)
    if bad:
      raise BaselineError(f"pallas-prof: baseline {path} is damaged: kernels.{key}.{bad} is "
                          f"negative; {UPDATE}", f"was damaged (kernels.{key}.{bad} negative)")
  return baseline


def _negative(kernel) -> str | None:
  """The first count of `kernel` below zero (no compiler writes one: an edited file)."""
  for name in ("instructions", "registers", "spills", "shared_bytes"):
    value = getattr(kernel, name)
    if value is not None and value < 0:
      return name
  for i, e in enumerate(kernel.equations):
    if e.instructions < 0:
      return f"equations[{i}].instructions"
  return None
