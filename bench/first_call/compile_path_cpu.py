"""What pallas-prof's compile path costs, piece by piece, on a machine without a GPU.

    python bench/first_call/compile_path_cpu.py [--out compile_path_cpu.json] [--repeats 3]

The figures behind the comments in backend/compiling/libdevice_link.py, triton_run.py
and compile_worker.py, for ops_vs_builtin.py's kernels compiled for sm_90:

- per op, Triton's stages with libdevice prepared (libdevice_link.py) and
  linked Triton's way, and inside llir the link and LLVM's O3;
- linking libdevice alone: the whole bitcode, the common library, a kernel's
  own library; and printing each kernel's LLVM module to text;
- Triton's triton_key() in a fresh process (what use_quick_triton_key spares)
  and a fresh compile worker's start plus first compile;
- a warm worker's compile of each op.
Medians of --repeats runs after one discarded run.
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
sys.path.insert(0, ROOT)
os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))

from bench import save_record  # noqa: E402

OPS = ("softmax", "layer_norm", "rms_norm", "mha")


def median_of(fn, repeats: int):
  fn()
  return statistics.median(fn() for _ in range(repeats))


def requests() -> dict:
  import jax
  from bench.suite.ops_vs_builtin import OPS_BY_NAME, abstract_args
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend import kernel_registry
  out = {}
  for op in OPS:
    spec = OPS_BY_NAME[op]()
    kernel_registry.clear()
    jax.clear_caches()
    spec["pallas"]().lower(*abstract_args(spec))
    (record,) = kernel_registry.kernels()
    out[op] = pcompile.compile_request(record.generated, ("cuda", 90), need_cubin=False)
  return out


def stages(request: dict, prepared: bool, repeats: int) -> dict:
  """Median ms per stage, and of libdevice's link and LLVM's O3 inside llir."""
  import triton.backends.nvidia.compiler as nvidia_compiler
  from pallas_prof.backend.compiling import triton_run
  llvm = nvidia_compiler.llvm
  request = dict(request, libdevice_cache=request["libdevice_cache"] if prepared else None)
  runs = []
  for _ in range(repeats + 1):
    inner = {}
    saved = llvm.optimize_module

    def optimize(*args, **kwargs):
      t0 = time.perf_counter()
      out = saved(*args, **kwargs)
      inner["O3"] = (time.perf_counter() - t0) * 1e3
      return out
    llvm.optimize_module = optimize
    try:
      result = triton_run.run_triton(request)
    finally:
      llvm.optimize_module = saved
    row = {r[0]: (r[2] - r[1]) / 1e6 for r in result["records"]}
    runs.append({**row, **inner, "link": result.get("libdevice_link")})
  keys = [k for k in runs[-1] if k != "link"]
  return {**{k: round(statistics.median(r[k] for r in runs[1:]), 2) for k in keys},
          "libdevice_link": runs[-1]["link"]}


def module_print_ms(request: dict) -> float:
  """ms to print a kernel's LLVM module to text (what keying libraries by the
  functions' names, read from the module's function list, avoids)."""
  import triton.backends.nvidia.compiler as nvidia_compiler
  from pallas_prof.backend.compiling import triton_run
  llvm = nvidia_compiler.llvm
  saved, seen = llvm.to_module, []

  def to_module(*args, **kwargs):
    module = saved(*args, **kwargs)
    t0 = time.perf_counter()
    str(module)
    seen.append((time.perf_counter() - t0) * 1e3)
    return module
  llvm.to_module = to_module
  try:
    triton_run.run_triton(request)
  finally:
    llvm.to_module = saved
  return round(seen[0], 2)


def link_alone(request: dict, repeats: int) -> dict:
  """ms to link libdevice into an empty module: bitcode, common library, own library."""
  from triton._C.libtriton import ir, llvm
  from pallas_prof.backend.compiling import libdevice_link
  bitcode = [p for _, p in request["options"]["extern_libs"]]
  cache = request["libdevice_cache"]
  own_functions = {"__nv_sqrtf": ("float", ["float"])}
  libraries = {"bitcode (470 KB)": bitcode}
  for label, functions in (("common library", libdevice_link.COMMON),
                           ("own library (sqrtf)", own_functions)):
    path, _ = libdevice_link._prepared(bitcode, functions, llvm.link_extern_libs, cache,
                                       False, 90)
    libraries[f"{label} ({os.path.getsize(path) // 1024} KB)"] = [path]
  with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
    f.write("module {\n  llvm.func @__nv_sqrtf(f32) -> f32\n}\n")

  def once(paths):
    context = ir.context()
    ir.load_dialects(context)
    module = llvm.to_module(ir.parse_mlir_module(f.name, context), llvm.context())
    t0 = time.perf_counter()
    llvm.link_extern_libs(module, paths)
    return (time.perf_counter() - t0) * 1e3

  out = {label: round(median_of(lambda p=paths: once(p), repeats), 2)
         for label, paths in libraries.items()}
  os.unlink(f.name)
  return out


def fresh_process() -> dict:
  code = ("import time; from triton.runtime import cache; t = time.perf_counter(); "
          "cache.triton_key(); print(time.perf_counter() - t)")
  key_s = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout.split()[-1])
  code = ("import sys, time; sys.path.insert(0, %r); "
          "from pallas_prof.backend.compiling import warmup; t = time.perf_counter(); "
          "warmup.warm_up(90); print(time.perf_counter() - t)") % ROOT
  worker_s = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout.split()[-1])
  return {"triton_key_fresh_process_ms": round(key_s * 1e3, 1),
          "worker_start_and_first_compile_ms": round(worker_s * 1e3, 1)}


def warm_worker(reqs: dict, repeats: int) -> dict:
  from pallas_prof.backend.compiling import compile_worker, warmup
  warmup.warm_up(90)
  out = {}
  for op, request in reqs.items():
    def once(request=request):
      t0 = time.perf_counter()
      compile_worker.compile(request)
      return (time.perf_counter() - t0) * 1e3
    out[op] = round(median_of(once, repeats), 1)
  return out


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--out")
  ap.add_argument("--repeats", type=int, default=3)
  args = ap.parse_args(argv)
  import pallas_prof
  pallas_prof.install()
  reqs = requests()
  record = {"command": "python bench/first_call/compile_path_cpu.py " + " ".join(argv or sys.argv[1:]),
            "stages_ms": {op: {"prepared": stages(r, True, args.repeats),
                               "triton's link": stages(r, False, args.repeats)}
                          for op, r in reqs.items()},
            "link_alone_ms": link_alone(reqs["rms_norm"], args.repeats),
            "print_llvm_module_ms": {op: module_print_ms(r) for op, r in reqs.items()},
            "fresh_process": fresh_process(),
            "warm_worker_compile_ms": warm_worker(reqs, args.repeats)}
  print(json.dumps(record, indent=1))
  save_record(args.out, record)


if __name__ == "__main__":
  main()
