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
    observer's `enabled` is true.
By default the observer does nothing; pallas_prof.instrument installs one
that records OpenTelemetry spans. The backend itself never imports
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
