"""What getting around Triton's scan bug costs: examples/selective_scan.py's forward
and backward kernels timed in each way they can be made to compile on Triton 3.6.

    python3 bench/cost/workaround_cost.py [--channels 1024 --length 4096] [--reps 50]
                                     [--out bench/results/workaround_cost_<gpu>_<commit>.json]

Variants, each in a process of its own (a fresh compile cache, so the first call's
compile is a cold one and includes any failed attempt):
  workaround   the example as it is: pallas-prof's first form that compiles (squeeze:
               the 16x1 block scanned as 16 elements)
  hand_fixed   the user's own fix, as the error's hint says: jnp.cumsum(dt)[:, None]
               instead of jnp.cumsum(dt[:, None], axis=0) (the plain lowering compiles)
  triangular   the workaround forced to its triangular form (no tl.scan for that cumsum)
  num_warps    the workaround forced to its last resort (num_warps 8 instead of 4)
  builtin      JAX's own Triton backend on the same kernels (pallas_prof's
               route_to_builtin), where it compiles them
Each: the first call (lowering + compile + run) timed once, then --warmup calls, then
the median (and 10th/90th percentiles) of --reps calls of the jitted forward and of
the jitted backward, each waited for (jax.block_until_ready); outputs checked against
the float64 reference (examples/selective_scan.reference). The record keeps the
command, commit, devices and versions.

On a CPU it runs every variant through Triton's interpreter at a small size: it
checks the plumbing and the results, not the figures (timing the interpreter says
nothing of a GPU).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "selective_scan.py")
VARIANTS = ("workaround", "hand_fixed", "triangular", "num_warps", "builtin")
COLUMN_SCAN = "jnp.cumsum(dt[:, None], axis=0)"


def _example(variant: str):
  """The example's module; for hand_fixed with the user's own fix of the column scan."""
  import importlib.util
  source = open(EXAMPLE).read()
  if variant == "hand_fixed":
    assert source.count(COLUMN_SCAN) == 2, "the example's column scans moved"
    source = source.replace(COLUMN_SCAN, "jnp.cumsum(dt, axis=0)[:, None]")
  path = os.path.join(tempfile.mkdtemp(prefix="workaround-cost-"), "selective_scan.py")
  with open(path, "w") as f:      # a real file: Triton and JAX read kernel sources back
    f.write(source)
  spec = importlib.util.spec_from_file_location("selective_scan", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _force(variant: str) -> None:
  from pallas_prof.backend import pallas_call_rule
  from pallas_prof.backend.compiling.failures import workarounds
  if variant == "triangular":
    workarounds.LADDERS["tt.scan"] = ("triangular",)
  elif variant == "num_warps":
    workarounds.LADDERS["tt.scan"] = ()          # straight to the last resort
  elif variant == "builtin":
    pallas_call_rule.route_to_builtin(True)


def _timed(fn, args, warmup: int, reps: int) -> dict:
  import jax
  for _ in range(warmup):
    jax.block_until_ready(fn(*args))
  samples = []
  for _ in range(reps):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    samples.append(time.perf_counter() - t0)
  samples.sort()
  return {"median_ms": statistics.median(samples) * 1e3,
          "p10_ms": samples[len(samples) // 10] * 1e3,
          "p90_ms": samples[(len(samples) * 9) // 10] * 1e3, "reps": reps}


def run_variant(variant: str, channels: int, length: int, warmup: int, reps: int) -> dict:
  """One variant, in this process: first call, timings, errors, what was compiled."""
  import jax
  import numpy as np
  s = _example(variant)
  _force(variant)
  x, dt, A, B, C, dy = s.inputs(0, channels, length)
  out: dict = {"variant": variant}
  try:
    t0 = time.perf_counter()
    y, states = jax.block_until_ready(s.forward(x, dt, A, B, C))
    out["first_forward_ms"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    grads = jax.block_until_ready(s.backward(x, dt, A, B, C, states, dy))
    out["first_backward_ms"] = (time.perf_counter() - t0) * 1e3
  except Exception as e:  # noqa: BLE001 - a variant that does not compile is a finding
    out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:400]}"
    return out
  want = s.reference(x, dt, A, B, C, dy)
  out["max_rel_error"] = {name: float(np.max(np.abs(np.asarray(g, np.float64) - w))
                                      / max(np.max(np.abs(w)), 1e-30))
                          for name, g, w in zip(s.NAMES, (y, *grads), want)}
  out["forward"] = _timed(s.forward, (x, dt, A, B, C), warmup, reps)
  out["backward"] = _timed(s.backward, (x, dt, A, B, C, states, dy), warmup, reps)
  from pallas_prof.backend import kernel_registry
  if jax.default_backend() != "gpu" and variant != "builtin":
    # no GPU: the kernels ran under the interpreter; compile them for sm_90 as the GPU would
    from pallas_prof.backend.compiling.failures.workarounds import compile_working_around
    for r in kernel_registry.kernels():
      try:
        r.compiled = compile_working_around(r.generated, ("cuda", 90), r.relower)
      except Exception as e:  # noqa: BLE001
        out.setdefault("compile_errors", {})[r.name] = str(e).splitlines()[0][:300]
  out["kernels"] = {r.name: {"workarounds": list(getattr(r.compiled.generated, "workarounds", ())
                                                 if r.compiled is not None else ()),
                             "num_warps": r.compiled.num_warps if r.compiled is not None else None}
                    for r in kernel_registry.kernels()}
  return out


def _commit(given: str | None) -> str:
  if given:
    return given
  done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                        text=True)
  return done.stdout.strip() or "unknown"


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--channels", type=int, default=None)
  parser.add_argument("--length", type=int, default=None)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--reps", type=int, default=50)
  parser.add_argument("--variants", default=",".join(VARIANTS))
  parser.add_argument("--commit", default=None, help="the commit to record (default: git's)")
  parser.add_argument("--out", default=None)
  parser.add_argument("--one", default=None, help=argparse.SUPPRESS)   # a child's variant
  args = parser.parse_args()
  sys.path[:0] = [ROOT]
  if args.one:
    import pallas_prof  # noqa: F401 - the example installs it; the child reports
    print(json.dumps(run_variant(args.one, args.channels, args.length, args.warmup, args.reps)))
    return
  import jax
  gpu = jax.default_backend() == "gpu"
  channels = args.channels or (1024 if gpu else 4)
  length = args.length or (4096 if gpu else 64)
  reps, warmup = (args.reps, args.warmup) if gpu else (min(args.reps, 3), 1)
  rows = []
  for variant in args.variants.split(","):
    env = dict(os.environ, PALLAS_PROF_CACHE_DIR=tempfile.mkdtemp(prefix="workaround-cache-"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PALLAS_PROF_WORKAROUNDS", None)
    done = subprocess.run([sys.executable, __file__, "--one", variant, "--channels",
                           str(channels), "--length", str(length), "--warmup", str(warmup),
                           "--reps", str(reps)], capture_output=True, text=True, env=env,
                          timeout=300)    # five fit in a device call's 600 s
    try:
      row = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
      row = {"variant": variant, "error": f"exit {done.returncode}: {done.stderr[-600:]}"}
    rows.append(row)
    if "error" in row:
      print(f"{variant:11s} error: {row['error']}", flush=True)
    else:
      print(f"{variant:11s} forward {row['forward']['median_ms']:9.3f} ms  backward "
            f"{row['backward']['median_ms']:9.3f} ms  first calls {row['first_forward_ms']:8.1f}"
            f" + {row['first_backward_ms']:8.1f} ms  max rel error "
            f"{max(row['max_rel_error'].values()):.2g}", flush=True)
  record = {"command": "python3 bench/cost/workaround_cost.py " + " ".join(sys.argv[1:]),
            "commit": _commit(args.commit), "backend": jax.default_backend(),
            "devices": [d.device_kind for d in jax.devices()], "jax": jax.__version__,
            "triton": __import__("importlib.metadata").metadata.version("triton"),
            "channels": channels, "length": length, "warmup": warmup, "reps": reps,
            "timing": ("wall clock per jitted call, waited for" if gpu
                       else "Triton's interpreter on the CPU: not a GPU figure"),
            "rows": rows}
  if args.out:
    with open(args.out, "w") as f:
      json.dump(record, f, indent=1)


if __name__ == "__main__":
  main()
