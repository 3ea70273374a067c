"""What is left between a float32 (TF32) matmul with B K-major and XLA's? (issue 49, f32 dots)

Advise took the suite's 5120x3136x4096 float32 matmul from 2.96x XLA's time to 1.87x by
passing B K-major with a 256x128 tile and 8 warps (bench/results, 2026-12-07). This probe
times, side by side in one process, the knobs advise did not try at that layout:
  - software pipelining depth (num_stages 3, 4, 5: each stage holds a (bm, bk) block of A
    and a (bn, bk) block of B in shared memory);
  - launch order in groups of 8 rows of tiles (CompilerParams(launch_group=8)), which keeps
    a group's B columns in L2 instead of re-reading all of B for every row of tiles;
  - TMA block loads (CompilerParams(tma=True));
  - tiles 256x128, 128x256, 128x128 at K steps of 32 and 64.
Each variant's output is compared with the first one's (relative to its largest value);
the PTX says which MMA each compiled to. XLA's dot (TF32, the default precision) is timed
in the same process.

    PYTHONPATH=$PWD python3 bench/probes/tf32_tiles.py --out $OUT/tf32_tiles.json
    python3 bench/probes/tf32_tiles.py --dry-run --out /tmp/t.json   # CPU: small, interpreter
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import pallas_prof  # noqa: E402
from bench.advice.wall import wall_median  # noqa: E402
from bench.probes.tf32_layout import kmajor_kernel, measure  # noqa: E402

# (bm, bn, bk, warps, stages, launch_group, tma); the first is what advise kept on 2026-12-07
CONFIGS = [
    (256, 128, 32, 8, 3, 0, False),
    (256, 128, 32, 8, 4, 0, False),
    (256, 128, 32, 8, 5, 0, False),
    (256, 128, 32, 8, 3, 8, False),
    (256, 128, 32, 8, 4, 8, False),
    (256, 128, 32, 8, 3, 0, True),
    (256, 128, 32, 8, 4, 8, True),
    (128, 256, 32, 8, 4, 8, False),
    (128, 256, 32, 8, 4, 8, True),
    (128, 128, 32, 4, 4, 8, False),
    (128, 128, 32, 8, 5, 8, False),
    (128, 128, 64, 8, 3, 8, False),
    (256, 128, 64, 8, 2, 8, False),
]
DRY_CONFIGS = [(32, 32, 16, 4, 3, 0, False), (32, 32, 16, 4, 4, 2, False), (32, 16, 16, 4, 3, 2, True)]


def call(m, n, k, bm, bn, bk, warps, stages, group, tma):
  name = f"tiles_{bm}x{bn}x{bk}_w{warps}_s{stages}_g{group}_{'tma' if tma else 'ld'}"
  params = pallas_prof.CompilerParams(num_warps=warps, num_stages=stages, launch_group=group,
                                      tma=tma)
  f = pl.pallas_call(
      functools.partial(kmajor_kernel, bk=bk), jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), pl.BlockSpec((bn, k), lambda i, j: (j, 0))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)), compiler_params=params, name=name)
  return name, jax.jit(lambda x, y: f(x, y.T))


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--out", required=True)
  ap.add_argument("--budget-s", type=float, default=150)
  ap.add_argument("--dry-run", action="store_true", help="small shapes, few timings (CPU)")
  args = ap.parse_args(argv)
  pallas_prof.install()
  start = time.perf_counter()
  m, n, k = (96, 80, 64) if args.dry_run else (5120, 3136, 4096)
  configs = DRY_CONFIGS if args.dry_run else CONFIGS
  reps = 2 if args.dry_run else 30
  a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
  xla = jax.jit(lambda x, y: jnp.dot(x, y))
  t_xla = wall_median(xla, (a, b), reps)
  flops = 2 * m * n * k
  print(f"{m}x{n}x{k} f32: XLA {t_xla * 1e3:.3f} ms ({flops / t_xla / 1e12:.0f} TFLOP/s)", flush=True)
  rows = [{"shape": [m, n, k], "kind": "xla", "ms": t_xla * 1e3}]
  ref = None
  for bm, bn, bk, warps, stages, group, tma in configs:
    if time.perf_counter() - start > args.budget_s:
      print("budget reached", flush=True)
      break
    row = {"shape": [m, n, k], "kind": "kmajor", "tile": [bm, bn, bk], "warps": warps,
           "stages": stages, "launch_group": group, "tma": tma}
    label = f"{bm}x{bn}x{bk} w{warps} s{stages} g{group}{' tma' if tma else ''}"
    try:
      name, f = call(m, n, k, bm, bn, bk, warps, stages, group, tma)
      measured, ref = measure(f, (a, b), name, ref, t_xla, reps)
      row.update(measured)
      print(f"  {label:28s} {row['ms']:7.3f} ms ({row['tflops']:4.0f} TFLOP/s, "
            f"{row['over_xla']:.2f}x XLA) mma={row['mma']} rel.err {row['rel_err_vs_first']:.1e}",
            flush=True)
    except Exception as e:  # noqa: BLE001 - a config that fails is recorded, not fatal
      row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
      print(f"  {label}: {row['error']}", flush=True)
    rows.append(row)
  with open(args.out, "w") as fh:
    json.dump({"commit": os.environ.get("PALLAS_PROF_COMMIT"), "jax": jax.__version__,
               "triton": __import__("triton").__version__, "device": str(jax.devices()[0]),
               "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
               "rows": rows}, fh, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
