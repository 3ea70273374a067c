"""pallas_prof.profile(): the report, and the CPU-only path."""
from __future__ import annotations

import json

import pytest

import pallas_prof
from pallas_prof.profiler import driver

from .conftest import line_of

pytestmark = pytest.mark.skipif(driver.gpu_status()[0], reason="checks the machine without a GPU")


def test_cpu_only_report_says_no_gpu_and_keeps_the_static_part(matmul_wgmma, softmax_kernel):
  mm, _ = matmul_wgmma
  sm, _ = softmax_kernel
  report = pallas_prof.profile([mm, sm])
  assert report.gpu_present is False
  assert report.message.startswith("no NVIDIA GPU: ")
  # what a CPU run shows and what it cannot (issue 30: not a pip hint on a machine without one)
  assert "Triton's interpreter" in report.message and "not timed" in report.message
  assert "Runtimes" in report.message and "need a GPU" in report.message
  if not driver.nvidia_driver_loaded():
    assert "pip install" not in report.message and "no NVIDIA driver" in report.message
  assert report.device is None and report.ceilings is None
  assert [k.label for k in report.kernels] == [mm.label, sm.label]
  for k in report.kernels:
    assert k.errors == []
    assert k.runtime is None and k.nvml is None and k.rates is None
    assert k.static.target == "cuda:90" and k.static.sass_instructions > 0
    assert k.work is not None and k.work.bytes > 0
    assert k.verdict.startswith("static only; heaviest equations (share of instructions): [")
    assert k.weight_basis == "static" and k.attribution.basis == "static"
  mmk = report.kernel(mm.label)
  dot = next(e for e in mmk.static.equations if e.primitive == "dot_general")
  assert dot.user_line == line_of("matmul", "jnp.dot(")
  assert dot.sass_counts["tensor_core"] > 0


def test_report_is_json(softmax_kernel):
  rec, _ = softmax_kernel
  report = pallas_prof.profile([rec])
  data = json.loads(report.to_json())
  assert data["schema_version"] == 2 and data["gpu_present"] is False
  k = data["kernels"][0]
  assert set(k) >= {"label", "name", "static", "work", "runtime", "nvml", "rates", "insitu", "ncu",
                    "verdict", "errors"}
  eqns = k["static"]["equations"]
  assert [e["index"] for e in eqns] == list(range(len(eqns)))
  exp = next(e for e in eqns if e["primitive"] == "exp")
  assert exp["sass_counts"]["special_function"] >= 1
  assert exp["user_line"] == line_of("softmax", "jnp.exp(")


def test_profile_by_name(softmax_kernel):
  rec, _ = softmax_kernel
  report = pallas_prof.profile(rec.label)
  assert [k.label for k in report.kernels] == [rec.label]
  with pytest.raises(driver.ProfilerError, match="no kernel named 'no_such_kernel'"):
    pallas_prof.profile("no_such_kernel")
