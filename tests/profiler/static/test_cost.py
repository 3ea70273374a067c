"""The bytes/FLOPs model on known shapes, numbers worked out by hand."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from pallas_prof.profiler.static import cost
from pallas_prof.profiler.timing.ceilings import rates
from pallas_prof.profiler.schema import Ceilings, WorkModel

from ..conftest import line_of


def test_matmul_model(matmul_wgmma):
  # 128x128 @ 128x128 bf16, blocks bm=bn=64, bk=32: grid 2x2, K loop of 128/32 = 4 steps
  rec, _ = matmul_wgmma
  w = cost.work_model(rec.generated)
  assert w.exact and w.source == "model" and w.programs == 4
  assert cost.loop_trips(rec.generated) == {1: 4}
  assert w.bytes == 3 * 128 * 128 * 2                   # a, b read once, o written once
  assert w.dot_flops == 2 * 128 * 128 * 128
  # per program and step: a block 64x32 + b block 32x64 bf16; per program: o block 64x64 bf16
  assert w.block_bytes == 4 * (4 * (64 * 32 * 2 + 32 * 64 * 2) + 64 * 64 * 2)
  # acc + dot: one f32 add of 64x64 per step and program
  assert w.elementwise_flops == 4 * 4 * 64 * 64
  assert w.flops == w.dot_flops + w.elementwise_flops
  assert w.transcendentals == 0
  assert w.dot_dtype == "bf16"


def test_softmax_model(softmax_kernel):
  # 4 rows of 128 f32, one row per program
  rec, _ = softmax_kernel
  w = cost.work_model(rec.generated)
  assert w.exact and w.programs == 4
  assert w.bytes == 2 * 4 * 128 * 4
  assert w.block_bytes == 4 * (128 * 4 + 128 * 4)
  # reduce_max (128 in), sub (128), reduce_sum (128 in), div (128) per row
  assert w.elementwise_flops == 4 * 4 * 128
  assert w.transcendentals == 4 * 128                   # exp
  assert w.dot_flops == 0 and w.dot_dtype is None


def test_flash_attention_model(flash_kernels):
  # q, k, v, o: (1, 128, 1, 32) f16; block_q = block_k = 32: grid (4, 1, 1), 4 key blocks
  rec, _ = flash_kernels[False]
  w = cost.work_model(rec.generated)
  assert w.exact and w.programs == 4
  assert w.bytes == 4 * 128 * 32 * 2
  # per program and key block: q.kT (32x32x32) and p.v (32x32x32)
  assert w.dot_flops == 4 * 4 * 2 * (2 * 32 * 32 * 32)
  assert w.dot_dtype == "f16"
  # per program: exp over s (32x32) and over m - m_new (32) each step
  assert w.transcendentals == 4 * 4 * (32 * 32 + 32)


def test_dynamic_trip_count_is_not_guessed(flash_kernels):
  rec, _ = flash_kernels[True]
  w = cost.work_model(rec.generated)
  loop_line = line_of("flash_attention", "jax.lax.fori_loop(", "flash_kernel")
  assert not w.exact
  assert w.flops is None and w.dot_flops is None and w.block_bytes is None
  assert w.bytes == 4 * 128 * 32 * 2                     # still known: the arrays
  assert any(f"flash_attention.py:{loop_line}" in n and "run time" in n for n in w.notes)


def test_cost_estimate_replaces_the_model(matmul_wgmma):
  rec, _ = matmul_wgmma
  ce = pl.CostEstimate(flops=1234, transcendentals=5, bytes_accessed=678)
  w = cost.work_model(rec.generated, ce)
  assert (w.source, w.flops, w.bytes, w.transcendentals) == ("cost_estimate", 1234, 678, 5)
  assert any("cost_estimate" in n for n in w.notes)


# --- the facts the rules record ----------------------------------------------------------------

def _lower(kernel, out_shape, *args, grid=(1,), in_specs=None, out_specs=None):
  """The GeneratedKernel of one pallas_call, lowered (not run)."""
  from tests.backend.lowering.rules.test_memory import generated_kernel
  specs = {} if in_specs is None else {"in_specs": in_specs, "out_specs": out_specs}
  call = pl.pallas_call(kernel, grid=grid, out_shape=jax.ShapeDtypeStruct(*out_shape), **specs)
  return generated_kernel(call, *args)


def _records(gk, primitive):
  return [e for e in gk.eqns if e.primitive == primitive]


@pytest.mark.parametrize("lhs, rhs, dims, form, batch, m, n, k", [
    ((24, 40), (40, 20), (((1,), (0,)), ((), ())), "matrix", 1, 24, 20, 40),
    ((40, 24), (40, 20), (((0,), (0,)), ((), ())), "lhs transposed", 1, 24, 20, 40),
    ((3, 24, 40), (3, 40, 20), (((2,), (1,)), ((0,), (0,))), "batched", 3, 24, 20, 40),
    ((16, 48), (48,), (((1,), (0,)), ((), ())), "matrix-vector", 1, 16, 1, 48),
])
def test_dot_records_its_dimensions(lhs, rhs, dims, form, batch, m, n, k):
  """The dot rule records M, N, K and the batch as it emitted them (the old model
  guessed K from a square root of the size products)."""
  out = jax.eval_shape(lambda a, b: jax.lax.dot_general(a, b, dims),
                       jax.ShapeDtypeStruct(lhs, jnp.bfloat16), jax.ShapeDtypeStruct(rhs, jnp.bfloat16))

  def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jax.lax.dot_general(a_ref[...], b_ref[...], dims,
                                     preferred_element_type=jnp.float32).astype(o_ref.dtype)

  gk = _lower(kernel, (out.shape, jnp.float32), np.ones(lhs, jnp.bfloat16),
              np.ones(rhs, jnp.bfloat16))
  [dot] = _records(gk, "dot_general")
  assert (dot.dot.batch, dot.dot.m, dot.dot.n, dot.dot.k) == (batch, m, n, k), form
  assert dot.dot.operand_dtype == "bfloat16" and dot.dot.precision is None
  w = cost.work_model(gk)
  assert w.dot_flops == 2 * batch * m * n * k and w.dot_dtype == "bf16"


@pytest.mark.parametrize("precision, dot_class", [
    (jax.lax.Precision.DEFAULT, "tf32"), (jax.lax.Precision.HIGHEST, "f32")])
def test_f32_dot_class_from_the_recorded_precision(precision, dot_class):
  def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision=precision)

  gk = _lower(kernel, ((16, 16), jnp.float32), np.ones((16, 32), np.float32),
              np.ones((32, 16), np.float32))
  [dot] = _records(gk, "dot_general")
  assert cost.dot_class(dot.dot) == dot_class == cost.work_model(gk).dot_dtype
  emitted = "input_precision" in gk.source
  assert (dot.dot.precision is not None) == emitted


def _row_loop_kernel(trips):
  def kernel(x_ref, o_ref):
    def body(i, acc):
      return acc + jnp.exp(x_ref[i, :]) * 2.0
    o_ref[...] = jax.lax.fori_loop(0, trips, body, jnp.zeros((x_ref.shape[1],), jnp.float32))
  return kernel


@pytest.mark.parametrize("trips, unrolled", [(3, True), (9, False)])
def test_loops_record_their_trips(trips, unrolled):
  """A loop records its trip count; one emitted straight-line has a record per
  iteration and multiplies nothing, so both count the same work (the old model
  read trip counts from `for ... in range(...)` in the source and called a
  straight-line loop unknown)."""
  gk = _lower(_row_loop_kernel(trips), ((37,), jnp.float32), np.ones((trips, 37), np.float32))
  [loop] = [e for e in gk.eqns if e.trips is not None]
  assert (loop.trips, loop.unrolled) == (trips, unrolled)
  assert ("for " in gk.source) != unrolled
  assert cost.loop_trips(gk) == {loop.index: trips}
  w = cost.work_model(gk)
  assert w.exact
  assert w.transcendentals == trips * 37                      # exp of each row
  assert w.elementwise_flops == trips * 2 * 37                # * 2.0 and + acc
  # each row read once (f32), the result written once
  assert w.block_bytes == trips * 37 * 4 + 37 * 4


def test_a_loop_bound_known_at_run_time_is_dynamic():
  def kernel(x_ref, o_ref):
    n = pl.program_id(0) + 1
    o_ref[...] = jax.lax.fori_loop(0, n, lambda i, acc: acc + x_ref[i, :],
                                   jnp.zeros((37,), jnp.float32))

  gk = _lower(kernel, ((37,), jnp.float32), np.ones((4, 37), np.float32), grid=(1,))
  [loop] = [e for e in gk.eqns if e.trips is not None]
  assert loop.trips == "dynamic" and cost.loop_trips(gk) == {loop.index: None}
  w = cost.work_model(gk)
  assert not w.exact and w.flops is None and w.block_bytes is None


def test_memory_equations_record_the_bytes_they_move():
  """A read and a write of a 5 x 37 f16 block of a ragged 12 x 37 array: the
  block's bytes each (the padded lanes move nothing); a read of the same block
  again reuses the load and moves nothing."""
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + x_ref[...]

  spec = pl.BlockSpec((5, 37), lambda i: (i, 0))
  gk = _lower(kernel, ((12, 37), jnp.float16), np.ones((12, 37), np.float16), grid=(3,),
              in_specs=[spec], out_specs=spec)
  reads = [e.bytes_read for e in gk.eqns if e.primitive == "get"]
  writes = [e.bytes_written for e in gk.eqns if e.primitive == "swap"]
  assert sorted(reads) == [0, 5 * 37 * 2] and writes == [5 * 37 * 2]
  assert cost.work_model(gk).block_bytes == 3 * 2 * 5 * 37 * 2


def test_records_survive_a_saved_run(tmp_path):
  from pallas_prof.backend.artifacts import EquationRecord
  gk = _lower(_row_loop_kernel(9), ((37,), jnp.float32), np.ones((9, 37), np.float32))
  again = [EquationRecord.from_dict(e.to_dict()) for e in gk.eqns]
  assert [(e.trips, e.bytes_read, e.transcendentals, e.text) for e in again] == \
      [(e.trips, e.bytes_read, e.transcendentals, e.text) for e in gk.eqns]


# --- rates and verdicts --------------------------------------------------------------------------

def _work(**kw):
  base = dict(source="model", bytes=None, block_bytes=None, flops=None, dot_flops=None,
              elementwise_flops=None, transcendentals=None, dot_dtype=None, programs=1,
              exact=True, notes=[])
  base.update(kw)
  return WorkModel(**base)


def _ceil(copy=4e12, bf16=8e14):
  return Ceilings(device_name="test", device_uuid="GPU-0", copy_bytes_per_s=copy,
                  copy_method="test", matrix_flops_per_s={"bf16": bf16}, matrix_method="test",
                  measured_at=0.0, details={}, notes=[])


def test_memory_bound_verdict():
  # 1 GB in 0.5 ms = 2 TB/s against 4 TB/s
  r = rates(_work(bytes=10**9, flops=10**8, dot_flops=0), 5e-4, _ceil())
  assert r.bytes_per_s == pytest.approx(2e12)
  assert r.bandwidth_pct == pytest.approx(50.0)
  assert r.bound == "memory" and r.efficiency_pct == pytest.approx(50.0)
  assert r.verdict.startswith("memory-bound") and "50%" in r.verdict


def test_compute_bound_verdict():
  # 2*8192^3 bf16 FLOPs in 2 ms against 800 TFLOP/s; 402 MB moved
  flops = 2 * 8192 ** 3
  r = rates(_work(bytes=3 * 8192 * 8192 * 2, flops=flops, dot_flops=flops, dot_dtype="bf16"),
            2e-3, _ceil())
  assert r.flops_per_s == pytest.approx(flops / 2e-3)
  assert r.compute_pct == pytest.approx(100 * flops / 2e-3 / 8e14)
  assert r.bound == "compute" and r.compute_ceiling == "bf16"
  assert r.ridge_point == pytest.approx(8e14 / 4e12)
  assert r.verdict.startswith("compute-bound") and "69%" in r.verdict


def test_far_from_roofline_is_said():
  r = rates(_work(bytes=10**6, flops=0, dot_flops=0), 1e-3, _ceil())
  assert r.bound == "memory" and r.efficiency_pct == pytest.approx(0.025)
  assert "far from its roofline" in r.verdict


def test_float_math_far_under_the_memory_roofline_is_not_called_memory_bound():
  # the known-answer pair of exp loops on the H200: 67 MB in 227 us (7 % of copy
  # bandwidth), 537 M exp and 3.2 G FLOPs of float math, no dots
  r = rates(_work(bytes=2 * 8192 * 1024 * 4, flops=3_220_000_000, dot_flops=0,
                  elementwise_flops=3_220_000_000, transcendentals=537_000_000), 227e-6,
            _ceil(copy=4.15e12))
  assert r.bound == "not memory"
  assert r.verdict.startswith("not memory-bound: 296 GB/s = 7% of the measured copy")
  assert "2.37 Ttranscendentals/s" in r.verdict and "14.2 TFLOP/s of float math" in r.verdict
  # the same bytes with no float math stay "memory-bound, far from its roofline"
  r = rates(_work(bytes=2 * 8192 * 1024 * 4, flops=0, dot_flops=0), 227e-6, _ceil(copy=4.15e12))
  assert r.bound == "memory" and "far from its roofline" in r.verdict


def test_no_ceilings_gives_rates_only():
  r = rates(_work(bytes=10**6, flops=10**6), 1e-3, None)
  assert r.bytes_per_s == pytest.approx(1e9) and r.bound == "unknown"
  assert r.bandwidth_pct is None
