"""The backend's observer (backend/hooks.py) made of OpenTelemetry spans.

Span conventions (DESIGN.md):
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
"""
from __future__ import annotations

import collections
import threading
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Status, StatusCode

from ..backend.errors import LoweringError

# resource figures of a compile (CompiledKernel.resources()) -> span attributes
_RESOURCE_ATTRIBUTES = {
    "shared_bytes": "triton.shared_bytes", "registers": "triton.registers",
    "spill_stores": "triton.spill_stores", "spill_loads": "triton.spill_loads",
    "stack_bytes": "triton.stack_bytes", "num_warps": "triton.num_warps",
    "num_stages": "triton.num_stages", "target": "triton.target",
}
_KEEP_KERNELS = 4096     # lowerings remembered for linking their compiles


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

  def _finish(self) -> None:
    otel_context.detach(self._token)
    self.span.end()


class _KernelScope(_Scope):
  __slots__ = ("name", "attributes", "state")

  def __init__(self, observer: "SpanObserver", name: str, attributes: dict[str, Any]):
    self.observer = observer
    self.name = name
    self.attributes = attributes

  def __enter__(self):
    span = self.observer.tracer.start_span(f"pallas_call {self.name}")
    self._activate(span)
    self.set_many(self.attributes)
    self.state = _KernelState(self.name, span)
    self.observer._stack().append(self.state)
    return self

  def set(self, key: str, value: Any) -> None:
    _set(self.span, key, value)
    if key == "pallas.source_key":
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
    span = self.observer.tracer.start_span(f"lower {self.eqn.primitive}",
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
          self.span.set_attribute("pallas.failed_eqn_index", failing.index)
    finally:
      self._finish()
    return None


def equation_attributes(eqn) -> dict[str, Any]:
  """The attributes of a `lower <primitive>` span (DESIGN.md, span conventions)."""
  attributes = {
      "jaxpr.eqn": eqn.text, "jaxpr.eqn_index": eqn.index, "jaxpr.eqn_path": eqn.path,
      "jaxpr.primitive": eqn.primitive, "jaxpr.in_avals": list(eqn.in_avals),
      "jaxpr.out_avals": list(eqn.out_avals), "jaxpr.region": eqn.region,
  }
  if eqn.parent is not None:
    attributes["jaxpr.parent_eqn_index"] = eqn.parent
  if eqn.file is not None:
    attributes["code.filepath"] = eqn.file
    attributes["code.lineno"] = int(eqn.line)
    if eqn.function:
      attributes["code.function"] = eqn.function
  return attributes


class SpanObserver:
  """backend.hooks.Observer that records OpenTelemetry spans with `tracer`."""
  enabled = True

  def __init__(self, tracer: trace.Tracer):
    self.tracer = tracer
    self._local = threading.local()
    self._lock = threading.Lock()
    self._lowerings: collections.OrderedDict[str, _KernelState] = collections.OrderedDict()

  # hooks.Observer ------------------------------------------------------------------
  def kernel(self, name: str, attributes: dict[str, Any]) -> _KernelScope:
    return _KernelScope(self, name, attributes)

  def equation(self, eqn) -> _EquationScope:
    return _EquationScope(self, eqn)

  def compiled(self, record) -> None:
    """`compile <kernel>` and its stage spans, from a compile.CompileRecord."""
    lowering = self._lowering(getattr(record, "source_key", None))
    error = record.error
    links = []
    if lowering is not None:
      links.append(Link(lowering.span.get_span_context(), {"pallas.link": "lowering"}))
    failed_eqn = getattr(error, "eqn", None)
    if failed_eqn is not None and lowering is not None \
        and failed_eqn.index in lowering.eqn_spans:
      links.append(Link(lowering.eqn_spans[failed_eqn.index], {"pallas.link": "failing equation"}))
    attributes = compile_attributes(record)
    requested = getattr(record, "requested_ns", None) or record.start_ns
    waited = record.start_ns - requested > _WAIT_WORTH_A_SPAN_NS
    # a compile that waited for the worker (its start-up, or other compiles
    # ahead) starts when it was asked for, with the wait as its first child
    span = self.tracer.start_span(f"compile {record.kernel}",
                                  start_time=requested if waited else record.start_ns,
                                  attributes=attributes, links=links)
    parent = trace.set_span_in_context(span)
    if waited:
      wait = self.tracer.start_span("compile wait", context=parent, start_time=requested,
                                    attributes=_wait_attributes(record))
      wait.end(end_time=record.start_ns)
    last_end = record.start_ns
    for stage in record.stages:
      child = self.tracer.start_span(f"compile {stage.stage}", context=parent,
                                     start_time=stage.start_ns,
                                     attributes=stage_attributes(stage, record))
      child.end(end_time=stage.end_ns)
      last_end = max(last_end, stage.end_ns)
    if error is not None:
      self._record_compile_error(span, parent, record, error, last_end)
    span.end(end_time=record.end_ns)

  # internals -------------------------------------------------------------------------
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
      failed = self.tracer.start_span(f"compile {stage}", context=parent, start_time=last_end,
                                      attributes={"triton.stage": stage})
      failed.set_status(Status(StatusCode.ERROR, _short(error)))
      failed.record_exception(error)
      failed.end(end_time=max(record.end_ns, last_end))
    eqn = getattr(error, "eqn", None)
    if eqn is not None:
      # the equation's own span ended with the lowering; point at it from here
      span.set_attribute("pallas.failed_eqn_index", eqn.index)
      span.set_attribute("jaxpr.primitive", eqn.primitive)
      if eqn.file is not None:
        span.set_attribute("code.filepath", eqn.file)
        span.set_attribute("code.lineno", int(eqn.line))
    span.set_status(Status(StatusCode.ERROR, _short(error)))
    span.record_exception(error)

  def _error_span_for_missing_equation(self, state: _KernelState, error: LoweringError) -> None:
    """An equation that failed before its span opened (e.g. reading an operand)
    still gets its one `lower` span, marked ERROR, under its parent."""
    eqn = error.eqn
    parent_ctx = state.eqn_spans.get(eqn.parent) if eqn.parent is not None else None
    parent_span = trace.NonRecordingSpan(parent_ctx) if parent_ctx is not None else state.span
    span = self.tracer.start_span(f"lower {eqn.primitive}",
                                  context=trace.set_span_in_context(parent_span),
                                  attributes=equation_attributes(eqn))
    state.eqn_spans[eqn.index] = span.get_span_context()
    span.set_status(Status(StatusCode.ERROR, _short(error)))
    span.record_exception(error)
    span.end()


_WAIT_WORTH_A_SPAN_NS = 1_000_000


def _wait_attributes(record) -> dict[str, Any]:
  attrs = record.attributes or {}
  out = {"pallas.kernel": record.kernel}
  for key in ("worker_queue_ms", "worker_startup_ms"):
    if attrs.get(key) is not None:
      out[f"pallas.compile.{key}"] = float(attrs[key])
  return out


def compile_attributes(record) -> dict[str, Any]:
  attributes: dict[str, Any] = {"pallas.kernel": record.kernel, "triton.target": record.target,
                                "triton.cache": record.cache, "triton.compile_key": record.key}
  if getattr(record, "source_key", None):
    attributes["pallas.source_key"] = record.source_key
  attributes.update(resource_attributes(record.attributes))
  attributes.update({k: v for k, v in _wait_attributes(record).items() if k != "pallas.kernel"})
  if record.stages:
    attributes["triton.stages"] = [s.stage for s in record.stages]
  return attributes


def resource_attributes(resources: dict[str, Any]) -> dict[str, Any]:
  out = {}
  for key, value in (resources or {}).items():
    name = _RESOURCE_ATTRIBUTES.get(key)
    if name is not None and value is not None:
      out[name] = value
  stores, loads = resources.get("spill_stores"), resources.get("spill_loads")
  if stores is not None or loads is not None:
    out["triton.spills"] = (stores or 0) + (loads or 0)
  return out


def stage_attributes(stage, record) -> dict[str, Any]:
  attributes = {"triton.stage": stage.stage, "triton.stage_bytes": int(stage.size),
                "triton.duration_ms": (stage.end_ns - stage.start_ns) / 1e6,
                "pallas.kernel": record.kernel}
  attributes.update(resource_attributes(record.attributes))
  link = (record.attributes or {}).get("libdevice_link")
  if stage.stage == "llir" and link:
    # how libdevice was linked (libdevice_link.py): "prepared-new" stages include
    # preparing the library once
    attributes["triton.libdevice_link"] = link
  return attributes
