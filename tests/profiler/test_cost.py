"""The bytes/FLOPs model on known shapes, numbers worked out by hand."""
from __future__ import annotations

import pytest
from jax.experimental import pallas as pl

from pallas_prof.profiler import cost
from pallas_prof.profiler.ceilings import rates
from pallas_prof.profiler.schema import Ceilings, WorkModel

from .conftest import line_of


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


@pytest.mark.parametrize("lhs, rhs, out, flops", [
    ("bfloat16[64,32]", "bfloat16[32,128]", "float32[64,128]", 2 * 64 * 128 * 32),
    ("float16[8,64,16]", "float16[8,16,32]", "float32[8,64,32]", 2 * 8 * 64 * 32 * 16),
    ("float32[16,48]", "float32[48]", "float32[16]", 2 * 16 * 48),
])
def test_dot_flops_from_shapes(lhs, rhs, out, flops):
  assert cost.dot_flops((lhs, rhs), (out,)) == flops


def test_parse_aval():
  import numpy as np
  assert cost.parse_aval("Ref<default>{bfloat16[64,128]}")[1] == (64, 128)
  dtype, shape = cost.parse_aval("~int32[]")
  assert dtype == np.int32 and shape == ()


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


def test_no_ceilings_gives_rates_only():
  r = rates(_work(bytes=10**6, flops=10**6), 1e-3, None)
  assert r.bytes_per_s == pytest.approx(1e9) and r.bound == "unknown"
  assert r.bandwidth_pct is None
