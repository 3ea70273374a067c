"""Compiling generated kernels for sm_90 on a machine without a GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallas_prof
from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import compile_cache, warmup
from pallas_prof.backend import kernel_registry
from testkit.examples import lower_example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = ["vector_add", "softmax", "layer_norm", "matmul", "flash_attention"]


@pytest.fixture(autouse=True)
def _installed():
  """The examples install pallas-prof when first imported, once a process: a later test
  of this file finds them imported and must not depend on what other files' tests left
  (conftest's _install_state_kept puts the state back after each test)."""
  pallas_prof.install()


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_compiles_for_sm90(example):
  gk = lower_example(example)
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)
  assert ck.ptx.startswith("//") and ".target sm_90" in ck.ptx
  assert f".entry {gk.name}(" in ck.ptx
  assert isinstance(ck.cubin, bytes) and ck.cubin[:4] == b"\x7fELF"
  assert set(ck.asm) >= {"ttir", "ttgir", "llir", "ptx", "cubin"}
  # every stage timed, each positive, adding up to the whole compile within 10%
  assert list(ck.stage_seconds) == ["ttir", "ttgir", "llir", "ptx", "cubin"]
  assert all(t > 0 for t in ck.stage_seconds.values())
  total = sum(ck.stage_seconds.values())
  assert abs(total - ck.compile_seconds) <= 0.10 * ck.compile_seconds, (total, ck.compile_seconds)
  # resources from ptxas's own report
  assert ck.registers is not None and ck.registers > 0
  assert ck.spill_stores is not None and ck.stack_bytes is not None
  assert ck.num_warps == gk.num_warps and ck.num_stages == gk.num_stages


def test_resources_match_the_compiled_code():
  """Registers agree with cuobjdump's report of the cubin; shared memory with
  the buffers the TTGIR allocates (the matmul's pipelined A and B tiles)."""
  import re
  import triton
  gk = lower_example("matmul")
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)
  cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
  path = os.path.join(compile_cache.cache_dir(), "test_matmul.cubin")
  with open(path, "wb") as f:
    f.write(ck.cubin)
  out = subprocess.run([cuobjdump, "--dump-resource-usage", path], capture_output=True,
                       text=True, check=True).stdout
  regs = int(out.split("REG:")[1].split()[0])
  assert regs == ck.registers
  itemsize = {"bf16": 2, "f16": 2, "f32": 4, "i8": 1}
  allocs = [int(np.prod([int(d) for d in dims.split("x")])) * itemsize[dt]
            for dims, dt in re.findall(r"ttg\.local_alloc : \(\) -> !ttg\.memdesc<([0-9x]+)x(bf16|f16|f32|i8)",
                                       ck.asm["ttgir"])]
  assert len(allocs) == 2                       # the A and B tiles, num_stages deep
  assert ck.shared_bytes == sum(allocs) > 0


def test_repeated_compile_in_process_is_cached():
  gk = lower_example("softmax")
  first = pcompile.compile_kernel(gk)
  t0 = time.perf_counter()
  again = pcompile.compile_kernel(gk)
  elapsed = time.perf_counter() - t0
  assert again.cache == "memory" and again.ptx == first.ptx
  assert elapsed < 0.005, f"cached compile took {elapsed * 1e3:.2f} ms"


def test_second_process_reuses_disk_cache(tmp_path):
  script = f"""
import sys, time, json
sys.path.insert(0, {ROOT!r})
import jax.numpy as jnp
from testkit.examples import lower_example
from pallas_prof.backend.compiling import compile as pcompile
gk = lower_example("layer_norm")
t0 = time.perf_counter()
ck = pcompile.compile_kernel(gk)
print(json.dumps({{"cache": ck.cache, "seconds": time.perf_counter() - t0, "regs": ck.registers}}))
"""
  env = dict(os.environ, PALLAS_PROF_CACHE_DIR=str(tmp_path), JAX_PLATFORMS="cpu")
  runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                    text=True, check=True).stdout.strip().splitlines()[-1])
          for _ in range(2)]
  assert runs[0]["cache"] == "miss" and runs[1]["cache"] == "disk"
  assert runs[1]["regs"] == runs[0]["regs"]
  assert runs[1]["seconds"] < 0.05, runs


def test_lowering_is_deterministic():
  a = lower_example("flash_attention")
  b = lower_example("flash_attention")
  assert a.source == b.source and a.path == b.path


def test_a_compiler_crash_is_a_lowering_error_and_the_worker_recovers(tmp_path):
  """LLVM can abort the process it runs in; compiles run in a worker, so the
  user's process survives and gets a LoweringError naming the kernel."""
  from pallas_prof.backend.compiling import compile_worker
  if not compile_worker.enabled():
    pytest.skip("PALLAS_PROF_COMPILE_WORKER=0: compiling in-process")
  good = lower_example("vector_add")
  crashing = tmp_path / "crashing_kernel.py"
  # the worker imports the kernel's file; this one aborts the process on import
  crashing.write_text("import os\nos.abort()\n")
  import dataclasses
  # (the file is checked against the source before the compile: the source is its text)
  bad = dataclasses.replace(good, path=str(crashing), source=crashing.read_text(),
                            name=good.name)
  with pytest.raises(pallas_prof.LoweringError) as info:
    pcompile.compile_kernel(bad, ("cuda", 90), use_disk_cache=False)
  assert "crashed (signal SIGABRT)" in str(info.value)
  assert info.value.kernel == good.name
  # the next compile gets a fresh worker
  pcompile.clear_memory_cache()
  ck = pcompile.compile_kernel(good, ("cuda", 90), use_disk_cache=False)
  assert ck.registers > 0


def test_deferred_cubin_is_assembled_on_demand():
  """The GPU launch path stops at PTX; the cubin and ptxas's figures come later."""
  gk = lower_example("softmax")
  pcompile.clear_memory_cache()
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False, need_cubin=False)
  assert ck.cubin_deferred and "cubin" not in ck.stage_seconds
  assert ".entry" in ck.ptx and ck.registers is None
  full = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)   # memory hit, completed
  assert full is not ck and not full.cubin_deferred
  assert full.cubin[:4] == b"\x7fELF" and full.registers > 0 and "cubin" in full.stage_seconds


def test_kernels_differing_only_in_dtype_never_share_a_compile():
  """`o = x + y` reads the same for every dtype; its compile must not be shared
  (a cache keyed by the source alone once ran f32 code on int16 data)."""
  from jax.experimental import pallas as pl

  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

  ptx = {}
  for dtype in (jnp.float32, jnp.int16, jnp.uint32):
    kernel_registry.clear()
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), dtype),
                          compiler_params=pallas_prof.CompilerParams())
    jax.jit(call).lower(jnp.ones(8, dtype), jnp.ones(8, dtype))
    (rec,) = kernel_registry.kernels()
    assert f"x_ref {jnp.dtype(dtype).name}[8]" in rec.generated.source
    ptx[jnp.dtype(dtype).name] = pcompile.compile_kernel(rec.generated).ptx
  assert "add.f32" in ptx["float32"] or "add.rn.f32" in ptx["float32"]
  assert "add.f32" not in ptx["int16"] and "add.f32" not in ptx["uint32"]
  assert len(set(ptx.values())) == 3


def test_the_quick_triton_key_names_the_installed_triton():
  import triton
  from triton.runtime import cache
  from pallas_prof.backend.compiling import triton_run
  original = cache.triton_key
  try:
    triton_run.use_quick_triton_key()
    triton_run.use_quick_triton_key()          # idempotent
    key = cache.triton_key()
    assert key.startswith(f"{triton.__version__}-") and "libtriton" in key
    assert cache.triton_key.pallas_prof_quick
  finally:
    cache.triton_key = original


def test_the_compile_worker_runs_without_jax(tmp_path):
  """The worker imports Triton and triton_run.py only: JAX's import would delay
  every process's first compile."""
  from pallas_prof.backend.compiling import warmup_kernel, worker_main
  request = {"path": warmup_kernel.__file__, "name": "pallas_prof_warmup",
             "signature": {"x_ref": "*fp16", "y_ref": "*fp16", "o_ref": "*fp16"},
             "attrs": {(i,): [["tt.divisibility", 16]] for i in range(3)},
             "options": {"num_warps": 4, "num_stages": 2}, "target": ("cuda", 90),
             "need_cubin": False}
  proc = subprocess.Popen([sys.executable, "-X", "importtime", worker_main.__file__],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=open(tmp_path / "stderr", "w"))
  worker_main.send(proc.stdin, request)
  result = worker_main.recv(proc.stdout)
  proc.stdin.close()
  assert proc.wait(timeout=60) == 0
  assert "error" not in result and ".entry pallas_prof_warmup" in result["asm"]["ptx"]
  # and without hashing Triton's 415 MB library for Triton's own cache key
  assert result["quick_triton_key"] is True
  imported = [line.rsplit("|", 1)[-1].strip() for line in open(tmp_path / "stderr")
              if line.startswith("import time:")]
  assert "triton" in imported
  assert not [m for m in imported if m == "jax" or m.startswith(("jax.", "pallas_prof"))], imported


def test_the_warm_up_compiles_as_real_kernels_do(monkeypatch, tmp_path):
  """The background warm-up compiles to PTX with the real kernels' options, so
  it also prepares the libdevice link expf-using kernels (softmax) share."""
  from pallas_prof.backend.compiling import compile_worker
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  warmup.warm_up(90)
  (library,) = (tmp_path / "libdevice").glob("*.ll")
  text = library.read_text()
  assert "define float @__nv_expf(" in text and "call i32 @__nvvm_reflect" not in text


def test_the_worker_keeps_triton_s_cache_to_itself_and_cleans_up():
  """Triton's own cache (which pallas-prof never reads) lives in the worker's
  folder, not in ~/.triton/cache, and goes when the worker ends."""
  from pallas_prof.backend.compiling import compile_worker
  if not compile_worker.enabled():
    pytest.skip("compile worker disabled (PALLAS_PROF_COMPILE_WORKER=0)")
  compile_worker._worker.close()
  warmup.warm_up(90)
  workdir = compile_worker._worker.workdir
  cache = os.path.join(workdir, "triton-cache")
  written = [os.path.join(d, f) for d, _, files in os.walk(cache) for f in files]
  assert any(f.endswith(".ptx") for f in written)
  compile_worker._worker.close()
  assert not os.path.exists(workdir) and compile_worker._worker.proc is None
  warmup.warm_up(90)                   # and a new one starts on demand
  assert compile_worker._worker.workdir not in (None, workdir)


def test_the_warm_up_leaves_triton_to_the_worker(tmp_path):
  """install()'s warm-up must not import Triton into the user's process: on the
  GPU machine that is 0.3-0.5 s holding the GIL while the program runs."""
  code = ("import sys; from pallas_prof.backend.compiling import warmup as pc\n"
          "pc.start_warmup(90); status = pc.wait_for_warm_up(120)\n"
          "assert 'error' not in status and 'compiled_s' in status, status\n"
          "print(sorted(m for m in sys.modules if m == 'triton' or m.startswith('triton.')))\n")
  env = dict(os.environ, PALLAS_PROF_CACHE_DIR=str(tmp_path), PALLAS_PROF_COMPILE_WORKER="1",
             PALLAS_PROF_WARMUP="1", PYTHONPATH=ROOT)
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300, check=False)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.strip().splitlines()[-1] == "[]"


def test_start_warmup_boots_the_worker_and_imports_the_rules(monkeypatch, tmp_path):
  """What install() starts on a GPU machine: in a background thread, the worker's
  start (which compiles a tiny kernel in a child of its own) and this process's
  import of the lowering rules."""
  import sys
  from pallas_prof.backend.compiling import compile_worker
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  monkeypatch.delenv("PALLAS_PROF_WARMUP", raising=False)
  monkeypatch.setattr(warmup, "_warmup_thread", None)
  monkeypatch.setattr(warmup, "warmup_status", {})
  compile_worker._worker.close()
  warmup.start_warmup(90)
  thread = warmup._warmup_thread
  thread.join(timeout=120)
  assert not thread.is_alive()
  assert "pallas_prof.backend.lowering.rules" in sys.modules
  if compile_worker.enabled():
    assert compile_worker._worker.proc is not None and compile_worker._worker.proc.poll() is None
  if not compile_worker.enabled():
    return
  status = warmup.wait_for_warm_up(120)     # it says what it did, in order, for diagnostics
  assert list((tmp_path / "libdevice").glob("*.ll"))     # the warm-up compile ran
  assert "error" not in status, status
  assert 0 <= status["worker_started_s"] <= status["rules_imported_s"]
  assert status["worker_started_s"] < status["worker_ready_s"] < status["compiled_s"]
  assert set(status["stages_s"]) == {"ttir", "ttgir", "llir", "ptx"}


def test_a_compile_that_waits_for_the_worker_says_how_long(monkeypatch):
  """The first compile after the worker (re)starts waits for its start-up
  (Python, `import triton`); one queued behind another compile waits for that.
  Both waits are measured, kept on the compiled kernel, and shown in the trace
  as a `compile wait` span that opens the compile's span."""
  import threading

  from pallas_prof.backend.compiling import compile_worker
  from tests.instrument.spans import traced
  if not compile_worker.enabled():
    pytest.skip("compile worker disabled (PALLAS_PROF_COMPILE_WORKER=0)")
  gk = lower_example("vector_add")

  def fresh_compile():
    pcompile.clear_memory_cache()
    return pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False, need_cubin=False)

  compile_worker._worker.close()
  with traced() as exporter:
    started = fresh_compile()
  assert started.worker_wait_seconds > 0.02          # a Python start and `import triton`
  spans = exporter.get_finished_spans()
  (compile_span,) = [s for s in spans if s.name == f"compile {gk.name}"]
  (wait,) = [s for s in spans if s.name == "compile wait"]
  assert wait.parent.span_id == compile_span.context.span_id
  assert wait.start_time == compile_span.start_time
  assert wait.attributes["pallas.compile.worker_startup_ms"] > 20
  assert (compile_span.end_time - compile_span.start_time) / 1e9 == pytest.approx(
      started.compile_seconds + started.worker_wait_seconds, rel=1e-6)

  holding, release = threading.Event(), threading.Event()

  def another_compile():                 # holds the worker as a compile in flight would
    with compile_worker._worker.lock:
      holding.set()
      release.wait(10)

  other = threading.Thread(target=another_compile)
  other.start()
  holding.wait(10)
  send = compile_worker.compile

  def send_then_release(request):          # the other compile ends 0.3 s after ours is sent
    threading.Timer(0.3, release.set).start()
    return send(request)

  monkeypatch.setattr(compile_worker, "compile", send_then_release)
  with traced() as exporter:
    queued = fresh_compile()
  monkeypatch.undo()
  other.join()
  (wait,) = [s for s in exporter.get_finished_spans() if s.name == "compile wait"]
  assert wait.attributes["pallas.compile.worker_queue_ms"] >= 250
  assert wait.attributes["pallas.compile.worker_startup_ms"] < 250
  assert queued.worker_wait_seconds >= 0.25

  ready = fresh_compile()                # nothing ahead, the worker up: no wait to speak of
  assert ready.worker_wait_seconds < 0.25
  cached = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False, need_cubin=False)
  assert cached.cache == "memory" and cached.worker_wait_seconds == 0.0


def test_a_forked_child_keeps_its_hands_off_the_parent_s_worker(tmp_path):
  """After os.fork the child compiles with a worker of its own, and its exit
  (atexit included) leaves the parent's worker running."""
  code = r'''
import os, sys
from pallas_prof.backend.compiling import compile_worker
from pallas_prof.backend.compiling.compile_cache import libdevice_cache, triton_options
request = {"path": os.path.join(os.path.dirname(compile_worker.__file__), "warmup_kernel.py"),
           "name": "pallas_prof_warmup",
           "signature": {"x_ref": "*fp16", "y_ref": "*fp16", "o_ref": "*fp16"},
           "attrs": {(i,): [["tt.divisibility", 16]] for i in range(3)},
           "options": triton_options(num_warps=4, num_stages=2),
           "target": ("cuda", 90), "need_cubin": False, "libdevice_cache": libdevice_cache()}
assert "error" not in compile_worker.compile(request)
parent_worker = compile_worker._worker.proc
pid = os.fork()
if pid == 0:
  ok = compile_worker._worker.proc is None
  result = compile_worker.compile(request)
  ok = ok and "error" not in result and compile_worker._worker.proc.pid != parent_worker.pid
  sys.exit(0 if ok else 3)                  # a normal exit: atexit handlers run
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert parent_worker.poll() is None, "the child's exit ended the parent's worker"
assert "error" not in compile_worker.compile(request)
print("ok")
'''
  env = dict(os.environ, PALLAS_PROF_CACHE_DIR=str(tmp_path), PALLAS_PROF_COMPILE_WORKER="1",
             PYTHONPATH=ROOT)
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300, check=False)
  assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]
