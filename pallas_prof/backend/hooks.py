"""The backend's two seams to what lies outside it: who watches, and who picks a compile.

Watching: `observer()` is what the backend (and the profiler, the tuner, the
advice) send their events to, a pallas_prof.events.Observer; by default it
does nothing, pallas_prof.instrument installs one that records OpenTelemetry
spans. Several may watch at once (`add_observer`): `observer()` is then an
events.FanOut that hands every event to each, in the order they were added.
The backend itself never imports OpenTelemetry.

Picking: `selector()` chooses which compile of a kernel the GPU path
launches (a Selector). The backend's own launches the kernel's compile;
importing pallas_prof installs the tuner's (pallas_prof/tune/params.py:
CompilerParams(autotune=...), tuning files), which backend/ never imports.
"""
from __future__ import annotations

from ..events import NULL_SPAN, FanOut, Observer, Span  # noqa: F401 - the seam's names

class NullObserver(Observer):
  """Nobody watching: what observer() is when no observer was added."""


class Selector:
  """Which CompiledKernel of a kernel the GPU path launches (pallas_call_rule.py asks)."""

  def prepare(self) -> None:
    """Imports what `select` needs; the warm-up thread calls it, off the first
    lowering's path."""

  def select(self, ck, gk, compiler_params, relower, target, *, compile_fn, aliases,
             zeroed):
    """`ck`: the kernel's compile; `gk`: its GeneratedKernel; `relower(options)` lowers
    the call with other LoweringOptions, `compile_fn(gk)` compiles one as the GPU path
    does. Returns the CompiledKernel to launch."""
    return ck


_observers: tuple = ()
_observer: Observer = NullObserver()
_selector: Selector = Selector()


def observer() -> Observer:
  return _observer


def _install(observers: tuple) -> None:
  global _observers, _observer
  for obs in observers:
    if not isinstance(obs, Observer):
      raise TypeError(f"{type(obs).__name__} is not an observer: subclass "
                      "pallas_prof.events.Observer and override the events it watches")
  _observers = observers
  if not observers:
    _observer = NullObserver()
  elif len(observers) == 1:
    _observer = observers[0]
  else:
    _observer = FanOut(observers)


def add_observer(obs: Observer) -> None:
  """`obs` watches too, after those already watching."""
  _install(_observers + (obs,))


def remove_observer(obs: Observer) -> None:
  """`obs` stops watching (nothing if it was not)."""
  _install(tuple(o for o in _observers if o is not obs))


def observers() -> tuple:
  """Everyone watching, in the order they were added."""
  return _observers


def set_observer(obs: Observer | None) -> Observer:
  """Makes `obs` the only observer (None: nobody); returns what observer() was."""
  previous = _observer
  _install(() if obs is None else (obs,))
  return previous


def selector() -> Selector:
  return _selector


def set_selector(chooser: Selector) -> Selector:
  """Makes `chooser` pick the compiles the GPU path launches; returns the previous one."""
  global _selector
  previous, _selector = _selector, chooser
  return previous
