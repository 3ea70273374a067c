"""The ROCm path's compile is every compile's (issue 40): Triton compiles the kernel for
the gfx arch in the compile worker, so a worker that dies, or a crash of Triton's, is a
CompileError naming the kernel, the user's program lives on, and nothing of the fault
is kept (running/rocm.py, compiling/for_targets.py).

Each test asserts the suite's three properties (tests/faults/inject.py): the error is
clear; nothing wrong persisted (the next lowering compiles and lowers); where a run was
going on (`pallas-prof run`), its report exists. The lowering here is jax.export for
`rocm` on the CPU: no AMD GPU runs anything.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend.compiling import compile_worker, worker_output
from pallas_prof.backend.compiling.failures import machine_faults
from pallas_prof.backend.running import rocm
from tests.faults import inject
from tests.faults.inject import Killer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(
    os.environ.get("PALLAS_PROF_COMPILE_WORKER") == "0",
    reason="PALLAS_PROF_COMPILE_WORKER=0 compiles in this process: no worker to kill")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
  """A cache of the test's own, nothing compiled or warned yet, a worker of this test's."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.setattr(machine_faults, "_warned", [])
  monkeypatch.setattr(rocm, "_compiled", {})
  backend_compile.clear_memory_cache()
  compile_worker.replace()
  yield
  compile_worker.replace()
  backend_compile.clear_memory_cache()


def _plus_two_call():
  def plus_two(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 2.0
  return pl.pallas_call(plus_two, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())


def _export_for_rocm(call, x) -> str:
  device = jax.sharding.AbstractDevice(device_kind="gfx942", num_cores=None, platform="rocm")
  mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
  with jax.sharding.use_abstract_mesh(mesh):
    return export.export(jax.jit(call), platforms=["rocm"], disabled_checks=[
        export.DisabledSafetyCheck.custom_call(rocm.XLA_TRITON_TARGET)])(x).mlir_module()


@pytest.mark.fault("kill_worker")
def test_a_worker_killed_every_time_in_the_gfx_compile_is_a_clear_error_and_keeps_nothing(
    monkeypatch, tmp_path):
  folder = tmp_path / "paused"
  folder.mkdir()
  monkeypatch.setenv(worker_output.TEST_PAUSE_ENV, f"ttgir:{folder}")
  compile_worker.replace()                      # a worker that pauses where told
  x = np.arange(256, dtype=np.float32)
  call = _plus_two_call()
  with Killer(str(folder), signal.SIGKILL, kills=99) as killer, \
      pytest.raises(pallas_prof.CompileError) as info:
    _export_for_rocm(call, x)
  assert len(killer.killed) == 2, killer.killed        # the compile and its one retry
  err = info.value
  assert err.fault == "machine", str(err)
  inject.assert_clear(str(err), "cannot compile kernel `plus_two` (ttgir stage)",
                      "killed (SIGKILL) from outside Triton", "target: AMD gfx942",
                      "not checked on AMD hardware", f"pallas_call: {__file__}")
  assert "run again" in err.hint
  # nothing kept: no AMD kernel remembered, no compile on disk; the next lowering, on a
  # worker that is not paused, compiles it whole and emits the custom call
  assert rocm._compiled == {}
  monkeypatch.delenv(worker_output.TEST_PAUSE_ENV)
  compile_worker.replace()
  text = _export_for_rocm(call, x)
  assert rocm.XLA_TRITON_TARGET in text and '"plus_two"' in text
  [kernel] = rocm._compiled.values()
  assert kernel.arch == "gfx942" and kernel.hsaco[:4] == b"\x7fELF"


SCRIPT = textwrap.dedent("""\
    import dataclasses, sys
    import jax, jax.numpy as jnp, numpy as np
    from jax import export
    from jax.experimental import pallas as pl
    import pallas_prof
    from pallas_prof import triton as plgpu
    from pallas_prof.backend.running import rocm

    def plus_three(x_ref, o_ref):
      o_ref[...] = x_ref[...] + 3.0

    call = pl.pallas_call(plus_three, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                          compiler_params=plgpu.CompilerParams())
    x = np.arange(256, dtype=np.float32)

    def export_for_rocm():
      device = jax.sharding.AbstractDevice(device_kind="gfx942", num_cores=None,
                                           platform="rocm")
      mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
      with jax.sharding.use_abstract_mesh(mesh):
        return export.export(jax.jit(call), platforms=["rocm"], disabled_checks=[
            export.DisabledSafetyCheck.custom_call(rocm.XLA_TRITON_TARGET)])(x).mlir_module()

    # the kernel's file aborts the process that loads it to compile it, as LLVM's abort()
    # would in Triton's AMD backend
    real = rocm.compile_for_gfx
    rocm.compile_for_gfx = lambda gk, arch: real(dataclasses.replace(
        gk, path=sys.argv[1], source=open(sys.argv[1]).read()), arch)
    try:
      export_for_rocm()
      print("no error")
    except pallas_prof.CompileError as e:
      print("CompileError:", e)
    rocm.compile_for_gfx = real
    print("lowered again:", rocm.XLA_TRITON_TARGET in export_for_rocm())
    np.testing.assert_array_equal(np.asarray(call(x)), x + 3)      # on the CPU
    print("the answer is right")
    """)


@pytest.mark.fault("kill_worker")
def test_a_triton_crash_in_the_gfx_compile_ends_the_worker_not_the_users_run(tmp_path):
  crash = tmp_path / "crashing_kernel.py"
  crash.write_text("import os\nos.write(2, b'LLVM says: something broke\\n')\nos.abort()\n")
  script = tmp_path / "script.py"
  script.write_text(SCRIPT)
  out = tmp_path / "run"
  env = dict(os.environ, COLUMNS="200", PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"),
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.pop("PALLAS_PROF_TRACE", None)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--no-analysis",
                         "--out", str(out), str(script), str(crash)], capture_output=True,
                        text=True, env=env, cwd=tmp_path, timeout=300)
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode == 0, done.stderr[-3000:]
  inject.assert_clear(done.stdout, "CompileError: cannot compile kernel `plus_three`",
                      "crashed (signal SIGABRT)", "your program survives this",
                      "target: AMD gfx942", "LLVM says: something broke")
  # nothing of the crash kept: the same call lowers for ROCm, and runs right on the CPU
  assert "lowered again: True" in done.stdout and "the answer is right" in done.stdout
  inject.assert_report(str(out))
  report = json.loads((out / "report.json").read_text())
  assert report["exit_code"] == 0
