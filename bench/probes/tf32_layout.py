"""Does a float32 dot's B operand layout decide Hopper's tensor-core path? (issue 49, f32 dots)

On sm_90, wgmma reads 32-bit (tf32) operands from shared memory only K-major; Triton's
AccelerateMatmul then falls back to mma.sync for a tf32 dot whose B block is N-contiguous,
which is the plain `a @ b` of a row-major (K, N) B. This probe times, on the suite's
5120x3136x4096 float32 matmul (TF32, the default precision) and an 8192^3 one:
  - plain: B (K, N) as the user has it, `jnp.dot(a, b)`;
  - kmajor: B given transposed, (N, K) (XLA's transpose outside, timed with the call),
    `jnp.dot(a, bt.T)` in the kernel, so its B block is K-contiguous;
for tiles 128x128x32 (4 warps) and 128x256x32 / 128x128x64 (8 warps); the PTX says
which MMA each compiled to (wgmma or mma.sync). Outputs are compared with the plain one.

    PYTHONPATH=$PWD python3 bench/probes/tf32_layout.py --out $OUT/tf32_layout.json
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
from pallas_prof.backend import kernel_registry  # noqa: E402


def plain_kernel(a_ref, b_ref, o_ref, *, bk):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * bk, bk)]
    b = b_ref[pl.ds(k * bk, bk), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // bk, step,
                                 jnp.zeros(o_ref.shape, jnp.float32)).astype(o_ref.dtype)


def kmajor_kernel(a_ref, bt_ref, o_ref, *, bk):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * bk, bk)]
    bt = bt_ref[:, pl.ds(k * bk, bk)]
    return acc + jnp.dot(a, bt.T, preferred_element_type=jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // bk, step,
                                 jnp.zeros(o_ref.shape, jnp.float32)).astype(o_ref.dtype)


def call(kind, m, n, k, bm, bn, bk, warps, stages):
  params = pallas_prof.CompilerParams(num_warps=warps, num_stages=stages)
  grid = (pl.cdiv(m, bm), pl.cdiv(n, bn))
  o = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
  a = pl.BlockSpec((bm, k), lambda i, j: (i, 0))
  if kind == "plain":
    b = pl.BlockSpec((k, bn), lambda i, j: (0, j))
    f = pl.pallas_call(functools.partial(plain_kernel, bk=bk), jax.ShapeDtypeStruct((m, n), jnp.float32),
                       grid=grid, in_specs=[a, b], out_specs=o, compiler_params=params,
                       name=f"plain_{bm}x{bn}x{bk}_w{warps}")
    return jax.jit(f)
  bt = pl.BlockSpec((bn, k), lambda i, j: (j, 0))
  f = pl.pallas_call(functools.partial(kmajor_kernel, bk=bk), jax.ShapeDtypeStruct((m, n), jnp.float32),
                     grid=grid, in_specs=[a, bt], out_specs=o, compiler_params=params,
                     name=f"kmajor_{bm}x{bn}x{bk}_w{warps}")
  return jax.jit(lambda x, y: f(x, y.T))


def mma_of(name):
  for r in kernel_registry.kernels():
    if r.name.startswith(name) and r.compiled is not None:
      ptx = r.compiled.asm.get("ptx", "")
      ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
      kinds = [w for w in ("wgmma.mma_async", "mma.sync") if w in ptx]
      return ",".join(kinds) or "none", r.compiled.registers if hasattr(r.compiled, "registers") else None
  return "?", None


def measure(f, args, name, ref, t_xla, reps=20):
  """Runs f once (its output, kept as ref when there is none yet), then times it; returns
  (the row's measured fields, ref). The error is relative to ref's largest value."""
  out = jax.block_until_ready(f(*args))
  t = wall_median(f, args, reps)
  ref = out if ref is None else ref
  m, k = args[0].shape
  flops = 2 * m * out.shape[1] * k
  err = float(jnp.abs(out - ref).max() / jnp.abs(ref).max())
  mma, _ = mma_of(name)
  return {"ms": t * 1e3, "tflops": flops / t / 1e12, "over_xla": t / t_xla,
          "rel_err_vs_first": err, "mma": mma}, ref


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--out", required=True)
  ap.add_argument("--budget-s", type=float, default=150)
  args = ap.parse_args(argv)
  pallas_prof.install()
  start = time.perf_counter()
  rows = []
  for m, n, k in ((5120, 3136, 4096), (8192, 8192, 8192)):
    a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
    xla = jax.jit(lambda x, y: jnp.dot(x, y))
    t_xla = wall_median(xla, (a, b))
    ref = None
    print(f"{m}x{n}x{k} f32: XLA {t_xla * 1e3:.3f} ms ({2 * m * n * k / t_xla / 1e12:.0f} TFLOP/s)", flush=True)
    rows.append({"shape": [m, n, k], "kind": "xla", "ms": t_xla * 1e3})
    for bm, bn, bk, warps, stages in ((128, 128, 32, 4, 3), (128, 256, 32, 8, 3), (128, 128, 64, 8, 3),
                                      (128, 256, 64, 8, 2)):
      for kind in ("plain", "kmajor"):
        if time.perf_counter() - start > args.budget_s:
          print("budget reached", flush=True)
          break
        row = {"shape": [m, n, k], "kind": kind, "tile": [bm, bn, bk], "warps": warps,
               "stages": stages}
        try:
          f = call(kind, m, n, k, bm, bn, bk, warps, stages)
          measured, ref = measure(f, (a, b), f"{kind}_{bm}x{bn}x{bk}_w{warps}", ref, t_xla)
          row.update(measured)
          print(f"  {kind:6s} {bm}x{bn}x{bk} w{warps} s{stages}: {row['ms']:.3f} ms "
                f"({row['tflops']:.0f} TFLOP/s, {row['over_xla']:.2f}x XLA) mma={row['mma']} "
                f"rel.err {row['rel_err_vs_first']:.1e}", flush=True)
        except Exception as e:  # noqa: BLE001 - a config that fails is recorded, not fatal
          row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
          print(f"  {kind} {bm}x{bn}x{bk} w{warps}: {row['error']}", flush=True)
        rows.append(row)
  with open(args.out, "w") as fh:
    json.dump({"commit": os.environ.get("PALLAS_PROF_COMMIT"), "jax": jax.__version__,
               "device": str(jax.devices()[0]), "rows": rows}, fh, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
