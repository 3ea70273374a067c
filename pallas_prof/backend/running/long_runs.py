"""A launch under Triton's interpreter that will take long says so, early.

The interpreter runs a grid's programs one after another, each a walk of the kernel
in Python and numpy: a grid of 2**31 - 1 programs ran for days without a word. The
first programs of a launch are timed as they run (nothing is run twice: a program that
accumulates into its output must run once); once SAMPLE_PROGRAMS have run, or
SAMPLE_SECONDS have passed, their pace times the grid's programs is the launch's
estimate, and an estimate over PALLAS_PROF_INTERPRETER_WARN_S gives one warning per
kernel, naming the kernel, its grid, the estimate and what to do instead. A small grid
pays a counter per program.

A launch also ends before its next program once the process is exiting. It runs in a
thread of XLA's (a host callback), and at exit JAX waits for every computation in flight
(its atexit clean-up): a run stopped by a signal wrote its report, then sat for as long as
the launch had left (23 minutes, seen on the ground-truth corpus under `timeout`).
"""
from __future__ import annotations

import atexit
import contextlib
import math
import threading
import time
import warnings

from ... import settings

SAMPLE_PROGRAMS = 16       # programs timed before the estimate, unless SAMPLE_SECONDS pass first
SAMPLE_SECONDS = 1.0


class LongInterpreterRunWarning(UserWarning):
  """A launch under Triton's CPU interpreter is estimated to take long."""


_warned: set[str] = set()      # kernels already warned about, by their source's key
_exiting = threading.Event()   # the process is exiting: launches end before their next program
_exit_hook = []                # [True] once stop_at_exit is registered


class LaunchAbandoned(RuntimeError):
  """An interpreter launch ended before its next program: the process is exiting."""


def _stop_launches() -> None:
  _exiting.set()


def abandoned(error: BaseException) -> bool:
  """Whether `error` (as the interpreter passed it on) is a launch ended at exit."""
  while error is not None:
    if isinstance(error, LaunchAbandoned):
      return True
    error = error.__cause__ or error.__context__
  return False


def _stop_at_exit() -> None:
  """Registers _stop_launches with atexit, once, at the first launch: JAX (imported by then)
  registered its clean-up before, and atexit runs the later registration first."""
  if not _exit_hook:
    _exit_hook.append(True)
    atexit.register(_stop_launches)


class Pace:
  """Times the first programs of a launch of `total` programs; `tick()` at each program's
  start. Calls `on_long(seconds per program, programs timed, estimate)` at most once."""

  def __init__(self, total: int, budget_s: float, on_long, clock=time.perf_counter):
    self.total, self.budget_s, self.on_long, self.clock = total, budget_s, on_long, clock
    self.started = 0
    self.first_started: float | None = None
    self.decided = False

  def tick(self) -> None:
    self.started += 1
    if self.decided:
      return
    now = self.clock()
    if self.started <= 2:
      # timed from the second program: the first also pays the launch's one-time costs
      self.first_started = now
      return
    timed = self.started - 2                 # programs finished since
    elapsed = now - self.first_started
    if timed < SAMPLE_PROGRAMS and elapsed < SAMPLE_SECONDS:
      return
    self.decided = True
    per_program = elapsed / timed
    estimate = per_program * self.total
    if estimate > self.budget_s:
      self.on_long(per_program, timed, estimate)


@contextlib.contextmanager
def watched(gk):
  """While the interpreter launches `gk`: its pace measured, a long run said."""
  total = math.prod(gk.launch_grid)
  if total <= 1:
    yield
    return
  # lazy: keeps triton out of this module's import (start-up time)
  from triton.runtime import interpreter
  builder = interpreter.interpreter_builder
  budget = settings.value("PALLAS_PROF_INTERPRETER_WARN_S")
  pace = Pace(total, budget, lambda *a: warn_long(gk, total, *a))
  original = builder.set_grid_idx          # the interpreter calls it before each program
  own = vars(builder).get("set_grid_idx")  # an instance's own, where something set one
  _stop_at_exit()

  def set_grid_idx(x, y, z):
    if _exiting.is_set():
      raise LaunchAbandoned(f"kernel `{gk.name}`: the process is exiting; its launch under "
                            f"Triton's interpreter ended after {pace.started} of {total:,} "
                            "programs")
    pace.tick()
    return original(x, y, z)

  builder.set_grid_idx = set_grid_idx
  try:
    yield
  finally:
    if own is None:
      del builder.set_grid_idx            # the class's method again
    else:
      builder.set_grid_idx = own


def warn_long(gk, total: int, per_program: float, timed: int, estimate: float) -> None:
  if gk.key in _warned:
    return
  _warned.add(gk.key)
  file, line = _kernel_site(gk.source_info)
  warnings.warn_explicit(
      f"kernel `{gk.name}`: its grid {tuple(gk.grid)} is {total:,} programs, which Triton's "
      f"interpreter runs one after another on the CPU, at about {_duration(per_program)} "
      f"each (the first {timed} timed): this launch will take about {_duration(estimate)}. "
      "A CPU run is for checking a kernel: run it on a smaller grid or smaller shapes there, "
      "or on a GPU (PALLAS_PROF_INTERPRETER_WARN_S sets when this is said)",
      LongInterpreterRunWarning, file, line)


def _kernel_site(source_info: str) -> tuple[str, int]:
  """(file, line) of "kernel at file:line" (JAX's words for the kernel function)."""
  _, _, where = (source_info or "").rpartition(" at ")
  path, _, line = where.rpartition(":")
  return (path, int(line)) if path and line.isdigit() else ("<kernel>", 0)


def _duration(seconds: float) -> str:
  for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0), ("s", 1.0)):
    if seconds >= size:
      return f"{seconds / size:.3g} {unit}"
  if seconds >= 1e-3:
    return f"{seconds * 1e3:.3g} ms"
  return f"{seconds * 1e6:.3g} us"
