"""Rule spans: one `lower <primitive>` span per lowered equation, nested right,
pointing at the exact line of the user's kernel that produced the equation."""
from __future__ import annotations

import functools
import inspect
import os

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from pallas_prof.backend import hooks
from testkit.helpers import random_array
from testkit.jax_ops import gpu_op
from tests.instrument.spans import (EXAMPLES, by_id, count_kernel_equations, kernel_spans,
                                    lines_containing, load_example, lower_fresh, lower_spans,
                                    pallas_call_eqns, parent_of, traced)

KERNELS = {"vector_add": "add_kernel", "softmax": "softmax_kernel",
           "layer_norm": "layer_norm_kernel", "matmul": "matmul_kernel",
           "flash_attention": "flash_kernel"}
CONTROL_FLOW = {"scan", "while", "cond", "jit", "pjit", "closed_call", "custom_jvp_call",
                "custom_vjp_call", "remat2"}


@pytest.fixture
def installed():
  pallas_prof.install()
  yield
  pallas_prof.uninstall()


def _example_case(name, rng):
  m = load_example(name)
  f32 = jnp.float32
  if name == "vector_add":
    args = [random_array(rng, (3000,), f32) for _ in range(2)]
    return m.add, args, {}, m
  if name == "softmax":
    return m.softmax, [random_array(rng, (8, 100), f32)], {}, m
  if name == "layer_norm":
    return m.layer_norm, [random_array(rng, (4, 96), f32), random_array(rng, (96,), f32),
                          random_array(rng, (96,), f32)], {}, m
  if name == "matmul":
    args = [random_array(rng, (64, 64), jnp.bfloat16) for _ in range(2)]
    return functools.partial(m.matmul, bm=32, bn=32, bk=16), args, {}, m
  if name == "flash_attention":
    args = [random_array(rng, (1, 64, 2, 32), jnp.float16) for _ in range(3)]
    return functools.partial(m.flash_attention, causal=True, block_q=32, block_k=32), args, {}, m
  raise KeyError(name)


def _check_kernel_spans(spans, gk, expected_count):
  """The invariants every traced lowering must satisfy; returns {eqn index: span}."""
  kernels = [s for s in kernel_spans(spans) if s.attributes.get("pallas.source_key") == gk.key]
  assert len(kernels) == 1, [s.name for s in kernel_spans(spans)]
  kernel = kernels[0]
  assert kernel.name == f"pallas_call {gk.name}"
  assert kernel.attributes["pallas.num_warps"] == gk.num_warps
  assert kernel.attributes["pallas.grid"] == str(gk.grid)
  index = by_id(spans)
  mine = [s for s in lower_spans(spans) if s.context.trace_id == kernel.context.trace_id
          and _under(s, kernel, index)]
  # exactly one span per equation: as many as the lowering recorded and as an
  # independent count over the jaxpr says
  assert len(mine) == len(gk.eqns) == expected_count
  by_eqn = {s.attributes["jaxpr.eqn_index"]: s for s in mine}
  assert sorted(by_eqn) == list(range(len(gk.eqns)))
  for eqn in gk.eqns:
    span = by_eqn[eqn.index]
    assert span.name == f"lower {eqn.primitive}"
    assert span.attributes["jaxpr.primitive"] == eqn.primitive
    assert span.attributes["jaxpr.eqn"] == eqn.text
    assert tuple(span.attributes["jaxpr.in_avals"]) == tuple(map(str, eqn.in_avals))
    assert tuple(span.attributes["jaxpr.out_avals"]) == tuple(map(str, eqn.out_avals))
    parent = parent_of(span, index)
    if eqn.parent is None:
      assert parent.context.span_id == kernel.context.span_id, (eqn, parent.name)
    else:
      # nested under the span of the control-flow equation that contains it
      assert parent.attributes["jaxpr.eqn_index"] == eqn.parent, eqn
      assert parent.attributes["jaxpr.primitive"] in CONTROL_FLOW
    assert span.start_time >= parent.start_time and span.end_time <= parent.end_time
    lines = span.attributes.get("pallas.generated_lines")
    if lines is not None:
      # the generated lines belong to this equation (or, for control flow, to
      # the equations nested in it)
      first, last = (int(x) for x in lines.split("-"))
      owners = {gk.line_map.get(n) for n in range(first, last + 1)} - {None}
      assert owners and owners <= _self_and_nested(gk, eqn.index)
      if eqn.primitive not in CONTROL_FLOW:
        assert owners == {eqn.index}
  return by_eqn


def _self_and_nested(gk, index):
  out = {index}
  for e in gk.eqns:            # preorder: a parent comes before its children
    if e.parent in out:
      out.add(e.index)
  return out


def _under(span, ancestor, index):
  p = parent_of(span, index)
  while p is not None:
    if p.context.span_id == ancestor.context.span_id:
      return True
    p = parent_of(p, index)
  return False


@pytest.mark.parametrize("name", ["vector_add", "softmax", "layer_norm", "matmul",
                                  "flash_attention"])
def test_examples_one_span_per_equation(name, rng):
  fn, args, kwargs, module = _example_case(name, rng)
  (pallas_eqn,) = pallas_call_eqns(fn, *args)
  with traced() as exporter:
    (gk,) = lower_fresh(jax.jit(fn), *args)
  spans = exporter.get_finished_spans()
  by_eqn = _check_kernel_spans(spans, gk, count_kernel_equations(pallas_eqn))
  path = os.path.realpath(module.__file__)
  user_spans = [s for s in by_eqn.values() if s.attributes.get("code.filepath")
                and os.path.realpath(s.attributes["code.filepath"]) == path]
  assert user_spans, "no span points at the example's source"
  source = open(path).read().splitlines()
  for span in user_spans:
    assert 1 <= span.attributes["code.lineno"] <= len(source)
  # the exact line: the exps come from the kernel's lines with jnp.exp, the dots from jnp.dot
  kernel_lines, first = inspect.getsourcelines(getattr(module, KERNELS[name]))
  for primitive, needle in (("exp", "jnp.exp("), ("dot_general", "jnp.dot(")):
    spans_of = [s for s in user_spans if s.attributes["jaxpr.primitive"] == primitive]
    expected = {first + i for i, text in enumerate(kernel_lines) if needle in text}
    assert {s.attributes["code.lineno"] for s in spans_of} == expected
  assert {s.attributes["code.function"] for s in user_spans} >= {KERNELS[name]}


def test_softmax_example_exp_line(rng):
  """The exp equation's span names the very line `e = jnp.exp(x)` of examples/softmax.py."""
  fn, args, _, module = _example_case("softmax", rng)
  with traced() as exporter:
    lower_fresh(jax.jit(fn), *args)
  (exp_span,) = [s for s in exporter.get_finished_spans() if s.name == "lower exp"]
  path = os.path.join(EXAMPLES, "softmax.py")
  (line,) = lines_containing(path, "jnp.exp(")
  assert os.path.realpath(exp_span.attributes["code.filepath"]) == os.path.realpath(path)
  assert exp_span.attributes["code.lineno"] == line
  assert exp_span.attributes["code.function"] == "softmax_kernel"


def test_flash_attention_body_nests_under_loop(rng):
  """Equations of the fori_loop body are children of the loop's span."""
  fn, args, _, _ = _example_case("flash_attention", rng)
  with traced() as exporter:
    (gk,) = lower_fresh(jax.jit(fn), *args)
  spans = exporter.get_finished_spans()
  index = by_id(spans)
  loops = [s for s in lower_spans(spans) if s.attributes["jaxpr.primitive"] in ("while", "scan")]
  assert len(loops) == 1
  body = [s for s in lower_spans(spans) if parent_of(s, index) is loops[0]]
  prims = {s.attributes["jaxpr.primitive"] for s in body}
  assert {"dot_general", "exp", "reduce_max", "reduce_sum"} <= prims
  assert all(s.attributes["jaxpr.region"] == "body" for s in body)
  assert len(body) == sum(1 for e in gk.eqns if e.parent == loops[0].attributes["jaxpr.eqn_index"])


def test_jax_softmax(installed, rng):
  softmax = gpu_op("softmax")
  x = random_array(rng, (4, 100), jnp.float32)
  fn = functools.partial(softmax.softmax, axis=-1)
  (pallas_eqn,) = pallas_call_eqns(fn, x)
  with traced() as exporter:
    (gk,) = lower_fresh(jax.jit(fn), x)
  by_eqn = _check_kernel_spans(exporter.get_finished_spans(), gk,
                               count_kernel_equations(pallas_eqn))
  (exp_span,) = [s for s in by_eqn.values() if s.attributes["jaxpr.primitive"] == "exp"]
  (line,) = lines_containing(softmax.__file__, "jnp.exp(")
  assert exp_span.attributes["code.filepath"] == softmax.__file__
  assert exp_span.attributes["code.lineno"] == line


@pytest.mark.parametrize("causal", [False, True])
def test_jax_attention(installed, rng, causal):
  attention = gpu_op("attention")
  q, k, v = (random_array(rng, (1, 64, 2, 32), jnp.float16) for _ in range(3))
  bs = attention.BlockSizes(block_q=32, block_k=32)
  fn = functools.partial(attention.mha, segment_ids=None, causal=causal, block_sizes=bs)
  (pallas_eqn,) = pallas_call_eqns(fn, q, k, v)
  with traced() as exporter:
    (gk,) = lower_fresh(jax.jit(fn), q, k, v)
  spans = exporter.get_finished_spans()
  by_eqn = _check_kernel_spans(spans, gk, count_kernel_equations(pallas_eqn))
  exp_lines = {s.attributes["code.lineno"] for s in by_eqn.values()
               if s.attributes["jaxpr.primitive"] in ("exp", "exp2")}
  source_lines = set(lines_containing(attention.__file__, "jnp.exp(")) | set(
      lines_containing(attention.__file__, "jnp.exp2("))
  assert exp_lines and exp_lines <= source_lines
  nested = [s for s in by_eqn.values() if "jaxpr.parent_eqn_index" in s.attributes]
  assert nested, "the attention kernel's loop body should be nested"


def test_tracing_off_means_null_observer():
  assert not getattr(hooks.observer(), "enabled", False)
  with traced():
    assert hooks.observer().enabled
  assert isinstance(hooks.observer(), hooks.NullObserver)


def test_failing_equation_span_is_error(rng):
  """A rule failure marks its equation's span ERROR with the exception recorded."""
  from testkit.helpers import pallas

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.sort(x_ref[...])

  x = random_array(rng, (16,), jnp.float32)
  call = jax.jit(pallas(kernel, jax.ShapeDtypeStruct((16,), jnp.float32)))
  with traced() as exporter:
    with pytest.raises(pallas_prof.LoweringError):
      lower_fresh(call, x)
  spans = exporter.get_finished_spans()
  (sort_span,) = [s for s in spans if s.name == "lower sort"]
  assert sort_span.status.status_code.name == "ERROR"
  assert [e.name for e in sort_span.events] == ["exception"]
  assert "LoweringError" in sort_span.events[0].attributes["exception.type"]
  (kernel_span,) = kernel_spans(spans)
  assert kernel_span.status.status_code.name == "ERROR"


def test_cond_branches_and_index_maps(rng):
  """Branch equations nest under the cond's span; index-map equations under pallas_call."""
  from jax.experimental import pallas as pl
  from testkit.helpers import pallas

  def kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = jax.lax.cond(pl.program_id(0) % 2 == 0,
                              lambda v: jnp.sin(v) * 2.0,          # branch 1 (true)
                              lambda v: jnp.cos(v) + 1.0, x)       # branch 0 (false)

  n_blocks = 4
  spec = pl.BlockSpec((8,), lambda i: (n_blocks - 1 - i,))   # reversed: index-map equations
  call = pallas(kernel, jax.ShapeDtypeStruct((32,), jnp.float32), grid=(n_blocks,),
                in_specs=[spec], out_specs=spec)
  x = random_array(rng, (32,), jnp.float32)
  (pallas_eqn,) = pallas_call_eqns(call, x)
  with traced() as exporter:
    (gk,) = lower_fresh(jax.jit(call), x)
  spans = exporter.get_finished_spans()
  by_eqn = _check_kernel_spans(spans, gk, count_kernel_equations(pallas_eqn))
  index = by_id(spans)
  index_map = [s for s in by_eqn.values()
               if s.attributes["jaxpr.region"].startswith("index_map")]
  assert len(index_map) == sum(len(bm.index_map_jaxpr.jaxpr.eqns)
                               for bm in pallas_eqn.params["grid_mapping"].block_mappings) > 0
  assert all(parent_of(s, index).name.startswith("pallas_call") for s in index_map)
  (cond,) = [s for s in by_eqn.values() if s.attributes["jaxpr.primitive"] == "cond"]
  in_branches = {s.attributes["jaxpr.primitive"]: s.attributes["jaxpr.region"]
                 for s in by_eqn.values() if parent_of(s, index) is cond}
  assert in_branches["sin"] == "branch 1" and in_branches["cos"] == "branch 0"
  kernel_lines, first = inspect.getsourcelines(kernel)
  for primitive, needle in (("sin", "jnp.sin("), ("cos", "jnp.cos(")):
    (span,) = [s for s in by_eqn.values() if s.attributes["jaxpr.primitive"] == primitive]
    assert os.path.realpath(span.attributes["code.filepath"]) == os.path.realpath(__file__)
    assert [span.attributes["code.lineno"]] == [first + i for i, text in enumerate(kernel_lines)
                                                if needle in text]


@pytest.mark.parametrize("collect", [True, False], ids=["collections", "no-collections"])
def test_the_kernel_span_says_how_much_of_the_lowering_was_garbage_collection(installed, rng,
                                                                              collect):
  """A full garbage collection (50-60 ms with JAX loaded on the GPU machine) lands
  on whatever Python runs then, often a process's first lowering: the lowering
  reports that time beside its own (GeneratedKernel.gc_seconds, the kernel span's
  pallas.lowering.gc_ms). Forced here: a collection every allocation, or none."""
  import gc
  fn, args, _, _ = _example_case("softmax", rng)
  threshold, enabled = gc.get_threshold(), gc.isenabled()
  try:
    if collect:
      gc.set_threshold(1)
      gc.enable()
    else:
      gc.disable()
    with traced() as exporter:
      (gk,) = lower_fresh(jax.jit(fn), *args)
  finally:
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()
  (kernel,) = [s for s in kernel_spans(exporter.get_finished_spans())
               if s.attributes.get("pallas.source_key") == gk.key]
  if collect:
    assert 0 < gk.gc_seconds < gk.lowering_seconds
    assert 0 < kernel.attributes["pallas.lowering.gc_ms"] <= gk.gc_seconds * 1e3
  else:
    assert gk.gc_seconds == 0
    assert "pallas.lowering.gc_ms" not in kernel.attributes
