"""Where does the wall clock of a jitted call go beyond its kernels' GPU time?

    python bench/suite/dispatch_gap.py [--out dispatch_gap.json]

ops_vs_builtin.py found every backend's wall clock per call 9-17 µs above the
GPU time CUPTI records for its kernels. For the memory-bound ops of that
benchmark (--ops; rms_norm by default) through pallas-prof, the built-in
backend and XLA, this times: batches of 20 calls (as
the benchmark does); one batch of 400; how long the host takes to enqueue a
call (400 calls issued, then waited for); the GPU time per call (CUPTI); and
for the norms, 20 calls chained inside one jitted function, which pays the
per-call dispatch once per 20 kernels; and the share of the copy bandwidth by
the wall clock of the 400-call batch.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

from bench.suite import ops_vs_builtin as b  # noqa: E402
from bench import save_record  # noqa: E402


def wall_per_call(fn, args, calls: int, repeats: int = 15) -> float:
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    for _ in range(calls):
      out = fn(*args)
    jax.block_until_ready(out)
    times.append((time.perf_counter() - t0) / calls)
  return statistics.median(times)


def enqueue_per_call(fn, args, calls: int = 400) -> float:
  """Host time to issue a call, the outputs dropped as they come (keeping 400 of
  them alive, 128 MB each, measured the allocator instead: 2.5 ms per call)."""
  jax.block_until_ready(fn(*args))
  t0 = time.perf_counter()
  for _ in range(calls):
    out = fn(*args)
  t1 = time.perf_counter()
  jax.block_until_ready(out)
  return (t1 - t0) / calls


def measure(fn, args) -> dict:
  for _ in range(3):
    jax.block_until_ready(fn(*args))
  row = {"wall_batch20_us": wall_per_call(fn, args, 20) * 1e6,
         "wall_batch400_us": wall_per_call(fn, args, 400, repeats=3) * 1e6,
         "host_enqueue_us": enqueue_per_call(fn, args) * 1e6}
  try:
    row["gpu_us"] = b.gpu_time_per_call(fn, args)["gpu_s_per_call"] * 1e6
  except Exception as e:  # noqa: BLE001
    row["gpu_error"] = str(e)[:200]
  return row


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--out")
  ap.add_argument("--ops", default="rms_norm", help="comma-separated: rms_norm, layer_norm, softmax, add")
  args = ap.parse_args(argv)
  b.require_gpu("bench/suite/dispatch_gap.py", "gap")
  import pallas_prof
  pallas_prof.install()
  copy = b.copy_bandwidth()["GBps"]
  record = {"device": jax.devices()[0].device_kind, "copy_GBps": copy, "ops": {},
            "command": "python bench/suite/dispatch_gap.py " + " ".join(argv or sys.argv[1:])}
  for op in args.ops.split(","):
    spec = b.OPS_BY_NAME[op]()
    rows = {}
    for backend in ("pallas_prof", "builtin", "xla"):
      if backend != "xla":
        b._use_backend(backend)
      jax.clear_caches()
      single = spec["xla"]() if backend == "xla" else spec["pallas"]()
      row = measure(single, spec["args"])
      if op.endswith("norm"):      # output shaped like the input: chain the calls
        chain = measure(jax.jit(lambda *a, _f=single: _chain(_f, *a)), spec["args"])
        row["chain20_per_kernel_wall_us"] = chain["wall_batch20_us"] / 20
        row["chain20_per_kernel_gpu_us"] = chain.get("gpu_us", float("nan")) / 20
      row["pct_copy_wall_batch400"] = 100 * spec["bytes"] / (row["wall_batch400_us"] * 1e-6) \
          / 1e9 / copy
      rows[backend] = row
      print(op, backend, json.dumps({k: round(v, 1) if isinstance(v, float) else v
                                     for k, v in row.items()}), flush=True)
    b._use_backend("pallas_prof")
    record["ops"][spec["name"]] = rows
  save_record(args.out, record)


def _chain(fn, x, *rest, n: int = 20):
  """n dependent calls of fn in one traced function (fn is jitted: it inlines)."""
  for _ in range(n):
    x = fn(x, *rest).astype(x.dtype)
  return x


if __name__ == "__main__":
  main()
