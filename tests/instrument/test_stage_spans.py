"""Stage spans: `compile <kernel>` with five stage children per fresh compile,
their timings and the compiled kernel's resources; tracing changes no byte
of the generated source or the PTX."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest

from pallas_prof.backend.compiling import compile as backend_compile
from testkit.helpers import random_array
from tests.instrument.spans import by_id, kernel_spans, load_example, lower_fresh, traced

STAGES = ["ttir", "ttgir", "llir", "ptx", "cubin"]


def _softmax(rng):
  m = load_example("softmax")
  return m.softmax, [random_array(rng, (8, 100), jnp.float32)]


def _matmul(rng):
  m = load_example("matmul")
  return (functools.partial(m.matmul, bm=32, bn=32, bk=16),
          [random_array(rng, (64, 64), jnp.bfloat16) for _ in range(2)])


def _flash(rng):
  m = load_example("flash_attention")
  return (functools.partial(m.flash_attention, causal=True, block_q=32, block_k=32),
          [random_array(rng, (1, 64, 2, 32), jnp.float16) for _ in range(3)])


def _fresh_compile(gk):
  backend_compile.clear_memory_cache()
  return backend_compile.compile_kernel(gk, use_disk_cache=False)




@pytest.mark.parametrize("case", [_softmax, _matmul, _flash], ids=["softmax", "matmul", "flash"])
def test_stage_spans_of_a_fresh_compile(case, rng):
  fn, args = case(rng)
  with traced() as exporter:
    (gk,) = lower_fresh(jax.jit(fn), *args)
    ck = _fresh_compile(gk)
  spans = exporter.get_finished_spans()
  index = by_id(spans)
  # the fresh compile's span: the last (on a GPU the lowering compiled to PTX
  # once already, for jaxlib)
  compile_spans = sorted((s for s in spans if s.name == f"compile {gk.name}"),
                         key=lambda s: s.start_time)
  assert compile_spans and (len(compile_spans) == 1 or jax.default_backend() != "cpu")
  compile_span = compile_spans[-1]
  children = sorted((s for s in spans if s.parent is not None
                     and s.parent.span_id == compile_span.context.span_id),
                    key=lambda s: s.start_time)
  # a compile that had to wait for the worker (this test process's first, say)
  # starts with that wait
  waits = [s for s in children if s.name == "compile wait"]
  stages = [s for s in children if s.name != "compile wait"]
  assert children[:len(waits)] == waits and len(waits) <= 1
  assert [s.name for s in stages] == [f"compile {st}" for st in STAGES]
  assert [s.attributes["triton.stage"] for s in stages] == STAGES
  # durations: the stages add up to the compile (within 10%), one after the
  # other, inside it
  total = compile_span.end_time - compile_span.start_time
  if waits:
    (wait,) = waits
    assert wait.start_time == compile_span.start_time and wait.end_time == stages[0].start_time
    assert (wait.end_time - wait.start_time) == pytest.approx(ck.worker_wait_seconds * 1e9, abs=1e3)
    total -= wait.end_time - wait.start_time
  assert total == pytest.approx(ck.compile_seconds * 1e9, rel=1e-6)
  assert sum(s.end_time - s.start_time for s in stages) == pytest.approx(total, rel=0.10)
  for a, b in zip(stages, stages[1:]):
    assert a.end_time == b.start_time
  assert stages[0].start_time >= compile_span.start_time
  assert stages[-1].end_time <= compile_span.end_time
  for s in stages:
    stage = s.attributes["triton.stage"]
    assert s.end_time - s.start_time == pytest.approx(ck.stage_seconds[stage] * 1e9, rel=1e-6)
    assert s.attributes["triton.stage_bytes"] == len(ck.asm[stage]) > 0
  # resources: exactly what Triton's metadata and ptxas reported
  attrs = compile_span.attributes
  assert attrs["triton.shared_bytes"] == ck.metadata["shared"]
  assert attrs["triton.num_warps"] == ck.metadata["num_warps"] == gk.num_warps
  assert attrs["triton.num_stages"] == ck.metadata["num_stages"] == gk.num_stages
  assert attrs["triton.target"] == "cuda:90"
  assert attrs["triton.registers"] == ck.registers and ck.registers > 0
  assert attrs["triton.spills"] == ck.spills
  assert attrs["triton.stack_bytes"] == ck.stack_bytes
  assert attrs["triton.cache"] == "miss"
  assert all(s.attributes["triton.shared_bytes"] == ck.metadata["shared"] for s in stages)
  # the llir stage says how libdevice was linked, where the kernel calls it
  llir = stages[STAGES.index("llir")]
  calls_libdevice = "libdevice." in gk.source.split("@triton.jit", 1)[1]
  assert ("triton.libdevice_link" in llir.attributes) == calls_libdevice
  if calls_libdevice:
    assert llir.attributes["triton.libdevice_link"].startswith("prepared")
  # related to the kernel's lowering: a sibling of pallas_call with a link to it
  (kernel,) = kernel_spans(spans)
  (link,) = compile_span.links
  assert link.context.span_id == kernel.context.span_id
  assert compile_span.parent.span_id == kernel.parent.span_id
  assert index[kernel.parent.span_id].name == "pallas-prof"
  assert compile_span.start_time >= kernel.end_time


def test_cache_hit_has_no_stage_spans(rng):
  fn, args = _softmax(rng)
  (gk,) = lower_fresh(jax.jit(fn), *args)
  ck = _fresh_compile(gk)
  with traced() as exporter:
    again = backend_compile.compile_kernel(gk, use_disk_cache=False)
  assert again.cache == "memory"
  spans = exporter.get_finished_spans()
  (compile_span,) = [s for s in spans if s.name == f"compile {gk.name}"]
  assert compile_span.attributes["triton.cache"] == "memory"
  assert compile_span.attributes["triton.shared_bytes"] == ck.shared_bytes
  assert not [s for s in spans if s.attributes.get("triton.stage")]


def test_tracing_changes_no_byte(rng):
  """Generated source, PTX and cubin are identical with tracing off and on."""
  fn, args = _flash(rng)
  (off_gk,) = lower_fresh(jax.jit(fn), *args)
  off = _fresh_compile(off_gk)
  with traced() as exporter:
    (on_gk,) = lower_fresh(jax.jit(fn), *args)
    on = _fresh_compile(on_gk)
  assert on.cache == off.cache == "miss"
  spans = exporter.get_finished_spans()
  assert len([s for s in spans if s.name.startswith("lower ")]) == len(on_gk.eqns) > 0
  assert len([s for s in spans if s.attributes.get("triton.stage")]) == 5
  assert on_gk.source == off_gk.source
  assert on.asm["ttir"] == off.asm["ttir"]
  assert on.asm["ptx"] == off.asm["ptx"]
  assert on.asm["cubin"] == off.asm["cubin"]
