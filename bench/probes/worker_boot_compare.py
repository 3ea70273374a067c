"""A fresh compile worker's start in two checkouts, taking turns (issue #17 part 5):
from starting the worker to Triton starting on its first request (the answer's
start_ns), without install()'s warm-ups, medians in milliseconds.

    python bench/probes/worker_boot_compare.py CHECKOUT_A,CHECKOUT_B [--processes 15] [--out f.json]

Each checkout's compile_worker is imported from that checkout in a fresh process that
compiles one tiny kernel for sm_90 (the request is made here, from this
checkout's warm-up kernel), so the two start their own workers the way they do.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

_CHILD = r"""
import json, pickle, sys, time
root, request_path = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)      # the checkout's package; importing it installs nothing
from pallas_prof.backend.compiling import compile_worker as cw
request = pickle.load(open(request_path, "rb"))
t0 = time.time_ns()
cw._worker.ensure_started()
answer = cw.compile(request)
assert "error" not in answer, answer["error"]
print(json.dumps({"start_ms": (answer["start_ns"] - t0) / 1e6,
                  "compile_ms": (answer["end_ns"] - answer["start_ns"]) / 1e6}))
cw._worker.close()
"""


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("roots")
  ap.add_argument("--processes", type=int, default=15)
  ap.add_argument("--out")
  args = ap.parse_args(argv)
  from bench import save_record
  from pallas_prof.backend.compiling import warmup
  roots = args.roots.split(",")
  request = dict(warmup.warm_up_request(90), name="pallas_prof_warmup_tiny",
                 signature={"x_ref": "*fp32", "o_ref": "*fp32"},
                 attrs={(i,): [["tt.divisibility", 16]] for i in range(2)})
  rows: dict[str, list[dict]] = {root: [] for root in roots}
  with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "request.pickle")
    with open(path, "wb") as f:
      pickle.dump(request, f)
    env = dict(os.environ, PYTHONPATH="", PALLAS_PROF_CACHE_DIR=folder)
    for _ in range(args.processes):
      for root in roots:
        done = subprocess.run([sys.executable, "-c", _CHILD, root, path], capture_output=True,
                              text=True, env=env, check=True)
        rows[root].append(json.loads(done.stdout.strip().splitlines()[-1]))
  record = {"command": "python bench/probes/worker_boot_compare.py " + " ".join(argv or sys.argv[1:]),
            "load_average": os.getloadavg(), "by_root": {}}
  for root in roots:
    commit = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h"], capture_output=True,
                            text=True, check=False).stdout.strip()
    start = statistics.median(r["start_ms"] for r in rows[root])
    compile_ms = statistics.median(r["compile_ms"] for r in rows[root])
    record["by_root"][root] = {"commit": commit, "start_ms_median": start,
                               "compile_ms_median": compile_ms, "runs": rows[root]}
    print(f"{root} ({commit}): worker up {start:.0f} ms, first compile {compile_ms:.0f} ms (medians)")
  print(f"load average {record['load_average']}")
  save_record(args.out, record)
  return 0


if __name__ == "__main__":
  sys.exit(main())
