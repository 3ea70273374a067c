"""The one seam between the backend and whoever watches it.

The backend calls `observer()` at a few places:
  - `kernel(name, attributes)`: a context manager around one kernel's
    lowering; the lowering sets "pallas.source_key" (the generated source's
    hash) on it, which later compile records carry as `source_key`;
  - `equation(EqnInfo)`: a context manager around each equation's rule
    (nested jaxprs are lowered inside their control-flow equation's one);
    the dispatcher sets "pallas.generated_lines" on it;
  - `compiled(CompileRecord)`: once after each compile or cache hit, with the
    stage timestamps, resource figures and any error; only called when the
    observer's `enabled` is true;
  - `profiled(KernelProfile, start_ns, end_ns, device)`: the profiler (profile())
    after it profiled a kernel, with the interval it spent on it and the GPU
    (DeviceInfo, None without one); only when enabled.
  - `tuned(TuningRecord)`: once after a kernel's (or a function's) tuning, or
    its cached choice, with every candidate's interval, time and error
    (pallas_prof/tune/records.py); only when enabled.
  - `advised(KernelAdvice, start_ns, end_ns)`: the advice (pallas_prof/advice) for one
    kernel, over the time spent on it; only when enabled.
By default the observer does nothing; pallas_prof.instrument installs one
that records OpenTelemetry spans. Several observers may watch at once
(`add_observer`): `observer()` is then a FanOut that hands every call to each,
in the order they were added, as the OpenTelemetry SDK's
SynchronousMultiSpanProcessor does with span processors. The backend itself never imports
OpenTelemetry, and the generated code does not depend on whether anyone is
watching.
"""
from __future__ import annotations

from typing import Any, Protocol


class Span(Protocol):
  def set(self, key: str, value: Any) -> None: ...
  def set_many(self, attributes: dict[str, Any]) -> None: ...
  def __enter__(self) -> "Span": ...
  def __exit__(self, *exc) -> bool | None: ...


class Observer(Protocol):
  enabled: bool

  def kernel(self, name: str, attributes: dict[str, Any]) -> Span: ...
  def equation(self, eqn) -> Span: ...
  def compiled(self, record) -> None: ...
  def profiled(self, kernel_profile, start_ns: int, end_ns: int, device) -> None: ...
  def tuned(self, record) -> None: ...
  def advised(self, advice, start_ns: int, end_ns: int) -> None: ...


class _NullSpan:
  __slots__ = ()

  def set(self, key, value):
    pass

  def set_many(self, attributes):
    pass

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    return None


NULL_SPAN = _NullSpan()


class NullObserver:
  """Watches nothing, costs (almost) nothing."""
  enabled = False

  def kernel(self, name, attributes):
    return NULL_SPAN

  def equation(self, eqn):
    return NULL_SPAN

  def compiled(self, record):
    """Called once per compile (or cache hit) with a compile.CompileRecord."""

  def profiled(self, kernel_profile, start_ns, end_ns, device):
    """Called once per kernel profile() profiled (a profiler.schema.KernelProfile)."""

  def tuned(self, record):
    """Called once per tuning (a tune.records.TuningRecord)."""

  def advised(self, advice, start_ns, end_ns):
    """Called once per kernel advised (an advice.schema.KernelAdvice)."""


class _Spans:
  """Several observers' spans of one event, entered in order and left in reverse."""
  __slots__ = ("spans",)

  def __init__(self, spans):
    self.spans = spans

  def set(self, key, value):
    for span in self.spans:
      span.set(key, value)

  def set_many(self, attributes):
    for span in self.spans:
      span.set_many(attributes)

  def __enter__(self):
    for i, span in enumerate(self.spans):
      try:
        span.__enter__()
      except BaseException as e:
        for entered in reversed(self.spans[:i]):
          entered.__exit__(type(e), e, e.__traceback__)
        raise
    return self

  def __exit__(self, *exc):
    for span in reversed(self.spans):
      span.__exit__(*exc)
    return None


class FanOut:
  """Observers watching at once: each call goes to every one, in order."""

  def __init__(self, observers):
    self.observers = tuple(observers)

  @property
  def enabled(self) -> bool:
    return any(o.enabled for o in self.observers)

  def kernel(self, name, attributes):
    return _Spans([o.kernel(name, attributes) for o in self.observers])

  def equation(self, eqn):
    return _Spans([o.equation(eqn) for o in self.observers])

  def compiled(self, record):
    for o in self.observers:
      if o.enabled:
        o.compiled(record)

  def profiled(self, kernel_profile, start_ns, end_ns, device):
    for o in self.observers:
      if o.enabled:
        o.profiled(kernel_profile, start_ns, end_ns, device)

  def tuned(self, record):
    for o in self.observers:
      if o.enabled and hasattr(o, "tuned"):     # observers written before tuning had spans
        o.tuned(record)

  def advised(self, advice, start_ns, end_ns):
    for o in self.observers:
      if o.enabled and hasattr(o, "advised"):   # observers written before the advice
        o.advised(advice, start_ns, end_ns)


_observers: tuple = ()
_observer: Observer = NullObserver()


def observer() -> Observer:
  return _observer


def _install(observers: tuple) -> None:
  global _observers, _observer
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
