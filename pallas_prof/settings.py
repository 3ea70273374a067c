"""Every PALLAS_PROF_* environment variable pallas-prof reads: what it means, what it
accepts, and its value, read through one parser.

A bad value used to surface wherever it was first read: PALLAS_PROF_CUDA_DRIVER_VERSION=abc
as a ValueError from int() after the script of a `pallas-prof run` had run, so the run
was lost. Now `pallas-prof run` (and tune, advise) checks every set variable before the
script starts and refuses with the variable, its value and what it accepts (exit 2);
`pallas_prof.install()` checks them too and warns at the user's line; and a reader that
meets a bad value anyway (a script that sets one later) warns once, at the user's line,
and goes on with the default.

Only the standard library here: the CLI checks the environment before anything heavy.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
import sys
import sysconfig
import warnings
from typing import Any, Callable

from .safe_files import is_null_device, special_kind

PREFIX = "PALLAS_PROF_"
# variables of the project's own tests and benchmarks, never read by the package
HARNESS_PREFIXES = ("PALLAS_PROF_TEST_", "PALLAS_PROF_FUZZ_")


class EnvironmentVariableWarning(UserWarning):
  """A PALLAS_PROF_* variable has a value pallas-prof cannot use (the default is used)."""


@dataclasses.dataclass(frozen=True)
class Variable:
  name: str
  meaning: str
  accepts: str                     # what it accepts, in words (the error and the docs say it)
  parse: Callable[[str], Any]      # its text -> its value; ValueError(why) when bad
  default: Any = None              # the value when unset or empty
  internal: bool = False           # set by pallas-prof for its own child processes
  reader_says: bool = False        # a bad value is said by its reader, which knows what it
                                   # does instead (one warning, not two)
  path: bool = False               # names a file or folder: made absolute when a run starts


class PartlyBad(ValueError):
  """A parser's refusal of part of a value: `usable` is the rest (PALLAS_PROF_CHECK=bounds,races
  still checks bounds)."""

  def __init__(self, why: str, usable):
    self.usable = usable
    super().__init__(why)


class BadValue(ValueError):
  """A set variable whose value its parser refuses."""

  def __init__(self, variable: Variable, text: str, cause: ValueError):
    self.variable, self.text, self.cause = variable, text, cause
    why = str(cause)
    super().__init__(f"{variable.name}={text!r}: {why}; it accepts {variable.accepts} "
                     f"(unset it for the default)")


# --- parsers -----------------------------------------------------------------------------

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def flag(text: str) -> bool:
  word = text.strip().lower()
  if word in TRUE_WORDS:
    return True
  if word in FALSE_WORDS:
    return False
  raise ValueError("not a yes or no")


def integer(least: int) -> Callable[[str], int]:
  def parse(text: str) -> int:
    try:
      value = int(text.strip())
    except ValueError:
      raise ValueError("not an integer") from None
    if value < least:
      raise ValueError(f"below {least}")
    return value
  return parse


def seconds(text: str) -> float:
  try:
    value = float(text.strip())
  except ValueError:
    raise ValueError("not a number") from None
  if not value > 0 or value == float("inf"):
    raise ValueError("not a number of seconds above 0")
  return value


def existing_file(text: str) -> str:
  path = os.path.expanduser(text)
  if not os.path.exists(path):
    raise ValueError(f"no such file: {path}")
  _regular_or_absent(path)
  return path


def _regular_or_absent(path: str) -> None:
  """One refusal for every path setting that names a file: not a FIFO, a device, a socket
  or a folder (safe_files.special_kind says why each is refused)."""
  kind = special_kind(path)
  if kind is not None:
    raise ValueError(f"{path} is {kind}, not a regular file")


def file_or(*words: str) -> Callable[[str], str]:
  def parse(text: str) -> str:
    return text if text in words else existing_file(text)
  return parse


def folder(text: str) -> str:
  """A folder, made when missing: refused only where a file already stands. The path stays
  usable to its reader, which says what it does instead (the cache takes a stand-in for
  the process: backend/cache_files.py)."""
  path = os.path.expanduser(text)
  if os.path.exists(path) and not os.path.isdir(path):
    raise PartlyBad(f"{path} exists and is not a folder", path)
  return path


def output_file(text: str) -> str:
  """A file pallas-prof writes: a regular one, a new one, or the null device (what is
  written there is thrown away, as the user asked: safe_files.is_null_device)."""
  path = os.path.expanduser(text)
  if not is_null_device(path):
    _regular_or_absent(path)
  return path


def words_from(known: tuple[str, ...]) -> Callable[[str], frozenset]:
  def parse(text: str) -> frozenset:
    words = text.lower().replace(",", " ").split()
    if not words:
      raise ValueError("no word in it")
    unknown = [w for w in words if w not in known]
    usable = frozenset(w for w in words if w in known)
    if unknown:
      why = f"pallas-prof knows no {', '.join(map(repr, unknown))}"
      raise PartlyBad(why, usable) if usable else ValueError(why)
    return usable
  return parse


def checks(on: tuple[str, ...], off: tuple[str, ...]) -> Callable[[str], frozenset]:
  """Checks to make, or off: both at once (`bounds, off`) is refused, not read as one of
  them (it was read as checks on, which the user who wrote off did not ask for)."""
  known = words_from(on + off)

  def parse(text: str) -> frozenset:
    words = set(text.lower().replace(",", " ").split())
    asked, refused = sorted(words & set(on)), sorted(words & set(off))
    if asked and refused:
      raise ValueError(f"{' and '.join(map(repr, asked))} and {' and '.join(map(repr, refused))}"
                       " contradict each other: name the checks, or off alone")
    return known(text)
  return parse


def choice(*words: str) -> Callable[[str], str]:
  def parse(text: str) -> str:
    word = text.strip().lower()
    if word not in words:
      raise ValueError(f"not one of {', '.join(words)}")
    return word
  return parse


def text(value: str) -> str:
  return value


# --- the variables -----------------------------------------------------------------------

YES_NO = "1, true, yes, on or 0, false, no, off"
CHECKS_ON, CHECKS_OFF = ("bounds",), ("0", "off", "none", "false", "no")

VARIABLES: dict[str, Variable] = {v.name: v for v in (
    Variable("PALLAS_PROF_CHECK", "`bounds`: every load and store checks its indices "
             "(the bounds-checked debug mode, as `install(check_bounds=True)`)",
             "bounds, or off (none, 0, false, no) alone",
             checks(CHECKS_ON, CHECKS_OFF), frozenset()),
    Variable("PALLAS_PROF_CACHE_DIR", "the cache folder (generated kernels, compiles, tuning)",
             "a folder (made if missing) only you can write; in one others can write, "
             "a private folder is used instead (docs/compiling.md)", folder, reader_says=True,
             path=True),
    Variable("PALLAS_PROF_TRACE", "trace the whole process (spans exported at exit)",
             YES_NO, flag, False),
    Variable("PALLAS_PROF_TRACE_FILE", "also write OTLP-JSON lines of the spans to this file "
             "(a script run by python; `pallas-prof run` writes its traces into the run's "
             "folder, and says so when this is set)",
             "a file path", output_file, path=True),
    Variable("PALLAS_PROF_PERFETTO", "also write a Perfetto / Chrome trace-event file here "
             "(as PALLAS_PROF_TRACE_FILE: not under `pallas-prof run`)",
             "a file path", output_file, path=True),
    Variable("PALLAS_PROF_TRACE_ROOT", "the name of the root span of PALLAS_PROF_TRACE=1",
             "any text", text),
    Variable("PALLAS_PROF_TRACEBACK", "keep the interpreter's and callbacks' frames in a "
             "kernel's error", YES_NO, flag, False),
    Variable("PALLAS_PROF_AUTOTUNE", "tune num_warps, num_stages and launch order of every "
             "kernel on the GPU", YES_NO, flag, False),
    Variable("PALLAS_PROF_AUTOTUNE_BUDGET_S", "seconds of tuning per kernel with "
             "PALLAS_PROF_AUTOTUNE=1", "a number of seconds above 0", seconds),
    Variable("PALLAS_PROF_TUNED", "a tuning file (`pallas-prof tune` writes one) to apply",
             "an existing file", existing_file, path=True),
    Variable("PALLAS_PROF_INTERPRETER_WARN_S", "warn when a launch under Triton's CPU "
             "interpreter is estimated to take longer than this", "a number of seconds "
             "above 0", seconds, 60.0),
    Variable("PALLAS_PROF_LIBDEVICE", "the libdevice to link (default: the one XLA links)",
             "an existing file, or triton (Triton's own)", file_or("triton"), path=True),
    Variable("PALLAS_PROF_PREPARED_LIBDEVICE", "link libdevice's common functions prepared "
             "once (0: Triton's way)", YES_NO, flag, True),
    Variable("PALLAS_PROF_JAXLIB_PTX", "`whole`: hand jaxlib the PTX as Triton wrote it "
             "(default: without debug sections)", "whole", choice("whole")),
    Variable("PALLAS_PROF_PTX_REWRITES", "rewrite the PTX forms ptxas is known to "
             "miscompile (0: hand ptxas Triton's PTX as it is)",
             YES_NO, flag, True),
    Variable("PALLAS_PROF_WORKAROUNDS", "lower again otherwise where Triton fails on a kernel "
             "(0: raise the failure)", YES_NO, flag, True),
    Variable("PALLAS_PROF_COMPILE_WORKER", "compile in a worker process (0: in-process)",
             YES_NO, flag, True),
    Variable("PALLAS_PROF_WARMUP", "start the compile worker and Triton at install() on a "
             "GPU machine (0: not)", YES_NO, flag, True),
    Variable("PALLAS_PROF_CUDA_DRIVER_VERSION", "stands in for the CUDA driver's version "
             "(cuDriverGetVersion, e.g. 13000 for CUDA 13.0; 0: no driver)",
             "an integer, 0 or more", integer(0)),
    Variable("PALLAS_PROF_CUPTI", "the libcupti that PC sampling loads",
             "an existing file", existing_file, path=True),
    Variable("PALLAS_PROF_CHROMIUM", "the Chromium that opens report.html headless (its "
             "checks and screenshots)", "an existing file", existing_file, path=True),
    Variable("PALLAS_PROF_WORKER_DIR", "the compile worker's folder", "a folder", folder,
             internal=True, path=True),
    Variable("PALLAS_PROF_WORKER_WARM_UP", "the compile worker's warm-up request", "a file "
             "path", text, internal=True, path=True),
    Variable("PALLAS_PROF_WORKER_ARCH", "the GPU's compute capability, for the compile "
             "worker", "an integer, 70 or more", integer(70), internal=True),
    Variable("PALLAS_PROF_TEST_WORKER_PAUSE", "stops the compile worker at a stage, for the "
             "fault tests that kill it there (worker_output.py)", "POINTS:FOLDER", text,
             internal=True),
)}


def variable(name: str) -> Variable:
  return VARIABLES[name]


_warned: set[tuple[str, str]] = set()


def value(name: str) -> Any:
  """The variable's value now: its default when unset or empty, or when its value is bad
  (then one warning per value, at the user's line; none where no line is the user's: the
  CLI before the script, which refuses bad values itself, or a thread of pallas-prof's own,
  which install() started after saying them)."""
  var = VARIABLES[name]
  raw = os.environ.get(name, "")
  if not raw:
    return var.default
  try:
    return var.parse(raw)
  except ValueError as e:
    level = user_stacklevel()
    if level is not None and not var.reader_says:
      _warn_once(BadValue(var, raw, e), stacklevel=level)
    return getattr(e, "usable", var.default)


def problems(environ=None) -> list[BadValue]:
  """The set variables whose values are bad, in the registry's order."""
  environ = os.environ if environ is None else environ
  found = []
  for var in VARIABLES.values():
    raw = environ.get(var.name, "")
    if not raw:
      continue
    try:
      var.parse(raw)
    except ValueError as e:
      found.append(BadValue(var, raw, e))
  return found


def unknown_names(environ=None) -> dict[str, str]:
  """Set PALLAS_PROF_* names pallas-prof does not read that look like a known one
  (a typo: PALLAS_PROF_CHEK=bounds would otherwise run unchecked) -> the known one."""
  environ = os.environ if environ is None else environ
  # compared after the prefix, which every name shares
  suffixes = {known[len(PREFIX):]: known for known in VARIABLES}
  out = {}
  for name in environ:
    if not name.startswith(PREFIX) or name in VARIABLES or name.startswith(HARNESS_PREFIXES):
      continue
    close = difflib.get_close_matches(name[len(PREFIX):], list(suffixes), n=1, cutoff=0.8)
    if close:
      out[name] = suffixes[close[0]]
  return out


def refusal(command: str, environ=None) -> str | None:
  """What `command` (a CLI command about to run a script) says instead of running it when a
  variable is bad; None when all are good. Typos are said, not refused."""
  bad = problems(environ)
  for name, known in unknown_names(environ).items():
    print(f"{command}: {name} is not a pallas-prof variable (did you mean {known}?); it is "
          "ignored", file=sys.stderr)
    _warned.add((name, "unknown"))      # said: install() in the same process says it no more
  if not bad:
    return None
  lines = [f"{command}: {e}" for e in bad]
  lines.append(f"{command}: the script was not run: fix or unset "
               + ("this variable" if len(bad) == 1 else "these variables"))
  return "\n".join(lines)


def absolute_paths(environ=None) -> None:
  """Makes each set path variable absolute (`~` expanded), in place: a script that changes
  the working folder (Hydra and many launchers do) must not move the cache or a trace file
  that pallas-prof reads later in the run, or that its compile worker reads. Words that are
  not paths (PALLAS_PROF_LIBDEVICE=triton) stay."""
  environ = os.environ if environ is None else environ
  for var in VARIABLES.values():
    raw = environ.get(var.name, "")
    if var.path and raw and raw not in _PATH_WORDS:
      environ[var.name] = os.path.abspath(os.path.expanduser(raw))


_PATH_WORDS = ("triton",)


def warn_about_environment() -> None:
  """install(): one warning per bad variable (and per likely typo), at the user's line."""
  level = user_stacklevel() or 1
  for e in problems():
    _warn_once(e, stacklevel=level)
  for name, known in unknown_names().items():
    _warn_once(f"{name} is not a pallas-prof variable (did you mean {known}?); it is "
               "ignored", stacklevel=level, key=(name, "unknown"))


def _warn_once(problem, stacklevel: int, key=None) -> None:
  if isinstance(problem, BadValue):
    key = (problem.variable.name, problem.text)
    message = f"{problem}; pallas-prof goes on " + (
        "with the rest" if isinstance(problem.cause, PartlyBad) else "as if it were unset")
  else:
    message = str(problem)
  if key in _warned:
    return
  _warned.add(key)
  # +1: this function's own frame sits between the caller's count and warnings.warn
  warnings.warn(message, EnvironmentVariableWarning, stacklevel=stacklevel + 1)


# --- the user's line ---------------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _internal_prefixes() -> tuple[str, ...]:
  """Files that are not the user's: pallas-prof's, JAX's and jaxlib's, Python's own."""
  out = [_PACKAGE]
  for name in ("jax", "jaxlib"):
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.submodule_search_locations:
      out += [os.path.abspath(p) + os.sep for p in spec.submodule_search_locations]
  stdlib = sysconfig.get_paths().get("stdlib")
  if stdlib:
    out.append(os.path.abspath(stdlib) + os.sep)
  return tuple(out)


_prefixes: list[tuple[str, ...]] = []


def user_stacklevel() -> int | None:
  """The stacklevel that makes a warnings.warn in the caller name the user's line: the
  innermost frame outside pallas-prof (its console script too), JAX and Python's library
  (Python 3.12's skip_file_prefixes does this; 3.11 has none). None when no frame is the
  user's."""
  if not _prefixes:
    _prefixes.append(_internal_prefixes())
  frame, level = sys._getframe(1), 1
  while frame is not None:
    path = frame.f_code.co_filename
    if not (path.startswith("<frozen") or os.path.abspath(path).startswith(_prefixes[0])
            or os.path.basename(path) == "pallas-prof"):
      return level
    frame, level = frame.f_back, level + 1
  return None


def doc_table(internal: bool = False) -> str:
  """The Markdown table of the variables (docs/running.md carries it; a test compares)."""
  rows = ["| variable | what it does | accepts |", "|---|---|---|"]
  for var in VARIABLES.values():
    if var.internal == internal:
      rows.append(f"| `{var.name}` | {var.meaning} | {var.accepts} |")
  return "\n".join(rows)
