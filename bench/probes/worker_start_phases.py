"""Where a fresh compile worker's start-up goes, phase by phase (issue #17 part 5:
a process's first pallas_call waits for it when it comes right after install()).

    python bench/probes/worker_start_phases.py [--processes 5]

Each fresh process does what compile_worker._serve does before its first
request, timed per phase: Python's own start (measured apart, as `python -c
pass`), loading triton_run.py, use_quick_triton_key (which imports triton),
the compiler's modules (import_compiler's imports), the two `ptxas --version`
queries, libdevice_link.py, and the garbage collection before gc.freeze().
Medians over the processes, in milliseconds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CHILD = r"""
import importlib.util, json, os, sys, time
t0 = time.perf_counter()
here = os.path.join({root!r}, "pallas_prof", "backend")
spec = importlib.util.spec_from_file_location("pallas_prof_triton_run",
                                              os.path.join(here, "triton_run.py"))
m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)
t1 = time.perf_counter()
m.use_quick_triton_key()
t2 = time.perf_counter()
import triton.backends.nvidia.compiler as nvidia
import triton.compiler.code_generator, triton.compiler.compiler  # noqa: E401
import triton.language.extra.libdevice, triton.language.semantic  # noqa: E401
t3 = time.perf_counter()
nvidia.get_ptxas_version(90); nvidia.get_ptxas(90).version
t4 = time.perf_counter()
m._libdevice_link_module()
t5 = time.perf_counter()
import gc; gc.collect()
t6 = time.perf_counter()
print(json.dumps({{"load_triton_run": t1 - t0, "import_triton": t2 - t1,
                   "compiler_modules": t3 - t2, "ptxas_version": t4 - t3,
                   "libdevice_link": t5 - t4, "gc": t6 - t5}}))
"""


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--processes", type=int, default=5)
  args = ap.parse_args(argv)
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  rows, python, totals = [], [], []
  for _ in range(args.processes):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    python.append(time.perf_counter() - t)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT)], env=env,
                          capture_output=True, text=True, check=True)
    totals.append(time.perf_counter() - t)
    rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
  summary = {"python_start": statistics.median(python), "whole_process": statistics.median(totals)}
  summary.update({k: statistics.median(r[k] for r in rows) for k in rows[0]})
  print("  ".join(f"{k} {v * 1e3:.0f} ms" for k, v in summary.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
