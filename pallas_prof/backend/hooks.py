"""The one seam between the backend and whoever watches it.

The backend calls `observer()` at a few places (a kernel's lowering, each
equation, a compile and each compiler stage). By default the observer does
nothing; pallas_prof.instrument installs one that opens OpenTelemetry spans.
The backend itself never imports OpenTelemetry, and the generated code does
not depend on whether anyone is watching.
"""
from __future__ import annotations

from typing import Any, Protocol


class Span(Protocol):
  def set(self, key: str, value: Any) -> None: ...
  def set_many(self, attributes: dict[str, Any]) -> None: ...
  def __enter__(self) -> "Span": ...
  def __exit__(self, *exc) -> bool | None: ...


class Observer(Protocol):
  def kernel(self, name: str, attributes: dict[str, Any]) -> Span: ...
  def equation(self, eqn) -> Span: ...
  def compiled(self, record) -> None: ...


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


_observer: Observer = NullObserver()


def observer() -> Observer:
  return _observer


def set_observer(obs: Observer | None) -> Observer:
  """Installs `obs` (None: the null observer); returns the previous one."""
  global _observer
  previous = _observer
  _observer = obs if obs is not None else NullObserver()
  return previous
