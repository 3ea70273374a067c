"""Failures while pallas-prof imports, said as what they are.

pallas-prof reaches into JAX's and Triton's internals (backend/compat/), so a JAX or
Triton it does not know can break its import. Python would then say the least useful
thing: an AttributeError inside a module's lazy `__getattr__` becomes "cannot import
name 'CompilerParams'". Every import of the package goes through `reported()`, which
raises a PallasProfImportError naming the real exception, where it was raised and the
versions found, with the real exception chained. Imports nothing of JAX or Triton.
"""
from __future__ import annotations

import contextlib
import os
import platform
import sys
import traceback

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class PallasProfImportError(ImportError):
  """pallas-prof could not import; the message has the cause and the versions found."""


def _version(distribution: str) -> str:
  module = sys.modules.get(distribution)
  found = getattr(module, "__version__", None)
  if found:
    return str(found)
  try:
    # lazy: importlib.metadata takes milliseconds to import; only a failed import needs it
    from importlib import metadata
    return metadata.version(distribution)
  except Exception:  # noqa: BLE001 - not installed, or no metadata: say so
    return "not installed"


def versions_found() -> str:
  """'jax 0.12.0.1, jaxlib 0.12.0.1, triton 3.9.0, Python 3.12.1'."""
  return ", ".join([f"{d} {_version(d)}" for d in ("jax", "jaxlib", "triton")]
                   + [f"Python {platform.python_version()}"])


def _where(error: BaseException) -> str:
  """The line that raised `error`, and the last line of pallas-prof on the way if another."""
  frames = traceback.extract_tb(error.__traceback__)
  if not frames:
    return ""
  ours = [f for f in frames if f.filename.startswith(_PACKAGE_DIR)]
  where = [frames[-1]] + ([ours[-1]] if ours and ours[-1] is not frames[-1] else [])
  return "; ".join(f"{f.filename}:{f.lineno}" + (f" ({f.line.strip()})" if f.line else "")
                   for f in where)


def describe(error: BaseException, what: str) -> str:
  lines = [f"pallas-prof could not import {what}: {type(error).__name__}: {error}"]
  where = _where(error)
  if where:
    lines.append(f"  raised at {where}")
  lines.append(f"  found: {versions_found()}")
  lines.append("  the versions pallas-prof supports are in its README; with one of those, "
               "this is a pallas-prof bug (the traceback above has the whole story)")
  return "\n".join(lines)


@contextlib.contextmanager
def reported(what: str):
  """Re-raises any failure inside the block as a PallasProfImportError about `what`."""
  try:
    yield
  except PallasProfImportError:
    raise
  except Exception as e:  # noqa: BLE001 - whatever broke the import: said, and chained
    raise PallasProfImportError(describe(e, what), name=what) from e
