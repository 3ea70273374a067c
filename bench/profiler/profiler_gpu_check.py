"""One short GPU session that exercises every GPU part of pallas_prof.profiler.

    python bench/profiler/profiler_gpu_check.py [OUT_DIR]        (default: $OUT, else .)

Writes OUT_DIR/profiler_gpu_check.json (rewritten after every part, so a
crash or timeout keeps what was measured) and prints a summary. Parts, each
in its own try/except (a failing part records its traceback and the rest go on):

  env        device, versions, tools found (ncu, nvdisasm), CUDA_VISIBLE_DEVICES
  nvml_idle  NVML readings for 1 s of an idle GPU
  kernels    softmax 8192x8192 f32, matmul 8192^3 bf16, flash attention
             (4, 4096, 16, 64) f16 non-causal, lowered for this GPU (not run by JAX)
  small_check the same three kernels at small shapes, replayed and checked
             against the CPU interpreter
  replay     pallas_prof.profile() on the big three on device 0 (explicitly):
             cold median/p10/p90/min (L2 flushed before each launch, throttle
             guard), the sustained (back-to-back) median, launches, input sets,
             poison check, JAX reference check, throttle-guard counts, NVML during
             the sustained window, ceilings (measured or cached), rates and verdicts
  ncu        if ncu exists: gpu__time_duration of 5 replayed launches per kernel vs
             the replay's cold median (target: within 3%; the sustained median and
             throttle counts printed beside it), and the source counters of matmul
             mapped to equations
  insitu     a subprocess script runs two pallas-prof kernels (softmax x3, vector add
             x5) under insitu.capture(); launch counts checked; then a jax.profiler
             trace is started and capture() must refuse plainly
  devices    device index 0 explicitly, and an out-of-range index's error

Keep it under ~3 minutes on an H200.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # leave room for cuMemAlloc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
os.makedirs(OUT_DIR, exist_ok=True)
RESULT_PATH = os.path.join(OUT_DIR, "profiler_gpu_check.json")
RESULTS: dict = {"started": time.time(), "parts": {}}
T0 = time.perf_counter()


def save() -> None:
  RESULTS["elapsed_s"] = time.perf_counter() - T0
  with open(RESULT_PATH + ".tmp", "w") as f:
    json.dump(RESULTS, f, indent=1, default=str)
  os.replace(RESULT_PATH + ".tmp", RESULT_PATH)


@contextlib.contextmanager
def part(name: str):
  record = RESULTS["parts"].setdefault(name, {})
  start = time.perf_counter()
  print(f"\n== {name}", flush=True)
  try:
    yield record
    record["ok"] = True
  except BaseException as e:  # noqa: BLE001 - keep going, say what failed
    record["ok"] = False
    record["error"] = f"{type(e).__name__}: {e}"
    record["traceback"] = traceback.format_exc()
    print(f"   FAILED: {type(e).__name__}: {e}", flush=True)
    if isinstance(e, KeyboardInterrupt):
      raise
  finally:
    record["seconds"] = round(time.perf_counter() - start, 2)
    save()


def us(seconds) -> str:
  return "n/a" if seconds is None else f"{seconds * 1e6:.1f} us"


def throttle_text(rt) -> str:
  th = rt.throttle if rt is not None else None
  if th is None:
    return "no throttle guard (cold not timed)"
  if not th.available:
    return f"guard off: {th.note}"
  text = (f"{th.checks} checks, {th.throttled_checks} throttled, {th.recoveries} recoveries "
          f"({th.recovery_s:.2f} s), {th.discarded_launches} launches redone, SM clock min "
          f"{th.min_sm_clock_mhz} of max {th.max_sm_clock_mhz} MHz")
  if th.reasons:
    text += f", reasons {th.reasons}"
  return text + (f"; {th.note}" if th.note else "")


STATE: dict = {}

# --- env ----------------------------------------------------------------------------------------

with part("env") as r:
  import importlib.metadata as md
  versions = {}
  for dist in ("jax", "jaxlib", "triton", "cuda-bindings", "nvidia-ml-py", "numpy"):
    try:
      versions[dist] = md.version(dist)
    except md.PackageNotFoundError:
      versions[dist] = None
  r["versions"] = versions
  r["python"] = sys.version
  r["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES")
  from pallas_prof.profiler import driver
  from pallas_prof.profiler.sampling import ncu as ncu_mod
  r["gpu_status"] = driver.gpu_status()
  r["device_count"] = driver.device_count()
  info = driver.device_info(0)
  STATE["info"] = info
  r["device0"] = info.to_dict()
  r["ncu"] = ncu_mod.find_ncu()
  try:
    import triton
    r["nvdisasm"] = triton.knobs.nvidia.nvdisasm.path
  except Exception as e:  # noqa: BLE001
    r["nvdisasm"] = f"unavailable: {e}"
  print(f"   {info.name} cc {info.compute_capability}, L2 {info.l2_bytes / 2**20:.0f} MiB, "
        f"{r['device_count']} device(s); ncu: {r['ncu']}; versions {versions}")

# --- NVML while idle ---------------------------------------------------------------------------

with part("nvml_idle") as r:
  from pallas_prof.profiler.timing import nvml
  api = nvml.init()
  handle = nvml.handle_for(api, STATE["info"].uuid, STATE["info"].pci_bus_id)
  STATE["nvml_handle"] = handle
  window = nvml.Sampler(handle, interval_s=0.01).sample_for(1.0)
  r["window"] = window.to_dict()
  print(f"   idle: {window.summary}")

# --- the kernels -------------------------------------------------------------------------------

with part("kernels") as r:
  import jax
  import jax.numpy as jnp
  import numpy as np
  import pallas_prof
  import softmax as softmax_ex
  import matmul as matmul_ex
  import flash_attention as flash_ex
  import vector_add  # noqa: F401 - used by the in-situ script; imports check it is present
  from pallas_prof.backend import kernel_registry
  pallas_prof.uninstall()           # the examples install(); their calls name pallas-prof anyway
  r["jax_devices"] = [str(d) for d in jax.devices()]

  def lowered(jitted, *args, **kwargs):
    before = {rec.key for rec in kernel_registry.kernels()}
    jitted.lower(*args, **kwargs)
    new = [rec for rec in kernel_registry.kernels() if rec.key not in before]
    assert len(new) == 1, [rec.label for rec in new]
    assert new[0].compiled is not None, "lowered for the GPU but not compiled"
    return new[0]

  S = jax.ShapeDtypeStruct
  big = {
      "softmax": lowered(softmax_ex.softmax, S((8192, 8192), jnp.float32)),
      "matmul": lowered(matmul_ex.matmul, S((8192, 8192), jnp.bfloat16),
                        S((8192, 8192), jnp.bfloat16), bm=128, bn=256, bk=64, num_warps=8,
                        num_stages=3),
      "attention": lowered(flash_ex.flash_attention, *([S((4, 4096, 16, 64), jnp.float16)] * 3),
                           causal=False, block_q=128, block_k=64, num_warps=4, num_stages=3),
  }
  small = {
      "softmax": lowered(softmax_ex.softmax, S((64, 1000), jnp.float32)),
      "matmul": lowered(matmul_ex.matmul, S((256, 256), jnp.bfloat16), S((256, 256), jnp.bfloat16),
                        bm=64, bn=64, bk=32),
      "attention": lowered(flash_ex.flash_attention, *([S((1, 256, 2, 64), jnp.float16)] * 3),
                           causal=False, block_q=64, block_k=64),
  }
  STATE["big"], STATE["small"] = big, small
  for name, rec in {**{f"big {k}": v for k, v in big.items()},
                    **{f"small {k}": v for k, v in small.items()}}.items():
    ck = rec.compiled
    r[name] = {"label": rec.label, "in_avals": rec.in_avals, "grid": list(rec.generated.grid),
               "shared": ck.shared_bytes, "registers": ck.registers, "spills": ck.spills,
               "target": list(ck.target)}
    print(f"   {name}: {rec.label} grid {rec.generated.grid} shared {ck.shared_bytes} "
          f"regs {ck.registers}")

# --- small shapes against the interpreter -------------------------------------------------------

with part("small_check") as r:
  from pallas_prof.profiler.timing import runner
  for name, rec in STATE["small"].items():
    stats = runner.replay(rec.compiled, device=0, aliases=rec.input_output_aliases,
                          reference="interpreter", min_launches=100, min_seconds=0.05,
                          tolerance=(1e-2, 1e-2) if name == "attention" else None)
    r[name] = stats.to_dict()
    c = stats.correctness
    print(f"   {name}: median {us(stats.median_s)}, written {stats.outputs_written}, "
          f"interpreter check passed={c.passed} ({c.message}; max |d| {c.max_abs_error})")

# --- replay of the big kernels through profile() -----------------------------------------------

with part("replay") as r:
  import pallas_prof
  from pallas_prof.profiler.timing import ceilings as ceilings_mod

  def softmax_ref(x):
    return np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1))

  def matmul_ref(a, b):
    return np.asarray(jnp.dot(jnp.asarray(a), jnp.asarray(b),
                              preferred_element_type=jnp.float32).astype(jnp.bfloat16))

  def attention_ref(q, k, v):
    return np.asarray(flash_ex.reference(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v),
                                         False).astype(jnp.float16))

  big = STATE["big"]
  refs = {big["softmax"].label: softmax_ref, big["matmul"].label: matmul_ref,
          big["attention"].label: attention_ref}
  cached = ceilings_mod.load_cached(STATE["info"])
  r["ceilings_were_cached"] = cached is not None
  t = time.perf_counter()
  # attention: P is rounded to f16 before its second dot (as in the example), the reference
  # keeps it in f32; softmax and matmul use the default tolerances of their dtypes
  report = pallas_prof.profile(list(big.values()), device=0, reference=refs,
                               tolerance={big["attention"].label: (1e-2, 1e-2)})
  r["profile_seconds"] = time.perf_counter() - t
  STATE["report"] = report
  r["report"] = report.to_dict()
  print(f"   {report.message}")
  if report.ceilings:
    c = report.ceilings
    print(f"   ceilings: copy {c.copy_bytes_per_s and c.copy_bytes_per_s / 1e12:.2f} TB/s "
          f"({c.copy_method}), matrix " + ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s"
                                                    for k, v in c.matrix_flops_per_s.items())
          + (f"; notes {c.notes}" if c.notes else ""))
  for k in report.kernels:
    rt = k.runtime
    if rt is None:
      print(f"   {k.label}: NOT TIMED {k.errors}")
      continue
    print(f"   {k.label}: {rt.mode} median {us(rt.median_s)} p10 {us(rt.p10_s)} "
          f"p90 {us(rt.p90_s)} min {us(rt.min_s)} x{rt.launches} ({rt.input_sets} sets of "
          f"{rt.set_bytes / 2**20:.0f} MiB), written={rt.outputs_written}, "
          f"check={rt.correctness and rt.correctness.passed}")
    if rt.sustained is not None:
      print(f"      sustained median {us(rt.sustained.median_s)} x{rt.sustained.launches}")
    print(f"      throttle guard: {throttle_text(rt)}")
    print(f"      nvml (sustained window): {k.nvml.summary if k.nvml else None}")
    print(f"      {k.verdict}")
    if k.errors:
      print(f"      errors: {k.errors}")

# --- ncu against the replay -----------------------------------------------------------------

with part("ncu") as r:
  from pallas_prof.profiler.sampling import ncu as ncu_mod
  if ncu_mod.find_ncu() is None:
    r["skipped"] = "ncu not found"
    print("   ncu not found: skipped")
  else:
    report = STATE["report"]
    by_label = {k.label: k for k in report.kernels}
    for name, rec in STATE["big"].items():
      kp = by_label[rec.label]
      rt = kp.runtime
      median = rt.cold.median_s if rt is not None and rt.cold is not None else None
      sustained = rt.sustained.median_s if rt is not None and rt.sustained is not None else None
      try:
        res = ncu_mod.run(rec.compiled, device=0, launches=5, warmup=2,
                          source=(name == "matmul"), replay_median_s=median,
                          aliases=rec.input_output_aliases, timeout=150)
        r[name] = res.to_dict()
        within = res.difference_pct is not None and abs(res.difference_pct) <= 3.0
        r[name]["within_3pct"] = within
        r[name]["replay_sustained_median_s"] = sustained
        r[name]["replay_throttle"] = rt.throttle.to_dict() if rt and rt.throttle else None
        print(f"   {name}: ncu median {us(res.median_s)} vs replay cold {us(median)}: "
              f"{res.difference_pct if res.difference_pct is None else round(res.difference_pct, 2)}% "
              f"({'within' if within else 'NOT within'} 3%); notes {res.notes}")
        print(f"      replay sustained {us(sustained)}"
              + (f" ({100 * (sustained / res.median_s - 1):+.1f}% against ncu)"
                 if sustained and res.median_s else "")
              + f"; throttle guard: {throttle_text(rt)}")
        if res.source_counters:
          top = sorted(res.source_counters.items(),
                       key=lambda kv: -max(kv[1].values(), default=0))[:5]
          print(f"      source counters by equation (top): {top}")
      except Exception as e:  # noqa: BLE001
        r[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print(f"   {name}: FAILED {type(e).__name__}: {e}")

# --- in situ -------------------------------------------------------------------------------------

INSITU_SCRIPT = r'''
import json, os, sys, tempfile
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
import jax, jax.numpy as jnp
import softmax, vector_add
from pallas_prof.backend import kernel_registry
from pallas_prof.profiler.timing import insitu
x = jax.random.normal(jax.random.PRNGKey(0), (4096, 4096), jnp.float32)
a = jax.random.normal(jax.random.PRNGKey(1), (2**24,), jnp.float32)
b = jax.random.normal(jax.random.PRNGKey(2), (2**24,), jnp.float32)
softmax.softmax(x).block_until_ready(); vector_add.add(a, b).block_until_ready()   # compile first
out = {"holders_before": insitu.cupti_holders()}
with insitu.capture() as cap:
  for _ in range(3):
    softmax.softmax(x).block_until_ready()
  for _ in range(5):
    vector_add.add(a, b).block_until_ready()
res = cap.result
out["kernels"] = {n: {"launches": k.launches, "total_s": k.total_ns / 1e9, "mean_s": k.mean_s,
                      "device_ids": k.device_ids} for n, k in res.kernels.items()}
out["matched"] = {label: s.to_dict() for label, s in insitu.match(res, kernel_registry.kernels()).items()}
out["notes"] = res.notes
print("INSITU_JSON " + json.dumps(out), flush=True)
try:
  jax.profiler.start_trace(tempfile.mkdtemp())
except Exception as e:
  out["busy_check"] = f"jax.profiler.start_trace failed: {type(e).__name__}: {e}"
else:
  try:
    with insitu.capture():
      softmax.softmax(x).block_until_ready()
    out["busy_check"] = "capture() did not refuse while a jax.profiler trace ran"
  except insitu.CuptiBusy as e:
    out["busy_check"] = "refused: " + str(e)
  except Exception as e:
    out["busy_check"] = f"other error: {type(e).__name__}: {e}"
  finally:
    jax.profiler.stop_trace()
print("BUSY_JSON " + json.dumps(out.get("busy_check")), flush=True)
'''

with part("insitu") as r:
  with tempfile.TemporaryDirectory() as d:
    script = os.path.join(d, "insitu_script.py")
    with open(script, "w") as f:
      f.write(INSITU_SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, script, ROOT], capture_output=True, text=True,
                          timeout=240, env=env)
  r["returncode"] = proc.returncode
  line = next((l for l in proc.stdout.splitlines() if l.startswith("INSITU_JSON ")), None)
  r["stderr_tail"] = proc.stderr[-3000:]
  if line is None:
    raise RuntimeError(f"the in-situ script printed no result (rc {proc.returncode}): "
                       f"{proc.stderr[-1500:]}")
  data = json.loads(line[len("INSITU_JSON "):])
  busy = next((l for l in proc.stdout.splitlines() if l.startswith("BUSY_JSON ")), None)
  data["busy_check"] = json.loads(busy[len("BUSY_JSON "):]) if busy else \
      f"no busy-check result (rc {proc.returncode})"
  r["result"] = data
  counts = {n: k["launches"] for n, k in data["kernels"].items()}
  r["softmax_launches_ok"] = counts.get("softmax_kernel") == 3
  r["add_launches_ok"] = counts.get("add_kernel") == 5
  print(f"   launches seen: softmax_kernel {counts.get('softmax_kernel')} (want 3), add_kernel "
        f"{counts.get('add_kernel')} (want 5); all kernels: {counts}")
  print(f"   busy check: {data.get('busy_check')}")
  assert r["softmax_launches_ok"] and r["add_launches_ok"], counts

# --- device indices --------------------------------------------------------------------------------

with part("devices") as r:
  import pallas_prof
  from pallas_prof.profiler import driver
  rec = STATE["small"]["softmax"]
  rep = pallas_prof.profile([rec], device=0, ceilings=False, min_launches=100, min_seconds=0.05)
  r["device0"] = {"message": rep.message, "device": rep.device.to_dict(),
                  "median_s": rep.kernels[0].runtime and rep.kernels[0].runtime.median_s,
                  "errors": rep.kernels[0].errors}
  print(f"   device=0: {rep.message}; median {us(r['device0']['median_s'])}")
  bad = driver.device_count()
  try:
    pallas_prof.profile([rec], device=bad, ceilings=False)
    r["bad_index"] = f"NO ERROR for device={bad}"
  except driver.BadDevice as e:
    r["bad_index"] = f"BadDevice: {e}"
  print(f"   device={bad}: {r['bad_index']}")
  assert r["bad_index"].startswith("BadDevice")

RESULTS["summary"] = {name: rec.get("ok") for name, rec in RESULTS["parts"].items()}
save()
print(f"\nsummary: {RESULTS['summary']}  ({time.perf_counter() - T0:.0f} s) -> {RESULT_PATH}")
