"""What a fresh compile worker spends on each benchmark kernel, under settings
that may change it (runs on any machine; the kernels are compiled for sm_90).

    python bench/first_call/worker_compile.py [--rounds 4] [--repeats 3] [--out worker_compile.json]

For each setting a new worker starts with that environment, warms up as
pallas-prof's does, then compiles every op once ("first": what a program's
first call of that kernel waits for) and --repeats more times ("warm": the
median). Triton's stages are reported as the worker timed them. The settings
take turns, --rounds times, and each figure is the median over the rounds
(single compiles on a shared host move by tens of per cent). Settings:

- default;
- MLIR_DISABLE_MULTITHREADING=1: Triton's MLIR contexts without their thread
  pool (MLIR runs some passes in parallel over functions; a kernel has one);
- TRITON_DISABLE_LINE_INFO=1: no debug line tables. pallas-prof needs them
  (the SASS-to-equation weights come from them); this only says what they cost.

`--settings NAME,...` picks some.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))

from bench import save_record  # noqa: E402

SETTINGS = {"default": {}, "mlir single-threaded": {"MLIR_DISABLE_MULTITHREADING": "1"},
            "no line info": {"TRITON_DISABLE_LINE_INFO": "1"}}


def one_setting(reqs: dict, env: dict, repeats: int) -> dict:
  from pallas_prof.backend.compiling import compile_worker, warmup
  compile_worker._worker.close()
  saved = {k: os.environ.get(k) for k in env}
  os.environ.update(env)
  try:
    t0 = time.perf_counter()
    warmup.warm_up(90)
    out = {"worker_start_and_warm_up_ms": round((time.perf_counter() - t0) * 1e3, 1)}
  finally:
    for k, v in saved.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
  time.sleep(0.5)       # as in a program: the warm-up is done before the first kernel

  def once(request):
    t0 = time.perf_counter()
    result = compile_worker.compile(request)
    total = (time.perf_counter() - t0) * 1e3
    stages = {name: round((end - start) / 1e6, 1) for name, start, end, *_ in result["records"]}
    return round(total, 1), stages

  for op, request in reqs.items():
    first, first_stages = once(request)
    warm = [once(request)[0] for _ in range(repeats)]
    out[op] = {"first_ms": first, "first_stages_ms": first_stages,
               "warm_median_ms": round(statistics.median(warm), 1)}
  compile_worker._worker.close()
  return out


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--out")
  ap.add_argument("--rounds", type=int, default=4)
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated names")
  args = ap.parse_args(argv)
  settings = {name: SETTINGS[name] for name in args.settings.split(",")}
  import pallas_prof
  from bench.first_call.compile_path_cpu import requests
  pallas_prof.install()
  reqs = requests()
  rounds = {name: [] for name in settings}
  for i in range(args.rounds):
    names = list(settings) if i % 2 == 0 else list(reversed(settings))
    for name in names:
      rounds[name].append(one_setting(reqs, settings[name], args.repeats))
    print(f"round {i + 1}/{args.rounds} done", flush=True)
  summary = {}
  for name, runs in rounds.items():
    med = lambda key, op=None: statistics.median(r[op][key] if op else r[key] for r in runs)
    summary[name] = {"worker_start_and_warm_up_ms": med("worker_start_and_warm_up_ms")}
    for op in reqs:
      summary[name][op] = {"first_ms": med("first_ms", op), "warm_median_ms": med("warm_median_ms", op),
                           "first_stages_ms": {s: round(statistics.median(r[op]["first_stages_ms"][s]
                                                                         for r in runs), 1)
                                               for s in runs[0][op]["first_stages_ms"]}}
  record = {"command": "python bench/first_call/worker_compile.py " + " ".join(argv or sys.argv[1:]),
            "cpu_count": os.cpu_count(), "summary": summary, "rounds": rounds}
  for name, row in summary.items():
    print(f"{name}: worker start + warm-up {row['worker_start_and_warm_up_ms']:.0f} ms (medians of "
          f"{args.rounds} rounds)")
    for op in reqs:
      print(f"  {op:11s} first {row[op]['first_ms']:6.1f} ms {row[op]['first_stages_ms']}"
            f"  warm {row[op]['warm_median_ms']:6.1f} ms")
  save_record(args.out, record)


if __name__ == "__main__":
  main()
