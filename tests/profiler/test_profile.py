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
    assert str(k.verdict).startswith("static only; heaviest equations (share of instructions): [")
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


def test_the_report_prints_as_the_cli_tables_and_has_a_short_repr(softmax_kernel, matmul_wgmma,
                                                                   monkeypatch):
  """Issue 30, item 5: the repr was the whole dataclass (several KB)."""
  import io

  from rich.console import Console
  monkeypatch.setenv("COLUMNS", "100")
  sm, _ = softmax_kernel
  mm, _ = matmul_wgmma
  report = pallas_prof.profile([sm, mm])
  text = repr(report)
  assert "\n" not in text and len(text) < 200, text
  assert text.startswith("<ProfileReport: 2 kernels, no GPU") and sm.label in text, text
  printed = str(report)                   # print(report)
  lines = printed.splitlines()
  assert lines[0] == "pallas-prof profile of 2 kernels, no GPU: static weights"
  assert max(len(line) for line in lines) <= 100
  assert f"hot equations of {sm.label}" in printed and f"hot equations of {mm.label}" in printed
  row = next(line for line in lines if line.startswith(sm.label))
  assert "x".join(map(str, report.kernel(sm.label).static.grid)) in row
  assert "jnp.exp(x)" in printed
  rich_out = io.StringIO()                # rich's protocol: console.print(report)
  Console(file=rich_out, width=100, no_color=True).print(report)
  assert rich_out.getvalue().splitlines()[0] == lines[0]
  assert f"hot equations of {mm.label}" in rich_out.getvalue()


def test_a_kernel_record_has_a_short_repr(softmax_kernel):
  """pallas_prof.kernels() in a REPL: each record's repr was the whole dataclass (the
  generated source, the jaxpr and every equation: kilobytes per kernel)."""
  rec, _ = softmax_kernel
  text = repr(rec)
  assert "\n" not in text and len(text) < 200, text
  assert text.startswith(f"<KernelRecord {rec.label}: grid 4, float32[4,128] -> float32[4,128], "
                         "cpu"), text
  assert rec.generated.source not in text and "jaxpr" not in text
