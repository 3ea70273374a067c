"""Tuning files: what `pallas-prof tune` and `pallas-prof advise` write and
`PALLAS_PROF_TUNED=file python script.py` applies, one entry per kernel:

    {"version": 4, "kernels": [{"kernel": "softmax_kernel", "source": <its sha256>,
      "code": <its sha256 without comments>, "target": ["cuda", 90], "gpu": "NVIDIA H200",
      "best": {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": false,
               "persistent": 0, "loop_stages": 0},
      "default": {"num_warps": 4, "num_stages": 3, "launch_group": 0, "tma": false,
                  "persistent": 0, "loop_stages": 0}}]}

best and default are saved TunedSettings (backend/options.py), by name. Version 3 held them
as [num_warps, num_stages, launch_group, tma] lists: a file of it (a user may have committed
one) is read as version 4 (`_upgraded`), then checked alike; versions 1 and 2 are refused.
A version 4 file written before `persistent` or `loop_stages` was a setting lacks it: read as 0.

An entry applies to the kernel whose generated source it names, or (`code`) whose source
is that one but for its comments: every line of a kernel's source names the user's line it
came from, so an edit above the kernel (advice's split of another kernel, a docstring)
changed its source, and a committed file's entry stopped applying without a word. A kernel
whose name has entries for its target and GPU but none for its code is said, once. The
file is the user's (they may commit it, edit it, copy it between machines): each entry is
checked (validate.py) before it is applied, a bad one ignored with one warning that names the
file, the entry and what to do, and a file that cannot be used at all leaves every kernel
at its default config, with one warning. Nothing here raises at the user's call.
"""
from __future__ import annotations

import dataclasses
import os

from .. import safe_files, serial
from ..backend.options import TunedSettings
from ..backend.targets import target_text
from . import validate

TUNED_ENV = "PALLAS_PROF_TUNED"          # a tuning file (`pallas-prof tune` writes one) to apply
FORMAT_VERSION = 4      # 4: best and default by name; 3: (num_warps, num_stages, launch_group, tma)
REWRITE = "write the file again with `pallas-prof tune`"
VERSION3_FIELDS = ("num_warps", "num_stages", "launch_group", "tma")   # its lists' order

_read: dict = {}        # path -> (the file's stat stamp, _Choices)


@dataclasses.dataclass(frozen=True)
class TuningEntry(serial.Saved):
  """One kernel's tuned config: for its generated source (sha256), on one target and GPU."""
  kernel: str
  source: str
  target: tuple[str, int]
  gpu: str
  best: TunedSettings
  default: TunedSettings
  # sha256 of the source without its comments (GeneratedKernel.code_key); older files lack it
  code: str | None = serial.field(default=None, omit_empty=True)

  @property
  def key(self) -> tuple:
    """What the entry is for: a later entry for the same one replaces it."""
    return (self.source, self.target, self.gpu)



@dataclasses.dataclass(frozen=True)
class TuningFile(serial.Saved):
  """A tuning file's contents: written by `write` alone (`pallas-prof tune` and `pallas-prof
  advise` both), read by `read` alone, which checks every entry."""
  entries: tuple[TuningEntry, ...] = serial.field(key="kernels", default=())
  version: int = FORMAT_VERSION

  @classmethod
  def of(cls, entries) -> "TuningFile":
    """One entry per kernel, source, target and GPU: the last given wins."""
    return cls(tuple({e.key: e for e in entries}.values()))

  def write(self, path: str) -> None:
    """Whole or not at all; readable by others, since the user may commit it."""
    safe_files.write_atomic(path, serial.to_json(self, indent=1), mode=0o644)

  @classmethod
  def read(cls, path: str) -> tuple["TuningFile", list[str]]:
    """The file's valid entries and, for each other one, what is wrong with it (`entry 2
    ('softmax_kernel'): best: ...`). validate.Refused for a file that is no tuning file."""
    entries, bad = [], []
    data = _upgraded(validate.read_json(path))
    for i, entry in enumerate(validate.tuning_file_entries(data, FORMAT_VERSION)):
      problem = validate.tuning_entry_problem(entry)
      if problem:
        name = entry.get("kernel") if isinstance(entry, dict) else None
        bad.append(f"entry {i}" + (f" ({name!r})" if isinstance(name, str) else "")
                   + f": {problem}")
      else:
        entries.append(serial.load(TuningEntry, entry, f"{path} entry {i}"))
    return cls.of(entries), bad


def _upgraded(data):
  """A version 3 file's JSON as version 4 holds it: each entry's best and default, a list
  of 4 values, as the object of those fields (tma's 0 or 1 as false or true). Nothing is
  checked here: what does not have that shape is left as it is, for the checker to name."""
  if not (isinstance(data, dict) and data.get("version") == 3
          and isinstance(data.get("kernels"), list)):
    return data
  return {**data, "version": 4,
          "kernels": [{**e, **{k: _named(e[k]) for k in ("best", "default") if k in e}}
                      if isinstance(e, dict) else e for e in data["kernels"]]}


def _named(value):
  if not (isinstance(value, list) and len(value) == len(VERSION3_FIELDS)):
    return value
  named = dict(zip(VERSION3_FIELDS, value, strict=True))
  if named["tma"] in (0, 1) and not isinstance(named["tma"], float):
    named["tma"] = bool(named["tma"])
  return named


def choice(path: str, gk, target, gpu: str) -> TunedSettings | None:
  """The settings the tuning file at `path` names for this kernel on this GPU, if it
  names valid ones."""
  try:
    info = os.stat(path)
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
  except OSError as e:
    _warn(path, f"{e.strerror}", "point it at the tuning file `pallas-prof tune` wrote, or "
          "unset it")
    return None
  if _read.get(path, (None,))[0] != stamp:
    _read[path] = (stamp, _choices(path))
  found = _read[path][1]
  where = (tuple(target), gpu)
  best = found.by_source.get((gk.key, *where)) or found.by_code.get((gk.code_key, *where))
  if best is None and (gk.name, *where) in found.names:
    _warn(path, f"no entry is for this {gk.name} (its entries for {target_text(target)} "
          f"on {gpu} were tuned for other code, or other shapes or dtypes)",
          f"it runs with its default config. {REWRITE.capitalize()} for the kernel as it is")
  return best


@dataclasses.dataclass(frozen=True)
class _Choices:
  """A file's valid entries' choices: by the source they name, by its code without
  comments (entries that name it), and the (kernel, target, gpu) that have entries."""
  by_source: dict
  by_code: dict
  names: frozenset


def _choices(path: str) -> _Choices:
  """Every valid entry of the file; one warning for the rest, or for the whole file."""
  # the user names this file: a link they made to it is followed, a FIFO or a huge file is not
  try:
    tuning, bad = TuningFile.read(os.path.realpath(path))
  except validate.Refused as e:
    _warn(path, f"not a tuning file: {e}", f"{REWRITE}, or unset it")
    return _Choices({}, {}, frozenset())
  if bad:
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    _warn(path, "; ".join(bad[:3]) + more, f"those kernels run with their default config. "
          f"Delete those entries, or {REWRITE}")
  entries = tuning.entries
  return _Choices({e.key: e.best for e in entries},
                  {(e.code, e.target, e.gpu): e.best for e in entries if e.code},
                  frozenset((e.kernel, e.target, e.gpu) for e in entries))


def _warn(path: str, problem: str, todo: str) -> None:
  validate.warn_once(f"{TUNED_ENV}={path}: {problem}; {todo}.")


def forget() -> None:
  """Reads every tuning file afresh (as a new process would)."""
  _read.clear()
