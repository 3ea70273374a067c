"""The process's very first pallas_call, by how long after pallas_prof.install()
it comes: pallas-prof vs JAX's built-in backend, medians of fresh processes.

    python bench/first_call/process_first_call.py [--delays 0,0.5,1,2] [--processes 3] [--out f.json]

install() starts the compile worker in the background, which imports Triton
(and compiles a tiny kernel in a child no compile waits for): a first
pallas_call that comes before the worker is up waits for its start-up.
Each process imports JAX and pallas-prof, installs, sleeps the delay,
initialises XLA with a jitted multiply, then times a tiny kernel's first call
(lower + compile + run) through each backend (ops_vs_builtin.warm_up_process).
The pallas-prof cache is empty in every process, as on a first run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(delay: float) -> dict:
  sys.path.insert(0, ROOT)
  import pallas_prof
  t = time.perf_counter()
  pallas_prof.install()
  installed = time.perf_counter() - t
  time.sleep(delay)
  from bench.suite import ops_vs_builtin as b
  out = b.warm_up_process()
  out["install_s"] = installed     # install() itself (NVML is asked in the background)
  return out


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--delays", default="0,0.5,1,2")
  ap.add_argument("--processes", type=int, default=3)
  ap.add_argument("--out")
  ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child is not None:
    print("RESULT " + json.dumps(child(args.child)), flush=True)
    return
  sys.path.insert(0, ROOT)
  from bench import save_record
  from bench.first_call.first_call import run_fresh_process
  from bench.suite.ops_vs_builtin import require_gpu
  require_gpu("bench/first_call/process_first_call.py", "process_first")
  record = {"command": "python bench/first_call/process_first_call.py " + " ".join(argv or sys.argv[1:]),
            "by_delay": {}}
  print("delay after install  ours s (median)  built-in s  ours/built-in   worker up at s (after install)")
  for delay in [float(d) for d in args.delays.split(",")]:
    runs = [r for r in (run_fresh_process(["--child", str(delay)], script=__file__)
                        for _ in range(args.processes)) if r is not None]
    if not runs:
      continue
    ours = statistics.median(r["pallas_prof"]["first_call_s"] for r in runs)
    builtin = statistics.median(r["builtin"]["first_call_s"] for r in runs)
    done = [r["pallas_prof"].get("background_warm_up", {}).get("worker_ready_s") for r in runs]
    record["by_delay"][str(delay)] = {"ours_median_s": ours, "builtin_median_s": builtin,
                                      "ratio": ours / builtin, "runs": runs}
    print(f"{delay:5.1f} s               {ours:.3f}             {builtin:.3f}       {ours / builtin:.2f}"
          f"            {', '.join(f'{d:.2f}' if d else '-' for d in done)}")
  save_record(args.out, record)


if __name__ == "__main__":
  main()
