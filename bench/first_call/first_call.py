"""First-call latency of each benchmark op, pallas-prof vs JAX's built-in backend,
as the median of several fresh processes.

    python bench/first_call/first_call.py [--processes 5] [--profile rms_norm,mha] [--out first_call.json]

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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(builtin_first: bool) -> dict:
  """One fresh process: every op's first call through both backends. The
  backend that goes first pays whatever the op's first trace costs once per
  process (lazy imports, JAX's own first-time paths), so the order alternates
  between processes and is recorded."""
  sys.path.insert(0, ROOT)
  import jax

  import pallas_prof
  from bench.suite import ops_vs_builtin as b
  from pallas_prof.backend import kernel_registry
  pallas_prof.install()
  order = ("builtin", "pallas_prof") if builtin_first else ("pallas_prof", "builtin")
  out = {"process_warm_up": b.warm_up_process(), "order": list(order), "ops": {}}
  for make in b.OPS:
    spec = make()
    row = {}
    for backend in order:
      b._use_backend(backend)
      kernel_registry.clear()
      total, phases, fn = b.first_call_seconds(spec["pallas"], spec["args"])
      row[backend] = {"first_call_s": total, **phases}
      if backend == "pallas_prof":
        row[backend]["kernels"] = b.kernel_records()
      del fn
    b._use_backend("pallas_prof")
    out["ops"][spec["name"]] = row
    jax.clear_caches()
  return out


def profile_child(op_names: list[str], top: int = 45) -> dict:
  """cProfile of each named op's first call through pallas-prof, in a fresh
  process after the usual warm-up: where the main process spends it (the
  compile worker's own time shows as waiting, its stages in `kernels`)."""
  import cProfile
  import io
  import pstats
  sys.path.insert(0, ROOT)
  import pallas_prof
  from bench.suite import ops_vs_builtin as b
  from pallas_prof.backend import kernel_registry
  pallas_prof.install()
  b.warm_up_process()
  out = {}
  for name in op_names:
    spec = b.OPS_BY_NAME[name]()
    b._use_backend("pallas_prof")
    kernel_registry.clear()
    prof = cProfile.Profile()
    prof.enable()
    total, phases, fn = b.first_call_seconds(spec["pallas"], spec["args"])
    prof.disable()
    text = {}
    for key in ("cumulative", "tottime"):
      buf = io.StringIO()
      pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(top)
      text[key] = buf.getvalue()
    out[name] = {"first_call_s": total, **phases, "kernels": b.kernel_records(), "pstats": text}
    del fn
  return out


def run_fresh_process(child_args: list[str], script: str = __file__) -> dict | None:
  """`script` (this one by default) in a fresh process with an empty pallas-prof
  cache; the JSON of its RESULT line, None (and its stderr printed) if it failed."""
  env = dict(os.environ, PALLAS_PROF_CACHE_DIR=tempfile.mkdtemp(prefix="pallas-prof-first-"))
  res = subprocess.run([sys.executable, os.path.abspath(script), *child_args], env=env,
                       check=False, capture_output=True, text=True, timeout=900)
  lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
  if res.returncode != 0 or not lines:
    print(f"process {child_args} failed:\n{res.stderr[-3000:]}", file=sys.stderr)
    return None
  return json.loads(lines[-1][len("RESULT "):])


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--processes", type=int, default=5)
  ap.add_argument("--out")
  ap.add_argument("--profile", default="",
                  help="comma-separated ops (softmax,rms_norm,mha,...) to cProfile in one more "
                       "fresh process; the profiles go into the JSON")
  ap.add_argument("--child", choices=("ours-first", "builtin-first"), help=argparse.SUPPRESS)
  ap.add_argument("--profile-child", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child:
    print("RESULT " + json.dumps(child(args.child == "builtin-first")), flush=True)
    return
  if args.profile_child:
    print("RESULT " + json.dumps(profile_child(args.profile_child.split(","))), flush=True)
    return
  sys.path.insert(0, ROOT)
  from bench import save_record
  from bench.suite.ops_vs_builtin import require_gpu
  require_gpu("bench/first_call/first_call.py", "first_call")
  runs = []
  for i in range(args.processes):
    order = "builtin-first" if i % 2 else "ours-first"
    result = run_fresh_process(["--child", order])
    if result is not None:
      runs.append(result)
      print(f"process {i + 1}/{args.processes} done ({order})", flush=True)
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
    for order in ("ours-first", "builtin-first"):
      picked = [x for x, r in zip(ratios, runs) if (r["order"][0] == "builtin") == (order == "builtin-first")]
      if picked:
        summary[op][f"median_of_ratios_{order}"] = statistics.median(picked)
  warm = {k: statistics.median(r["process_warm_up"][k]["first_call_s"] for r in runs)
          for k in ("pallas_prof", "builtin")}
  record = {"command": "python bench/first_call/first_call.py " + " ".join(argv or sys.argv[1:]),
            "processes": len(runs), "summary": summary,
            "process_first_pallas_call_median_s": warm, "runs": runs}
  if args.profile:
    record["profiles"] = run_fresh_process(["--profile-child", args.profile])
  width = max(len(op) for op in summary)
  print(f"{'op':{width}s}  ours s  built-in s  ours/built-in: of the medians | median "
        "(each process) | ours first, built-in first")
  for op, s in summary.items():
    each = " ".join(f"{x:.2f}" for x in s["ratios"])
    by_order = ", ".join(f"{s.get(f'median_of_ratios_{o}', float('nan')):.2f}"
                         for o in ("ours-first", "builtin-first"))
    print(f"{op:{width}s}  {s['ours_median_s']:.3f}   {s['builtin_median_s']:.3f}     "
          f"{s['ratio_of_medians']:.2f} | {s['median_of_ratios']:.2f}  ({each}) | {by_order}")
  print(f"process's first pallas_call: ours {warm['pallas_prof']:.2f} s, "
        f"built-in {warm['builtin']:.2f} s (median)")
  save_record(args.out, record)


if __name__ == "__main__":
  main()
