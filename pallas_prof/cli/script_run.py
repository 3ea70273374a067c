"""The user's script, run as `python script.py args` would run it, and what its end says.

runpy runs it as __main__ with its sys.argv and sys.path[0] (what it does to the working
folder and the standard streams is undone when it ends: run_steps/script_effects.py); its
exit code and uncaught exception are kept rather than raised, so that `run` can still
report on the kernels it lowered; the traceback printed is Python's, without pallas-prof's
own frames.
"""
from __future__ import annotations

import os
import runpy
import site
import sys
import sysconfig
import time
import traceback

from ..backend import LoweringError
from .run_steps.script_effects import kept_cwd, kept_streams


class ScriptOutcome:
  def __init__(self, exit_code: int, error: BaseException | None, seconds: float,
               reader_gone: bool = False, message: str | None = None):
    self.exit_code = exit_code
    # sys.exit("text"): the text Python prints on stderr, printed by `run` masked as the
    # traceback is (it was printed as it came, a secret in it too)
    self.message = message
    self.error = error
    self.seconds = seconds
    self.reader_gone = reader_gone      # its stdout's reader left (`| head`): it ended there


def run_script(path: str, argv: list[str]) -> ScriptOutcome:
  """Runs `path` as __main__ with sys.argv = [path, *argv]; never raises."""
  saved_argv, saved_path = sys.argv, list(sys.path)
  sys.argv = [path, *argv]
  sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
  start, gone, message = time.perf_counter(), False, None
  try:
    with kept_cwd(), kept_streams():
      runpy.run_path(path, run_name="__main__")
    code, error = 0, None
  except SystemExit as e:
    code, error = _exit_code(e.code), None
    if not (e.code is None or isinstance(e.code, int)):
      message = str(e.code)
  except KeyboardInterrupt as e:
    code, error = 130, e
  except BrokenPipeError as e:
    # `pallas-prof run script.py | head`: the end a Unix tool makes, not the script's failure
    from .processes import SIGPIPE_EXIT, reader_gone
    gone = reader_gone()
    code, error = (SIGPIPE_EXIT, None) if gone else (1, e)
  except BaseException as e:  # noqa: BLE001 - the script's own error, reported like Python
    code, error = 1, e
  finally:
    sys.argv = saved_argv
    sys.path[:] = saved_path
  return ScriptOutcome(code, error, time.perf_counter() - start, reader_gone=gone,
                       message=message)


def _exit_code(code) -> int:
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  return 1


def find_kernel_error(error: BaseException | None):
  """The LoweringError (JAX may wrap or chain it) or the kernel's failure at run time
  (a KernelRuntimeError, or the JaxRuntimeError that carries one) behind an exception."""
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ..backend.running import runtime_errors
  from ..backend.errors import in_chain
  return in_chain(error, LoweringError) or runtime_errors.recognise(error)


def script_error_note(error: BaseException) -> str:
  """The script's own uncaught exception in one line, with the deepest line of the user's
  code it passed through, for report.json and report.html (they said only "exit 1")."""
  skip = [_PACKAGE,
          *(os.path.abspath(p) for p in (sysconfig.get_paths().get("stdlib"),
                                         sysconfig.get_paths().get("purelib"),
                                         *getattr(site, "getsitepackages", lambda: [])())
            if p)]
  where = None
  for frame in traceback.extract_tb(error.__traceback__):
    path = os.path.abspath(frame.filename)
    if not frame.filename.startswith("<") and not any(path.startswith(d + os.sep) for d in skip):
      where = f"{os.path.relpath(path) if not os.path.relpath(path).startswith('..') else path}" \
              f":{frame.lineno}"
  first = (str(error).strip().splitlines() or [""])[0]
  return (f"the script raised {type(error).__name__}" + (f": {first}" if first else "")
          + (f" (at {where})" if where else ""))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # pallas_prof/


def print_script_traceback(error: BaseException, script: str, own_frames: bool = False,
                           redact=lambda text: text) -> None:
  """The traceback Python would print, without pallas-prof's own frames on top, nor (unless
  `own_frames`: --traceback) the wrappers `run` puts around pl.pallas_call in between
  (a frame of pallas_prof/advice/recipes.py sat between the user's call and JAX's);
  `redact` masks the secrets in it (its message, its paths: entries.redactor)."""
  tb = error.__traceback__
  script = os.path.abspath(script)
  probe = tb
  while probe is not None and os.path.abspath(probe.tb_frame.f_code.co_filename) != script:
    probe = probe.tb_next
  report = traceback.TracebackException(type(error), error, probe or tb)
  if not own_frames:
    seen, todo = set(), [report]
    while todo:
      t = todo.pop()
      if t is None or id(t) in seen:
        continue
      seen.add(id(t))
      t.stack = traceback.StackSummary.from_list(
          [f for f in t.stack if not os.path.abspath(f.filename).startswith(_PACKAGE + os.sep)]
          or t.stack)
      todo += [t.__cause__, t.__context__]
  print(redact("".join(report.format())), end="", file=sys.stderr)
