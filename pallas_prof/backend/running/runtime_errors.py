"""KernelRuntimeError: a kernel that lowered and compiled, then failed while it ran.

    try:
      y = f(x)                                 # a jitted function calling pl.pallas_call
    except pallas_prof.BoundsError as e:       # a read or write outside a ref
      print(e.kernel, e.location, e.hint)
    except pallas_prof.KernelRuntimeError as e:  # any other failure while the kernel ran
      ...

Where they come from: on the CPU the kernel runs under Triton's interpreter inside
jax.pure_callback (launch.py: an access outside every buffer it was given, or any
other failure there); in the bounds-checked mode a jax.debug.callback after the kernel
reads its flag buffer on either platform (bounds_errors.py). Both are host callbacks, and
jaxlib hands the caller an exception raised in one as a JaxRuntimeError that carries
only its text ("CpuCallback error calling callback: Traceback ...": the whole
traceback, under a logged copy of the same traceback).

So each error is remembered as it is raised (`remember`), and the executions that
JAX runs from Python pass through `_execute` (compat.wrap_python_executions): a
JaxRuntimeError whose text holds a remembered error is raised as that error, once,
without the callback's frames; JAX's logged copy is left out (a logging filter).
Once the backend lowered a kernel with a host callback, programs with host callbacks
stay on that Python path (JAX's C++ fast path would raise the JaxRuntimeError as it
comes): their dispatch is JAX's slower Python one, beside a kernel that runs under
Triton's interpreter or is being bounds-checked. A program with one of pallas-prof's callbacks
is waited for before its call returns, so that the failure is raised by the call that
ran the kernel (on a GPU the launch is otherwise asynchronous and the error would
surface later, at whatever first reads a result, still as JaxRuntimeError).

PALLAS_PROF_TRACEBACK=1 keeps everything: the callback's frames chained to the error.
"""
from __future__ import annotations

import collections
import logging
import threading
import warnings

import jax

from ... import settings
from ..errors import KernelError, in_chain
from .. import compat

TRACEBACK_ENV = "PALLAS_PROF_TRACEBACK"
_REMEMBERED = 32                      # recent errors kept to recognise in a JaxRuntimeError


class KernelRuntimeError(KernelError, RuntimeError):
  """A kernel failed while it ran (after lowering and compiling succeeded).

  A KernelError, so that the same report renders it (instrument/errors.py): reason,
  hint, kernel, eqn (the equation whose line failed, when known), jaxpr_text, details
  (label -> text), cause, ref_names; `where` says what ran it ("Triton's interpreter on
  the CPU", "the GPU")."""

  __module__ = "pallas_prof"          # as the user names it: pallas_prof.KernelRuntimeError
  at_run_time = True

  def __init__(self, reason: str, *, kernel: str | None = None, eqn=None,
               hint: str | None = None, details: dict | None = None,
               jaxpr_text: str | None = None, cause: BaseException | None = None,
               where: str | None = None, message: str | None = None, ref_names=()):
    self.where = where
    self.jax_error = None             # the JaxRuntimeError it arrived in, when it did
    super().__init__(reason, kernel=kernel, eqn=eqn, hint=hint, details=details,
                     jaxpr_text=jaxpr_text, cause=cause, stage="run", message=message,
                     ref_names=ref_names)

  def _message(self) -> str:
    parts = [self.reason]
    if self.eqn is not None:
      text = self.named(_equation_text(self.eqn))
      if text and "equation: " not in self.reason:
        parts.append(f"  equation: [{self.eqn.index}] {text}")
      if self.location and self.location not in self.reason:
        fn = f" (in {self.eqn.function})" if self.eqn.function else ""
        parts.append(f"  at {self.location}{fn}")
    for key, value in self.details.items():
      parts.append(f"  {key}: {value}")
    if self.hint:
      parts.append(f"  hint: {self.hint}")
    return "\n".join(parts)


def _equation_text(eqn) -> str | None:
  try:
    return str(eqn.text) or None
  except Exception:  # noqa: BLE001 - a lazily described equation that cannot say itself
    return None


# --- recognising them in the JaxRuntimeError jaxlib raises ------------------------------

_recent: collections.deque = collections.deque(maxlen=_REMEMBERED)
_lock = threading.Lock()
_state = {"callbacks": False, "installed": False, "raised": 0}


def remember(error: KernelRuntimeError) -> KernelRuntimeError:
  """Called as a callback raises `error` (it may run on another thread than the caller)."""
  with _lock:
    _recent.append((_state["raised"], error))
    _state["raised"] += 1
  return error


def raised() -> int:
  """How many kernel failures were raised in this process so far."""
  return _state["raised"]


def recent(since: int = 0) -> list[KernelRuntimeError]:
  """The remembered failures (the last few), those raised after the first `since` only."""
  with _lock:
    return [e for n, e in _recent if n >= since]


def recognise(error: BaseException | None) -> KernelRuntimeError | None:
  """The KernelRuntimeError behind `error`: itself, one it was raised from, or the
  remembered one whose text a JaxRuntimeError carries (the newest that fits)."""
  found = in_chain(error, KernelRuntimeError)
  if found is not None or error is None:
    return found
  text = str(error)
  for candidate in reversed(recent()):
    first = str(candidate).splitlines()[0]
    if first and first in text:
      return candidate
  return None


def full_traceback() -> bool:
  return settings.value(TRACEBACK_ENV)


def _as_raised(error: KernelRuntimeError, jax_error: BaseException) -> KernelRuntimeError:
  error.jax_error = jax_error
  if not full_traceback():
    # the callback's frames (Triton's interpreter, jaxlib's plumbing) are not the user's
    error.__traceback__ = None
    error.__cause__ = None
    error.__suppress_context__ = True
  return error


def callbacks_lowered() -> None:
  """The backend lowered a kernel that runs in (or is checked by) a host callback."""
  _state["callbacks"] = True


def _execute(run, has_host_callbacks: bool):
  """One execution of a compiled program (compat.wrap_python_executions)."""
  try:
    out = run()
    if has_host_callbacks and _state["callbacks"]:
      jax.block_until_ready(out)
  except jax.errors.JaxRuntimeError as e:
    error = recognise(e)
    if error is None:
      raise
    compat.forget_failed_tokens()      # else JAX's exit prints it again
    raise _as_raised(error, e) from (e if full_traceback() else None)
  return out


class _DropOurCallbackTracebacks(logging.Filter):
  """JAX logs every failing callback with its traceback before jaxlib raises it; the
  error is raised to the caller whole, so that copy is left out (kept with
  PALLAS_PROF_TRACEBACK=1). So is the copy of a stop (Ctrl-C, SIGTERM: KeyboardInterrupt
  or SystemExit) that landed in a kernel's callback: the run says it was stopped."""

  def filter(self, record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
      return full_traceback()
    return full_traceback() or not isinstance(exc, KernelRuntimeError) and \
        not isinstance(getattr(exc, "__cause__", None), KernelRuntimeError)


def install() -> None:
  """Once per process, from the backend's registration."""
  if _state["installed"]:
    return
  if not compat.wrap_python_executions(_execute,
                               keep_in_python=lambda: _state["callbacks"]):
    warnings.warn("pallas-prof does not know how this JAX runs compiled programs: a kernel "
                  "that fails while running reaches you as JAX's JaxRuntimeError, not as "
                  "pallas_prof.KernelRuntimeError/BoundsError", RuntimeWarning, stacklevel=2)
  for name in compat.CALLBACK_LOGGERS:
    logging.getLogger(name).addFilter(_DropOurCallbackTracebacks())
  _state["installed"] = True
