"""One error model: LoweringError, CompileError and KernelRuntimeError (BoundsError with
it) are KernelErrors with the same typed fields, which the report reads without guessing;
and the catches in compiling/ that look for a missing tool let a bug of ours through."""
from __future__ import annotations

import types

import pytest

import pallas_prof
from pallas_prof.backend.compiling import lineinfo, triton_compat
from pallas_prof.backend.errors import CompileError, KernelError, LoweringError
from pallas_prof.backend.running.bounds_errors import BoundsError
from pallas_prof.backend.running.runtime_errors import KernelRuntimeError
from pallas_prof.instrument import error_text

FIELDS = ("reason", "hint", "kernel", "eqn", "jaxpr_text", "rule", "stage", "details", "cause",
          "source_excerpt", "ref_names", "equations", "where", "at_run_time")


def _equation():
  return types.SimpleNamespace(primitive="add", file="/user/k.py", line=7, function="kernel",
                               index=3, text="c = add a b", region="kernel", parent=None,
                               in_avals=(), out_avals=(), jaxpr_line=None)


def _each_kind():
  eqn = _equation()
  return [LoweringError("no rule", kernel="k", eqn=eqn, hint="write it otherwise"),
          CompileError("ptxas failed", kernel="k", equations=(eqn,), stage="ptx"),
          KernelRuntimeError("it failed", kernel="k", eqn=eqn, where="the GPU"),
          BoundsError("read outside x_ref", kernel="k", eqn=eqn)]


@pytest.mark.parametrize("error", _each_kind(), ids=lambda e: type(e).__name__)
def test_every_kernel_failure_is_a_kernel_error_with_the_typed_fields(error):
  assert isinstance(error, KernelError) and isinstance(error, pallas_prof.KernelError)
  missing = [name for name in FIELDS if not hasattr(error, name)]
  assert missing == [], f"{type(error).__name__} lacks {missing}"
  assert error.kernel == "k" and error.primitive == "add" and error.location == "/user/k.py:7"
  assert isinstance(error.details, dict) and isinstance(error.ref_names, tuple)
  assert error.at_run_time == isinstance(error, KernelRuntimeError)
  text = error_text(error)
  assert "kernel `k`" in text and "/user/k.py:7" in text and error.reason in text


def test_the_old_catches_still_catch_what_they_caught():
  lowering, compiling, running, bounds = _each_kind()
  for error in (lowering, compiling):
    with pytest.raises(LoweringError):
      raise error
  for error in (running, bounds):
    with pytest.raises(RuntimeError):
      raise error
  with pytest.raises(IndexError):
    raise bounds
  assert not isinstance(running, LoweringError) and not isinstance(compiling, RuntimeError)
  assert running.stage == "run" and running.where == "the GPU" and lowering.stage is None
  assert compiling.eqn is compiling.equations[0]


def test_a_run_time_report_reads_where_it_ran():
  text = error_text(KernelRuntimeError("it failed", kernel="k", eqn=_equation(),
                                       where="Triton's interpreter on the CPU"))
  assert "failed at run time" in text
  assert "run time, found by Triton's interpreter on the CPU" in text


def test_a_missing_nvdisasm_is_said_and_a_bug_is_not_hidden(monkeypatch):
  monkeypatch.setenv("PATH", "")

  def missing(name):
    raise RuntimeError(f"Cannot find {name}")

  monkeypatch.setattr(triton_compat, "tool_path", missing)
  with pytest.raises(lineinfo.SassUnavailable, match="nvdisasm not found .*Cannot find"):
    lineinfo._nvdisasm_path()

  def broken(name):
    raise TypeError("a bug in the lookup")

  monkeypatch.setattr(triton_compat, "tool_path", broken)
  with pytest.raises(TypeError, match="a bug in the lookup"):
    lineinfo._nvdisasm_path()


def test_a_missing_ptxas_falls_back_and_a_bug_is_not_hidden(monkeypatch):
  def missing(arch):
    raise RuntimeError("Cannot find ptxas")

  monkeypatch.setattr(triton_compat, "ptxas_tool", missing)
  assert triton_compat.ptxas_path(90).endswith("backends/nvidia/bin/ptxas")

  def broken(arch):
    raise TypeError("a bug in the lookup")

  monkeypatch.setattr(triton_compat, "ptxas_tool", broken)
  with pytest.raises(TypeError, match="a bug in the lookup"):
    triton_compat.ptxas_path(90)


def test_the_base_alone_says_its_reason_and_hint():
  error = KernelError("a kernel failed", hint="look at its line", kernel="k")
  assert str(error) == "a kernel failed\n  hint: look at its line"
  assert error_text(error).startswith("pallas-prof: cannot lower in kernel `k`")
