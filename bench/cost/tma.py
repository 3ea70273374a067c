"""TMA block loads (CompilerParams(tma=True)) against plain loads, on a GPU.

Not yet run on a GPU (written 2026-12-02, when no device time was left): the first
run (`bash bench/cost/tma_gpu.sh`, ~150 s) decides whether TMA can join the tuner's
default configs and the suite's matmul candidates.

    python bench/cost/tma.py [--out tma.json] [--quick]      # one Hopper GPU, ~60-90 s

The matmul example's kernel (a fori_loop over K slicing `a_ref[:, pl.ds(k*bk, bk)]`
and `b_ref[pl.ds(k*bk, bk), :]`):
- results: each TMA variant's output against the plain one's, bit for bit, at
  8192^3 bf16 (the example's 128 x 256 x 64 blocks, 8 warps), at a shape of no
  power of two with overhanging blocks (3000 x 3136 x 5000 bf16) and in float32
  (2000 x 1984 x 3000, 128 x 128 x 32 blocks), on fresh random inputs; each output
  finite, and the plain one's relative error against an XLA dot of the inputs in
  float32;
- speed at 8192^3 bf16: plain, plain in launch groups of 8, tma, tma in groups of 8,
  the same with TMA loads only (the store kept plain), and tma in groups of 8 with
  4 stages: milliseconds per call (wall clock, median of 30 batches of 10 jitted
  calls after warm-up, as bench/cost/launch_order.py, measured twice) and TFLOP/s, each
  output equal to the plain one; and the profiler's replay of each (cold L2 before each
  launch, median), which also shows the replay allocating Triton's global scratch
  the descriptors live in;
- the tuner (CompilerParams(autotune=...)) choosing among plain in groups of 8, tma,
  and tma in groups of 8 at 8192^3: each candidate's outputs checked against the
  default's by its replay, then timed L2-cold.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

SPEED = [  # label, launch_group, tma, num_stages; "loads only": stores kept plain (_loads_only)
    ("plain", 0, False, 3), ("plain g8", 8, False, 3), ("tma", 0, True, 3),
    ("tma g8", 8, True, 3), ("tma g8 loads only", 8, True, 3), ("tma g8 4s", 8, True, 4)]
EXACT = [  # m, k, n, dtype, (bm, bn, bk), num_warps
    (8192, 8192, 8192, "bfloat16", (128, 256, 64), 8),
    (3000, 3136, 5000, "bfloat16", (128, 256, 64), 8),
    (2000, 1984, 3000, "float32", (128, 128, 32), 8)]
DRY_EXACT = [(256, 192, 512, "bfloat16", (128, 256, 64), 8),
             (200, 128, 300, "float32", (128, 128, 32), 8)]


def matmul(a, b, *, bm, bn, bk, num_warps, num_stages, group, tma, name):
  import jax
  from jax.experimental import pallas as pl
  import pallas_prof
  import matmul as example
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      functools.partial(example.matmul_kernel, block_k=bk), grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), name=name,
      compiler_params=pallas_prof.CompilerParams(num_warps=num_warps, num_stages=num_stages,
                                                 launch_group=group, tma=tma))(a, b)


def _inputs(m, k, n, dtype, seed):
  import jax
  import jax.numpy as jnp
  ka, kb = jax.random.split(jax.random.PRNGKey(seed))
  return (jax.random.normal(ka, (m, k), jnp.float32).astype(dtype),
          jax.random.normal(kb, (k, n), jnp.float32).astype(dtype))


def exactness(rows: list, shapes) -> bool:
  """TMA (alone and in launch groups of 8) against plain, bit for bit, on fresh inputs."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from pallas_prof.backend import kernel_registry
  ok = True
  for case, (m, k, n, dtype, (bm, bn, bk), warps) in enumerate(shapes):
    a, b = _inputs(m, k, n, jnp.dtype(dtype), int(time.time()) % 100000 + case)
    ref = jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))
    outs = {}
    for label, group, tma in (("plain", 0, False), ("tma", 0, True), ("tma g8", 8, True)):
      name = f"mm_exact{case}_{label.replace(' ', '_')}"
      fn = jax.jit(functools.partial(matmul, bm=bm, bn=bn, bk=bk, num_warps=warps, num_stages=3,
                                     group=group, tma=tma, name=name))
      out = np.asarray(jax.block_until_ready(fn(a, b)).astype(jnp.float32))
      gk = kernel_registry.find(name)[-1].generated
      outs[label] = (out, gk)
    plain = outs["plain"][0]
    rel = float(np.linalg.norm(plain - np.asarray(ref)) / np.linalg.norm(np.asarray(ref)))
    for label, (out, gk) in outs.items():
      row = {"check": "exact", "shape": [m, k, n], "dtype": dtype, "blocks": [bm, bn, bk],
             "variant": label, "tma_used": gk.tma, "tma_notes": [str(n) for n in gk.tma_notes],
             "equal_to_plain": bool(np.array_equal(out, plain)),
             "max_abs_diff": float(np.max(np.abs(out - plain))),
             "finite": bool(np.isfinite(out).all()), "plain_rel_err_vs_f32_xla": rel}
      ok &= row["equal_to_plain"] and row["finite"] and (gk.tma == ("tma" in label))
      rows.append(row)
      print(json.dumps(row), flush=True)
  return ok


class _loads_only:
  """Keeps stores plain while a variant is lowered (TMA loads only): for this
  benchmark's comparison; CompilerParams(tma=True) does both where it can."""

  def __enter__(self):
    from pallas_prof.backend.lowering.features import tma
    self.saved = tma.store_refusal
    tma.store_refusal = lambda *a, **k: "bench/cost/tma.py: stores kept plain for comparison"

  def __exit__(self, *exc):
    from pallas_prof.backend.lowering.features import tma
    tma.store_refusal = self.saved


def speed(rows: list, size: int, batches: int) -> None:
  import contextlib
  import jax
  import jax.numpy as jnp
  from bench.suite.dispatch_gap import wall_per_call
  from pallas_prof.backend import kernel_registry
  a, b = _inputs(size, size, size, jnp.bfloat16, size)
  plain = None
  for label, group, tma, stages in SPEED:
    name = f"mm_speed_{label.replace(' ', '_')}"
    fn = jax.jit(functools.partial(matmul, bm=128, bn=256, bk=64, num_warps=8,
                                   num_stages=stages, group=group, tma=tma, name=name))
    try:
      with _loads_only() if "loads only" in label else contextlib.nullcontext():
        out = jax.block_until_ready(fn(a, b))       # lowered and compiled here
      plain = out if plain is None else plain
      for _ in range(2):
        jax.block_until_ready(fn(a, b))
      seconds = wall_per_call(fn, (a, b), 10, repeats=batches)
      again = wall_per_call(fn, (a, b), 10, repeats=batches)   # the spread between two runs
      gk = kernel_registry.find(name)[-1].generated
      row = {"check": "speed", "size": size, "variant": label, "ms": seconds * 1e3,
             "ms_again": again * 1e3, "tflops": 2 * size ** 3 / seconds / 1e12,
             "equal_to_plain": bool((out == plain).all()), "tma_used": gk.tma,
             "tma_stores": ".store([" in gk.source, "tma_notes": [str(n) for n in gk.tma_notes]}
    except Exception as e:  # noqa: BLE001 - reported (e.g. out of shared memory); the rest run
      row = {"check": "speed", "size": size, "variant": label,
             "error": f"{type(e).__name__}: {e}"[:600]}
    rows.append(row)
    print(json.dumps(row), flush=True)


def replay(rows: list, size: int) -> None:
  """The profiler's cold replay of the speed kernels (L2 flushed before each launch)."""
  import pallas_prof
  for label, *_ in SPEED:
    name = f"mm_speed_{label.replace(' ', '_')}"
    try:
      report = pallas_prof.profile(name, mode="cold", sample=False, nvml=False, ceilings=False,
                                   min_launches=30, min_seconds=0.1)
      kp = report.kernels[-1]
      rt = kp.runtime
      if rt is None:
        raise RuntimeError(f"no replay timing: {kp.errors}")
      row = {"check": "replay", "variant": label, "cold_median_ms": rt.median_s * 1e3,
             "tflops": 2 * size ** 3 / rt.median_s / 1e12, "launches": rt.launches,
             "outputs_written": rt.outputs_written, "errors": list(kp.errors)}
    except Exception as e:  # noqa: BLE001 - reported, the other variants still run
      row = {"check": "replay", "variant": label, "error": f"{type(e).__name__}: {e}"[:500]}
    rows.append(row)
    print(json.dumps(row), flush=True)


def tune(rows: list, size: int) -> None:
  """The tuner's own choice among plain, groups of 8, tma, tma in groups of 8 (its replay
  checks each candidate's outputs against the default's and times it L2-cold)."""
  import jax
  import jax.numpy as jnp
  import pallas_prof
  from pallas_prof.tune import params
  a, b = _inputs(size, size, size, jnp.bfloat16, size + 1)
  settings = pallas_prof.Autotune(configs=({"launch_group": 8}, {"tma": 1},
                                           {"tma": 1, "launch_group": 8}), budget_s=60)

  def tuned(a, b):
    import matmul as example
    from jax.experimental import pallas as pl
    return pl.pallas_call(
        functools.partial(example.matmul_kernel, block_k=64), grid=(size // 128, size // 256),
        in_specs=[pl.BlockSpec((128, size), lambda i, j: (i, 0)),
                  pl.BlockSpec((size, 256), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 256), lambda i, j: (i, j)), name="mm_tuned",
        out_shape=jax.ShapeDtypeStruct((size, size), a.dtype),
        compiler_params=pallas_prof.CompilerParams(num_warps=8, num_stages=3,
                                                   autotune=settings))(a, b)
  params.clear_results()
  t0 = time.perf_counter()
  jax.block_until_ready(jax.jit(tuned)(a, b))
  for t in params.results():
    row = {"check": "tune", "kernel": t.kernel, "best": params.config_label(t.best),
           "wall_s": time.perf_counter() - t0, "tuning_s": t.tuning_s,
           "candidates": [{"config": c.label, "median_ms": c.median_s and c.median_s * 1e3,
                           "tflops": c.median_s and 2 * size ** 3 / c.median_s / 1e12,
                           "error": c.error} for c in t.candidates]}
    rows.append(row)
    print(json.dumps(row), flush=True)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out")
  ap.add_argument("--quick", action="store_true", help="fewer batches, no replay")
  ap.add_argument("--steps", default="exact,speed,replay,tune")
  ap.add_argument("--dry-run", action="store_true",
                  help="small shapes (a CPU runs them through Triton's interpreter)")
  args = ap.parse_args(argv)
  import pallas_prof
  pallas_prof.install()
  rows: list = []
  ok = True
  steps = args.steps.split(",")
  try:
    size = 512 if args.dry_run else 8192
    if "exact" in steps:
      ok = exactness(rows, DRY_EXACT if args.dry_run else EXACT)
    if "speed" in steps:
      speed(rows, size, 2 if args.dry_run else 10 if args.quick else 30)
    if "replay" in steps and not args.quick:
      replay(rows, size)
    if "tune" in steps:
      tune(rows, size)
  finally:
    if args.out:
      with open(args.out, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
  speeds = [r for r in rows if r["check"] == "speed"]
  ok &= all(r.get("equal_to_plain", True) for r in speeds)
  if speeds:
    print(f"\n{'variant':<18} {'ms':>8} {'again':>8} {'TFLOP/s':>8}  equal to plain")
    for r in speeds:
      if "error" in r:
        print(f"{r['variant']:<18} {r['error'][:120]}")
      else:
        print(f"{r['variant']:<18} {r['ms']:8.3f} {r['ms_again']:8.3f} {r['tflops']:8.1f}  "
              f"{r['equal_to_plain']}")
  print("outputs:", "all equal to plain bit for bit" if ok else "MISMATCH (see rows)")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
