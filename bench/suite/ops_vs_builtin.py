"""pallas-prof vs JAX's built-in Pallas Triton backend vs plain XLA, side by side, on a GPU:
six forward ops at one shape each, with first-call phases and a cached recompile in a
fresh process. The canonical benchmark is now bench/suite/suite.py (more ops and shapes);
this one stays for its first-call figures and as other scripts' library of op specs.

    python bench/suite/ops_vs_builtin.py [--out bench/results/ops_vs_builtin_h200.json] [--only softmax,mha]

Method (see the device library's METHOD.md): inputs larger than L2, fresh
random data, correctness checked before timing on every variant (with the
output memory poisoned first), warm-up, then many batches of 20 jitted calls,
median per call. First-call time = lowering + compile + first run (each phase
recorded), measured after clearing JAX's caches, with an empty pallas-prof
cache, once the process has paid its one-time start-up on a tiny kernel through
each backend (recorded too, as `process_warm_up`).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import pallas_prof  # noqa: E402
from bench import save_record  # noqa: E402
# imported up front, as every op measured here imports it: its import is no op's first call
from jax.experimental.pallas import triton as plgpu  # noqa: E402, F401

BATCH = 20


# --- timing -----------------------------------------------------------------------------

def time_per_call(fn, args, *, min_batches=15, min_seconds=1.0) -> dict:
  """Median seconds per call over batches of BATCH calls (after warm-up)."""
  for _ in range(3):
    jax.block_until_ready(fn(*args))
  batches = []
  start = time.perf_counter()
  while len(batches) < min_batches or time.perf_counter() - start < min_seconds:
    t0 = time.perf_counter()
    for _ in range(BATCH):
      out = fn(*args)
    jax.block_until_ready(out)
    batches.append((time.perf_counter() - t0) / BATCH)
    if len(batches) > 400:
      break
  return {"median_s": statistics.median(batches), "min_s": min(batches),
          "p10_s": float(np.percentile(batches, 10)), "p90_s": float(np.percentile(batches, 90)),
          "batches": len(batches), "calls_per_batch": BATCH}


def gpu_time_per_call(fn, args, calls=10 * BATCH) -> dict:
  """GPU time per call: the durations CUPTI records for every kernel the calls
  launch (pallas-prof's in-situ capture, CUPTI's activity records), summed over
  `calls` calls and divided by them: a mean, with the host's launch gaps between
  calls left out. This, not the wall clock per call, is what compares with the
  copy bandwidth, which CUDA events time around the copy alone."""
  from pallas_prof.profiler.timing import insitu
  jax.block_until_ready(fn(*args))
  with insitu.capture(devices=1) as cap:
    for _ in range(calls // BATCH):
      for _ in range(BATCH):
        out = fn(*args)
      jax.block_until_ready(out)
  kernels = cap.result.kernels
  if not kernels:
    raise RuntimeError("; ".join(cap.result.notes) or "CUPTI recorded no kernel")
  total_ns = sum(k.total_ns for k in kernels.values())
  return {"gpu_s_per_call": total_ns / 1e9 / calls, "gpu_calls": calls,
          "gpu_kernels": {name: k.launches for name, k in kernels.items()}}


def first_call_seconds(make_fn, args) -> tuple[float, dict, object]:
  """Seconds from nothing to the first result, in three phases: `lower` (tracing,
  and for pallas-prof its lowering and Triton compile), `compile` (XLA's compile:
  for the built-in backend that is where Triton compiles) and `first_run` (the
  first execution: for pallas-prof jaxlib turns the PTX into a cubin here).
  `gc_s`: of the whole, Python's garbage collections (a full one, 50-60 ms on
  the H200 machine's host, lands on whichever backend allocates past the
  threshold)."""
  from pallas_prof.backend.lowering.lower import CollectionClock
  jax.clear_caches()
  fn = make_fn()
  with CollectionClock() as collections:
    t0 = time.perf_counter()
    lowered = fn.lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    t3 = time.perf_counter()
  phases = {"lower_s": t1 - t0, "compile_s": t2 - t1, "first_run_s": t3 - t2,
            "gc_s": collections.seconds}
  return t3 - t0, phases, fn


def kernel_records() -> list[dict]:
  """What pallas-prof's registry knows of the kernels it just lowered and
  compiled: where the lowering, the wait for the compile worker and Triton's
  stages spent their time."""
  from pallas_prof.backend import kernel_registry
  return [{"kernel": r.name, "lowering_s": r.generated.lowering_seconds,
           "lowering_gc_s": r.generated.gc_seconds,
           "compile_s": getattr(r.compiled, "compile_seconds", None),
           "worker_wait_s": getattr(r.compiled, "worker_wait_seconds", None),
           "cache": getattr(r.compiled, "cache", None),
           "stages_s": dict(getattr(r.compiled, "stage_seconds", None) or {})}
          for r in kernel_registry.kernels()]


def warm_up_process() -> dict:
  """The costs every process pays once, whichever backend it uses (CUDA context,
  XLA's start-up, jaxlib's Triton custom call, Triton's own start-up) are paid
  here, on a tiny kernel unlike the measured ones, so that each op's first call
  measures that kernel's own cold compile. What this took per backend is kept:
  it is what a program's very first pallas_call costs."""
  from jax.experimental import pallas as pl

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0

  x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
  jax.block_until_ready(jax.jit(lambda a: a * 3.0)(x))       # XLA and the CUDA context first
  out = {}
  for variant in ("pallas_prof", "builtin"):
    _use_backend(variant)
    make = lambda: jax.jit(lambda a: pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype))(a))
    from pallas_prof.backend import kernel_registry
    kernel_registry.clear()
    total, phases, _ = first_call_seconds(make, (x,))
    out[variant] = {"first_call_s": total, **phases}
    if variant == "pallas_prof":
      from pallas_prof.backend.compiling import warmup
      # after the timing: the warm-up's compile (in the worker's child) has its figures
      out[variant]["background_warm_up"] = warmup.wait_for_warm_up(30)
      out[variant]["kernels"] = kernel_records()
  _use_backend("pallas_prof")
  return out


def poisoned_check(fn, args, reference, tol, poison_args) -> float:
  """Run once on NaN/garbage inputs, free that output (XLA reuses the memory),
  then run on the real inputs: unwritten elements would keep the poison."""
  junk = jax.block_until_ready(fn(*poison_args))
  del junk
  out = jax.block_until_ready(fn(*args))
  out32 = np.asarray(jnp.asarray(out, jnp.float32))
  ref32 = np.asarray(jnp.asarray(reference, jnp.float32))
  if not np.all(np.isfinite(out32)):
    raise AssertionError("output has non-finite values (unwritten / poisoned elements?)")
  err = float(np.linalg.norm(out32 - ref32) / max(np.linalg.norm(ref32), 1e-30))
  if err > tol:
    raise AssertionError(f"relative error {err:.3g} > {tol}")
  return err


def copy_bandwidth() -> dict:
  """Device-to-device copy through cuMemcpyDtoDAsync, bytes read + written per second."""
  from cuda.bindings import driver as cu
  n = 1 << 30  # 1 GiB each way
  src = jnp.ones((n // 4,), jnp.float32)
  dst = jnp.zeros((n // 4,), jnp.float32)
  jax.block_until_ready((src, dst))

  def check(res):
    err = res[0] if isinstance(res, tuple) else res
    if err != cu.CUresult.CUDA_SUCCESS:
      raise RuntimeError(f"CUDA error {err}")
    return res[1] if isinstance(res, tuple) and len(res) > 1 else None

  check(cu.cuInit(0))
  start, stop = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(0))
  times = []
  for i in range(12):
    check(cu.cuEventRecord(start, 0))
    check(cu.cuMemcpyDtoDAsync(dst.unsafe_buffer_pointer(), src.unsafe_buffer_pointer(), n, 0))
    check(cu.cuEventRecord(stop, 0))
    check(cu.cuEventSynchronize(stop))
    ms = check(cu.cuEventElapsedTime(start, stop))
    if i >= 2:
      times.append(ms / 1e3)
  t = statistics.median(times)
  return {"bytes_moved": 2 * n, "median_s": t, "GBps": 2 * n / t / 1e9}


def copy_timed_like_the_ops(bytes_moved: int) -> dict:
  """A jitted XLA copy that moves the op's bytes (half read, half written),
  timed exactly as the ops are: wall clock per call over batches of BATCH. The
  CUDA-event copy above leaves out what every jitted call pays (dispatch, and
  each batch's synchronisation); this one does not, so the op's time against
  it is like against like."""
  n = bytes_moved // 2 // 4
  x = jax.random.normal(_key(), (n,), jnp.float32)
  fn = jax.jit(lambda a: jnp.copy(a))
  if not bool(jnp.array_equal(fn(x), x)):
    raise AssertionError("the jitted copy did not copy")
  timing = time_per_call(fn, (x,))
  return {**timing, "bytes_moved": 2 * n * 4, "GBps": 2 * n * 4 / timing["median_s"] / 1e9}


# --- the ops ----------------------------------------------------------------------------

def _key():
  return jax.random.PRNGKey(np.random.randint(2**31))


def op_softmax():
  from jax.experimental.pallas.ops.gpu import softmax
  x = jax.random.normal(_key(), (8192, 8192), jnp.float32)
  bad = jnp.full_like(x, jnp.nan)
  return dict(
      name="softmax 8192x8192 f32", args=(x,), poison=(bad,),
      pallas=lambda: jax.jit(softmax.softmax), xla=lambda: jax.jit(lambda x: jax.nn.softmax(x, -1)),
      bytes=2 * x.size * 4, flops=None, tol=1e-5)


def op_norm(kind):
  from jax.experimental.pallas.ops.gpu import layer_norm, rms_norm
  mod = {"layer_norm": layer_norm, "rms_norm": rms_norm}[kind]
  k = jax.random.split(_key(), 3)
  x = jax.random.normal(k[0], (1, 8192, 8192), jnp.float32).astype(jnp.bfloat16)
  w = jax.random.normal(k[1], (8192,), jnp.float32).astype(jnp.bfloat16)
  b = jax.random.normal(k[2], (8192,), jnp.float32).astype(jnp.bfloat16)
  f = getattr(mod, kind)
  ref = getattr(mod, f"{kind}_reference")
  bad = (jnp.full_like(x, jnp.nan), w, b)
  return dict(
      name=f"{kind} fwd 8192x8192 bf16", args=(x, w, b), poison=bad,
      pallas=lambda: jax.jit(f), xla=lambda: jax.jit(ref),
      bytes=2 * x.size * 2 + 2 * 8192 * 2, flops=None, tol=2e-2)


def op_mha():
  from jax.experimental.pallas.ops.gpu import attention
  shape = (4, 4096, 16, 64)
  q, k, v = (jax.random.normal(kk, shape, jnp.float32).astype(jnp.float16)
             for kk in jax.random.split(_key(), 3))
  b, s, h, d = shape
  pallas = lambda: jax.jit(functools.partial(attention.mha, segment_ids=None, causal=True))

  def xla_attention(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=True, scale=1.0, implementation="xla")
  bad = (jnp.full_like(q, jnp.nan), k, v)
  return dict(
      name="mha fwd causal b4 s4096 h16 d64 f16", args=(q, k, v), poison=bad,
      pallas=pallas, xla=lambda: jax.jit(xla_attention),
      bytes=4 * q.size * 2, flops=4 * b * h * s * s * d / 2, tol=2e-2)


def op_matmul():
  import matmul as example
  m = n = k = 8192
  ka, kb = jax.random.split(_key())
  a = jax.random.normal(ka, (m, k), jnp.float32).astype(jnp.bfloat16)
  bm = jax.random.normal(kb, (k, n), jnp.float32).astype(jnp.bfloat16)
  params = dict(bm=128, bn=256, bk=64, num_warps=8, num_stages=3)
  pallas = lambda: jax.jit(functools.partial(example.matmul, **params))
  xla = lambda: jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)
                        .astype(jnp.bfloat16))
  bad = (jnp.full_like(a, jnp.nan), bm)
  return dict(name="matmul 8192^3 bf16 (f32 acc)", args=(a, bm), poison=bad, pallas=pallas,
              xla=xla, bytes=3 * m * n * 2, flops=2 * m * n * k, tol=1e-2,
              explicit_params=True)


def op_add():
  import vector_add as example
  n = 1 << 26
  kx, ky = jax.random.split(_key())
  x = jax.random.normal(kx, (n,), jnp.float32)
  y = jax.random.normal(ky, (n,), jnp.float32)
  bad = (jnp.full_like(x, jnp.nan), y)
  return dict(name="vector add 2^26 f32", args=(x, y), poison=bad,
              pallas=lambda: jax.jit(example.add),
              xla=lambda: jax.jit(lambda x, y: x + y), bytes=3 * n * 4, flops=None, tol=0.0)


OPS_BY_NAME = {"softmax": op_softmax, "layer_norm": functools.partial(op_norm, "layer_norm"),
               "rms_norm": functools.partial(op_norm, "rms_norm"), "mha": op_mha,
               "matmul": op_matmul, "add": op_add}
OPS = list(OPS_BY_NAME.values())


def abstract_args(spec) -> tuple:
  """An op's arguments as shapes and dtypes (to lower it without running it)."""
  return tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in spec["args"])


def _use_backend(backend: str):
  """Route Triton-style pallas_calls to pallas-prof or to JAX's built-in backend."""
  from pallas_prof.backend import pallas_call_rule
  pallas_prof.install()
  pallas_call_rule.route_to_builtin(backend == "builtin")


def run_op(make) -> dict:
  spec = make()
  result = {"op": spec["name"]}
  ref = jax.block_until_ready(spec["xla"]()(*spec["args"]))
  for variant in ("pallas_prof", "builtin", "xla"):
    try:
      if variant == "xla":
        first, phases, fn = first_call_seconds(spec["xla"], spec["args"])
      else:
        _use_backend(variant)
        from pallas_prof.backend import kernel_registry
        kernel_registry.clear()
        first, phases, fn = first_call_seconds(spec["pallas"], spec["args"])
        if variant == "pallas_prof":
          result["ours_first_call_breakdown"] = kernel_records()
      err = poisoned_check(fn, spec["args"], ref, spec["tol"] or 1e-6, spec["poison"]) \
          if variant != "xla" else 0.0
      timing = time_per_call(fn, spec["args"])
      t = timing["median_s"]
      entry = {"first_call_s": first, "first_call_phases": phases, "rel_error": err, **timing}
      if spec["bytes"]:
        entry["GBps"] = spec["bytes"] / t / 1e9
      if spec["flops"]:
        entry["TFLOPs"] = spec["flops"] / t / 1e12
      try:
        entry.update(gpu_time_per_call(fn, spec["args"]))
        if spec["bytes"]:
          entry["GBps_gpu"] = spec["bytes"] / entry["gpu_s_per_call"] / 1e9
      except Exception as e:  # noqa: BLE001 - reported, the wall-clock figures stand
        entry["gpu_time_error"] = f"{type(e).__name__}: {str(e)[:300]}"
      result[variant] = entry
    except Exception as e:  # noqa: BLE001 - reported, not hidden
      result[variant] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
    finally:
      _use_backend("pallas_prof")
  ours, builtin = result.get("pallas_prof", {}), result.get("builtin", {})
  if "median_s" in ours and "median_s" in builtin:
    result["ratio_ours_over_builtin"] = ours["median_s"] / builtin["median_s"]
    result["first_call_ratio"] = ours["first_call_s"] / builtin["first_call_s"]
  if "gpu_s_per_call" in ours and "gpu_s_per_call" in builtin:
    result["gpu_ratio_ours_over_builtin"] = ours["gpu_s_per_call"] / builtin["gpu_s_per_call"]
  if spec["bytes"] and not spec["flops"]:
    try:
      copy = copy_timed_like_the_ops(spec["bytes"])
      result["copy_timed_alike"] = copy
      for variant in ("pallas_prof", "builtin", "xla"):
        if "median_s" in result.get(variant, {}):
          result[variant]["pct_of_copy_timed_alike"] = \
              100 * copy["median_s"] / result[variant]["median_s"]
    except Exception as e:  # noqa: BLE001 - reported, the other figures stand
      result["copy_timed_alike"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
  return result


def cached_recompile_ms() -> dict:
  """Lowering + compile of each kernel in a fresh process, answered by the disk cache."""
  code = (
      "import sys, time, json; sys.path.insert(0, %r)\n"
      "import jax\n"
      "from pallas_prof.backend import kernel_registry\n"
      "from pallas_prof.backend.compiling import compile as pc\n"
      "import bench.suite.ops_vs_builtin as b\n"
      "out = {}\n"
      "for make in b.OPS:\n"
      "  spec = make(); kernel_registry.clear(); jax.clear_caches(); b._use_backend('pallas_prof')\n"
      "  spec['pallas']().lower(*spec['args'])\n"
      "  for rec in kernel_registry.kernels():\n"
      "    first = rec.compiled.cache if rec.compiled else None\n"
      "    pc.clear_memory_cache()\n"
      "    t0 = time.perf_counter(); ck = pc.compile_kernel(rec.generated, tuple(rec.compiled.target), need_cubin=False)\n"
      "    out[rec.name] = {'cache_at_first_lowering': first, 'cache': ck.cache,\n"
      "                     'compile_ms': (time.perf_counter() - t0) * 1e3,\n"
      "                     'lowering_ms': rec.generated.lowering_seconds * 1e3,\n"
      "                     'lowering_gc_ms': rec.generated.gc_seconds * 1e3}\n"
      "print(json.dumps(out))\n") % ROOT
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
  if res.returncode != 0:
    return {"error": res.stderr[-2000:]}
  return json.loads(res.stdout.strip().splitlines()[-1])


def require_gpu(script: str, step: str) -> None:
  """These benchmarks time 8192x8192 ops against the GPU's copy bandwidth: on a
  CPU they would run Triton's interpreter for hours. Say so and stop."""
  if jax.default_backend() != "gpu":
    raise SystemExit(f"{script} needs an NVIDIA GPU (JAX's backend here is "
                     f"{jax.default_backend()!r}); run it on the device machine, e.g. "
                     f"`bash bench/gpu_session.sh {step}`")


def main(argv=None):
  parser = argparse.ArgumentParser()
  parser.add_argument("--out")
  parser.add_argument("--only", help="comma-separated substrings of op names")
  args = parser.parse_args(argv)
  require_gpu("bench/suite/ops_vs_builtin.py", "bench")
  # as a user's program would: install at start-up (the compile worker warms up
  # while the inputs are made and the copy bandwidth is measured)
  pallas_prof.install()
  dev = jax.devices()[0]
  print(f"device: {dev.device_kind}, jax {jax.__version__}, backend {jax.default_backend()}")
  record = {"command": "python bench/suite/ops_vs_builtin.py " + " ".join(argv or sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M"), "device": dev.device_kind,
            "jax": jax.__version__, "host": platform.node(), "ops": []}
  record["process_warm_up"] = warm_up_process()
  print("process warm-up (first pallas_call of the process):", json.dumps(record["process_warm_up"]))
  try:
    record["copy_bandwidth"] = copy_bandwidth()
    print(f"device-to-device copy: {record['copy_bandwidth']['GBps']:.0f} GB/s")
  except Exception as e:  # noqa: BLE001
    record["copy_bandwidth"] = {"error": str(e)}
  name_filter = args.only.split(",") if args.only else None
  for make in OPS:
    if name_filter and not any(f in getattr(make, "__name__", str(make)) or
                               f in str(getattr(make, "args", "")) for f in name_filter):
      continue
    r = run_op(make)
    record["ops"].append(r)
    print(json.dumps(r))
    save_record(args.out, record)
  record["cached_recompile_fresh_process"] = cached_recompile_ms()
  ratios = [r["ratio_ours_over_builtin"] for r in record["ops"] if "ratio_ours_over_builtin" in r]
  if ratios:
    record["geomean_ratio"] = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
  _print_table(record)
  save_record(args.out, record)


def _print_table(record):
  from rich.console import Console
  from rich.table import Table
  bw = record.get("copy_bandwidth", {}).get("GBps")
  t = Table(title=f"{record['device']}: pallas-prof vs built-in vs XLA, wall clock per call "
                  "(median of batches) | GPU time per call (CUPTI, mean)"
                  + (f"; copy {bw:.0f} GB/s" if bw else "")
                  + ". % copy BW: wall clock | GPU time, against the CUDA-event copy | "
                    "wall clock against a jitted copy of the same bytes, timed alike")
  for c in ("op", "ours ms", "built-in ms", "XLA ms", "ours/built-in", "ours GB/s | TFLOP/s",
            "% copy BW", "first call ours/built-in s"):
    t.add_column(c)
  for r in record["ops"]:
    o, bi, x = r.get("pallas_prof", {}), r.get("builtin", {}), r.get("xla", {})
    def ms(e):
      if "median_s" not in e:
        return e.get("error", "-")[:40]
      gpu = f" | {e['gpu_s_per_call'] * 1e3:.3f}" if "gpu_s_per_call" in e else ""
      return f"{e['median_s'] * 1e3:.3f}{gpu}"

    def ratio(key):
      return f"{r[key]:.3f}" if key in r else "-"
    rate = f"{o['GBps']:.0f} | {o.get('GBps_gpu', float('nan')):.0f} GB/s" \
        if "GBps" in o and "TFLOPs" not in o else \
        (f"{o['TFLOPs']:.0f} TFLOP/s" if "TFLOPs" in o else "-")
    pct = (f"{100 * o['GBps'] / bw:.0f}% | {100 * o.get('GBps_gpu', float('nan')) / bw:.0f}%"
           f" | {o.get('pct_of_copy_timed_alike', float('nan')):.0f}%"
           if bw and "GBps" in o and "TFLOPs" not in o else "-")
    fc = (f"{o.get('first_call_s', float('nan')):.2f} / {bi.get('first_call_s', float('nan')):.2f}")
    t.add_row(r["op"], ms(o), ms(bi), ms(x),
              f"{ratio('ratio_ours_over_builtin')} | {ratio('gpu_ratio_ours_over_builtin')}",
              rate, pct, fc)
  Console(width=200).print(t)
  if "geomean_ratio" in record:
    print(f"geometric mean ours/built-in: {record['geomean_ratio']:.3f}")
  print("cached recompile in a fresh process:", json.dumps(record.get("cached_recompile_fresh_process")))


if __name__ == "__main__":
  main()
