"""Where generated kernels live: each one a real file named by its content,
under the cache directory (cache_files.py: PALLAS_PROF_CACHE_DIR, else
~/.cache/pallas-prof), and checked against that content before it is used.
"""
from __future__ import annotations

import hashlib
import os

from . import cache_files
from ..safe_files import read_regular


def cache_dir() -> str:
  """The folder this process keeps its cache in (cache_files.root)."""
  return cache_files.root()


def write_source(name: str, key: str, source: str) -> str:
  """The path of a file holding exactly `source`: `kernels/<name>_<key[:16]>.py`, kept
  from an earlier run when it still holds it, else (re)written, a damaged one moved
  aside first. In the stand-in cache where the cache folder cannot be written."""
  # Triton reads kernel source back with inspect (and stamps the path into the
  # PTX line info), so each kernel is a real file, named by its content.
  path = os.path.join(cache_files.root(), "kernels", f"{name}_{key[:16]}.py")
  wanted = source.encode()
  # read a little past the source's length: a longer file (lines appended) is then
  # named as such, rather than only as too large
  found = cache_files.read(path, 2 * len(wanted) + 4096)
  if found == wanted:
    return path
  if found is not None:
    cache_files.move_aside(path, f"it holds {len(found)} bytes, not the {len(wanted)}-byte "
                                 "kernel source its name stands for")
  return cache_files.write(path, wanted)


def checked_in_place(path: str, source: str) -> str:
  """`path` where it holds `source`, wherever it is (the cache a kernel was lowered in may
  not be this process's now, and the path is in the compiled code's line info); else
  checked_source's path, the source written again in this process's cache."""
  wanted = source.encode()
  try:
    if read_regular(path, len(wanted)) == wanted:     # (read only: it may be no cache's)
      return path
  except OSError:       # missing, a link, longer than the source: not the kernel's file
    pass
  return checked_source(path, source)


def checked_source(path: str, source: str) -> str:
  """write_source for the kernel module at `path`, as it wrote it: `path` when it still
  holds `source`, else the path of that source written again (the damaged file moved
  aside). Never writes outside the cache: the path is made again from the name."""
  name = os.path.basename(path).rpartition("_")[0] or "kernel"
  return write_source(name, hashlib.sha256(source.encode()).hexdigest(), source)
