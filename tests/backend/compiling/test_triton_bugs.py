"""Triton bugs met so far, kept as regression tests: each trigger (a kernel Triton
fails to compile for sm_90) with the workaround pallas-prof applies.

For every trigger, on a Triton known to fail on it (3.6):
  - with PALLAS_PROF_WORKAROUNDS=0 the compile fails with a CompileError that
    says it is Triton's fault, names the failing pass, the assertion text, the
    scan's op and layout, and the user's line of the scan (no location on the
    op: found through the op kind ScanOpToLLVM.cpp lowers);
  - with workarounds on it compiles, the workaround named in the generated
    source's header and GeneratedKernel.workarounds, only for the scans that
    need it;
  - the compiled kernel computes what the plain kernel computes (Triton's
    interpreter, bit for bit: the forms that fix these do the same scan).
On a Triton that compiles a trigger plainly, the test says so (the bug is
fixed there) and checks that no workaround was applied.

The fuzzer (tests/fuzz) finds new triggers; workarounds.classify_failure reads them.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pallas_prof
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.failures import workarounds
from pallas_prof.backend.running.launch import run_interpreted
from pallas_prof.backend.compiling.triton_compat import triton_release as triton_version
from pallas_prof.instrument import error_text
from testkit.helpers import pallas, random_array

THIS_FILE = os.path.realpath(__file__)
TRITON_36 = triton_version().startswith("3.6")
SCAN_ASSERTION = ("numScanBlocks * numParallelBlocks * parallelElementsPerThread * "
                  "scanElementsPerThreads == srcValues.size()")


@dataclasses.dataclass(frozen=True)
class Trigger:
  body: Callable           # (v, m) -> the kernel's output, v: (rows,), m: (rows, cols)
  rows: int
  cols: int
  form: str                # the form that gets around it (backend/lowering/features/scan_forms.py)
  dtype: str = "float32"
  num_warps: int = 4
  function: str = "AddPartialReduce"    # where Triton 3.6 asserts


# a scan of a block with a size-1 axis (v[:, None]) while a 2-D block of the kernel is
# loaded vectorised (sizePerThread [1, 2] or more along the size-1 axis): Triton 3.6's
# ScanOpToLLVM asserts; 3.9 compiles every one (bench/results/triton_scan_sweep_*.txt)
TRIGGERS = {
    "cumsum_of_a_column": Trigger(
        lambda v, m: jnp.cumsum(v[:, None], axis=0) * m, 16, 16, "squeeze"),  # TRIGGER
    "cumsum_of_a_column_8_warps": Trigger(     # another num_warps would not get around it
        lambda v, m: jnp.cumsum(v[:, None], axis=0) * m, 16, 64, "squeeze",  # TRIGGER
        num_warps=8),
    "cumsum_along_the_size_1_axis": Trigger(
        lambda v, m: jnp.cumsum(v[:, None], axis=1) * m, 16, 16, "squeeze",  # TRIGGER
        function="AddPartialReduceOneWarp"),
    "reversed_cumsum_of_a_column": Trigger(
        lambda v, m: lax.cumsum(v[:, None], axis=0, reverse=True) * m, 16, 16,  # TRIGGER
        "squeeze"),
    "cumprod_of_a_column": Trigger(
        lambda v, m: lax.cumprod(v[:, None], axis=0) * m, 16, 16, "squeeze"),  # TRIGGER
    "cummax_of_a_column": Trigger(
        lambda v, m: lax.cummax(v[:, None], axis=0) * m, 16, 16, "squeeze"),  # TRIGGER
    "int32_cumsum_of_a_column": Trigger(
        lambda v, m: jnp.cumsum(v[:, None], axis=0) * m, 16, 16, "squeeze",  # TRIGGER
        dtype="int32"),
    "float16_cumsum_of_a_column": Trigger(
        lambda v, m: jnp.cumsum(v[:, None], axis=0) * m, 16, 16, "squeeze",  # TRIGGER
        dtype="float16"),
    "cumsum_of_a_column_not_a_power_of_two": Trigger(
        lambda v, m: jnp.cumsum(v[:, None], axis=0) * m, 12, 40, "squeeze"),  # TRIGGER
    "the_selective_scan_s_two_cumsums": Trigger(   # only the first needs the workaround
        lambda v, m: jnp.cumsum(                                            # PLAIN
            (v * 0.5)[:, None] * m * jnp.exp(-jnp.cumsum(v[:, None], axis=0) * 0.1),  # TRIGGER
            axis=0),
        16, 16, "squeeze"),
}


def lowered(name: str):
  t = TRIGGERS[name]

  def kernel(v_ref, m_ref, o_ref):
    o_ref[...] = t.body(v_ref[...], m_ref[...])

  fn = pallas(kernel, jax.ShapeDtypeStruct((t.rows, t.cols), t.dtype), name=name,
              compiler_params=pallas_prof.CompilerParams(num_warps=t.num_warps))
  jax.jit(fn).lower(jax.ShapeDtypeStruct((t.rows,), t.dtype),
                    jax.ShapeDtypeStruct((t.rows, t.cols), t.dtype))
  return kernel_registry.find(name)[-1]


@pytest.fixture(autouse=True)
def _fresh_compiles(monkeypatch, tmp_path):
  """No compile, and no plan that worked, remembered from another test."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  backend_compile.clear_memory_cache()
  workarounds.forget_all()
  yield


def compile_it(rec, monkeypatch, enabled: bool):
  monkeypatch.setenv(workarounds.ENV, "1" if enabled else "0")
  return workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                            use_disk_cache=False)


def trigger_line(name: str) -> int:
  """The line of the trigger's failing scan in this file."""
  t = TRIGGERS[name]
  return t.body.__code__.co_firstlineno + (1 if name == "the_selective_scan_s_two_cumsums"
                                            else 0)


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_with_workarounds_off_the_failure_is_explained(name, monkeypatch):
  rec = lowered(name)
  if not TRITON_36:
    compile_it(rec, monkeypatch, enabled=False)     # compiles plainly: fixed in this Triton
    return
  with pytest.raises(pallas_prof.CompileError) as info:
    compile_it(rec, monkeypatch, enabled=False)
  err = info.value
  assert isinstance(err, pallas_prof.LoweringError)
  d = err.diagnosis
  assert (d.fault, d.kind, d.stage, d.failing_pass, d.op_kind) == \
      ("triton", "assertion", "llir", "ConvertTritonGPUToLLVM", "tt.scan")
  assert d.assertion == (f"ScanOpToLLVM.cpp:{d.assertion.split(':')[1].split()[0]} in "
                         f"{TRIGGERS[name].function}: `{SCAN_ASSERTION}`")
  # the scan's line of this file, through the op kind (the op has no location)
  line = trigger_line(name)
  assert (err.eqn.primitive.startswith("cum"), err.eqn.file, err.eqn.line) == \
      (True, THIS_FILE, line)
  assert "no location" in d.mapped_by and "ScanOpToLLVM.cpp" in d.mapped_by
  # the op with its layout, where the last IR printed shows it
  (op,) = [o for o in d.ops if o.eqn_index == err.eqn.index]
  assert "#blocked = #ttg.blocked<{sizePerThread" in op.describe() and "x1x" in op.types
  text = error_text(err)
  assert f"--> {THIS_FILE}:{line}" in text and SCAN_ASSERTION in text
  assert "ConvertTritonGPUToLLVM" in text and "Triton's, not your kernel's" in text
  assert "workaround:" in text and "PALLAS_PROF_WORKAROUNDS=0" in text and "squeeze" in text
  assert err.reproducer["script"].endswith(".sm90.repro.py")
  assert os.path.exists(err.reproducer["script"]) and os.path.exists(err.reproducer["mlir"])
  assert workarounds.classify_failure(err)["assertion"] == d.assertion


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_the_workaround_compiles_and_computes_the_same(name, monkeypatch, rng):
  t = TRIGGERS[name]
  rec = lowered(name)
  ck = compile_it(rec, monkeypatch, enabled=True)
  variant = ck.generated
  assert ".target sm_90" in ck.ptx
  if not TRITON_36:
    assert variant.workarounds == ()
    return
  line = trigger_line(name)
  (note,) = variant.workarounds
  assert f"{os.path.basename(THIS_FILE)}:{line}" in note and t.form in variant.workaround_plan \
      .scan_forms[0]
  assert f"# Triton workaround: {note}" in variant.source
  assert "ScanOpToLLVM.cpp" in variant.source      # why, in the header
  # only the scan that needs it: the other cumsum of the selective scan stays tl.cumsum
  assert len(variant.workaround_plan.scan_forms) == 1
  v = random_array(rng, (t.rows,), t.dtype, low=-3 if t.dtype != "float16" else -1,
                   high=3 if t.dtype != "float16" else 1)
  m = random_array(rng, (t.rows, t.cols), t.dtype, low=-3, high=3)
  shapes = [((t.rows, t.cols), np.dtype(t.dtype))]
  (plain,) = run_interpreted(rec.generated, [v, m], shapes)
  (worked_around,) = run_interpreted(variant, [v, m], shapes)
  np.testing.assert_array_equal(worked_around, plain)


def test_the_plan_that_worked_is_remembered(monkeypatch):
  """A second compile of the kernel goes straight to the lowering that compiled."""
  if not TRITON_36:
    pytest.skip(f"Triton {triton_version()} compiles the trigger: no plan to remember")
  rec = lowered("cumsum_of_a_column")
  first = compile_it(rec, monkeypatch, enabled=True)
  backend_compile.clear_memory_cache()
  workarounds.forget_all()           # the disk's copy remains
  seen = []
  original = backend_compile.compile_kernel
  monkeypatch.setattr(workarounds, "compile_kernel",
                      lambda gk, *a, **k: seen.append(gk.workarounds) or original(gk, *a, **k))
  second = compile_it(rec, monkeypatch, enabled=True)
  assert seen == [first.generated.workarounds]      # no failing plain compile first
  assert second.generated.source == first.generated.source


def test_the_reproducer_reproduces_without_pallas_prof(monkeypatch, tmp_path):
  if not TRITON_36:
    pytest.skip(f"Triton {triton_version()} compiles the trigger")
  rec = lowered("cumsum_of_a_column")
  with pytest.raises(pallas_prof.CompileError) as info:
    compile_it(rec, monkeypatch, enabled=False)
  script = info.value.reproducer["script"]
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300,
                        cwd=tmp_path, env=env)
  assert done.returncode == 1, done.stdout + done.stderr
  assert "reproduced with triton 3.6" in done.stdout
  assert SCAN_ASSERTION in done.stderr          # Triton's own words, on its stderr
  with open(script) as f:
    assert "pallas_prof" not in f.read()


def test_the_spans_say_what_failed_and_what_got_around_it(monkeypatch, tmp_path):
  if not TRITON_36:
    pytest.skip(f"Triton {triton_version()} compiles the trigger")
  from tests.instrument.spans import traced
  rec = lowered("cumsum_of_a_column")
  # on a GPU, lowering compiled it already and remembered what worked, in memory and on
  # disk: start again from nothing
  backend_compile.clear_memory_cache()
  workarounds.forget_all()
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "after_lowering"))
  with traced() as exporter:
    ck = compile_it(rec, monkeypatch, enabled=True)
  spans = [s for s in exporter.get_finished_spans() if s.name == "compile cumsum_of_a_column"]
  failed = [s for s in spans if s.status.status_code.name == "ERROR"]
  worked = [s for s in spans if "pallas.workarounds" in s.attributes]
  # the plain compile, then its retry on a fresh worker (a failure is Triton's only once
  # it reproduces: backend/compiling/failures/machine_faults.py), then the workaround
  assert len(failed) == 2 and len(worked) == 1
  assert [s.attributes["pallas.compile.fault"] for s in failed] == ["triton", "triton"]
  a = failed[-1].attributes
  assert (a["pallas.compile.fault"], a["triton.failed_pass"], a["pallas.compile.failed_op"]) == \
      ("triton", "ConvertTritonGPUToLLVM", "tt.scan")
  assert SCAN_ASSERTION in a["triton.assertion"]
  assert a["code.lineno"] == trigger_line("cumsum_of_a_column")
  assert list(a["pallas.compile.failed_eqn_indices"]) == [e.index for e in
                                                           ck.generated.eqns if e.primitive == "cumsum"]
  assert a["pallas.compile.reproducer"].endswith(".repro.py")
  assert list(worked[0].attributes["pallas.workarounds"]) == list(ck.generated.workarounds)
  assert worked[0].status.status_code.name != "ERROR"


def test_check_compile_says_what_a_finder_of_bugs_needs():
  """workarounds.check_compile: the fuzzer's one call per program."""
  rec = lowered("cumsum_of_a_column")
  found = workarounds.check_compile(rec.generated, rec.relower)
  assert found["compiled"] and found["still_failing"] is None
  if TRITON_36:
    f = found["failure"]
    assert (f["fault"], f["kind"], f["stage"], f["op_kind"]) == \
        ("triton", "assertion", "llir", "tt.scan")
    assert [(i, p) for i, p, _ in f["equations"]] and f["reproducer"]["script"]
    assert len(found["workarounds"]) == 1 and "squeeze" not in found["workarounds"][0] \
        and "size-1 axes" in found["workarounds"][0]
  else:
    assert found["failure"] is None and found["workarounds"] == []
  plain = lowered("cumsum_of_a_column")    # without a way to lower it again: still failing
  found = workarounds.check_compile(plain.generated)
  assert found["compiled"] == (not TRITON_36)
  assert (found["still_failing"] is not None) == TRITON_36
