"""One checker for the tuning choices pallas-prof reads back from disk: the autotune
cache (blocks.py), the compiler-parameter cache (params.py) and tuning files
(PALLAS_PROF_TUNED, tuned_file.py; `pallas-prof tune` and `pallas-prof advise` write them).

    settings_problem(value, target)   saved tuned settings (backend.options.TunedSettings,
                                      an object of num_warps, num_stages, launch_group,
                                      tma and persistent): the one rule for them, wherever
                                      they are kept
    tuning_entry_problem(entry)       one entry of a tuning file
    cached_choice(data, layout, ...)  a tuner's cache file (either tuner's: a CacheLayout
                                      says what its file holds)

The readers call these and build their records only from what passed; tests/structure/
test_tuning_records.py keeps a second checker from growing beside them.

What an earlier run left is data to check, not code to trust: a value is applied only
when a kernel can run with it and, where the file recorded a tuning, when it is one of
the configs that tuning tried for that same function and key. A file or entry that fails
is refused (`Refused`, saying why); its reader drops it with one warning naming the
file, the entry and what to do (tuning again, or the kernel's default), never an
exception at the user's call.
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from typing import Any, Callable

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
MAX_PERSISTENT = 2**31 - 1  # persistent programs: CUDA's launch axis 0 at most
# saved settings older files lack (written before the field was): read as its default
OPTIONAL_SAVED = {"persistent": 0, "loop_stages": 0}


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
  elif name == "persistent":
    if not (is_int(value) and 0 <= value <= MAX_PERSISTENT):
      return (f"persistent must be an int from 0 to {MAX_PERSISTENT} (0: one program per "
              f"point of the grid), not {short(value)}")
  elif name == "loop_stages":
    if not (is_int(value) and 0 <= value <= MAX_NUM_STAGES):
      return (f"loop_stages must be an int from 0 to {MAX_NUM_STAGES} (0: loops as written), "
              f"not {short(value)}")
  else:
    return f"unknown field {name!r} (known: {', '.join(TUNED_FIELDS)})"
  return None


def below_hopper(target) -> bool:
  """TMA needs sm_90: a target below it (or one that does not say) cannot use it."""
  try:
    return int(target[1]) < 90
  except (TypeError, ValueError, IndexError):
    return True


def settings_problem(value, target=None) -> str | None:
  """Why `value`, saved tuned settings ({"num_warps": 8, "num_stages": 3, "launch_group": 0,
  "tma": false, "persistent": 0, "loop_stages": 0}), is not what a kernel for `target` can be compiled with
  (None: it is). An older file's settings lack persistent (OPTIONAL_SAVED)."""
  if not isinstance(value, dict) or \
      sorted({**OPTIONAL_SAVED, **value}) != sorted(TUNED_FIELDS):
    return f"{short(value)} is not an object of {', '.join(TUNED_FIELDS)}"
  value = {**OPTIONAL_SAVED, **value}
  for name in TUNED_FIELDS:
    problem = _saved_tma_problem(value[name]) if name == "tma" else \
        field_problem(name, value[name])
    if problem:
      return problem
  if value["tma"] and target is not None and below_hopper(target):
    return f"tma needs sm_90 or newer, and the target is {short(list(target))}"
  return None


def _saved_tma_problem(value) -> str | None:
  # saved as JSON's true/false (TunedSettings.tma); a config's 0 or 1 is field_problem's
  return None if isinstance(value, bool) else f"tma must be true or false, not {short(value)}"


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


# --- the records pallas-prof saves a tuning in ---------------------------------------------

def _sha256(v) -> bool:
  return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)


saved_settings = described(f"an object of {', '.join(TUNED_FIELDS)}")(
    lambda v: isinstance(v, dict))      # its fields: settings_problem's

_TUNING_ENTRY_FIELDS = {
    "kernel": is_text,
    "source": described("a sha256 in hex")(_sha256),
    "target": described('["cuda", capability]')(
        lambda v: isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
        and is_int(v[1])),
    "gpu": is_text, "best": saved_settings, "default": saved_settings}


# files written before it lack the source's sha256 without its comments (its `code`)
_TUNING_ENTRY_OPTIONAL = {"code": described("a sha256 in hex")(_sha256)}


def tuning_entry_problem(entry) -> str | None:
  """Why a tuning file's entry (tune/tuned_file.py's TuningEntry, as its file holds it)
  cannot be applied (None: it can)."""
  problem = shape_problem(entry, _TUNING_ENTRY_FIELDS, _TUNING_ENTRY_OPTIONAL)
  if problem:
    return problem
  for name, target in (("best", entry["target"]), ("default", None)):
    problem = settings_problem(entry[name], target)
    if problem:
      return f"{name}: {problem}"
  return None


def tuning_file_entries(data, version: int) -> list:
  """The entries of a tuning file's JSON, each still to check (tuning_entry_problem);
  Refused for a file that is no tuning file of this `version`."""
  problem = shape_problem(data, {"version": an_int, "kernels": a_list})
  if problem:
    raise Refused(problem)
  if data["version"] != version:
    raise Refused(f"format version {data['version']}, this pallas-prof reads version {version}")
  return data["kernels"]


@dataclasses.dataclass(frozen=True)
class CacheLayout:
  """What one tuner's cache file holds, for cached_choice: {"version", "identity", and the
  tuning: its `fields` (name -> check, `candidates` among them), at the top or under the key
  `body`}; each candidate of `candidate_fields`, its config under `config`, its time under
  `seconds` (null: it did not run or was dropped) and why it was dropped under "error"."""
  version: int
  fields: dict
  candidate_fields: dict
  config: str
  seconds: str
  body: str | None = None
  optional: dict = dataclasses.field(default_factory=dict)
  same_as_identity: tuple[str, ...] = ()     # the tuning's fields its identity holds too
  every_config: bool = False     # a candidate per config tried (else some may be left out)
  what: str = "function"         # the identity's field naming what the tuning is for


def cached_choice(data, layout: CacheLayout, identity: dict, tried: list, *, default=None,
                  config_problem: Callable[[Any], str | None] | None = None,
                  best_problem: Callable[[Any], str | None] | None = None) -> tuple[dict, Any]:
  """The tuning in a cache file's JSON (the body, as the file holds it) and its best config,
  if the file is whole and for this identity, every candidate's config is one of `tried`
  (at most once each; all of them where the layout says every_config) and valid
  (config_problem), and its best is `default` or a candidate that ran and agreed with the
  default and one this target can use (best_problem). Refused, saying why, otherwise."""
  if not isinstance(data, dict) or not is_int(data.get("version")):
    raise Refused(shape_problem(data, {"version": an_int}) or "no int 'version'")
  if data["version"] != layout.version:
    raise Refused(f"format version {data['version']}, this pallas-prof reads version "
                  f"{layout.version}")
  top = {"version": an_int, "identity": an_object}
  if layout.body:
    problem = shape_problem(data, {**top, layout.body: an_object})
  else:
    problem = shape_problem(data, {**top, **layout.fields}, layout.optional)
  if problem:
    raise Refused(problem)
  if canonical(data["identity"]) != canonical(identity):
    other = data["identity"]
    raise Refused(f"it was written for {other.get(layout.what)!r} in another setting "
                  "(source, key, target, GPU, configs or versions)")
  body = data[layout.body] if layout.body else data
  if layout.body:
    problem = shape_problem(body, layout.fields, layout.optional)
    if problem:
      raise Refused(f"{layout.body}: {problem}")
  for name in layout.same_as_identity:
    if body[name] != identity.get(name):
      raise Refused(f"its {name} {short(body[name])} is not {short(identity.get(name))}")
  wanted = {canonical(c) for c in tried}
  candidates, seen = body["candidates"], set()
  if layout.every_config and len(candidates) != len(tried):
    raise Refused(f"{len(candidates)} candidates for {len(tried)} configs")
  for i, c in enumerate(candidates):
    problem = shape_problem(c, layout.candidate_fields)
    config = None if problem else c[layout.config]
    problem = problem or (config_problem and config_problem(config))
    if not problem and canonical(config) not in wanted:
      problem = f"{short(config)} was not tried"
    if not problem and canonical(config) in seen:
      problem = f"{short(config)} is listed twice"
    if problem:
      raise Refused(f"candidate {i}: {problem}")
    seen.add(canonical(config))
  best = body["best"]
  if default is not None and canonical(best) == canonical(default):
    return body, best             # the kernel's own options: nothing to apply
  kept = {canonical(c[layout.config]) for c in candidates
          if c[layout.seconds] is not None and c["error"] is None}
  problem = (best_problem and best_problem(best)) or (
      None if canonical(best) in kept else
      "not one of the candidates that ran and agreed with the default")
  if problem:
    raise Refused(f"its best {short(best)}: {problem}")
  return body, best
