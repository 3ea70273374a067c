"""What jaxlib's custom call payload costs per call and on the first call (issue #17 part 5).

    python bench/first_call/payload_cost.py [--out payload_cost.json]      # one GPU, ~40 s

A jitted 5120-wide layer norm (JAX's own Pallas op, bf16, 256 rows: a short
kernel, so the host's enqueue shows) and rms_norm, each in a fresh process per
variant: `builtin` (JAX's own Triton backend), `whole` (pallas-prof handing
jaxlib Triton's whole PTX and the TTIR, as before: PALLAS_PROF_JAXLIB_PTX=whole)
and `stripped` (the PTX without line info, no TTIR: launch.jaxlib_ptx). Per
variant: the lowered module's characters, the custom call's compressed payload
bytes, the first call's seconds (lowering, compiles, jaxlib's ptxas, load),
the host's enqueue time per call (400 calls issued, then waited for) and the
wall clock per call in batches of 20, and whether the outputs equal the
built-in's. jaxlib rebuilds its kernel from the payload on every launch
(copies the PTX and TTIR, hashes the PTX): `stripped` should enqueue faster
than `whole`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = ("builtin", "whole", "stripped")

_CHILD = r"""
import json, os, re, statistics, sys, time, zlib
sys.path.insert(0, {root!r})
variant, op, rows = sys.argv[1], sys.argv[2], int(sys.argv[4])
import jax, jax.numpy as jnp, numpy as np
import pallas_prof
from pallas_prof.backend import pallas_call_rule
from jax.experimental.pallas.ops.gpu import layer_norm, rms_norm
pallas_prof.install()
pallas_call_rule.route_to_builtin(variant == "builtin")
mod = {{"layer_norm": layer_norm, "rms_norm": rms_norm}}[op]
k = jax.random.split(jax.random.PRNGKey(0), 3)
x = jax.random.normal(k[0], (1, rows, 5120), jnp.float32).astype(jnp.bfloat16)
w = jax.random.normal(k[1], (5120,), jnp.float32).astype(jnp.bfloat16)
b = jax.random.normal(k[2], (5120,), jnp.float32).astype(jnp.bfloat16)
fn = jax.jit(getattr(mod, op))
t0 = time.perf_counter()
out = jax.block_until_ready(fn(x, w, b))
first = time.perf_counter() - t0
text = fn.lower(x, w, b).as_text()
m = re.search(r'(?:opaque|ir) = "([^"]*)"', text)   # MLIR escapes '"' and '\\' as \22, \5C
payload = len(re.sub(r"\\[0-9A-Fa-f]{{2}}", "x", m.group(1)).encode()) if m else None
def enqueue(calls=400):
  jax.block_until_ready(fn(x, w, b))
  t0 = time.perf_counter()
  for _ in range(calls):
    o = fn(x, w, b)
  t1 = time.perf_counter()
  jax.block_until_ready(o)
  return (t1 - t0) / calls
def batch(calls=20):
  t0 = time.perf_counter()
  for _ in range(calls):
    o = fn(x, w, b)
  jax.block_until_ready(o)
  return (time.perf_counter() - t0) / calls
for _ in range(5):
  enqueue(); batch()
enq = statistics.median(enqueue() for _ in range(15))
wall = statistics.median(batch() for _ in range(30))
np.save(sys.argv[3], np.asarray(out, np.float32))
print(json.dumps({{"variant": variant, "op": op, "module_chars": len(text),
                   "payload_bytes": payload, "first_call_s": first,
                   "enqueue_us": enq * 1e6, "wall_batch20_us": wall * 1e6}}))
"""


def run_variant(variant: str, op: str, out_path: str, rows: int = 256) -> dict:
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
  env.pop("PALLAS_PROF_JAXLIB_PTX", None)
  if variant == "whole":
    env["PALLAS_PROF_JAXLIB_PTX"] = "whole"
  code = _CHILD.format(root=ROOT)
  done = subprocess.run([sys.executable, "-c", code, variant, op, out_path, str(rows)], env=env,
                        capture_output=True, text=True, timeout=120)
  if done.returncode != 0:
    return {"variant": variant, "op": op, "error": done.stderr[-2000:]}
  return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", help="write the record as JSON here")
  ap.add_argument("--ops", default="layer_norm,rms_norm")
  ap.add_argument("--rounds", type=int, default=1, help="processes per variant (interleaved)")
  args = ap.parse_args(argv)
  import numpy as np
  import tempfile
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for op in args.ops.split(","):
      for r in range(args.rounds):
        for variant in VARIANTS:
          path = os.path.join(tmp, f"{op}-{variant}-{r}.npy")
          row = run_variant(variant, op, path)
          if "error" not in row and variant != "builtin":
            ref = np.load(os.path.join(tmp, f"{op}-builtin-{r}.npy"))
            row["max_abs_diff_vs_builtin"] = float(np.max(np.abs(np.load(path) - ref)))
          rows.append(row)
          print(json.dumps(row)[:400], flush=True)
  summary = {}
  for op in args.ops.split(","):
    for variant in VARIANTS:
      got = [r for r in rows if r["op"] == op and r["variant"] == variant and "error" not in r]
      if got:
        summary[f"{op}/{variant}"] = {k: statistics.median(r[k] for r in got)
                                      for k in ("enqueue_us", "wall_batch20_us", "first_call_s",
                                                "module_chars")}
        summary[f"{op}/{variant}"]["payload_bytes"] = got[0]["payload_bytes"]
  for key, s in summary.items():
    print(f"{key:22s} enqueue {s['enqueue_us']:6.1f} us  wall/call {s['wall_batch20_us']:6.1f} us"
          f"  first call {s['first_call_s']:.3f} s  module {s['module_chars']} chars"
          f"  payload {s['payload_bytes']} B")
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"rows": rows, "summary": summary, "time": time.time()}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
