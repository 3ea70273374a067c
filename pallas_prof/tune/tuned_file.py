"""Tuning files: what `pallas-prof tune` and `pallas-prof advise` write and
`PALLAS_PROF_TUNED=file python script.py` applies, one entry per kernel:

    {"version": 3, "kernels": [{"kernel": "softmax_kernel", "source": <its sha256>,
      "target": ["cuda", 90], "gpu": "NVIDIA H200", "best": [8, 3, 0, 0],
      "default": [4, 3, 0, 0]}]}

best and default are (num_warps, num_stages, launch_group, tma). The file is the user's
(they may commit it, edit it, copy it between machines): each entry is checked
(validate.py) before it is applied, a bad one ignored with one warning that names the
file, the entry and what to do, and a file that cannot be used at all leaves every kernel
at its default config, with one warning. Nothing here raises at the user's call.
"""
from __future__ import annotations

import json
import os

from .. import safe_files
from . import validate

TUNED_ENV = "PALLAS_PROF_TUNED"          # a tuning file (`pallas-prof tune` writes one) to apply
FORMAT_VERSION = 3      # 3: a config is (num_warps, num_stages, launch_group, tma)
REWRITE = "write the file again with `pallas-prof tune script.py`"

_is_key = validate.described("a list of 4 ints")(
    lambda v: isinstance(v, list) and len(v) == 4 and all(map(validate.is_int, v)))
_ENTRY_FIELDS = {
    "kernel": validate.is_text,
    "source": validate.described("a sha256 in hex")(
        lambda v: isinstance(v, str) and len(v) == 64
        and all(c in "0123456789abcdef" for c in v)),
    "target": validate.described('["cuda", capability]')(
        lambda v: isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
        and validate.is_int(v[1])),
    "gpu": validate.is_text, "best": _is_key, "default": _is_key}

_read: dict = {}        # path -> (the file's stat stamp, {(source, target, gpu): best})


def choice(path: str, gk, target, gpu: str) -> tuple[int, int, int, int] | None:
  """The (num_warps, num_stages, launch_group, tma) the tuning file at `path` names for
  this kernel on this GPU, if it names a valid one."""
  try:
    info = os.stat(path)
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
  except OSError as e:
    _warn(path, f"{e.strerror}", "point it at the tuning file `pallas-prof tune` wrote, or "
          "unset it")
    return None
  if _read.get(path, (None,))[0] != stamp:
    _read[path] = (stamp, _choices(path))
  return _read[path][1].get((gk.key, tuple(target), gpu))   # key: the source's sha256


def _choices(path: str) -> dict:
  """Every valid entry of the file; one warning for the rest, or for the whole file."""
  # the user names this file: a link they made to it is followed, a FIFO or a huge file is not
  try:
    data = validate.read_json(os.path.realpath(path))
    entries = _entries(data)
  except validate.Refused as e:
    _warn(path, f"not a tuning file: {e}", f"{REWRITE}, or unset it")
    return {}
  choices, bad = {}, []
  for i, entry in enumerate(entries):
    problem = entry_problem(entry)
    if problem:
      name = entry.get("kernel") if isinstance(entry, dict) else None
      bad.append(f"entry {i}" + (f" ({name!r})" if isinstance(name, str) else "")
                 + f": {problem}")
      continue
    choices[(entry["source"], tuple(entry["target"]), entry["gpu"])] = tuple(entry["best"])
  if bad:
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    _warn(path, "; ".join(bad[:3]) + more, f"those kernels run with their default config. "
          f"Delete those entries, or {REWRITE}")
  return choices


def _entries(data) -> list:
  problem = validate.shape_problem(data, {"version": validate.an_int, "kernels": validate.a_list})
  if problem:
    raise validate.Refused(problem)
  if data["version"] != FORMAT_VERSION:
    raise validate.Refused(f"format version {data['version']}, this pallas-prof reads version "
                           f"{FORMAT_VERSION}")
  return data["kernels"]


def entry_problem(entry) -> str | None:
  """Why a tuning file's entry cannot be applied (None: it can)."""
  return validate.shape_problem(entry, _ENTRY_FIELDS) or \
      validate.key_problem(entry["best"], entry["target"])


def _warn(path: str, problem: str, todo: str) -> None:
  validate.warn_once(f"{TUNED_ENV}={path}: {problem}; {todo}.")


def forget() -> None:
  """Reads every tuning file afresh (as a new process would)."""
  _read.clear()


def write(path: str, entries: list[dict]) -> None:
  """The tuning file of these entries, whole or not at all; readable by others, since the
  user may commit it."""
  safe_files.write_atomic(path, json.dumps({"version": FORMAT_VERSION, "kernels": entries},
                                           indent=1), mode=0o644)
