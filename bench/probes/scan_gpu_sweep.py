"""Which scans come out wrong on a GPU: jnp.cumsum over small blocks, compiled, against numpy.

    python3 bench/probes/scan_gpu_sweep.py [--out FILE.json]      # on a GPU

The GPU fuzzer (seed 20261204) found cumsums of outer products along axis 0
wrong on the H200 in single elements, right under Triton's interpreter.
This sweeps the block's shape (small, not powers of two, size-1 axes), the
scanned axis, num_warps, the dtype and the input's form (a plain block, an
outer product, a broadcast column), each through pallas-prof with its
workarounds on (what users get) and off (Triton's plain tl.cumsum), and says
for each: right, wrong (how many elements), or a compile failure.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

SHAPES = [(1, 4), (2, 2), (3, 3), (4, 4), (7, 7), (8, 8), (16, 1), (16, 16), (5, 12), (32, 4),
          (3, 40), (64, 64)]
FORMS = ("block", "outer", "column")


def kernel_for(form, axis):
  import jax.numpy as jnp

  def kernel(a_ref, b_ref, o_ref):
    a, b = a_ref[...], b_ref[...]
    if form == "block":
      x = a
    elif form == "outer":
      x = a[:, 0][:, None] * b[0, :][None, :]
    else:   # a broadcast column times the block
      x = a[:, 0:1] * jnp.exp(-b)
    o_ref[...] = jnp.cumsum(x, axis=axis)
  return kernel


def reference(form, axis, a, b):
  import numpy as np
  a, b = a.astype(np.float64), b.astype(np.float64)
  x = a if form == "block" else (a[:, 0][:, None] * b[0, :][None, :] if form == "outer"
                                 else a[:, 0:1] * np.exp(-b))
  return np.cumsum(x, axis=axis)


def run_one(shape, axis, warps, dtype, form, rng):
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.experimental import pallas as pl
  import pallas_prof
  if dtype == "int32" and form == "column":
    return None
  lo, hi = (-9, 9) if dtype == "int32" else (-2.0, 2.0)
  a = (rng.integers(lo, hi, shape) if dtype == "int32" else rng.uniform(lo, hi, shape)).astype(dtype)
  b = (rng.integers(lo, hi, shape) if dtype == "int32" else rng.uniform(lo, hi, shape)).astype(dtype)
  call = pl.pallas_call(kernel_for(form, axis), out_shape=jax.ShapeDtypeStruct(shape, dtype),
                        compiler_params=pallas_prof.CompilerParams(num_warps=warps),
                        name=f"scan_{form}_{shape[0]}x{shape[1]}_ax{axis}_w{warps}")
  try:
    out = np.asarray(call(jnp.asarray(a), jnp.asarray(b)), np.float64)
  except Exception as e:  # noqa: BLE001 - recorded
    return {"outcome": "error", "error": f"{type(e).__name__}: {str(e)[:200]}"}
  want = reference(form, axis, a, b)
  tol = 0 if dtype == "int32" else 1e-4 * np.maximum(1.0, np.abs(want))
  wrong = np.abs(out - want) > tol
  return {"outcome": "wrong" if wrong.any() else "right", "wrong": int(wrong.sum()),
          "of": int(wrong.size),
          "first": [list(map(int, i)) for i in np.argwhere(wrong)[:3]]}


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--out", default=None)
  ap.add_argument("--warps", default="1,4,8")
  ap.add_argument("--workarounds", default="on", choices=["on", "off", "both"])
  ap.add_argument("--shapes", type=int, default=len(SHAPES), help="the first N shapes")
  args = ap.parse_args(argv)
  import numpy as np
  rng = np.random.default_rng(20261203)
  results = []
  modes = {"on": ("1",), "off": ("0",), "both": ("1", "0")}[args.workarounds]
  for workarounds in modes:
    os.environ["PALLAS_PROF_WORKAROUNDS"] = workarounds
    for shape, axis, warps, dtype, form in itertools.product(
        SHAPES[:args.shapes], (0, 1), [int(w) for w in args.warps.split(",")], ("float32", "int32"), FORMS):
      r = run_one(shape, axis, warps, dtype, form, rng)
      if r is None:
        continue
      r.update(shape=list(shape), axis=axis, num_warps=warps, dtype=dtype, form=form,
               workarounds=workarounds == "1")
      results.append(r)
      if r["outcome"] != "right":
        print(json.dumps(r), flush=True)
  summary = {}
  for r in results:
    k = f"workarounds={'on' if r['workarounds'] else 'off'}"
    summary.setdefault(k, {}).setdefault(r["outcome"], 0)
    summary[k][r["outcome"]] += 1
  print(json.dumps(summary))
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"summary": summary, "results": results}, f, indent=1)


if __name__ == "__main__":
  main()
