"""What the GPU can do, measured on it, and where each kernel stands.

Ceilings are measured at first use and cached per GPU (a JSON file under the
pallas-prof cache dir, keyed by the device's UUID):

  copy bandwidth  device-to-device, counting bytes read + written: the best
                  of cuMemcpyDtoDAsync and a vectorised Triton copy kernel
                  launched by the replay runner, each on 512 MiB buffers,
                  CUDA events, median of the timed repetitions
  matrix rate     jnp.dot of 8192^3 in bf16, f16 and f32 with TF32, timed with
                  JAX (warm-up, then back-to-back calls blocked at the end),
                  best of three rounds; needs JAX with a GPU backend

`rates()` turns a kernel's bytes, FLOPs and median time into achieved
bytes/s and FLOP/s, percentages of those ceilings and a roofline verdict.
"""
from __future__ import annotations

import json
import math
import os
import re
import time
from typing import Callable

import numpy as np

from ...backend import cache_files
from .. import driver
from ..driver import ProfilerError, call
from ..launchspec import own_param
from .own_kernels import compile_own_kernel, own_launch_spec
from .replayer import Replayer
from ..schema import Ceilings, DeviceInfo, Rates, WorkModel

COPY_BYTES = 512 * 2**20
MATRIX_N = 8192
CACHE_FORMAT = 1


# --- the cache ---------------------------------------------------------------------------------

def cache_path(device: DeviceInfo) -> str:
  safe = re.sub(r"[^0-9A-Za-z_.-]", "_", f"{device.name}_{device.uuid}")
  return os.path.join(cache_files.root(), "ceilings", f"{safe}.json")


def load_cached(device: DeviceInfo) -> Ceilings | None:
  """The device's ceilings as stored, None where there are none; a file that is not
  ceilings pallas-prof stored for this device (damaged: unreadable, other fields,
  rates that are not positive numbers) is moved aside, and they are measured again."""
  path = cache_path(device)
  raw = cache_files.read(path, cache_files.MAX_RECORD_BYTES)
  if raw is None:
    return None
  try:
    data = json.loads(raw)
    if data.get("format") != CACHE_FORMAT:
      return None                  # another layout: measured again, and replaced
    data.pop("format", None)
    found = Ceilings(**data)
    if found.device_uuid == device.uuid and _plausible(found):
      return found
  except (ValueError, TypeError, AttributeError):
    pass
  cache_files.move_aside(path, "not the ceilings pallas-prof stored for this GPU")
  return None


def _plausible(found: Ceilings) -> bool:
  rates = [found.copy_bytes_per_s] + list(dict(found.matrix_flops_per_s).values())
  return all(r is None or (isinstance(r, (int, float)) and math.isfinite(r) and r > 0)
             for r in rates)


def store(device: DeviceInfo, ceilings: Ceilings) -> str:
  """Keeps the ceilings in the cache, whole or not at all (the stand-in cache where the
  cache folder cannot be written); returns the path written."""
  data = ceilings.to_dict()
  data["format"] = CACHE_FORMAT
  return cache_files.write(cache_path(device), json.dumps(data, indent=1))


def get(device: DeviceInfo, *, refresh: bool = False,
        measure: Callable[[DeviceInfo], Ceilings] | None = None) -> Ceilings:
  """The device's ceilings: from the cache, else measured now and cached."""
  if not refresh:
    cached = load_cached(device)
    if cached is not None:
      return cached
  ceilings = (measure or measure_all)(device)
  try:
    store(device, ceilings)
  except OSError:      # neither the cache nor a temporary folder: measured again next run
    pass
  return ceilings


# --- measuring ---------------------------------------------------------------------------------

def measure_all(device: DeviceInfo) -> Ceilings:
  notes, details = [], {}
  copy_rates = {}
  for method, fn in (("cuMemcpyDtoDAsync", measure_memcpy), ("triton copy kernel",
                                                             measure_copy_kernel)):
    try:
      copy_rates[method] = fn(device.index)
    except Exception as e:  # noqa: BLE001 - one method failing leaves the other
      notes.append(f"copy bandwidth by {method} failed: {type(e).__name__}: {e}")
  details["copy_bytes_per_s"] = copy_rates
  best = max(copy_rates, key=copy_rates.get) if copy_rates else None
  matrix, matrix_notes = measure_matrix(device.index)
  notes += matrix_notes
  return Ceilings(device_name=device.name, device_uuid=device.uuid,
                  copy_bytes_per_s=copy_rates.get(best) if best else None,
                  copy_method=best or "none",
                  matrix_flops_per_s=matrix,
                  matrix_method=f"jax.numpy.dot {MATRIX_N}^3 (XLA/cuBLAS), best of 3 rounds",
                  measured_at=time.time(), details=details, notes=notes)


def measure_memcpy(index: int, nbytes: int = COPY_BYTES, reps: int = 10) -> float:
  """Device-to-device cuMemcpyDtoDAsync; bytes read + written per second."""
  d = driver._driver()
  with driver.primary_context(index):
    src, dst = driver.DeviceBuffer(nbytes), driver.DeviceBuffer(nbytes)
    stream = call("cuStreamCreate", int(d.CUstream_flags.CU_STREAM_NON_BLOCKING))
    events = [(call("cuEventCreate", 0), call("cuEventCreate", 0)) for _ in range(reps + 3)]
    try:
      call("cuMemsetD8Async", src.ptr, 0x3C, nbytes, stream)
      for start, end in events:
        call("cuEventRecord", start, stream)
        call("cuMemcpyDtoDAsync", dst.ptr, src.ptr, nbytes, stream)
        call("cuEventRecord", end, stream)
      call("cuStreamSynchronize", stream)
      times = [call("cuEventElapsedTime", a, b) / 1e3 for a, b in events[3:]]
    finally:
      for a, b in events:
        call("cuEventDestroy", a)
        call("cuEventDestroy", b)
      call("cuStreamDestroy", stream)
      src.close()
      dst.close()
  return 2 * nbytes / float(np.median(times))


def copy_kernel_spec(cc: int, nbytes: int = COPY_BYTES, block: int = 4096, num_warps: int = 8):
  """A LaunchSpec of a vectorised Triton copy of nbytes (float32)."""
  # lazy: at the top it would load triton whenever this module is imported
  from ._ceiling_kernels import pallas_prof_copy
  n = nbytes // 4 // block * block
  compiled = compile_own_kernel(pallas_prof_copy, {"src": "*fp32", "dst": "*fp32",
                                                   "BLOCK": "constexpr"},
                                {"BLOCK": block}, cc, num_warps)
  return own_launch_spec(compiled, (n // block, 1, 1), num_warps,
                         [own_param("src", "float32", (n,), "input", 0),
                          own_param("dst", "float32", (n,), "output", 0)])


def measure_copy_kernel(index: int, nbytes: int = COPY_BYTES) -> float:
  info = driver.device_info(index)
  spec = copy_kernel_spec(info.compute_capability, nbytes)
  n = spec.params[0].shape[0]
  with Replayer(spec, index) as r:
    r.prepare(n_sets=1)      # 2 x 512 MiB is far beyond the L2: no rotation needed
    timing = r.time_launches(min_launches=10, min_seconds=0.05)
  return 2 * n * 4 / float(np.median(timing["times_s"]))


def measure_matrix(index: int, n: int = MATRIX_N) -> tuple[dict[str, float], list[str]]:
  """Dense matrix rates with jnp.dot on JAX's GPU `index`."""
  notes = []
  try:
    # lazy: keeps jax out of this module's import (start-up time)
    import jax
    import jax.numpy as jnp
    gpus = jax.devices("gpu")
  except Exception as e:  # noqa: BLE001
    return {}, [f"matrix rates need JAX with a GPU backend: {type(e).__name__}: {e}"]
  dev = next((g for g in gpus if getattr(g, "local_hardware_id", g.id) == index), None)
  if dev is None:
    return {}, [f"JAX has no GPU with hardware id {index} (has {[str(g) for g in gpus]})"]
  rates = {}
  for name, dtype, precision in (("bf16", jnp.bfloat16, None), ("f16", jnp.float16, None),
                                 ("tf32", jnp.float32, "tensorfloat32")):
    try:
      rates[name] = _time_dot(jax, jnp, dev, n, dtype, precision)
    except Exception as e:  # noqa: BLE001
      notes.append(f"{name} matrix rate failed: {type(e).__name__}: {e}")
  return rates, notes


def _time_dot(jax, jnp, dev, n, dtype, precision, calls: int = 20, rounds: int = 3) -> float:
  key = jax.random.PRNGKey(0)
  ka, kb = jax.random.split(key)
  a = jax.device_put(jax.random.normal(ka, (n, n), jnp.float32).astype(dtype), dev)
  b = jax.device_put(jax.random.normal(kb, (n, n), jnp.float32).astype(dtype), dev)
  ctx = jax.default_matmul_precision(precision) if precision else _null()
  with ctx:
    f = jax.jit(lambda x, y: jnp.dot(x, y))
    for _ in range(3):
      f(a, b).block_until_ready()
    best = 0.0
    for _ in range(rounds):
      t0 = time.perf_counter()
      for _ in range(calls):
        out = f(a, b)
      out.block_until_ready()
      dt = (time.perf_counter() - t0) / calls
      best = max(best, 2 * n ** 3 / dt)
  return best


class _null:
  def __enter__(self):
    return self

  def __exit__(self, *exc):
    return None


# --- where a kernel stands ---------------------------------------------------------------------

def _fmt_rate(x: float, unit: str) -> str:
  for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
    if abs(x) >= scale:
      return f"{x / scale:.3g} {prefix}{unit}"
  return f"{x:.3g} {unit}"


def rates(work: WorkModel | None, median_s: float, ceilings: Ceilings | None) -> Rates:
  """Achieved rates, their share of the ceilings, and which one bounds the kernel."""
  if work is None or median_s <= 0:
    return Rates(None, None, None, None, None, None, None, "unknown", None,
                 "no work model or no time")
  bps = work.bytes / median_s if work.bytes is not None else None
  fps = work.flops / median_s if work.flops is not None else None
  bw = ceilings.copy_bytes_per_s if ceilings else None
  matrix = None
  if ceilings and work.dot_dtype:
    matrix = ceilings.matrix_flops_per_s.get(work.dot_dtype)
  dot_fps = work.dot_flops / median_s if work.dot_flops is not None else None
  bw_pct = 100 * bps / bw if bps is not None and bw else None
  compute_pct = 100 * dot_fps / matrix if dot_fps is not None and matrix and work.dot_flops else None
  intensity = work.flops / work.bytes if work.flops is not None and work.bytes else None
  ridge = matrix / bw if matrix and bw else None
  t_mem = work.bytes / bw if work.bytes is not None and bw else None
  t_comp = work.dot_flops / matrix if work.dot_flops and matrix else None
  if t_mem is None and t_comp is None:
    bound, eff = "unknown", None
  elif t_comp is None or (t_mem is not None and t_mem >= t_comp):
    bound, eff = "memory", 100 * t_mem / median_s
  else:
    bound, eff = "compute", 100 * t_comp / median_s
  if bound == "memory" and t_comp is None and eff < 25 and (
      work.elementwise_flops or work.transcendentals):
    # No dots, so no compute roofline; far under the memory one, with float math to do:
    # calling it memory-bound would send the user to the loads (measured: a loop of
    # exp on the H200 far under the copy bandwidth, its time all in the special-function unit)
    bound = "not memory"
  verdict = _verdict(bound, eff, bps, bw, bw_pct, dot_fps, matrix, compute_pct, work,
                     median_s)
  return Rates(bytes_per_s=bps, flops_per_s=fps, bandwidth_pct=bw_pct, compute_pct=compute_pct,
               compute_ceiling=work.dot_dtype if matrix else None, arithmetic_intensity=intensity,
               ridge_point=ridge, bound=bound, efficiency_pct=eff, verdict=verdict)


def _verdict(bound, eff, bps, bw, bw_pct, dot_fps, matrix, compute_pct, work,
             median_s=None) -> str:
  if bound == "unknown":
    return "no ceilings measured: achieved rates only"
  if bound == "not memory":
    math = [f"{_fmt_rate(work.elementwise_flops / median_s, 'FLOP/s')} of float math"
            ] if work.elementwise_flops else []
    if work.transcendentals:
      math.append(f"{_fmt_rate(work.transcendentals / median_s, 'transcendentals/s')}")
    return (f"not memory-bound: {_fmt_rate(bps, 'B/s')} = {bw_pct:.0f}% of the measured copy "
            f"bandwidth, and no dots for a compute roofline; its time goes to its float math "
            f"({', '.join(math)}), latency or occupancy: the hot equations say which lines")
  if bound == "memory":
    text = (f"memory-bound: {_fmt_rate(bps, 'B/s')} = {bw_pct:.0f}% of the measured copy "
            f"bandwidth ({_fmt_rate(bw, 'B/s')})")
    if compute_pct is not None:
      text += f"; dots at {compute_pct:.0f}% of the {work.dot_dtype} matrix rate"
  else:
    text = (f"compute-bound: dots at {_fmt_rate(dot_fps, 'FLOP/s')} = {compute_pct:.0f}% of the "
            f"measured {work.dot_dtype} matrix rate ({_fmt_rate(matrix, 'FLOP/s')})")
    if bw_pct is not None:
      text += f"; memory at {bw_pct:.0f}% of copy bandwidth"
  if eff is not None and eff < 25:
    text += (" - far from its roofline bound: latency, occupancy, launch size or a serial "
             "part dominates")
  if work.dot_flops is None and work.dot_dtype:
    text += "; FLOPs unknown (a loop trip count is known only at run time)"
  return text


__all__ = ["get", "measure_all", "measure_memcpy", "measure_copy_kernel", "measure_matrix",
           "rates", "load_cached", "store", "cache_path", "ProfilerError"]
