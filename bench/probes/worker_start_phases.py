"""Where a fresh compile worker's start-up goes, phase by phase (issue #17 part 5:
a process's first pallas_call waits for it when it comes right after install()).

    python bench/probes/worker_start_phases.py [--processes 5] [--out f.json]

Per fresh process, medians in milliseconds:
- Python's own start (`python -c pass`), and without site (`python -S -c pass`:
  not used, since Triton then imports what site's .pth files had imported);
- in a process started as the worker is (TRITON_BACKENDS_IN_TREE=1), what
  worker_main._serve does before its first
  request: loading triton_run.py, use_quick_triton_key (which imports triton),
  import_compiler (the compiler's modules, libdevice_link.py, and ptxas's two
  `--version` runs in a thread beside them), and ptxas's two runs alone, for
  comparison (in a process of their own: Triton caches them);
- the real thing: compile_worker starting a worker and the worker answering a
  ping (its whole start-up as a first compile would wait for it).
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
sys.path.insert(0, ROOT)

_CHILD = r"""
import importlib.util, json, os, sys, time
t0 = time.perf_counter()
here = os.path.join({root!r}, "pallas_prof", "backend", "compiling")
spec = importlib.util.spec_from_file_location("pallas_prof_triton_run",
                                              os.path.join(here, "triton_run.py"))
m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)
t1 = time.perf_counter()
m.use_quick_triton_key()
t2 = time.perf_counter()
m.import_compiler(90)
t3 = time.perf_counter()
print(json.dumps({{"load_triton_run": t1 - t0, "import_triton": t2 - t1,
                   "import_compiler_with_ptxas": t3 - t2}}))
"""

_PTXAS = r"""
import time, triton.backends.nvidia.compiler as nvidia
t = time.perf_counter(); nvidia.get_ptxas_version(90); nvidia.get_ptxas(90).version
print(time.perf_counter() - t)
"""


def _timed(command, env) -> tuple[float, str]:
  t = time.perf_counter()
  done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
  return time.perf_counter() - t, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def worker_ready_seconds() -> float:
  """A real worker's start, from Popen to its answer to a ping."""
  from pallas_prof.backend.compiling import compile_worker
  worker = compile_worker._Worker()
  try:
    t = time.perf_counter()
    worker.ensure_started()
    worker.call({"op": "ping"})
    return time.perf_counter() - t
  finally:
    worker.close()


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--processes", type=int, default=5)
  ap.add_argument("--out")
  args = ap.parse_args(argv)
  from bench import save_record
  env = dict(os.environ, JAX_PLATFORMS="cpu", TRITON_BACKENDS_IN_TREE="1")
  worker_env = dict(env, PYTHONPATH=ROOT)
  rows: dict[str, list[float]] = {}
  for _ in range(args.processes):
    rows.setdefault("python_start", []).append(_timed([sys.executable, "-c", "pass"], env)[0])
    rows.setdefault("python_start_no_site", []).append(
        _timed([sys.executable, "-S", "-c", "pass"], env)[0])
    whole, line = _timed([sys.executable, "-c", _CHILD.format(root=ROOT)], worker_env)
    rows.setdefault("whole_process", []).append(whole)
    for k, v in json.loads(line).items():
      rows.setdefault(k, []).append(v)
    rows.setdefault("ptxas_version_twice_alone", []).append(
        float(_timed([sys.executable, "-c", _PTXAS], worker_env)[1]))
    rows.setdefault("worker_ready", []).append(worker_ready_seconds())
  summary = {k: statistics.median(v) for k, v in rows.items()}
  print("  ".join(f"{k} {v * 1e3:.0f} ms" for k, v in summary.items()))
  head = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h"], capture_output=True,
                        text=True, check=False).stdout.strip()
  save_record(args.out, {"command": "python bench/probes/worker_start_phases.py "
                                    + " ".join(argv or sys.argv[1:]),
                         "commit": head, "load_average": os.getloadavg(),
                         "medians_s": summary, "runs_s": rows})
  return 0


if __name__ == "__main__":
  sys.exit(main())
