"""Where generated kernels live: each one a real file named by its content,
under the cache directory (PALLAS_PROF_CACHE_DIR, else ~/.cache/pallas-prof).
"""
from __future__ import annotations

import os

from .. import settings


def cache_dir() -> str:
  root = settings.value("PALLAS_PROF_CACHE_DIR") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pallas-prof")
  return root


def write_source(name: str, key: str, source: str) -> str:
  # Triton reads kernel source back with inspect (and stamps the path into the
  # PTX line info), so each kernel is a real file, named by its content.
  directory = os.path.join(cache_dir(), "kernels")
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f"{name}_{key[:16]}.py")
  if not os.path.exists(path):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
      f.write(source)
    os.replace(tmp, path)
  return path
