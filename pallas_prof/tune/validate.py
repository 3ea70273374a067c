"""One checker for the tuning choices pallas-prof reads back from disk: the autotune
cache (blocks.py), the compiler-parameter cache (params.py) and tuning files
(PALLAS_PROF_TUNED, tuned_file.py; `pallas-prof tune` and `pallas-prof advise` write them).

What an earlier run left is data to check, not code to trust: a value is applied only
when a kernel can run with it and, where the file recorded a tuning, when it is one of
the configs that tuning tried for that same function and key. A file or entry that fails
is refused (`Refused`, saying why); its reader drops it with one warning naming the
file, the entry and what to do (tuning again, or the kernel's default), never an
exception at the user's call.
"""
from __future__ import annotations

import json
import math
import warnings

from ..backend.options import TUNED_FIELDS
from ..safe_files import UnsafeFile, read_regular

# a tuning file or cache entry holds a few lines per kernel; anything far larger is not one,
# and reading it whole into the user's process would cost memory for nothing
MAX_FILE_BYTES = 16 << 20
MAX_NUM_WARPS = 32          # Triton wants a power of two; CUDA runs at most 1024 threads a program
# each stage holds another copy of a loop's blocks in shared memory: far beyond what any
# GPU's shared memory holds for real kernels, a value is a typo or damage, not a tuning
MAX_NUM_STAGES = 16
MAX_LAUNCH_GROUP = 4096     # programs of the first grid dimension launched together


class TuningFileWarning(UserWarning):
  """A tuning file or cached choice was not used: it names the file, the entry and why."""


class Refused(ValueError):
  """Why a tuning file, or one entry of it, is not used."""


def is_int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def is_seconds(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool) and \
      math.isfinite(value) and value >= 0


def field_problem(name: str, value) -> str | None:
  """Why `value` cannot be the compiler parameter `name` (None: it can)."""
  if name == "num_warps":
    if not (is_int(value) and 1 <= value <= MAX_NUM_WARPS and value & (value - 1) == 0):
      return (f"num_warps must be a power of two from 1 to {MAX_NUM_WARPS} (Triton's rule; a "
              f"program runs at most 1024 threads), not {short(value)}")
  elif name == "num_stages":
    if not (is_int(value) and 1 <= value <= MAX_NUM_STAGES):
      return f"num_stages must be an int from 1 to {MAX_NUM_STAGES}, not {short(value)}"
  elif name == "launch_group":
    if not (is_int(value) and 0 <= value <= MAX_LAUNCH_GROUP):
      return (f"launch_group must be an int from 0 to {MAX_LAUNCH_GROUP} (0: the plain launch "
              f"order), not {short(value)}")
  elif name == "tma":
    if not (is_int(value) and value in (0, 1)):
      return f"tma must be 0 or 1, not {short(value)}"
  else:
    return f"unknown field {name!r} (known: {', '.join(TUNED_FIELDS)})"
  return None


def below_hopper(target) -> bool:
  """TMA needs sm_90: a target below it (or one that does not say) cannot use it."""
  try:
    return int(target[1]) < 90
  except (TypeError, ValueError, IndexError):
    return True


def key_problem(key, target=None) -> str | None:
  """Why `key` is not a (num_warps, num_stages, launch_group, tma) a kernel for `target`
  can be compiled with (None: it is)."""
  if not isinstance(key, (list, tuple)) or len(key) != len(TUNED_FIELDS):
    return f"{short(key)} is not [{', '.join(TUNED_FIELDS)}]"
  for name, value in zip(TUNED_FIELDS, key, strict=True):
    problem = field_problem(name, value)
    if problem:
      return problem
  if key[3] and target is not None and below_hopper(target):
    return f"tma needs sm_90 or newer, and the target is {short(list(target))}"
  return None


def shape_problem(data, required: dict, optional: dict | None = None) -> str | None:
  """Why `data` is not an object of exactly these fields ({name: check(value) -> bool})."""
  if not isinstance(data, dict):
    return f"{type(data).__name__}, not an object"
  optional = optional or {}
  missing = [k for k in required if k not in data]
  if missing:
    return f"no {', '.join(map(repr, missing))}"
  unknown = sorted(str(k) for k in data if k not in required and k not in optional)
  if unknown:
    return f"unknown field(s) {', '.join(map(repr, unknown))}"
  for name, check in {**required, **optional}.items():
    if name in data and not check(data[name]):
      return f"{name} {short(data[name])} is not {_what(check)}"
  return None


def _what(check) -> str:
  return getattr(check, "what", "valid")


def described(what: str):
  """Names a field check for shape_problem's messages."""
  def mark(check):
    check.what = what
    return check
  return mark


is_text = described("a string")(lambda v: isinstance(v, str))
maybe_text = described("a string or null")(lambda v: v is None or isinstance(v, str))
maybe_seconds = described("seconds (a number >= 0) or null")(lambda v: v is None or is_seconds(v))
seconds = described("seconds (a number >= 0)")(is_seconds)
an_int = described("an int")(is_int)
a_list = described("a list")(lambda v: isinstance(v, list))
an_object = described("an object")(lambda v: isinstance(v, dict))


def read_json(path: str):
  """The JSON value in `path`, a regular file of sane size; else Refused saying why."""
  try:
    raw = read_regular(path, MAX_FILE_BYTES)
  except UnsafeFile as e:
    raise Refused(f"not read: {e.strerror}") from None
  except OSError as e:
    raise Refused(f"cannot be read ({e.strerror or e})") from None
  if not raw.strip():
    raise Refused("empty")
  try:
    return json.loads(raw.decode("utf-8"))
  except (UnicodeDecodeError, ValueError) as e:
    raise Refused(f"not JSON ({type(e).__name__}: {str(e)[:120]})") from None


def canonical(value) -> str:
  """A value as JSON with sorted keys: what a file holds of it, compared type for type
  (1, 1.0, true and "1" all differ)."""
  return json.dumps(value, sort_keys=True, default=str)


_warned: set = set()


def warn_once(text: str, stacklevel: int = 2) -> None:
  """One TuningFileWarning per message and process: a file read again says nothing new.
  stacklevel: as warnings.warn's, counted from the caller of warn_once."""
  if text in _warned:
    return
  _warned.add(text)
  warnings.warn(text, TuningFileWarning, stacklevel=stacklevel + 1)


def short(value, limit: int = 80) -> str:
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."
