"""Lowering and compile latency of the examples' kernels.

    python bench/first_call/compile_latency.py [--out bench/results/compile_latency_<host>.json]

For each example kernel: lowering time (jaxpr -> Triton source), a cold
compile (no cache) with its per-stage split, a compile answered from the
in-process cache, and one answered from the disk cache by a fresh process.
Runs on CPU (compiles for sm_90 with the wheel's ptxas) or on a GPU machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
EXAMPLES = ["vector_add", "softmax", "layer_norm", "matmul", "flash_attention"]

_CHILD = """
import sys, time, json
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
from testkit.examples import lower_example
gk = lower_example({name!r})
t1 = time.perf_counter()
from pallas_prof.backend.compiling import compile as pcompile
ck = pcompile.compile_kernel(gk)
t2 = time.perf_counter()
print(json.dumps({{"cache": ck.cache, "lower": t1 - t0, "compile": t2 - t1}}))
"""


def measure(name: str, repeats: int) -> dict:
  from pallas_prof.backend.compiling import compile as pcompile, compile_cache
  from testkit.examples import lower_example
  lowerings, colds, stages = [], [], []
  for _ in range(repeats):
    gk = lower_example(name)
    lowerings.append(gk.lowering_seconds)   # jaxpr -> Triton source (not JAX's tracing)
    pcompile.clear_memory_cache()
    ck = pcompile.compile_kernel(gk, use_disk_cache=False)
    colds.append(ck.compile_seconds)
    stages.append(dict(ck.stage_seconds))
  t0 = time.perf_counter()
  hit = pcompile.compile_kernel(gk)
  memory_hit = time.perf_counter() - t0
  assert hit.cache == "memory"
  # a fresh process, same disk cache: the first compile there should be a disk hit
  env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", ""))
  compile_cache.store_on_disk(ck)
  out = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT, name=name)],
                       capture_output=True, text=True, env=env, check=True).stdout
  child = json.loads(out.strip().splitlines()[-1])
  med = lambda xs: statistics.median(xs)
  return {
      "kernel": gk.name, "lowering_ms": med(lowerings) * 1e3,
      "cold_compile_ms": med(colds) * 1e3,
      "stages_ms": {s: med([st[s] for st in stages]) * 1e3 for s in stages[0]},
      "memory_cache_ms": memory_hit * 1e3,
      "fresh_process_cache": child["cache"], "fresh_process_compile_ms": child["compile"] * 1e3,
      "shared_bytes": ck.shared_bytes, "registers": ck.registers, "spills": ck.spills,
  }


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", help="write the results as JSON here")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))
  import jax
  results = [measure(name, args.repeats) for name in EXAMPLES]
  from rich.console import Console
  from rich.table import Table
  table = Table(title=f"lowering + compile latency, target sm_90, on {platform.node()} "
                      f"({jax.default_backend()}), median of {args.repeats}")
  for col in ("kernel", "lower ms", "cold compile ms", "ttir", "ttgir", "llir", "ptx", "cubin",
              "cached (mem) ms", "cached (new process) ms"):
    table.add_column(col, justify="right" if col != "kernel" else "left")
  for r in results:
    st = r["stages_ms"]
    table.add_row(r["kernel"], f"{r['lowering_ms']:.1f}", f"{r['cold_compile_ms']:.0f}",
                  *(f"{st[s]:.1f}" for s in ("ttir", "ttgir", "llir", "ptx", "cubin")),
                  f"{r['memory_cache_ms']:.3f}",
                  f"{r['fresh_process_compile_ms']:.1f} ({r['fresh_process_cache']})")
  Console(width=None if sys.stdout.isatty() else 160).print(table)
  if args.out:
    record = {"command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (argv or sys.argv[1:])),
              "note": "lowering_ms is pallas-prof's jaxpr->Triton step only; cold_compile_ms is "
                      "triton.compile with every stage; cache columns are compile_kernel calls",
              "host": platform.node(), "backend": jax.default_backend(),
              "date": time.strftime("%Y-%m-%d"), "results": results}
    with open(args.out, "w") as f:
      json.dump(record, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
