"""What tuning costs (issue #17: at most 30 s per kernel; a cached tuning adds at
most 50 ms in a new process).

    python bench/cost/tune_cost.py --device cpu [--out tune_cost_cpu.json]   # any machine, ~1 min
    python bench/cost/tune_cost.py --device gpu [--out tune_cost_gpu.json]   # one GPU, ~1-2 min

cpu: the cached path alone, in fresh processes. A first process lowers the
softmax example and a matmul for the GPU target (Triton compiles on a CPU),
compiles a candidate config to pallas-prof's disk cache and writes a tuning
cache entry choosing it (no timing: there is no GPU; the GPU's name is
replaced by a fixed one). Then, per case, a fresh process lowers the kernel
and times `params.select` with tuning asked for: what the GPU path runs
between the default's compile and the custom call. Cases: the cached choice
is the default (a JSON read), and it is another config (the kernel lowered
again with that config, as the GPU path does, and compiled from the disk
cache). Also whether `triton` got imported.

gpu: three fresh processes running the softmax example (4096 x 4096 f32) and
the matmul example (4096³ bf16) under PALLAS_PROF_AUTOTUNE=1: the first tunes
(seconds per kernel, candidates, speedup), the second finds the cache (the
cached path's milliseconds per kernel, from its start and end, and the first
call's seconds), the third runs without tuning (first call's seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CPU_CHILD = r"""
import dataclasses, json, os, sys, time
sys.path.insert(0, {root!r})
mode, kernel, choice = sys.argv[1], sys.argv[2], sys.argv[3]
import jax, jax.numpy as jnp
import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.tune import params
from testkit.examples import load_example, lowered_record, sds
from pallas_prof.backend.lowering import pallas_call
pallas_prof.install()
target, gpu = ("cuda", 90), "bench/cost/tune_cost.py: no GPU"
calls = []                  # the lowering's arguments: a candidate is lowered as registration does
real_lower = pallas_call.lower_kernel
def recording_lower(*args, **kwargs):
  calls.append((args, kwargs))
  return real_lower(*args, **kwargs)
pallas_call.lower_kernel = recording_lower
if kernel == "softmax":
  rec = lowered_record(load_example("softmax").softmax, sds((4096, 4096), "float32"))
else:
  rec = lowered_record(load_example("matmul").matmul, sds((4096, 4096), "bfloat16"),
                       sds((4096, 4096), "bfloat16"))
gk = rec.generated
pallas_call.lower_kernel = real_lower
(largs, lkwargs), = calls
def relower(options):          # registration's: lower_kernel(jaxpr, grid_mapping, options, ...)
  return real_lower(largs[0], largs[1], options, *largs[3:], **lkwargs)
default = params.default_config(gk)
four = params.TunedSettings(4, 3)
best = default if choice == "default" else (four if default != four else
                                             params.TunedSettings(8, 3))
settings = params.Autotune()
default_ck = compile_kernel(gk, target, need_cubin=False)
if mode == "prepare":
  compile_kernel(relower(gk.options.with_settings(best)), target, need_cubin=False)  # on disk, as tuning leaves it
  identity = params._identity(gk, target, settings, gpu)
  cands = tuple(params._candidate(c, 1e-3) for c in dict.fromkeys([default, best]))
  params._save(params._cache_file(identity), identity,
               params.KernelTuning(gk.name, default, best, cands, 1.0))
  print(json.dumps({{"prepared": True}}))
else:
  had_triton = "triton" in sys.modules
  t0 = time.perf_counter()
  ck = params.select(default_ck, gk, pallas_prof.CompilerParams(autotune=True), relower, target,
                     compile_fn=lambda g: compile_kernel(g, target, need_cubin=False),
                     device_name=gpu)
  seconds = time.perf_counter() - t0
  (t,) = params.results()
  assert t.from_cache and params.default_config(ck.generated) == best, t
  print(json.dumps({{"kernel": kernel, "best": best.label, "default": [gk.num_warps, gk.num_stages],
                     "select_ms": seconds * 1e3, "from_cache": t.from_cache,
                     "triton_imported": "triton" in sys.modules and not had_triton}}))
"""

_GPU_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, os.path.join({root!r}, "examples"))
import jax, jax.numpy as jnp
import pallas_prof
from pallas_prof.tune import params
pallas_prof.install()
import softmax as sm, matmul as mm
k = jax.random.split(jax.random.PRNGKey(0), 3)
x = jax.random.normal(k[0], (4096, 4096), jnp.float32)
a = jax.random.normal(k[1], (4096, 4096), jnp.float32).astype(jnp.bfloat16)
b = jax.random.normal(k[2], (4096, 4096), jnp.float32).astype(jnp.bfloat16)
out = {{}}
for name, fn, args in (("softmax", jax.jit(sm.softmax), (x,)), ("matmul", mm.matmul, (a, b))):
  t0 = time.perf_counter()
  jax.block_until_ready(fn(*args))
  out[name] = {{"first_call_s": time.perf_counter() - t0}}
for t in params.results():
  name = "softmax" if "softmax" in t.kernel else "matmul"
  out[name].update(kernel=t.kernel, from_cache=t.from_cache, tuning_s=t.tuning_s,
                   cached_path_ms=(t.end_ns - t.start_ns) / 1e6, speedup=t.speedup,
                   default=t.default.label, best=t.best.label,
                   candidates=[[c.label, c.median_s, c.compile_s, c.error]
                               for c in t.candidates])
print(json.dumps(out))
"""


def _child(code: str, args: list[str], env: dict) -> dict:
  done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                        text=True, timeout=300)
  if done.returncode != 0:
    return {"error": done.stderr[-3000:]}
  return json.loads(done.stdout.strip().splitlines()[-1])


def run_cpu(repeats: int) -> dict:
  code = _CPU_CHILD.format(root=ROOT)
  rows = []
  with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, PALLAS_PROF_CACHE_DIR=cache, JAX_PLATFORMS="cpu")
    for kernel in ("softmax", "matmul"):
      for best in ("default", "other"):
        prep = _child(code, ["prepare", kernel, best], env)
        if "error" in prep:
          rows.append({"kernel": kernel, "best": best, "error": prep["error"]})
          continue
        runs = [_child(code, ["select", kernel, best], env) for _ in range(repeats)]
        good = [r for r in runs if "error" not in r]
        row = {"kernel": kernel, "best": best, "runs": runs}
        if good:
          row["select_ms_median"] = statistics.median(r["select_ms"] for r in good)
          row["triton_imported"] = any(r["triton_imported"] for r in good)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
  return {"device": "cpu", "rows": rows}


def _short(name: str, which: str, got: dict) -> str:
  """One line per kernel and process (the console tail is what a device call returns)."""
  if "error" in got:
    return f"{which}: error {got['error'][-300:]}"
  k = got.get(name, {})
  text = f"{name} {which}: first call {k.get('first_call_s', float('nan')):.3f} s"
  if which == "tuning" and "tuning_s" in k:
    best = k["candidates"] and min((c for c in k["candidates"] if c[1]), key=lambda c: c[1],
                                   default=None)
    text += (f", tuning {k['tuning_s']:.2f} s over {len(k['candidates'])} configs, "
             f"default {k['default']} best {k['best']} speedup {k.get('speedup') or 0:.3f}"
             + (f" ({best[0]} {best[1] * 1e6:.1f} us)" if best else ""))
  if which == "cached" and "cached_path_ms" in k:
    text += f", cached path {k['cached_path_ms']:.2f} ms (from cache: {k['from_cache']})"
  return text


def run_gpu() -> dict:
  code = _GPU_CHILD.format(root=ROOT)
  record = {"device": "gpu"}
  with tempfile.TemporaryDirectory() as cache:
    base = dict(os.environ, PALLAS_PROF_CACHE_DIR=cache, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    base.pop("PALLAS_PROF_AUTOTUNE", None)
    tuned = dict(base, PALLAS_PROF_AUTOTUNE="1")
    for which, env in (("tuning", tuned), ("cached", tuned), ("untuned", base)):
      record[which] = _child(code, [], env)
      for name in ("softmax", "matmul"):
        print(_short(name, which, record[which]), flush=True)
  return record


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
  ap.add_argument("--repeats", type=int, default=3, help="cpu: fresh processes per case")
  ap.add_argument("--out", help="write the record as JSON here")
  args = ap.parse_args(argv)
  record = run_cpu(args.repeats) if args.device == "cpu" else run_gpu()
  if args.out:
    with open(args.out, "w") as f:
      json.dump(record, f, indent=1)
  return 0 if all("error" not in r for r in record.get("rows", [])) else 1


if __name__ == "__main__":
  sys.exit(main())
