"""The backend's observer (backend/hooks.py) made of OpenTelemetry spans.

Span conventions (docs/tracing.md):
- `pallas_call <kernel>`: one kernel's lowering.
- `lower <primitive>`: one per equation; a child of the span of the
  control-flow equation whose nested jaxpr contains it (the backend lowers
  loop bodies, branches and calls inside that equation's rule, so the
  current-span context nests them), else of `pallas_call`.
- `compile <kernel>` with one `compile <stage>` child per Triton stage,
  created from the backend's timestamps after the compile.

How compile spans relate to `pallas_call`: a compile happens after the
lowering span has ended (on GPU right after it, on CPU whenever the kernel
is first compiled), so `compile <kernel>` is a sibling of `pallas_call`
under whatever span is current (the `pallas-prof` root span that
`tracing()` opens), with a span link to the kernel's `pallas_call` span.
A child that starts after its parent ended draws as a bar hanging outside
its parent in Jaeger and breaks the nesting of Perfetto's slices; as
siblings, both read in time order (lower, then compile) in Jaeger's trace
view and on the kernel's own Perfetto track, and the link says which
lowering a compile belongs to.

This module keeps the spans' bookkeeping (which span is open, whose it is, which
lowering a compile links to); what each span says is span_attributes.py's.
"""
from __future__ import annotations

import collections
import threading
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Status, StatusCode

from ..backend.errors import LoweringError
from ..events import Observer
from . import conventions as cv
from .span_attributes import (advice_attributes, compile_attributes, equation_attributes,
                              failure_attributes, profile_attributes, stage_attributes,
                              wait_attributes)

_KEEP_KERNELS = 4096     # lowerings remembered for linking their compiles
# a compile that waited for the worker longer than this gets a `compile wait` span
_WAIT_WORTH_A_SPAN_NS = 1_000_000

# span id -> the SpanObserver whose open span (or tracing root) it is: with several
# observers at once, each parents its spans under its own, never under another's
_OWNERS: dict[int, Any] = {}


def own_span(span, observer) -> None:
  _OWNERS[span.get_span_context().span_id] = observer


def disown_span(span) -> None:
  _OWNERS.pop(span.get_span_context().span_id, None)


def _set(span, key: str, value: Any) -> None:
  if value is None:
    return
  if isinstance(value, (str, bool, int, float)):
    span.set_attribute(key, value)
  elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
    span.set_attribute(key, list(value))
  else:
    span.set_attribute(key, str(value))


def _short(exc: BaseException) -> str:
  text = str(exc).strip().splitlines()
  return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


class _KernelState:
  """What the observer remembers about one kernel's lowering."""
  __slots__ = ("name", "span", "eqn_spans", "source_key")

  def __init__(self, name: str, span):
    self.name = name
    self.span = span
    self.eqn_spans: dict[int, Any] = {}      # eqn index -> SpanContext
    self.source_key: str | None = None


class _Scope:
  """Starts a span, makes it current, ends it; implements hooks.Span."""
  __slots__ = ("observer", "span", "_token")

  def set(self, key: str, value: Any) -> None:
    _set(self.span, key, value)

  def set_many(self, attributes: dict[str, Any]) -> None:
    for key, value in attributes.items():
      _set(self.span, key, value)

  def _activate(self, span) -> None:
    self.span = span
    self._token = otel_context.attach(trace.set_span_in_context(span))
    own_span(span, self.observer)
    self.observer._open().append(span)

  def _finish(self) -> None:
    otel_context.detach(self._token)
    opened = self.observer._open()
    if opened and opened[-1] is self.span:
      opened.pop()
    disown_span(self.span)
    self.span.end()


class _KernelScope(_Scope):
  __slots__ = ("name", "attributes", "state")

  def __init__(self, observer: "SpanObserver", name: str, attributes: dict[str, Any]):
    self.observer = observer
    self.name = name
    self.attributes = attributes

  def __enter__(self):
    span = self.observer.tracer.start_span(cv.pallas_call(self.name),
                                           context=self.observer._parent())
    self._activate(span)
    self.set_many(self.attributes)
    self.state = _KernelState(self.name, span)
    self.observer._stack().append(self.state)
    return self

  def set(self, key: str, value: Any) -> None:
    _set(self.span, key, value)
    if key == cv.PALLAS_SOURCE_KEY:
      self.state.source_key = value
      self.observer._remember(value, self.state)

  def __exit__(self, exc_type, exc, tb):
    try:
      if exc is not None:
        if isinstance(exc, LoweringError) and exc.eqn is not None \
            and exc.eqn.index not in self.state.eqn_spans:
          self.observer._error_span_for_missing_equation(self.state, exc)
        self.span.set_status(Status(StatusCode.ERROR, _short(exc)))
        self.span.record_exception(exc)
    finally:
      stack = self.observer._stack()
      if stack and stack[-1] is self.state:
        stack.pop()
      self._finish()
    return None


class _EquationScope(_Scope):
  __slots__ = ("eqn",)

  def __init__(self, observer: "SpanObserver", eqn):
    self.observer = observer
    self.eqn = eqn

  def __enter__(self):
    span = self.observer.tracer.start_span(cv.lower(self.eqn.primitive),
                                           context=self.observer._parent(),
                                           attributes=equation_attributes(self.eqn))
    self._activate(span)
    stack = self.observer._stack()
    if stack:
      stack[-1].eqn_spans[self.eqn.index] = span.get_span_context()
    return self

  def __exit__(self, exc_type, exc, tb):
    try:
      if exc is not None:
        failing = getattr(exc, "eqn", None)
        if failing is None or failing is self.eqn or failing.index == self.eqn.index:
          self.span.set_status(Status(StatusCode.ERROR, _short(exc)))
          self.span.record_exception(exc)
        else:
          # the exception comes from an equation nested in this one
          self.span.set_status(Status(StatusCode.ERROR,
                                      f"nested equation [{failing.index}] {failing.primitive} "
                                      "failed"))
          self.span.set_attribute(cv.PALLAS_FAILED_EQN_INDEX, failing.index)
    finally:
      self._finish()
    return None


class SpanObserver(Observer):
  """An events.Observer that records OpenTelemetry spans with `tracer`."""
  enabled = True

  def __init__(self, tracer: trace.Tracer):
    self.tracer = tracer
    self._local = threading.local()
    self._lock = threading.Lock()
    self._lowerings: collections.OrderedDict[str, _KernelState] = collections.OrderedDict()
    self.root = None        # the root span of the tracing() this observer serves, if any

  # events.Observer -----------------------------------------------------------------
  def kernel(self, name: str, attributes: dict[str, Any]) -> _KernelScope:
    return _KernelScope(self, name, attributes)

  def equation(self, eqn) -> _EquationScope:
    return _EquationScope(self, eqn)

  def compiled(self, record) -> None:
    """`compile <kernel>` and its stage spans, from a compile.CompileRecord."""
    lowering = self._lowering(record.source_key)
    error = record.error
    links = []
    if lowering is not None:
      links.append(Link(lowering.span.get_span_context(), {cv.PALLAS_LINK: "lowering"}))
    failed_eqn = getattr(error, "eqn", None)
    if failed_eqn is not None and lowering is not None \
        and failed_eqn.index in lowering.eqn_spans:
      links.append(Link(lowering.eqn_spans[failed_eqn.index],
                        {cv.PALLAS_LINK: "failing equation"}))
    attributes = compile_attributes(record)
    requested = record.requested_ns or record.start_ns
    waited = record.start_ns - requested > _WAIT_WORTH_A_SPAN_NS
    # a compile that waited for the worker (its start-up, or other compiles
    # ahead) starts when it was asked for, with the wait as its first child
    span = self.tracer.start_span(cv.compile_kernel(record.kernel), context=self._parent(),
                                  start_time=requested if waited else record.start_ns,
                                  attributes=attributes, links=links)
    parent = trace.set_span_in_context(span)
    if waited:
      wait = self.tracer.start_span(cv.COMPILE_WAIT, context=parent, start_time=requested,
                                    attributes=wait_attributes(record))
      wait.end(end_time=record.start_ns)
    last_end = record.start_ns
    for stage in record.stages:
      child = self.tracer.start_span(cv.compile_stage(stage.stage), context=parent,
                                     start_time=stage.start_ns,
                                     attributes=stage_attributes(stage, record))
      child.end(end_time=stage.end_ns)
      last_end = max(last_end, stage.end_ns)
    if error is not None:
      self._record_compile_error(span, parent, record, error, last_end)
    span.end(end_time=record.end_ns)

  def profiled(self, kernel_profile, start_ns: int, end_ns: int, device=None) -> None:
    """`profile <kernel>`: the profiler's figures for one kernel, over the time spent on it."""
    span = self.tracer.start_span(cv.profile(kernel_profile.name), context=self._parent(),
                                  start_time=start_ns,
                                  attributes=profile_attributes(kernel_profile, device))
    if kernel_profile.errors:
      span.set_status(Status(StatusCode.ERROR, "; ".join(kernel_profile.errors)[:300]))
    span.end(end_time=max(end_ns, start_ns))

  def tuned(self, record) -> None:
    """`tune <kernel>` with a `tune <kernel> <config>` child per candidate, from a
    tune.records.TuningRecord (linked to the kernel's lowering when it was traced)."""
    lowering = self._lowering(record.source_key)
    links = [Link(lowering.span.get_span_context(), {cv.PALLAS_LINK: "lowering"})] \
        if lowering is not None else []
    attributes = {cv.PALLAS_KERNEL: record.name, cv.TUNE_KIND: record.kind,
                  cv.TUNE_DEFAULT: record.default, cv.TUNE_BEST: record.best,
                  cv.TUNE_FROM_CACHE: bool(record.from_cache),
                  cv.TUNE_CANDIDATES: len(record.candidates)}
    if record.speedup is not None:
      attributes[cv.TUNE_SPEEDUP] = float(record.speedup)
    if record.clock:
      attributes[cv.TUNE_CLOCK] = record.clock
    span = self.tracer.start_span(cv.tune(record.name), context=self._parent(),
                                  start_time=record.start_ns, attributes=attributes, links=links)
    parent = trace.set_span_in_context(span)
    for c in record.candidates if not record.from_cache else ():
      attrs = {cv.PALLAS_KERNEL: record.name, cv.TUNE_CONFIG: c.label,
               cv.TUNE_CHOSEN: bool(c.chosen)}
      if c.seconds is not None:
        attrs[cv.TUNE_MEDIAN_US] = c.seconds * 1e6
      if c.compile_seconds is not None:
        attrs[cv.TUNE_COMPILE_MS] = c.compile_seconds * 1e3
      if c.error:
        attrs[cv.TUNE_ERROR] = c.error[:300]
      start = c.start_ns or record.end_ns
      child = self.tracer.start_span(cv.tune_candidate(record.name, c.label), context=parent,
                                     start_time=start, attributes=attrs)
      if c.error:
        child.set_status(Status(StatusCode.ERROR, c.error[:300]))
      child.end(end_time=max(start, c.end_ns or start))
    span.end(end_time=max(record.end_ns, record.start_ns))

  def advised(self, advice, start_ns: int, end_ns: int) -> None:
    """`advise <kernel>`: its diagnoses and the best-ranked action (advice_attributes)."""
    span = self.tracer.start_span(cv.advise(advice.name), context=self._parent(),
                                  start_time=start_ns, attributes=advice_attributes(advice))
    span.end(end_time=max(end_ns, start_ns))

  # internals -------------------------------------------------------------------------
  def _open(self) -> list:
    """This thread's spans of this observer that are open now, innermost last."""
    opened = getattr(self._local, "open", None)
    if opened is None:
      opened = self._local.open = []
    return opened

  def _parent(self):
    """The context a new span starts in: under this observer's innermost open span;
    else under the current span unless that is another observer's (then under this
    observer's root, or a trace of its own)."""
    opened = self._open()
    if opened:
      return trace.set_span_in_context(opened[-1])
    current = trace.get_current_span()
    owner = _OWNERS.get(current.get_span_context().span_id)
    if owner is None or owner is self:
      return None
    if self.root is not None:
      return trace.set_span_in_context(self.root)
    return otel_context.Context()

  def _stack(self) -> list[_KernelState]:
    stack = getattr(self._local, "stack", None)
    if stack is None:
      stack = self._local.stack = []
    return stack

  def _remember(self, source_key: str, state: _KernelState) -> None:
    with self._lock:
      self._lowerings[source_key] = state
      self._lowerings.move_to_end(source_key)
      while len(self._lowerings) > _KEEP_KERNELS:
        self._lowerings.popitem(last=False)

  def _lowering(self, source_key: str | None) -> _KernelState | None:
    if source_key is None:
      return None
    with self._lock:
      return self._lowerings.get(source_key)

  def _record_compile_error(self, span, parent, record, error, last_end: int) -> None:
    stage = getattr(error, "stage", None)
    done = {s.stage for s in record.stages}
    if stage and stage not in done:
      # the stage that failed: from the last finished stage to the end of the compile
      failed = self.tracer.start_span(cv.compile_stage(stage), context=parent,
                                      start_time=last_end, attributes={cv.TRITON_STAGE: stage})
      failed.set_status(Status(StatusCode.ERROR, _short(error)))
      failed.record_exception(error)
      failed.end(end_time=max(record.end_ns, last_end))
    span.set_attributes(failure_attributes(error))
    eqn = getattr(error, "eqn", None)
    if eqn is not None:
      # the equation's own span ended with the lowering; point at it from here
      span.set_attribute(cv.PALLAS_FAILED_EQN_INDEX, eqn.index)
      span.set_attribute(cv.JAXPR_PRIMITIVE, eqn.primitive)
      if eqn.file is not None:
        span.set_attribute(cv.CODE_FILEPATH, eqn.file)
        span.set_attribute(cv.CODE_LINENO, int(eqn.line))
    span.set_status(Status(StatusCode.ERROR, _short(error)))
    span.record_exception(error)

  def _error_span_for_missing_equation(self, state: _KernelState, error: LoweringError) -> None:
    """An equation that failed before its span opened (e.g. reading an operand)
    still gets its one `lower` span, marked ERROR, under its parent."""
    eqn = error.eqn
    parent_ctx = state.eqn_spans.get(eqn.parent) if eqn.parent is not None else None
    parent_span = trace.NonRecordingSpan(parent_ctx) if parent_ctx is not None else state.span
    span = self.tracer.start_span(cv.lower(eqn.primitive),
                                  context=trace.set_span_in_context(parent_span),
                                  attributes=equation_attributes(eqn))
    state.eqn_spans[eqn.index] = span.get_span_context()
    span.set_status(Status(StatusCode.ERROR, _short(error)))
    span.record_exception(error)
    span.end()
