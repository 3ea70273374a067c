"""First-call latency of each benchmark op, pallas-prof vs JAX's built-in backend,
as the median of several fresh processes.

    python bench/first_call.py [--processes 5] [--out first_call.json]

ops_vs_builtin.py measures each op's first call once, and single first calls
move by ±30 % between runs. Repeating them inside one process would not be
cold: jaxlib keeps every PTX it assembled, XLA and pallas-prof their
compiles. So each repetition is a fresh process with an empty pallas-prof
cache, which pays the process's start-up on a tiny kernel first (as
ops_vs_builtin.py does) and then, per op, times lower + compile + first run
through pallas-prof and through the built-in backend.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child() -> dict:
  sys.path.insert(0, ROOT)
  import jax
  import pallas_prof
  from bench import ops_vs_builtin as b
  from pallas_prof.backend import registry
  pallas_prof.install()
  out = {"process_warm_up": b.warm_up_process(), "ops": {}}
  for make in b.OPS:
    spec = make()
    row = {}
    for backend in ("pallas_prof", "builtin"):
      b._use_backend(backend)
      registry.clear()
      total, phases, fn = b.first_call_seconds(spec["pallas"], spec["args"])
      row[backend] = {"first_call_s": total, **phases}
      del fn
    b._use_backend("pallas_prof")
    out["ops"][spec["name"]] = row
    jax.clear_caches()
  return out


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--processes", type=int, default=5)
  ap.add_argument("--out")
  ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child:
    print("RESULT " + json.dumps(child()), flush=True)
    return
  sys.path.insert(0, ROOT)
  from bench.ops_vs_builtin import require_gpu
  require_gpu("bench/first_call.py", "first_call")
  runs = []
  for i in range(args.processes):
    env = dict(os.environ, PALLAS_PROF_CACHE_DIR=tempfile.mkdtemp(prefix="pallas-prof-first-"))
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                         capture_output=True, text=True, timeout=900)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
      print(f"process {i} failed:\n{res.stderr[-3000:]}", file=sys.stderr)
      continue
    runs.append(json.loads(lines[-1][len("RESULT "):]))
    print(f"process {i + 1}/{args.processes} done", flush=True)
  if not runs:
    raise SystemExit("no process finished")
  summary = {}
  for op in runs[0]["ops"]:
    ours = [r["ops"][op]["pallas_prof"]["first_call_s"] for r in runs]
    builtin = [r["ops"][op]["builtin"]["first_call_s"] for r in runs]
    ratios = [o / b for o, b in zip(ours, builtin)]
    summary[op] = {"ours_median_s": statistics.median(ours),
                   "builtin_median_s": statistics.median(builtin),
                   "ratio_of_medians": statistics.median(ours) / statistics.median(builtin),
                   "median_of_ratios": statistics.median(ratios), "ratios": ratios}
  warm = {k: statistics.median(r["process_warm_up"][k]["first_call_s"] for r in runs)
          for k in ("pallas_prof", "builtin")}
  record = {"command": "python bench/first_call.py " + " ".join(argv or sys.argv[1:]),
            "processes": len(runs), "summary": summary,
            "process_first_pallas_call_median_s": warm, "runs": runs}
  width = max(len(op) for op in summary)
  print(f"{'op':{width}s}  ours s  built-in s  ours/built-in: of the medians | median "
        "(each process)")
  for op, s in summary.items():
    each = " ".join(f"{x:.2f}" for x in s["ratios"])
    print(f"{op:{width}s}  {s['ours_median_s']:.3f}   {s['builtin_median_s']:.3f}     "
          f"{s['ratio_of_medians']:.2f} | {s['median_of_ratios']:.2f}  ({each})")
  print(f"process's first pallas_call: ours {warm['pallas_prof']:.2f} s, "
        f"built-in {warm['builtin']:.2f} s (median)")
  if args.out:
    with open(args.out, "w") as f:
      json.dump(record, f, indent=2)


if __name__ == "__main__":
  main()
