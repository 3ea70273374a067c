"""Helpers for the instrumentation tests: traced lowering, span trees, independent equation counts."""
from __future__ import annotations

import contextlib
import importlib.util
import os

import jax
from jax import lax
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pallas_prof
from pallas_prof.backend import compat, kernel_registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def load_example(name: str):
  """Imports examples/<name>.py as a module (its jitted function and kernel)."""
  path = os.path.join(EXAMPLES, f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"pallas_prof_example_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@contextlib.contextmanager
def traced(**kwargs):
  """Tracing into an in-memory exporter; yields the exporter (spans after exit)."""
  exporter = InMemorySpanExporter()
  with pallas_prof.tracing(exporter, **kwargs):
    yield exporter


def lower_fresh(fn, *args, **kwargs):
  """Lowers `fn` (a jitted function) again, so our pallas_call rule runs; returns
  the GeneratedKernels it produced."""
  jax.clear_caches()
  kernel_registry.clear()
  fn.lower(*args, **kwargs)
  return [r.generated for r in kernel_registry.kernels()]


def by_id(spans):
  return {s.context.span_id: s for s in spans}


def parent_of(span, index):
  return index.get(span.parent.span_id) if span.parent is not None else None


def lower_spans(spans):
  return [s for s in spans if s.name.startswith("lower ")]


def kernel_spans(spans):
  return [s for s in spans if s.name.startswith("pallas_call ")]


def descendants(span, spans):
  """Spans below `span` in the tree."""
  index = by_id(spans)
  out = []
  for s in spans:
    p = parent_of(s, index)
    while p is not None:
      if p.context.span_id == span.context.span_id:
        out.append(s)
        break
      p = parent_of(p, index)
  return out


def pallas_call_eqns(fn, *args):
  """The pallas_call equations in the jaxpr of fn(*args), found independently of the backend."""
  closed = jax.make_jaxpr(fn)(*args)
  found = []

  def walk(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive is compat.pallas_call_p:
        found.append(eqn)
        continue
      for sub in sub_jaxprs(eqn.params):
        walk(sub)
  walk(closed.jaxpr)
  return found


def sub_jaxprs(params):
  for value in params.values():
    items = value if isinstance(value, (tuple, list)) else (value,)
    for item in items:
      if isinstance(item, compat.JAXPR_TYPES):
        yield compat.open_jaxpr(item)[0]


def _is_counter_increment(eqn, counter) -> bool:
  return (eqn.primitive is lax.add_p and eqn.invars[0] is counter
          and isinstance(eqn.invars[1], compat.Literal) and eqn.invars[1].val == 1)


def count_lowered_equations(jaxpr) -> int:
  """How many equations a lowering of `jaxpr` must visit, counted from the jaxpr alone.

  Every equation counts, nested jaxprs included, except what a fori-style
  loop turns into the Python `for` statement itself: the loop counter's
  `add i 1` (scan and while bodies) and a while loop's `i < n` condition.
  """
  return sum(_count_equation(eqn) for eqn in jaxpr.eqns)


def _count_equation(eqn) -> int:
  total = 1
  params = eqn.params
  if eqn.primitive is lax.while_p:
    cond, body = params["cond_jaxpr"].jaxpr, params["body_jaxpr"].jaxpr
    fori = (not params["cond_nconsts"] and len(cond.eqns) == 1
            and cond.eqns[0].primitive is lax.lt_p)
    counter = body.invars[params["body_nconsts"]] if fori else None
    if not fori:
      total += count_lowered_equations(cond)
    total += sum(_count_equation(e) for e in body.eqns
                 if counter is None or not _is_counter_increment(e, counter))
  elif eqn.primitive is lax.scan_p:
    body = params["jaxpr"].jaxpr
    num_consts, num_carry = compat.scan_layout(params)     # jax 0.11 renamed them
    counter = body.invars[num_consts] if num_carry else None
    total += sum(_count_equation(e) for e in body.eqns
                 if counter is None or not (_is_counter_increment(e, counter)
                                            and e.outvars[0] is body.outvars[0]))
  else:
    for sub in sub_jaxprs(params):
      total += count_lowered_equations(sub)
  return total


def count_kernel_equations(pallas_eqn) -> int:
  """The kernel body plus its BlockSpec index maps (the backend lowers those too)."""
  total = count_lowered_equations(pallas_eqn.params["jaxpr"])
  for bm in pallas_eqn.params["grid_mapping"].block_mappings:
    total += count_lowered_equations(bm.index_map_jaxpr.jaxpr)
  return total


def lines_containing(path: str, needle: str) -> list[int]:
  with open(path) as f:
    return [i for i, line in enumerate(f, start=1) if needle in line]

