"""Baseline files: one readable JSON file per test, sorted keys, written whole or not at all.

A baseline is what an earlier run left: data to check, never trusted blindly. A file
that is not JSON, of another schema, written for another test, or with a field of the
wrong kind is refused with a BaselineError naming the file, the field and what to do.
"""
from __future__ import annotations

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
  """A baseline file that cannot be used; the message names the file and what to do."""


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


def write(path: str, baseline: Baseline) -> str:
  private_dir(os.path.dirname(path))
  text = json.dumps(plain(baseline.to_dict()), indent=1, sort_keys=True, ensure_ascii=False)
  return write_atomic(path, text + "\n", mode=0o644)


def read(path: str, nodeid: str) -> Baseline | None:
  """The baseline of `nodeid` in `path`; None where there is none; BaselineError where the
  file is damaged, foreign or of another schema."""
  if not os.path.lexists(path):
    return None
  try:
    raw = read_regular(path, MAX_BYTES)
  except UnsafeFile as e:
    raise BaselineError(f"pallas-prof: baseline {path} is {e.strerror}; remove it and "
                        f"{UPDATE}") from None
  except OSError as e:
    raise BaselineError(f"pallas-prof: baseline {path} cannot be read ({e.strerror}); "
                        "check its permissions") from None
  try:
    data = json.loads(raw.decode("utf-8"))
  except (UnicodeDecodeError, ValueError, RecursionError) as e:
    raise BaselineError(f"pallas-prof: baseline {path} is not JSON ({e}); it was cut short or "
                        f"edited: {UPDATE}") from None
  if not isinstance(data, dict) or data.get("schema") != SCHEMA:
    found = data.get("schema") if isinstance(data, dict) else None
    raise BaselineError(f"pallas-prof: {path} is not a pallas-prof baseline of schema {SCHEMA} "
                        f"(its schema: {found!r}); {UPDATE}")
  try:
    baseline = from_fields(Baseline, data, "baseline")
  except Misfit as e:
    raise BaselineError(f"pallas-prof: baseline {path} is damaged: {e.describe()}; "
                        f"{UPDATE}") from None
  if baseline.test != nodeid:
    raise BaselineError(f"pallas-prof: baseline {path} is the baseline of {baseline.test!r}, "
                        f"not of this test {nodeid!r}; {UPDATE}")
  for key, kernel in baseline.kernels.items():
    bad = _negative(kernel)
    if bad:
      raise BaselineError(f"pallas-prof: baseline {path} is damaged: kernels.{key}.{bad} is "
                          f"negative; {UPDATE}")
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
