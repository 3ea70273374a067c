"""What a script may do to the process it shares with pallas-prof, undone when it ends, so
that the run's own work after it (compiles, profiles, the run's folder, the report) happens
where and how the run started:

    kept_cwd()   the working folder: a script that changes it (Hydra and many launchers do)
                 split `run --out runs/a` in two, the traces and the marker in ./runs/a and
                 report.json and kernels/ in runs/a under the script's folder.
    kept_streams()  sys.stdout and sys.stderr: a script that closed sys.stdout turned a
                 successful run into a ValueError traceback; one that put a StringIO there
                 took the whole report into it. The report goes where pallas-prof started:
                 the same stream objects, or where one was closed (or its file descriptor
                 made to point elsewhere), a stream on a copy of the descriptor it had.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

STREAMS = ("stdout", "stderr")


@contextlib.contextmanager
def kept_cwd() -> Iterator[str]:
  """The working folder as it was before the block, whatever the block did to it (one
  removed meanwhile stays left: the paths the run resolved at start still hold)."""
  where = os.getcwd()
  try:
    yield where
  finally:
    with contextlib.suppress(OSError):
      os.chdir(where)


@contextlib.contextmanager
def kept_streams() -> Iterator[None]:
  """sys.stdout and sys.stderr as they were before the block, open and writing where they
  wrote then, whatever the block did to them."""
  saved = {name: getattr(sys, name) for name in STREAMS}
  copies = {name: _copy_of_descriptor(stream) for name, stream in saved.items()}
  try:
    yield
  finally:
    for name, stream in saved.items():
      setattr(sys, name, _usable(stream, copies[name]))


def _copy_of_descriptor(stream) -> int | None:
  try:
    return os.dup(stream.fileno())
  except (AttributeError, OSError, ValueError):    # no descriptor (a StringIO, pytest's capture)
    return None


def _usable(stream, copy: int | None):
  """`stream` if it still writes where it did, else a stream on `copy` (the descriptor it
  had when the block began), which the returned stream then owns."""
  if copy is None:
    return stream
  if not getattr(stream, "closed", True) and _same_file(stream, copy):
    os.close(copy)
    return stream
  return os.fdopen(copy, "w", buffering=1,       # line by line, as a terminal's stream
                   encoding=getattr(stream, "encoding", None) or "utf-8",
                   errors=getattr(stream, "errors", None) or "backslashreplace")


def _same_file(stream, copy: int) -> bool:
  try:
    now, then = os.fstat(stream.fileno()), os.fstat(copy)
  except (AttributeError, OSError, ValueError):
    return False
  return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)
