"""Reading a run directory's files: what an earlier run left is data to check, never
instructions to follow.

Every read of a run (report.json, kernels/<label>/*, and the user's source lines a
run names) goes through here (run_directory.py and report.py call it):

    inside(run_dir, rel, what)       the path, if `rel` stays inside the run directory
                                     (no absolute path, no `..` out, no link leading out)
    leads_out(folder, name)          where a child of a folder (of runs) resolves to,
                                     when a link takes it outside that folder
    read_bytes / read_text / read_json
                                     a regular file of at most MAX_FILE_BYTES: a FIFO
                                     or device is refused without blocking, a link is
                                     not followed out of the run
    source_line(path, n)             line n of a Python file of the user's that a run
                                     names ("" if it is not a readable .py file)

A file that is not what a run writes raises RunFileError (a SavedRunError): one line
that names the file, what is wrong with it and what to do. They are ordinary exceptions (a
notebook or a script reading a run can catch them); cli/main.py alone turns one into the
command's end, that line on stderr and exit code 1.
"""
from __future__ import annotations

import functools
import json
import linecache
import os

from ...safe_files import UnsafeFile, read_regular

# the most a file of a run may hold: far more than any report, listing or cubin a run
# writes, far less than what would exhaust the reader's memory
MAX_FILE_BYTES = 256 << 20
# the most a user's source file may hold for its lines to be shown
MAX_SOURCE_BYTES = 16 << 20
AGAIN = "run the script again with `pallas-prof run` to write the run afresh"


class SavedRunError(Exception):
  """A saved run that cannot be read as it is: str(error) is one line that names the file,
  what is wrong and what to do ("pallas-prof: ..."), the line cli/main.py prints."""


class RunFileError(SavedRunError):
  """A run's file that cannot be read as it is; the message says which and what to do."""


def inside(run_dir: str, rel, what: str) -> str:
  """The real path of `rel` (relative to `run_dir`) if it stays inside the run directory,
  links resolved; else RunFileError naming `what` (where the path came from)."""
  if not isinstance(rel, str) or not rel or "\0" in rel or os.path.isabs(rel):
    raise RunFileError(f"pallas-prof: {what} names {rel!r}, not a path inside the run "
                       f"directory {run_dir}; the run was edited or damaged: {AGAIN}")
  full = leads_out(run_dir, rel)
  if full is not None:
    raise RunFileError(f"pallas-prof: {what} names {rel!r}, which leads outside the run "
                       f"directory {run_dir} (to {full}); a run reads only its own files: "
                       f"{AGAIN}")
  return os.path.realpath(os.path.join(os.path.realpath(run_dir), rel))


def leads_out(folder: str, rel: str) -> str | None:
  """The real path `rel` (relative to `folder`) resolves to when that is outside `folder`
  (a `..` or a link leading out), else None."""
  root = os.path.realpath(folder)
  full = os.path.realpath(os.path.join(root, rel))
  return full if os.path.commonpath([root, full]) != root else None


def read_bytes(run_dir: str, rel: str, what: str | None = None) -> bytes:
  """The bytes of `rel` in the run, a regular file inside it of at most MAX_FILE_BYTES."""
  path = inside(run_dir, rel, what or f"{run_dir}'s file {rel!r}")
  shown = os.path.join(run_dir, rel)
  try:
    return read_regular(path, MAX_FILE_BYTES)
  except UnsafeFile as e:
    raise RunFileError(f"pallas-prof: {shown} is {_unsafe(e)}; a run directory holds only "
                       f"regular files of at most {MAX_FILE_BYTES >> 20} MiB: {AGAIN}") from None
  except FileNotFoundError:
    raise RunFileError(f"pallas-prof: {shown} is missing from the run directory: "
                       f"{AGAIN}") from None
  except OSError as e:
    raise RunFileError(f"pallas-prof: {shown} cannot be read ({e.strerror or e}); check "
                       "its permissions, or " + AGAIN) from None


def _unsafe(e: UnsafeFile) -> str:
  return {"not a regular file": "not a regular file (a FIFO, a device or a folder)",
          "a symbolic link, not followed": "a symbolic link, not followed"}.get(
              e.strerror, f"too large ({e.strerror})")


def read_text(run_dir: str, rel: str) -> str:
  data = read_bytes(run_dir, rel)
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise RunFileError(f"pallas-prof: {os.path.join(run_dir, rel)} is damaged: not UTF-8 "
                       f"text (byte {e.start}); {AGAIN}") from None


def read_json(run_dir: str, rel: str) -> dict:
  """`rel` as a JSON object (a dict); RunFileError for anything else."""
  text = read_text(run_dir, rel)
  shown = os.path.join(run_dir, rel)
  try:
    data = json.loads(text)
  except ValueError as e:         # RecursionError aside, json's errors are ValueErrors
    raise RunFileError(f"pallas-prof: {shown} is damaged: not JSON ({e}); {AGAIN}") from None
  except RecursionError:
    raise RunFileError(f"pallas-prof: {shown} is damaged: nested too deep to read; "
                       f"{AGAIN}") from None
  if not isinstance(data, dict):
    raise RunFileError(f"pallas-prof: {shown} is damaged: a JSON {type(data).__name__} "
                       f"where an object belongs; {AGAIN}")
  return data


# --- the user's source lines a run names ----------------------------------------------

@functools.lru_cache(maxsize=64)
def source_lines(path) -> tuple[str, ...]:
  """The lines of the user's Python file at `path`, as a run names it (an equation's
  file): read only if it is a regular .py file of at most MAX_SOURCE_BYTES (a run may
  name any path: a FIFO would block, a device never end, another file show what it
  should not); () otherwise."""
  if not isinstance(path, str) or not path.endswith(".py") or "\0" in path:
    return ()
  try:
    data = read_regular(os.path.realpath(path), MAX_SOURCE_BYTES)
  except (OSError, ValueError):
    return ()
  return tuple(data.decode("utf-8", errors="replace").splitlines())


def source_line(path, number) -> str:
  """Line `number` (1-based) of the user's file, as source_lines reads it; "" if none."""
  lines = source_lines(path)
  if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= len(lines):
    return lines[number - 1]
  return ""


def interactive_lines(name: str | None) -> tuple[str, ...]:
  """The lines of code this process ran from no file, by the name it ran them under: a
  Jupyter or IPython cell ('/tmp/ipykernel_1234/3041493352.py', '<ipython-input-3-...>'),
  which IPython keeps in linecache with no modification time (it is on no disk). Files are
  never read here: a name not so kept gives ()."""
  entry = linecache.cache.get(name) if isinstance(name, str) else None
  if not entry or len(entry) < 3 or entry[1] is not None:
    return ()
  return tuple(line.rstrip("\r\n") for line in entry[2])


def user_line(path: str | None, name: str | None, number) -> str:
  """Line `number` of the user's code: of the file at `path` where this machine has it,
  else of the notebook cell `name` (interactive_lines); "" if neither."""
  text = source_line(path, number) if path else ""
  if text:
    return text
  lines = interactive_lines(name)
  if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= len(lines):
    return lines[number - 1]
  return ""
