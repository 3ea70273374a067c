"""Why does the norms' split dw/db kernel still run at a quarter of the copy bandwidth?
(issue 49: rms_norm fwd+bwd 8x2048x3136 bf16; advise's kept split took its dw/db kernel
from about 0.79 ms to about 0.21 ms, where reading x and dy once would take about 0.05.)

The hypothesis: each loop iteration sums its (block_m, block_n) tile over the rows
(`(dout * a_hat).sum(axis=0)`, twice), a reduction across warps through shared memory
with barriers, so the next iteration's loads wait for it. Accumulating the tile unreduced
(a (block_m, block_n) carry, as Triton's own layer-norm tutorial does) and summing the
rows once after the loop removes both from the loop. This probe times, side by side in
one process, JAX's rms_norm dw/db kernel written three ways at the suite's shape:
  - jax:      as JAX writes it (block_n 16, block_m 16, one program per column block);
  - split:    what advise kept on triton 3.9 (block_n 128, the rows split over S programs,
              partials summed by XLA after the call), sums per iteration;
  - deferred: the same split with the sums deferred to after the loop, at several
              block_m, S and warps;
  - *_l3:     with the loop's loads copied ahead by Triton (CompilerParams.loop_stages=3;
              JAX's own kernel at 4 and 2 warps, where each thread loads 4 bytes or more);
each as the whole function (the call and its second pass), outputs compared with a float32
reference computed by XLA. With --cpu it runs each variant at a small shape under the
interpreter (outputs compared) and compiles the suite's shape for sm_90 (registers, spills,
barriers and cp.async in the PTX), which needs no GPU.

    PYTHONPATH=$PWD python3 bench/probes/dw_deferred.py --out $OUT/dw_deferred.json
    python3 bench/probes/dw_deferred.py --cpu --out dw_deferred_cpu.json
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
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import pallas_prof  # noqa: E402
from pallas_prof import triton as plgpu  # noqa: E402
from pallas_prof.backend import kernel_registry  # noqa: E402

ROWS, COLS = 8 * 2048, 3136          # the suite's rms_norm 8x2048x3136, rows flattened


def dw_db_kernel(x_ref, do_ref, rstd_ref, dw_ref, db_ref, *, block_m, block_n, chunk,
                 deferred):
  """JAX's rms_norm_backward_kernel_dw_db over rows [s * chunk, (s + 1) * chunk) of
  block_m each, s the grid's second axis (chunk = all the row blocks: no split)."""
  m, n_col = x_ref.shape
  j = pl.program_id(0)
  col_idx = j * block_n + jnp.arange(block_n)
  col_mask = col_idx < n_col
  trip = pl.cdiv(m, block_m)
  lo = pl.program_id(1) * chunk
  hi = jnp.minimum(lo + chunk, trip)

  def body(i, acc):
    row_idx = i * block_m + jnp.arange(block_m)
    row_mask = row_idx < m
    mask = row_mask[:, None] & col_mask[None, :]
    a = plgpu.load(x_ref.at[row_idx[:, None], col_idx[None]], mask=mask,
                   other=0.0).astype(jnp.float32)
    dout = plgpu.load(do_ref.at[row_idx[:, None], col_idx[None]], mask=mask,
                   other=0.0).astype(jnp.float32)
    rstd = plgpu.load(rstd_ref.at[row_idx], mask=row_mask, other=0.0).astype(jnp.float32)
    a_hat = a * rstd[:, None]
    dw_acc, db_acc = acc
    if deferred:
      return dw_acc + dout * a_hat, db_acc + dout
    return dw_acc + (dout * a_hat).sum(axis=0), db_acc + dout.sum(axis=0)

  shape = (block_m, block_n) if deferred else (block_n,)
  dw_acc, db_acc = jax.lax.fori_loop(lo, hi, body, (jnp.zeros(shape), jnp.zeros(shape)))
  if deferred:
    dw_acc, db_acc = dw_acc.sum(axis=0), db_acc.sum(axis=0)
  row = pl.program_id(1) + jnp.zeros((1, 1), jnp.int32)   # this program's partial: row s
  plgpu.store(dw_ref.at[row, col_idx[None]], dw_acc[None], mask=col_mask[None])
  plgpu.store(db_ref.at[row, col_idx[None]], db_acc[None], mask=col_mask[None])


def variant(rows, cols, *, block_m, block_n, splits, warps, stages, deferred, name,
            loop_stages=0):
  trip = pl.cdiv(rows, block_m)
  chunk = pl.cdiv(trip, splits)
  kernel = functools.partial(dw_db_kernel, block_m=block_m, block_n=block_n, chunk=chunk,
                             deferred=deferred)
  part = jax.ShapeDtypeStruct((splits, cols), jnp.float32)
  call = pl.pallas_call(       # no BlockSpecs: whole refs, indexed by the kernel (as JAX's)
      kernel, out_shape=[part, part], grid=(pl.cdiv(cols, block_n), splits),
      compiler_params=pallas_prof.CompilerParams(num_warps=warps, num_stages=stages,
                                                 loop_stages=loop_stages),
      name=name)

  def fn(x, do, rstd):
    dw, db = call(x, do, rstd)
    return dw.sum(0).astype(x.dtype), db.sum(0).astype(x.dtype)
  return jax.jit(fn)


def reference(x, do, rstd):
  a_hat = x.astype(jnp.float32) * rstd[:, None]
  dof = do.astype(jnp.float32)
  return (dof * a_hat).sum(0).astype(x.dtype), dof.sum(0).astype(x.dtype)


def configs():
  yield dict(name="jax", block_m=16, block_n=16, splits=1, warps=8, stages=3, deferred=False)
  yield dict(name="split", block_m=16, block_n=128, splits=22, warps=4, stages=3, deferred=False)
  # the loop's loads copied ahead (CompilerParams.loop_stages): JAX's own kernel with fewer
  # warps (Triton copies ahead only 4 bytes or more a thread), the split, the deferred twin
  for warps in (4, 2):
    yield dict(name=f"jax_w{warps}_l3", block_m=16, block_n=16, splits=1, warps=warps, stages=3,
               deferred=False, loop_stages=3)
  yield dict(name="split_l3", block_m=16, block_n=128, splits=22, warps=4, stages=3,
             deferred=False, loop_stages=3)
  yield dict(name="deferred_m16_n128_s22_w4_l3", block_m=16, block_n=128, splits=22, warps=4,
             stages=3, deferred=True, loop_stages=3)
  for block_m, block_n in ((16, 128), (32, 128), (16, 256), (64, 64)):
    for splits in (11, 22, 44):
      for warps in (4, 8):
        yield dict(name=f"deferred_m{block_m}_n{block_n}_s{splits}_w{warps}", block_m=block_m,
                   block_n=block_n, splits=splits, warps=warps, stages=3, deferred=True)


def inputs(rows, cols, dtype=jnp.bfloat16):
  k = jax.random.split(jax.random.key(0), 3)
  x = jax.random.normal(k[0], (rows, cols), dtype)
  do = jax.random.normal(k[1], (rows, cols), dtype)
  rstd = jax.random.uniform(k[2], (rows,), jnp.float32, 0.5, 2.0)
  return x, do, rstd


def per_call_s(fn, args, batch: int = 20) -> float:
  """dispatch_gap's wall time per call of batches of back-to-back calls, once warm."""
  from bench.suite.dispatch_gap import wall_per_call
  jax.block_until_ready(fn(*args))
  return wall_per_call(fn, args, batch)


def rel_err(got, want) -> float:
  return max(float(jnp.abs(g.astype(jnp.float32) - w.astype(jnp.float32)).max()
                   / (jnp.abs(w.astype(jnp.float32)).max() + 1e-30))
             for g, w in zip(got, want, strict=True))


def ptx_facts(name):
  for r in kernel_registry.kernels():
    if r.name == name and r.compiled is not None:
      ptx = r.compiled.asm.get("ptx", "")
      ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
      return {"registers": r.compiled.registers, "spills": r.compiled.spill_stores,
              "bar_sync": ptx.count("bar.sync"), "cp_async": ptx.count("cp.async"),
              "shared": r.compiled.shared_bytes}
  return {}


def run_gpu(budget_s: float) -> list:
  args = inputs(ROWS, COLS)
  want = jax.jit(reference)(*args)
  xla = jax.jit(reference)
  rows = [{"name": "xla_dw_db", "ms": per_call_s(xla, args) * 1e3}]
  print(f"XLA's dw/db alone: {rows[0]['ms']:.3f} ms", flush=True)
  start = time.perf_counter()
  for c in configs():
    if time.perf_counter() - start > budget_s:
      rows.append(dict(c, error="not timed: budget spent"))
      continue
    row = dict(c)
    try:
      fn = variant(ROWS, COLS, **c)
      got = jax.block_until_ready(fn(*args))
      row["rel_err"] = rel_err(got, want)
      row["ms"] = per_call_s(fn, args) * 1e3
      row["gb_s"] = 2 * ROWS * COLS * 2 / (row["ms"] * 1e-3) / 1e9
      row.update(ptx_facts(c["name"]))
      print(f"  {c['name']:32s} {row['ms']:.3f} ms {row['gb_s']:.0f} GB/s rel.err "
            f"{row['rel_err']:.1e} regs {row.get('registers')} bar.sync {row.get('bar_sync')} "
            f"cp.async {row.get('cp_async')}", flush=True)
    except Exception as e:  # noqa: BLE001 - a variant that fails is recorded
      row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
      print(f"  {c['name']}: {row['error']}", flush=True)
    rows.append(row)
  return rows


def run_cpu() -> list:
  """Each variant at a small ragged shape under the interpreter (outputs compared), then
  the suite's shape compiled for sm_90 (no run)."""
  from pallas_prof import compile_for
  small = inputs(203, 72)
  want = reference(*small)
  rows = []
  for c in configs():
    row = dict(c)
    small_c = dict(c, splits=min(c["splits"], 3))
    got = variant(203, 72, **small_c)(*small)
    row["rel_err_small"] = rel_err(got, want)
    kernel_registry.clear()
    structs = [jax.ShapeDtypeStruct((ROWS, COLS), jnp.bfloat16)] * 2 + \
        [jax.ShapeDtypeStruct((ROWS,), jnp.float32)]
    variant(ROWS, COLS, **c).lower(*structs)     # lowered by pallas-prof, not run
    rec = [r for r in kernel_registry.kernels() if r.name == c["name"]]
    if rec:
      out = compile_for(rec[0], "sm_90")
      ck = getattr(out, "compiled", None)
      if ck is not None:
        ptx = ck.asm.get("ptx", "")
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        row.update(registers=ck.registers, spills=ck.spill_stores, bar_sync=ptx.count("bar.sync"),
                   cp_async=ptx.count("cp.async"), shared=ck.shared_bytes)
      else:
        row["compile"] = str(getattr(out, "error", out))[:300]
    print(f"  {c['name']:32s} small rel.err {row['rel_err_small']:.1e} regs "
          f"{row.get('registers')} spills {row.get('spills')} bar.sync {row.get('bar_sync')} "
          f"cp.async {row.get('cp_async')}", flush=True)
    rows.append(row)
  return rows


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--out", required=True)
  ap.add_argument("--cpu", action="store_true")
  ap.add_argument("--budget-s", type=float, default=120)
  args = ap.parse_args(argv)
  pallas_prof.install()
  rows = run_cpu() if args.cpu else run_gpu(args.budget_s)
  with open(args.out, "w") as fh:
    json.dump({"commit": os.environ.get("PALLAS_PROF_COMMIT"), "jax": jax.__version__,
               "device": str(jax.devices()[0]), "shape": [ROWS, COLS], "rows": rows}, fh, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
