"""examples/selective_scan.py: a Mamba-style selective scan, forward and backward.

On the CPU: both kernels against the float64 numpy recurrence (itself checked
against finite differences) under Triton's interpreter; jax.vjp of the
custom_vjp gives what the kernels give; both compile for sm_90, Triton 3.6's
scan assertion got around; with the workaround off, the explained error names
the example's cumsum line and the assertion; `pallas-prof run` on the example.
On a GPU (marked gpu): the compiled kernels against the float64 reference.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import pallas_prof
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.failures import workarounds
from pallas_prof.backend.running.launch import run_interpreted
from pallas_prof.backend.compiling.triton_compat import triton_release as triton_version
from pallas_prof.instrument import error_text
from pallas_prof.profiler import driver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "selective_scan.py")
TRITON_36 = triton_version().startswith("3.6")
GPU = driver.gpu_status()[0]
SCAN_ASSERTION = ("numScanBlocks * numParallelBlocks * parallelElementsPerThread * "
                  "scanElementsPerThreads == srcValues.size()")


@pytest.fixture(autouse=True)
def _installed():
  """The example installs pallas-prof when it is first imported; a later test finds it
  imported, and pallas-prof as the test before it left it (the suite restores each test's
  state): these failed with JAX's "Only interpret mode is supported on CPU" after any other
  test file in the same process."""
  pallas_prof.install()


def example():
  sys.path.insert(0, os.path.dirname(EXAMPLE))
  try:
    import selective_scan
  finally:
    sys.path.pop(0)
  return selective_scan


def cumsum_line(kernel: str) -> int:
  """The example's line of `da = jnp.cumsum(dt[:, None], axis=0) * a[None, :]` in `kernel`."""
  with open(EXAMPLE) as f:
    lines = f.read().splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith(f"def {kernel}("))
  return next(i for i in range(start, len(lines))
              if "jnp.cumsum(dt[:, None], axis=0)" in lines[i]) + 1


@pytest.mark.parametrize("channels,length", [(3, 48), (2, 80)])
def test_both_kernels_match_the_float64_recurrence(channels, length, rng):
  s = example()
  seed = int(rng.integers(2**31))
  errs = s.errors(seed, channels, length)
  assert set(errs) == set(s.NAMES)
  assert max(errs.values()) < s.TOLERANCE, errs


def test_the_reference_s_gradients_are_the_finite_differences(rng):
  s = example()
  x, dt, A, B, C, dy = (np.asarray(v, np.float64) for v in s.inputs(int(rng.integers(2**31)), 2, 5))
  grads = s.reference(x, dt, A, B, C, dy)[1:]
  args = [x, dt, A, B, C]
  for arg, grad in zip(range(5), grads):
    for flat in rng.choice(args[arg].size, 3, replace=False):
      step = 1e-6
      up = [a.copy() for a in args]
      down = [a.copy() for a in args]
      up[arg].reshape(-1)[flat] += step
      down[arg].reshape(-1)[flat] -= step
      numeric = (np.sum(s.reference(*up, dy)[0] * dy) - np.sum(s.reference(*down, dy)[0] * dy)) \
          / (2 * step)
      assert abs(numeric - grad.reshape(-1)[flat]) <= 1e-6 * max(1.0, abs(numeric)), (arg, flat)


def test_jax_vjp_of_the_custom_vjp_is_the_kernels(rng):
  s = example()
  x, dt, A, B, C, dy = s.inputs(int(rng.integers(2**31)), 2, 32)
  y, vjp = jax.vjp(s.selective_scan, x, dt, A, B, C)
  direct_y, states = s.forward(x, dt, A, B, C)
  np.testing.assert_array_equal(y, direct_y)
  for name, got, want in zip(s.NAMES[1:], vjp(dy), s.backward(x, dt, A, B, C, states, dy)):
    if name in ("dB", "dC"):   # atomic adds: on a GPU their order is not fixed
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
    else:
      np.testing.assert_array_equal(got, want, err_msg=name)


def lowered():
  """The forward and backward kernels' registry records."""
  s = example()
  kernel_registry.clear()
  jax.clear_caches()
  x, dt, A, B, C, dy = s.inputs(0, 2, 32)
  s.forward.lower(x, dt, A, B, C)
  states = jax.ShapeDtypeStruct((2, 2, A.shape[1]), np.float32)
  s.backward.lower(x, dt, A, B, C, states, dy)
  return kernel_registry.find("forward_kernel")[-1], kernel_registry.find("backward_kernel")[-1]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
  """No compile, and no plan that worked, remembered from another test."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  backend_compile.clear_memory_cache()
  workarounds.forget_all()
  return monkeypatch


@pytest.mark.parametrize("which", [0, 1])
def test_both_compile_for_sm90(which, fresh):
  rec = lowered()[which]
  fresh.setenv(workarounds.ENV, "1")
  ck = workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                          use_disk_cache=False)
  assert ".target sm_90" in ck.ptx and ck.cubin[:4] == b"\x7fELF"
  kernel = ("forward_kernel", "backward_kernel")[which]
  if TRITON_36:
    (note,) = ck.generated.workarounds
    assert f"cumsum at selective_scan.py:{cumsum_line(kernel)}" in note and "size-1" in note
    # the scan of the column is reshaped; the others (the cumsum of u, the backward's
    # reversed cumsum) stay plain
    gk = ck.generated
    source = gk.source.splitlines()
    for e in gk.eqns:
      if e.primitive == "cumsum":
        emitted = "\n".join(source[i - 1] for i in e.lines)
        assert ("tl.reshape(" in emitted) == (e.line == cumsum_line(kernel)), emitted
        assert "tl.cumsum(" in emitted
  else:
    assert ck.generated.workarounds == ()
  # what compiled computes what the interpreter ran, bit for bit
  s = example()
  x, dt, A, B, C, dy = (np.asarray(v) for v in s.inputs(5, 2, 32))
  y, states = (np.asarray(v) for v in s.forward(x, dt, A, B, C))
  args = [x, dt, A, B, C] if which == 0 else [x, dt, A, B, C, states, dy]
  shapes = [(tuple(p.shape), np.dtype(p.dtype)) for p in rec.generated.outputs]
  for got, want in zip(run_interpreted(ck.generated, args, shapes),
                       run_interpreted(rec.generated, args, shapes)):
    np.testing.assert_array_equal(got, want)


def test_with_the_workaround_off_the_error_names_the_cumsum_line(fresh):
  if not TRITON_36:
    pytest.skip(f"Triton {triton_version()} compiles the selective scan plainly")
  forward, _ = lowered()
  fresh.setenv(workarounds.ENV, "0")
  with pytest.raises(pallas_prof.CompileError) as info:
    workarounds.compile_working_around(forward.generated, ("cuda", 90), forward.relower,
                                       use_disk_cache=False)
  err = info.value
  line = cumsum_line("forward_kernel")
  assert (err.eqn.primitive, os.path.realpath(err.eqn.file), err.eqn.line) == \
      ("cumsum", os.path.realpath(EXAMPLE), line)
  text = error_text(err)
  assert f"selective_scan.py:{line}" in text and SCAN_ASSERTION in text
  assert "jnp.cumsum(dt[:, None], axis=0)" in text          # the user's line, shown
  assert "Triton's, not your kernel's" in text and "reproducer:" in text
  assert "PALLAS_PROF_WORKAROUNDS=0" in text


def run_example(tmp_path, *, workaround: bool):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"))
  env[workarounds.ENV] = "1" if workaround else "0"
  env.pop("PALLAS_PROF_TRACE", None)
  out = tmp_path / "run"
  # --no-profile: the compile and the report are the point (no replay, no sampling on a GPU)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--no-profile", "--out",
                         str(out), EXAMPLE, "--seed", "7"], capture_output=True, text=True,
                        cwd=tmp_path,
                        env=env, timeout=600)
  return done, json.loads((out / "report.json").read_text()), out


def test_pallas_prof_run_compiles_it_and_says_so(tmp_path):
  done, report, out = run_example(tmp_path, workaround=True)
  assert done.returncode == 0, done.stdout + done.stderr
  assert report["errors"] == []
  kernels = {k["name"]: k for k in report["kernels"]}
  assert set(kernels) == {"forward_kernel", "backward_kernel"}
  for name, k in kernels.items():
    assert k["resources"]["registers"] > 0                 # compiled for sm_90
    if TRITON_36:
      (note,) = k["workarounds"]
      assert f"selective_scan.py:{cumsum_line(name)}" in note
      assert f"Triton workaround: {note}" in (out / k["files"]["source"]).read_text()
      assert f"{k['label']}: Triton workaround:" in done.stdout
  if TRITON_36:
    html = (out / "report.html").read_text()
    assert html.count("Triton workaround") >= 2
    assert f"selective_scan.py:{cumsum_line('forward_kernel')}" in html
  if TRITON_36:          # the compile span of the kernel that compiled says what was changed
    spans = [s for line in (out / "trace.otlp.jsonl").read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    noted = [s for s in spans if s["name"] == "compile forward_kernel" and any(
        a["key"] == "pallas.workarounds" for a in s["attributes"])]
    assert noted


def test_pallas_prof_run_with_the_workaround_off_explains_the_failure(tmp_path):
  if not TRITON_36:
    pytest.skip(f"Triton {triton_version()} compiles the selective scan plainly")
  done, report, out = run_example(tmp_path, workaround=False)
  by_kernel = {e["kernel"].split("#")[0]: e for e in report["errors"]}
  if GPU:      # the script's first call fails to compile: it stops there
    assert done.returncode == 1 and set(by_kernel) == {"forward_kernel"}
  else:        # the script ran (the interpreter); the compiles after it failed
    assert done.returncode == 0, done.stderr
    assert set(by_kernel) == {"forward_kernel", "backward_kernel"}
  for name, e in by_kernel.items():
    failure = e["compile_failure"]
    assert (failure["fault"], failure["failing_pass"], failure["op_kind"]) == \
        ("triton", "ConvertTritonGPUToLLVM", "tt.scan")
    assert SCAN_ASSERTION in failure["assertion"]
    assert f"selective_scan.py:{cumsum_line(name)}" in e["location"]
    assert failure["reproducer"]["script"].endswith(".repro.py")
    assert "PALLAS_PROF_WORKAROUNDS=0" in failure["workaround"]
    assert SCAN_ASSERTION in e["report"]
  assert "fault: Triton's, not the kernel's" in done.stdout
  html = (out / "report.html").read_text()
  assert "ScanOpToLLVM.cpp" in html and "not your kernel" in html


@pytest.mark.gpu
@pytest.mark.parametrize("channels,length", [(64, 256), (1024, 4096)])
def test_on_the_gpu_it_matches_the_float64_recurrence(channels, length, rng):
  s = example()
  errs = s.errors(int(rng.integers(2**31)), channels, length)
  assert max(errs.values()) < s.TOLERANCE, errs
  if TRITON_36:
    compiled = [r.compiled for r in kernel_registry.kernels()
                if r.name in ("forward_kernel", "backward_kernel")]
    assert compiled and all(ck.generated.workarounds for ck in compiled)
