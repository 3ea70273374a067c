"""pallas-prof's share of a process's first pallas_call on the GPU path, measured
on a machine without a GPU (issue #17 part 5): medians of fresh processes.

    python bench/first_call/first_call_cpu.py [--delays 0,1] [--processes 5] [--roots CHECKOUT,...] [--out f.json]

Each fresh process (empty pallas-prof cache, as on a first run) imports JAX and
pallas-prof, installs as on a GPU machine (NVML's answer, sm_90, stood in for:
install() then starts what it starts there), sleeps the
delay, starts XLA with a jitted multiply, then times a tiny kernel's
first call up to its PTX: tracing and lowering to Triton source (`lower_s`;
the CPU lowering, whose Triton source is the GPU's) and the compile for sm_90
(`compile_s`: the wait for the compile worker plus Triton's stages). What
XLA and jaxlib add on a GPU (their compile, ptxas, the launch) is not here:
bench/first_call/process_first_call.py measures the whole on the GPU.

--roots runs each checkout's pallas_prof (say, main before a change, and this
one) with this script, taking turns process by process, so that the load of a
shared machine falls on each alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(delay: float) -> dict:
  start = time.perf_counter()
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  imported_jax = time.perf_counter()

  import pallas_prof
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend import pallas_call_rule, kernel_registry
  from pallas_prof.backend.compiling import warmup
  imported = time.perf_counter()
  pallas_call_rule._nvml_capability = lambda: 90   # NVML's answer on an H100/H200 stood in for
  pallas_prof.install()                        # so install() starts what it starts there
  installed = time.perf_counter()
  time.sleep(delay)
  x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
  jax.block_until_ready(jax.jit(lambda a: a * 3.0)(x))       # XLA's start, as on the GPU

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0

  fn = jax.jit(lambda a: pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape,
                                                                                a.dtype))(a))
  t0 = time.perf_counter()
  fn.lower(x)
  (record,) = kernel_registry.kernels()
  t1 = time.perf_counter()
  ck = pcompile.compile_kernel(record.generated, ("cuda", 90), need_cubin=False)
  t2 = time.perf_counter()
  status = warmup.status() if hasattr(warmup, "status") else dict(warmup.warmup_status)
  return {"import_jax_s": imported_jax - start, "import_pallas_prof_s": imported - imported_jax,
          "install_s": installed - imported, "first_call_since_install_s": t0 - installed,
          "first_call_s": t2 - t0, "lower_s": t1 - t0, "compile_s": t2 - t1,
          "worker_wait_s": ck.worker_wait_seconds, "triton_s": ck.compile_seconds,
          "stages_s": dict(ck.stage_seconds), "background_warm_up": status,
          "worker_command": getattr(pcompile.compile_worker._worker.proc, "args", None)}


def run_child(root: str, delay: float) -> dict:
  with tempfile.TemporaryDirectory(prefix="pallas-prof-first-call-") as cache:
    env = dict(os.environ, PYTHONPATH=root, PALLAS_PROF_CACHE_DIR=cache, JAX_PLATFORMS="cpu")
    env.pop("PALLAS_PROF_WARMUP", None)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(delay)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
  lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
  if done.returncode != 0 or not lines:
    raise RuntimeError(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
  return json.loads(lines[-1][len("RESULT "):])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--delays", default="0,1")
  ap.add_argument("--processes", type=int, default=5)
  ap.add_argument("--roots", default=ROOT, help="the checkouts whose pallas_prof runs, by commas")
  ap.add_argument("--out")
  ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child is not None:
    print("RESULT " + json.dumps(child(args.child), default=str), flush=True)
    return 0
  sys.path.insert(0, ROOT)
  from bench import save_record
  roots = args.roots.split(",")
  commits = {root: subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %s"],
                                  capture_output=True, text=True,
                                  check=False).stdout.strip()[:60] for root in roots}
  record = {"command": "python bench/first_call/first_call_cpu.py " + " ".join(argv or sys.argv[1:]),
            "commits": commits, "device": "cpu (no GPU; kernels compiled for sm_90)",
            "load_average_before": os.getloadavg(), "by_root": {}}
  keys = ("first_call_s", "lower_s", "compile_s", "worker_wait_s", "triton_s",
          "import_pallas_prof_s", "install_s")
  print(f"medians of {args.processes} fresh processes per row, ms (CPU)")
  print("delay s  " + "  ".join(k[:-2] for k in keys) + "  warm-up compiled at s  checkout")
  for delay in (float(d) for d in args.delays.split(",")):
    runs = {root: [] for root in roots}
    for _ in range(args.processes):
      for root in roots:
        runs[root].append(run_child(root, delay))
    for root in roots:
      medians = {k: statistics.median(r[k] for r in runs[root]) for k in keys}
      done = [r["background_warm_up"].get("compiled_s") for r in runs[root]]
      record["by_root"].setdefault(root, {})[str(delay)] = {"medians_s": medians,
                                                            "runs": runs[root]}
      print(f"{delay:6.1f}  " + "  ".join(f"{medians[k] * 1e3:{len(k) - 2}.0f}" for k in keys)
            + "  " + ",".join(f"{d:.2f}" if d else "-" for d in done) + f"  {commits[root]}")
  record["load_average_after"] = os.getloadavg()
  save_record(args.out, record)
  return 0


if __name__ == "__main__":
  sys.exit(main())
