"""What pallas-prof tells whoever watches it: one typed method per event.

An observer subclasses `Observer` and overrides the events it wants; the rest
do nothing (the OpenTelemetry SDK's SpanProcessor pattern), so an event added
later reaches old observers as a no-op. pallas_prof.instrument's SpanObserver
turns them into OpenTelemetry spans; a test or a progress bar can watch the same
way. Observers are installed through backend/hooks.py (`add_observer`); several
at once get each event in the order they were added (`FanOut`).

  - `kernel(name, attributes)`: a span around one kernel's lowering; the
    lowering sets "pallas.source_key" (the generated source's hash) on it,
    which later compile records carry as `source_key`;
  - `equation(eqn)`: a span around each equation's rule (nested jaxprs are
    lowered inside their control-flow equation's one); the dispatcher sets
    "pallas.generated_lines" on it;
  - `compiled(record)`: after each compile or cache hit, with the stage
    timestamps, resource figures and any error;
  - `profiled(kernel_profile, start_ns, end_ns, device)`: the profiler (profile())
    after it profiled a kernel, with the interval it spent on it and the GPU;
  - `tuned(record)`: after a kernel's (or a function's) tuning, or its cached
    choice, with every candidate's interval, time and error;
  - `advised(advice, start_ns, end_ns)`: the advice for one kernel.
The last four are only sent to an observer whose `enabled` is true. Neither
the backend nor the generated code depends on whether anyone is watching.
"""
from __future__ import annotations

from typing import Any, Protocol

# the payloads live below this module (event_payloads.py says why): nothing here
# imports the backend, tune/, profiler/ or advice/ that send them
from .event_payloads import (AdvisedKernel, CompileRecord, Device, Equation, ProfiledKernel,
                             TuningRecord)


class Span(Protocol):
  def set(self, key: str, value: Any) -> None: ...
  def set_many(self, attributes: dict[str, Any]) -> None: ...
  def __enter__(self) -> "Span": ...
  def __exit__(self, *exc) -> bool | None: ...


class NullSpan:
  """A span that records nothing."""
  __slots__ = ()

  def set(self, key: str, value: Any) -> None:
    pass

  def set_many(self, attributes: dict[str, Any]) -> None:
    pass

  def __enter__(self) -> "NullSpan":
    return self

  def __exit__(self, *exc) -> None:
    return None


NULL_SPAN = NullSpan()

# The attribute keys the backend sets on the spans it opens (kernel(), equation()) and hands
# observers in CompileRecord.attributes: defined here, the seam both sides import, since
# backend/ may not import instrument/; instrument/conventions.py re-exports them.
PALLAS_KERNEL = "pallas.kernel"                  # kernel name (profile spans: its label)
PALLAS_GRID = "pallas.grid"
PALLAS_NUM_WARPS = "pallas.num_warps"
PALLAS_NUM_STAGES = "pallas.num_stages"
PALLAS_SOURCE = "pallas.source"                  # the user's pallas_call, file:line
PALLAS_SOURCE_KEY = "pallas.source_key"          # hash of the generated source
PALLAS_LOWERING_GC_MS = "pallas.lowering.gc_ms"  # of the lowering: the garbage collector
PALLAS_GENERATED_LINES = "pallas.generated_lines"
BACKEND_KEYS = frozenset({PALLAS_KERNEL, PALLAS_GRID, PALLAS_NUM_WARPS, PALLAS_NUM_STAGES,
                          PALLAS_SOURCE, PALLAS_SOURCE_KEY, PALLAS_LOWERING_GC_MS,
                          PALLAS_GENERATED_LINES})

# Where a run happened: the spans' resource attributes (instrument/tracer.py) and the keys of
# report.json's "origin" (cli/processes.py writes it, cli/summary.py reads it: they read saved
# runs, and importing instrument/ would load OpenTelemetry and JAX). Defined here for them;
# instrument/conventions.py re-exports them.
PROCESS_PID = "process.pid"                      # OpenTelemetry's resource conventions
HOST_NAME = "host.name"
JAX_PROCESS_INDEX = "jax.process_index"
JAX_PROCESS_COUNT = "jax.process_count"


class Observer:
  """Watches nothing, costs (almost) nothing: override the events you want."""
  enabled: bool = False

  def kernel(self, name: str, attributes: dict[str, Any]) -> Span:
    """A span around the lowering of kernel `name`."""
    return NULL_SPAN

  def equation(self, eqn: Equation) -> Span:
    """A span around one equation's lowering rule."""
    return NULL_SPAN

  def compiled(self, record: CompileRecord) -> None:
    """Once per compile (or cache hit)."""

  def profiled(self, kernel_profile: ProfiledKernel, start_ns: int, end_ns: int,
               device: Device | None) -> None:
    """Once per kernel profile() profiled, with the interval spent on it and the GPU."""

  def tuned(self, record: TuningRecord) -> None:
    """Once per tuning (pallas_prof/tune/records.py), or cached choice."""

  def advised(self, advice: AdvisedKernel, start_ns: int, end_ns: int) -> None:
    """Once per kernel advised (pallas_prof/advice)."""


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


class FanOut(Observer):
  """Observers watching at once: each event goes to every one, in order, as the
  OpenTelemetry SDK's SynchronousMultiSpanProcessor does with span processors."""

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
    for o in self._enabled():
      o.compiled(record)

  def profiled(self, kernel_profile, start_ns, end_ns, device):
    for o in self._enabled():
      o.profiled(kernel_profile, start_ns, end_ns, device)

  def tuned(self, record):
    for o in self._enabled():
      o.tuned(record)

  def advised(self, advice, start_ns, end_ns):
    for o in self._enabled():
      o.advised(advice, start_ns, end_ns)

  def _enabled(self):
    return [o for o in self.observers if o.enabled]
