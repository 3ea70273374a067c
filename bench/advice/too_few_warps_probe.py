"""Which row kernel does one warp cost time on? A probe for the advice's too_few_warps case
(issue 29): each candidate kernel is compiled at num_warps 1, 4 and 8, replayed on the
same seeded inputs as the advice's trials are (cold, outputs compared against the
one-warp build), and its registers, spills and time recorded.

    PYTHONPATH=$PWD python3 bench/advice/too_few_warps_probe.py --out $OUT/probe   # a GPU

On the H200 the first known-answer case (RMS rows of 4096 floats, one warp) streamed at
its roof: one warp holding 128 values a thread keeps enough loads in flight. This probe
finds the candidates where it does not, so the known answer plants a defect that costs.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax                                  # noqa: E402
import jax.numpy as jnp                     # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import pallas_prof                          # noqa: E402


def rms_kernel(x_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
  o_ref[...] = y.astype(o_ref.dtype)


def softmax_kernel(x_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
  o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def layer_norm_kernel(x_ref, w_ref, b_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  c = x - jnp.mean(x, axis=-1, keepdims=True)
  y = c * jax.lax.rsqrt(jnp.mean(c * c, axis=-1, keepdims=True) + 1e-5)
  o_ref[...] = (y * w_ref[...] + b_ref[...]).astype(o_ref.dtype)


def _rows(kernel, rows, warps, *args):
  x = args[0]
  spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
  vec = pl.BlockSpec((1, x.shape[1]), lambda i: (0, 0))
  return pl.pallas_call(kernel, grid=(x.shape[0] // rows,),
                        in_specs=[spec] + [vec] * (len(args) - 1), out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        compiler_params=pallas_prof.CompilerParams(num_warps=warps))(*args)


# name: (kernel, shape, block rows, dtype, extra (1, n) f32 operands)
CANDIDATES = {
    "rms_8192x4096": (rms_kernel, (8192, 4096), 1, jnp.float32, 0),
    "rms_8192x4096_bf16": (rms_kernel, (8192, 4096), 1, jnp.bfloat16, 0),
    "rms_2048x16384": (rms_kernel, (2048, 16384), 1, jnp.float32, 0),
    "rms_1024x32768": (rms_kernel, (1024, 32768), 1, jnp.float32, 0),
    "rms_8192x4096_4rows": (rms_kernel, (8192, 4096), 4, jnp.float32, 0),
    "softmax_8192x4096": (softmax_kernel, (8192, 4096), 1, jnp.float32, 0),
    "softmax_2048x16384": (softmax_kernel, (2048, 16384), 1, jnp.float32, 0),
    "layer_norm_8192x4096": (layer_norm_kernel, (8192, 4096), 1, jnp.float32, 2),
    "layer_norm_2048x16384": (layer_norm_kernel, (2048, 16384), 1, jnp.float32, 2),
}


def probe(name: str, warps_list=(1, 4, 8)) -> dict:
  from bench.advice.advice_known_answers import _inputs, _lower_and_run
  from pallas_prof.backend.compiling.compile import assemble_cubin
  from pallas_prof.tune.params import replay_candidate
  kernel, shape, rows, dtype, extra = CANDIDATES[name]
  specs = [jax.ShapeDtypeStruct(shape, dtype)] + [jax.ShapeDtypeStruct((1, shape[1]),
                                                                      jnp.float32)] * extra
  args = _inputs(specs)
  result = {"candidate": name, "shape": list(shape), "rows_per_program": rows,
            "dtype": jnp.dtype(dtype).name, "builds": {}}
  reference = None
  for w in warps_list:
    fn = jax.jit(functools.partial(_rows, kernel, rows, w))
    (rec,), _ = _lower_and_run(fn, specs, args)
    ck = rec.compiled
    outputs, times, differs = replay_candidate(ck, reference, (), (), 0, 30, 0.05)
    if reference is None:
      reference = outputs
    if differs:        # time it all the same, and say so
      _, times, _ = replay_candidate(ck, None, (), (), 0, 30, 0.05)
    ck = assemble_cubin(ck)
    median = statistics.median(times)
    moved = 2 * (shape[0] * shape[1] * jnp.dtype(dtype).itemsize)
    result["builds"][w] = {"registers": ck.registers, "spill_stores": ck.spill_stores,
                           "spill_loads": ck.spill_loads, "median_us": median * 1e6,
                           "spread_pct": 100 * (max(times) - min(times)) / median,
                           "launches": len(times), "GB_per_s": moved / median / 1e9,
                           "outputs_differ": differs or None}
  base = result["builds"][1]["median_us"]
  for w, b in result["builds"].items():
    b["saving_vs_1_warp_pct"] = 100 * (base - b["median_us"]) / base
  return result


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True)
  ap.add_argument("--only", nargs="*", default=list(CANDIDATES))
  ap.add_argument("--commit", default=os.environ.get("PALLAS_PROF_COMMIT"))
  args = ap.parse_args()
  os.makedirs(args.out, exist_ok=True)
  results = {"command": " ".join(["python3"] + sys.argv), "commit": args.commit,
             "device": str(jax.devices()[0]), "candidates": []}
  for name in args.only:
    t = time.perf_counter()
    try:
      r = probe(name)
    except Exception as e:  # noqa: BLE001 - the other candidates' results stand
      r = {"candidate": name, "error": f"{type(e).__name__}: {e}"}
    r["seconds"] = time.perf_counter() - t
    results["candidates"].append(r)
    line = r.get("error") or "  ".join(
        f"w{w}: {b['median_us']:.1f} us {b['GB_per_s']:.0f} GB/s regs {b['registers']} "
        f"spills {(b['spill_stores'] or 0) + (b['spill_loads'] or 0)}"
        for w, b in r["builds"].items())
    print(f"{name}: {line}", flush=True)
    with open(os.path.join(args.out, "too_few_warps_probe.json"), "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
