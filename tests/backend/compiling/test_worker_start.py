"""The compile worker's start (issue #17 part 5: a process's first pallas_call):
install() starts it on a GPU machine and pallas_calls reuse it; nothing starts
without a GPU; a compile never waits behind the warm-up compile; closing the
worker ends the warm-up's child; a worker that dies is replaced."""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from pallas_prof.backend.compiling import compile_worker, warmup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytestmark = pytest.mark.skipif(not compile_worker.enabled(),
                                reason="compile worker disabled (PALLAS_PROF_COMPILE_WORKER=0)")


def _run(code: str, tmp_path, **env) -> str:
  full_env = dict(os.environ, PALLAS_PROF_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT,
                  JAX_PLATFORMS="cpu", **env)
  full_env.pop("PALLAS_PROF_WARMUP", None)
  full_env.pop("PALLAS_PROF_COMPILE_WORKER", None)
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=full_env, timeout=300, check=False)
  assert res.returncode == 0, res.stderr[-3000:]
  return res.stdout.strip().splitlines()[-1]


_KERNEL = r'''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from pallas_prof.backend.compiling import compile as pcompile, compile_worker, warmup
from pallas_prof.backend import kernel_registry

def kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + 1.0

def first_kernel():
  fn = jax.jit(lambda a: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype))(a))
  fn.lower(jax.ShapeDtypeStruct((8, 128), jnp.float32))
  (record,) = kernel_registry.kernels()
  return record.generated
'''


def test_install_on_a_gpu_machine_starts_the_worker_and_the_first_compile_uses_it(tmp_path):
  """install() with a GPU (NVML's answer stood in for) starts the worker at once;
  the first compile goes to that same process, which the warm-up's child did
  not hold up, and the warm-up's compile ends in its own time."""
  code = _KERNEL + r'''
import pallas_prof
from pallas_prof.backend import pallas_call_rule
pallas_call_rule._nvml_capability = lambda: 90       # what NVML says on an H100/H200
import sys
assert "pallas_prof.tune.params" not in sys.modules
pallas_prof.install()
warmup._warmup_thread.join(60)
# what the first lowering would import, imported in the background meanwhile
assert "pallas_prof.tune.params" in sys.modules
started = compile_worker._worker.proc
assert started is not None and started.poll() is None, "install() started no worker"
ck = pcompile.compile_kernel(first_kernel(), ("cuda", 90), need_cubin=False)
assert ".entry kernel" in ck.ptx
assert compile_worker._worker.proc is started, "the compile started another worker"
status = warmup.wait_for_warm_up(120)
assert "error" not in status and status["compiled_s"] > status["worker_ready_s"] > 0, status
print("ok")
'''
  assert _run(code, tmp_path) == "ok"


def test_nothing_starts_without_a_gpu(tmp_path):
  """On a machine without a GPU install() starts no worker, and a pallas_call
  runs in Triton's interpreter without one."""
  code = _KERNEL + r'''
import numpy as np
import pallas_prof
from pallas_prof.backend import pallas_call_rule
pallas_call_rule._nvml_capability = lambda: None     # what NVML says without a GPU
pallas_prof.install()
warmup._warmup_thread.join(60)                   # NVML is asked in the background
assert warmup.status()["gpu"] is None and compile_worker._worker.proc is None
x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
out = jax.jit(lambda a: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype))(a))(x)
np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2 + 1)
assert compile_worker._worker.proc is None
print("ok")
'''
  assert _run(code, tmp_path) == "ok"


def test_install_does_not_wait_for_nvml(tmp_path):
  """install() asks NVML for the GPU in the warm-up's thread: a slow answer
  (here 3 s) does not hold up the program."""
  code = r'''
import time
import pallas_prof
from pallas_prof.backend import pallas_call_rule
from pallas_prof.backend.compiling import warmup
pallas_call_rule._nvml_capability = lambda: time.sleep(3)   # slow, then no GPU
t = time.perf_counter()
pallas_prof.install()
took = time.perf_counter() - t
warmup._warmup_thread.join(60)
assert took < 1.5 and warmup.status()["gpu_asked_s"] >= 3, (took, warmup.status())
print("ok")
'''
  assert _run(code, tmp_path) == "ok"


def _slow_warm_up(tmp_path, seconds: float) -> dict:
  """A warm-up request whose kernel module sleeps as it is imported (and says its pid)."""
  path = tmp_path / "slow_warm_up_kernel.py"
  source = open(os.path.join(ROOT, "pallas_prof", "backend", "compiling",
                             "warmup_kernel.py")).read()
  path.write_text(f"import os, time\nopen({str(tmp_path / 'child.pid')!r}, 'w')"
                  f".write(str(os.getpid()))\ntime.sleep({seconds})\n" + source)
  return dict(warmup.warm_up_request(90), path=str(path))


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"     # a zombie has ended
  except OSError:
    return False


def test_a_compile_does_not_wait_behind_the_warm_up_compile(tmp_path, monkeypatch):
  """The warm-up compiles in a child of the worker: a compile sent at once is
  answered while that child is still busy (here for 60 s), and closing the
  worker ends the child too."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  compile_worker._worker.close()
  slow = _slow_warm_up(tmp_path, 60)
  start = time.monotonic()
  compile_worker.start(warm_up=slow)
  result = compile_worker.compile(warmup.warm_up_request(90))
  assert "error" not in result and ".entry pallas_prof_warmup" in result["asm"]["ptx"]
  assert time.monotonic() - start < 50
  assert compile_worker.warm_up_answer() is None          # the child is still asleep
  child = int((tmp_path / "child.pid").read_text())
  assert _alive(child)
  compile_worker._worker.close()
  deadline = time.monotonic() + 10
  while _alive(child) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not _alive(child), "the warm-up's child outlived its worker"


def test_the_warm_up_answer_comes_back_and_the_worker_stays_the_same(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  compile_worker._worker.close()
  compile_worker.start(warm_up=warmup.warm_up_request(90))
  worker = compile_worker._worker.proc
  deadline = time.monotonic() + 120
  while compile_worker.warm_up_answer() is None and time.monotonic() < deadline:
    time.sleep(0.02)
  answer = compile_worker.warm_up_answer()
  assert answer is not None and "error" not in answer, answer
  assert ".entry pallas_prof_warmup" in answer["asm"]["ptx"]
  assert list((tmp_path / "libdevice").glob("*.ll"))      # what it prepares for later compiles
  assert compile_worker.compile(warmup.warm_up_request(90))["asm"]["ptx"]
  assert compile_worker._worker.proc is worker
  compile_worker._worker.close()


def test_a_worker_that_died_is_replaced_by_the_next_compile(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  request = warmup.warm_up_request(90)
  assert "error" not in compile_worker.compile(request)
  dead = compile_worker._worker.proc
  os.kill(dead.pid, signal.SIGKILL)
  dead.wait(10)
  result = compile_worker.compile(request)
  assert "error" not in result and ".entry pallas_prof_warmup" in result["asm"]["ptx"]
  assert compile_worker._worker.proc is not dead and compile_worker._worker.proc.poll() is None


def test_the_worker_asks_ptxas_its_version_as_it_starts(tmp_path):
  """Both of Triton's ptxas queries are answered (cached) once the worker has
  imported the compiler, so no compile runs `ptxas --version`."""
  triton_run = os.path.join(ROOT, "pallas_prof", "backend", "compiling", "triton_run.py")
  code = (f"import importlib.util, sys\n"
          f"spec = importlib.util.spec_from_file_location('tr', {triton_run!r})\n"
          "m = importlib.util.module_from_spec(spec); sys.modules['tr'] = m; spec.loader.exec_module(m)\n"
          "m.import_compiler(90)\n"
          "import triton.backends.nvidia.compiler as nvidia\n"
          "from triton import knobs\n"
          "print(nvidia.get_ptxas_version.cache_info().currsize, "
          "knobs.NvidiaTool.from_path.cache_info().currsize)\n")
  assert _run(code, tmp_path) == "1 1"


def test_the_worker_finds_triton_s_backends_in_its_folder_unless_told_otherwise(monkeypatch):
  """TRITON_BACKENDS_IN_TREE=1 in the worker (not in this process), and a
  setting of the user's own goes through as it is."""
  def worker_environ():
    compile_worker._worker.close()
    compile_worker.start()
    proc = compile_worker._worker.proc
    assert compile_worker.compile({"op": "ping"})["pid"] == proc.pid
    with open(f"/proc/{proc.pid}/environ", "rb") as f:
      return f.read().split(b"\0")

  monkeypatch.delenv("TRITON_BACKENDS_IN_TREE", raising=False)
  assert b"TRITON_BACKENDS_IN_TREE=1" in worker_environ()
  assert "TRITON_BACKENDS_IN_TREE" not in os.environ
  monkeypatch.setenv("TRITON_BACKENDS_IN_TREE", "0")
  assert b"TRITON_BACKENDS_IN_TREE=0" in worker_environ()
  compile_worker._worker.close()


def test_the_worker_freezes_triton_s_objects_without_a_collection_as_it_starts():
  """Triton's objects are frozen before the first request (later collections
  skip them), and no full collection delays that request."""
  compile_worker._worker.close()
  compile_worker.start()
  first = compile_worker.compile({"op": "ping"})
  assert first["frozen"] > 10_000 and first["full_collections"] == 0, first
  compile_worker._worker.close()


def _ping_after_marker(tmp_path, seconds: float) -> dict:
  deadline = time.monotonic() + 60
  while not (tmp_path / "child.pid").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
  time.sleep(seconds)
  return compile_worker.compile({"op": "ping"})


def test_the_worker_warms_itself_up_while_idle(tmp_path, monkeypatch):
  """With nothing asked of it, the worker compiles the tiny kernel itself."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  compile_worker._worker.close()
  here = dict(_slow_warm_up(tmp_path, 0), name="pallas_prof_warmup_tiny",
              signature={"x_ref": "*fp32", "o_ref": "*fp32"},
              attrs={(i,): [["tt.divisibility", 16]] for i in range(2)})
  compile_worker.start(warm_up_here=here)
  # a ping is a request, and one that comes during the warm-up stops it: give the tiny
  # compile ample time first (well under a second idle, seconds on a loaded CI machine)
  assert _ping_after_marker(tmp_path, 10)["warmed_here"] == "done"
  compile_worker._worker.close()


def test_the_worker_s_own_warm_up_gives_way_to_a_request(tmp_path, monkeypatch):
  """A request waiting as the worker comes up: no warm-up of its own. One that
  comes during it (here while its kernel module is still loading, for 2 s)
  stops it before Triton's next stage, and is answered as usual."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  request = warmup.warm_up_request(90)
  compile_worker._worker.close()
  compile_worker.start(warm_up_here=warmup.tiny_warm_up_request(90))
  assert "error" not in compile_worker.compile(request)       # sent before the worker is up
  assert compile_worker.compile({"op": "ping"})["warmed_here"] == "skipped"
  compile_worker._worker.close()
  here = dict(_slow_warm_up(tmp_path, 2), name="pallas_prof_warmup_tiny",
              signature={"x_ref": "*fp32", "o_ref": "*fp32"},
              attrs={(i,): [["tt.divisibility", 16]] for i in range(2)})
  compile_worker.start(warm_up_here=here)
  deadline = time.monotonic() + 60
  while not (tmp_path / "child.pid").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
  result = compile_worker.compile(request)
  assert "error" not in result and ".entry pallas_prof_warmup" in result["asm"]["ptx"]
  assert compile_worker.compile({"op": "ping"})["warmed_here"] == "stopped at ttir"
  compile_worker._worker.close()
