"""Replay: launch a CompiledKernel's cubin on the GPU and time it.

The cubin Triton produced is loaded with cuModuleLoadData and launched with
cuLaunchKernel (cuda-bindings; no torch, no JAX in the loop), with the
kernel's parameters: one pointer per input, one per output, then Triton
3.6's global-scratch and profile-scratch pointers (null unless the kernel
asks for scratch).

What a replay does, in order:
  1. inputs drawn fresh at random per dtype, in enough sets (each with its
     own outputs) that their total exceeds twice the L2 cache; launches
     rotate through the sets so no launch finds its data in L2
  2. outputs poisoned twice (0xFF bytes, then 0x5A) and launched: an element
     equal to the poison both times was never written
  3. optional correctness: outputs of set 0 against the CPU interpreter or a
     reference function
  4. per timing mode, warm-up, then at least `min_launches` timed launches and
     `min_seconds` of them (or, past min_launches, `max_seconds` of wall
     time), CUDA events around each launch (on a stream of our own)
  5. median, p10, p90, min of the per-launch times, per mode

Two timing modes (after nvbench, which reports "cold" and "batch" GPU time):

  cold       the headline figure, and what Nsight Compute's gpu__time_duration
             measures (ncu flushes the caches before each launch and leaves
             idle gaps between launches). Before each timed launch a read-only
             Triton kernel reads twice the L2 size (l2flush.py), outside the
             events: the kernel starts with no data of its own in L2 and no
             dirty lines of a previous launch to write back. Rotating sets
             alone leave the previous launch's outputs dirty in L2 (up to ~50 MB
             of a 60 MB L2 for an 8192^2 f32 softmax); their write-back slowed
             the next launch by ~5% against ncu. A throttle guard (throttle.py)
             checks the SM clock after each ~3 ms batch and has a throttled
             batch redone after a recovery sleep: back-to-back launches of an
             8192^3 bf16 matmul power-capped an H200 to 1455 of 1980 MHz and
             took 13% longer than ncu's isolated launches. Once the GPU has
             throttled, the remaining cold launches are paced (one at a time,
             after an idle gap of ten kernel times, 2-20 ms: pacing_gap), as
             ncu's isolated launches are.
  sustained  back-to-back launches, no flush, no guard: what a program's loop
             sees, power capping and write-back included.

`replay(mode="both")` (the default) times cold first, on a GPU the sustained
launches have not yet heated, then sustained.

Also a small command line for Nsight Compute to profile a replay in a
subprocess: `python -m pallas_prof.profiler.runner SPEC_DIR --launches N`
(mode "plain": launches only, no flush, since ncu flushes the caches itself;
`--mode cold|sustained|both` times instead and prints the stats).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from . import driver, l2flush
from .driver import ProfilerError, call
from .schema import Correctness, RuntimeStats, TimingStats
from .throttle import ThrottleGuard

POISONS = (0xFF, 0x5A)
MAX_LAUNCHES = 200_000
BATCH = 2048
ALIGN = 256
MODES = ("cold", "sustained", "both")
MAX_SECONDS = 2.0            # per mode: once min_launches are in, stop after this much wall time
CHECK_INTERVAL_S = 0.003     # cold: wall time of a batch between two throttle checks


# --- what to launch ------------------------------------------------------------------------

@dataclasses.dataclass
class ParamSpec:
  name: str
  dtype: str
  shape: tuple[int, ...]
  role: str                 # "input" | "output"
  index: int

  @property
  def nbytes(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64)) * np_dtype(self.dtype).itemsize


@dataclasses.dataclass
class LaunchSpec:
  """Everything a launch needs, serialisable (for the ncu subprocess)."""
  name: str
  cubin: bytes
  launch_grid: tuple[int, int, int]
  num_warps: int
  warp_size: int
  shared: int
  num_ctas: int
  global_scratch_size: int
  global_scratch_align: int
  profile_scratch_size: int
  profile_scratch_align: int
  params: list[ParamSpec]
  aliases: list[tuple[int, int]]          # (input index, output index)
  zeroed_outputs: list[int]
  ptx_param_count: int | None

  @classmethod
  def from_compiled(cls, ck, aliases=(), zeroed_outputs=()) -> "LaunchSpec":
    gk = ck.generated
    if gk is None:
      raise ProfilerError(f"kernel {ck.name}: no GeneratedKernel, so its parameters are unknown")
    md = ck.metadata
    zeroed = set(zeroed_outputs)
    aliased_outs = {o for _, o in aliases}
    for p in gk.outputs:
      if p.name in getattr(gk, "atomic_params", ()) and p.index not in aliased_outs:
        zeroed.add(p.index)     # the GPU path zeroes outputs updated with atomics
    target = md.get("target") or {}
    if md.get("launch_cooperative_grid") or md.get("launch_pdl"):
      raise ProfilerError(f"kernel {ck.name}: cooperative-grid / PDL launches are not supported "
                          "by the replay")
    return cls(
        name=str(md.get("name") or ck.name), cubin=ck.cubin,
        launch_grid=tuple(int(g) for g in gk.launch_grid), num_warps=int(md["num_warps"]),
        warp_size=int(target.get("warp_size", md.get("warp_size", 32)) or 32),
        shared=int(md.get("shared", 0) or 0), num_ctas=int(md.get("num_ctas", 1) or 1),
        global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
        global_scratch_align=int(md.get("global_scratch_align", 1) or 1),
        profile_scratch_size=int(md.get("profile_scratch_size", 0) or 0),
        profile_scratch_align=int(md.get("profile_scratch_align", 1) or 1),
        params=[ParamSpec(p.name, p.dtype, tuple(p.shape), p.role, p.index) for p in gk.params],
        aliases=[tuple(a) for a in aliases], zeroed_outputs=sorted(zeroed),
        ptx_param_count=ptx_param_count(ck.asm.get("ptx", ""), str(md.get("name") or ck.name)))

  @property
  def inputs(self) -> list[ParamSpec]:
    return [p for p in self.params if p.role == "input"]

  @property
  def outputs(self) -> list[ParamSpec]:
    return [p for p in self.params if p.role == "output"]

  @property
  def programs(self) -> int:
    return int(np.prod(self.launch_grid, dtype=np.int64))

  def save(self, directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "kernel.cubin"), "wb") as f:
      f.write(self.cubin)
    meta = dataclasses.asdict(self)
    meta.pop("cubin")
    with open(os.path.join(directory, "spec.json"), "w") as f:
      json.dump(meta, f)

  @classmethod
  def load(cls, directory: str) -> "LaunchSpec":
    with open(os.path.join(directory, "spec.json")) as f:
      meta = json.load(f)
    with open(os.path.join(directory, "kernel.cubin"), "rb") as f:
      cubin = f.read()
    meta["params"] = [ParamSpec(p["name"], p["dtype"], tuple(p["shape"]), p["role"], p["index"])
                      for p in meta["params"]]
    meta["launch_grid"] = tuple(meta["launch_grid"])
    meta["aliases"] = [tuple(a) for a in meta["aliases"]]
    return cls(cubin=cubin, **meta)


def ptx_param_count(ptx: str, name: str) -> int | None:
  """Number of .param entries of the kernel's .entry in the PTX."""
  import re
  m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
  if not m:
    return None
  return len(re.findall(r"\.param\b", m.group(1)))


def np_dtype(name: str) -> np.dtype:
  import jax.numpy as jnp
  return np.dtype(jnp.dtype(name))


# --- random inputs ----------------------------------------------------------------------------

def random_values(rng: np.random.Generator, n: int, dtype) -> np.ndarray:
  """n fresh random values of `dtype`: floats uniform in [-2, 2), integers in
  [0, 64) (small and non-negative: an int input may be an index), bools a coin flip."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.random(n, dtype=np.float32) < 0.5
  import jax.numpy as jnp
  if jnp.issubdtype(dtype, jnp.floating):
    x = rng.random(n, dtype=np.float32) * np.float32(4.0) - np.float32(2.0)
    return x.astype(dtype)
  if jnp.issubdtype(dtype, jnp.integer):
    hi = min(64, int(jnp.iinfo(dtype).max) + 1)
    return rng.integers(0, hi, size=n).astype(dtype)
  if jnp.issubdtype(dtype, jnp.complexfloating):
    return (rng.random(n) + 1j * rng.random(n)).astype(dtype)
  raise ProfilerError(f"no random input for dtype {dtype}")


def plan_sets(set_bytes: int, l2_bytes: int, free_bytes: int,
              memory_fraction: float = 0.5) -> int:
  """How many input/output sets to rotate through: enough that together they
  exceed twice the L2 cache, at least 2, within `memory_fraction` of free memory."""
  if set_bytes <= 0:
    return 1
  budget = int(free_bytes * memory_fraction)
  if set_bytes > budget:
    raise ProfilerError(
        f"one set of the kernel's inputs and outputs needs {set_bytes / 2**20:.1f} MiB but only "
        f"{free_bytes / 2**20:.1f} MiB of device memory are free (JAX preallocates 75% of it: "
        "set XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_PYTHON_CLIENT_MEM_FRACTION)")
  wanted = max(2, math.ceil(2 * l2_bytes / set_bytes) + 1)
  return max(1, min(wanted, budget // set_bytes))


def launch_plan(estimate_s: float, min_launches: int, min_seconds: float,
                max_launches: int = MAX_LAUNCHES) -> int:
  """Timed launches: at least min_launches and enough to fill min_seconds."""
  if estimate_s <= 0:
    return max(min_launches, 1)
  return int(min(max_launches, max(min_launches, math.ceil(min_seconds / estimate_s))))


def enough(kept: int, kept_s: float, wanted: int, min_launches: int, min_seconds: float,
           elapsed_s: float, max_seconds: float = MAX_SECONDS) -> bool:
  """Whether a timed window may stop: `wanted` launches and min_seconds of kernel
  time, or, once min_launches are in, max_seconds of wall time (cold launches
  cost a flush and a check each: a tiny kernel would otherwise take many seconds)."""
  if kept >= MAX_LAUNCHES:
    return True
  if kept < min_launches:
    return False
  return elapsed_s >= max_seconds or (kept >= wanted and kept_s >= min_seconds)


def check_batch(wall_per_launch_s: float, interval_s: float = CHECK_INTERVAL_S) -> int:
  """Cold launches per throttle check: about interval_s of wall time, 1..BATCH. A
  throttled batch is thrown away whole, so batches stay short."""
  if wall_per_launch_s <= 0:
    return BATCH
  return int(min(BATCH, max(1, round(interval_s / wall_per_launch_s))))


def pacing_gap(kernel_s: float) -> float:
  """Idle time before each cold launch once the GPU has throttled: the launches are
  then isolated, as ncu's are. Back-to-back launches of an 8192^3 bf16 matmul kept
  an H200 power-capped even with recovery sleeps between batches (cold median 3-8%
  over ncu, while its p10 matched ncu): the power controller reacts within a few
  launches. Ten kernel times of idle, 2 to 20 ms."""
  return min(0.02, max(0.002, 10 * kernel_s))


def check_mode(mode: str) -> tuple[str, ...]:
  """The modes to time, in order: cold first, on a GPU not yet heated by the
  sustained launches."""
  if mode not in MODES:
    raise ProfilerError(f"timing mode {mode!r}: expected one of {', '.join(MODES)}")
  return ("cold", "sustained") if mode == "both" else (mode,)


def summarize(times_s: Sequence[float]) -> dict[str, float]:
  t = np.asarray(times_s, dtype=np.float64)
  return {"median_s": float(np.median(t)), "p10_s": float(np.percentile(t, 10)),
          "p90_s": float(np.percentile(t, 90)), "min_s": float(t.min()),
          "mean_s": float(t.mean())}


def unwritten_elements(first: np.ndarray, second: np.ndarray, poisons=POISONS) -> int:
  """Elements whose bytes still equal the poison after both poisoned launches."""
  itemsize = first.dtype.itemsize
  a = np.ascontiguousarray(first).view(np.uint8).reshape(-1, itemsize)
  b = np.ascontiguousarray(second).view(np.uint8).reshape(-1, itemsize)
  return int(np.count_nonzero(np.all(a == poisons[0], axis=1) & np.all(b == poisons[1], axis=1)))


DEFAULT_TOLERANCES = {"float64": (1e-10, 1e-9), "float32": (1e-5, 1e-4),
                      "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def compare(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray], what: str,
            tolerance: tuple[float, float] | None = None) -> Correctness:
  """Replay outputs against reference outputs, per dtype tolerances; NaN only
  matches NaN."""
  if len(outputs) != len(references):
    return Correctness(what, False, [], [], [], f"{len(outputs)} outputs but the reference "
                       f"gave {len(references)}")
  abs_errs, rel_errs, tols, problems = [], [], [], []
  for i, (out, ref) in enumerate(zip(outputs, references)):
    ref = np.asarray(ref)
    if out.shape != ref.shape:
      problems.append(f"output {i}: shape {out.shape} but reference {ref.shape}")
      abs_errs.append(float("inf"))
      rel_errs.append(float("inf"))
      tols.append([0.0, 0.0])
      continue
    import jax.numpy as jnp
    floating = jnp.issubdtype(out.dtype, jnp.floating)
    atol, rtol = tolerance or DEFAULT_TOLERANCES.get(out.dtype.name, (0.0, 0.0))
    if not floating:
      atol, rtol = (0.0, 0.0) if tolerance is None else tolerance
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    nan_o, nan_r = np.isnan(o), np.isnan(r)
    nan_mismatch = int(np.count_nonzero(nan_o != nan_r))
    both = ~(nan_o | nan_r)
    diff = np.abs(o - r)[both]
    scale = np.abs(r)[both]
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(scale, 1e-30)).max()) if diff.size else 0.0
    bad = int(np.count_nonzero(diff > atol + rtol * scale))
    abs_errs.append(max_abs)
    rel_errs.append(max_rel)
    tols.append([atol, rtol])
    if nan_mismatch:
      problems.append(f"output {i}: NaN in {nan_mismatch} places where the other is not NaN")
    if bad:
      problems.append(f"output {i}: {bad} of {o.size} elements beyond |d| <= {atol} + {rtol}*|ref| "
                      f"(max |d| {max_abs:.3g})")
  passed = not problems
  message = f"matches the {what}" if passed else "; ".join(problems)
  return Correctness(what, passed, abs_errs, rel_errs, tols, message)


# --- the replay -----------------------------------------------------------------------------

class Replayer:
  """Loads a LaunchSpec on a device; rotates sets of inputs; launches and times."""

  def __init__(self, spec: LaunchSpec, device: int = 0, seed: int | None = None,
               inputs: Sequence[Sequence[np.ndarray]] | None = None):
    self.spec = spec
    self.device = device
    self.seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else seed
    self.given_inputs = inputs
    self._ctx_manager = None
    self.ctx = None
    self.module = None
    self.function = None
    self.stream = None
    self.buffers: list[driver.DeviceBuffer] = []
    self.n_sets = 0
    self.host_inputs: list[np.ndarray] = []      # set 0, for references
    self._param_arrays: list[tuple[list[np.ndarray], np.ndarray]] = []
    self._zero_ptrs: list[list[tuple[int, int]]] = []
    self._out_ptrs: list[list[int]] = []
    self.l2_bytes = 0
    self.set_bytes = 0
    self.notes: list[str] = []
    self._counter = 0          # timed launches so far: each takes the next input set
    self._flush: l2flush.L2Flush | None = None

  # -- setup --------------------------------------------------------------------------------
  def __enter__(self) -> "Replayer":
    self._ctx_manager = driver.primary_context(self.device)
    self.ctx = self._ctx_manager.__enter__()
    try:
      self._load()
    except BaseException:
      self.__exit__(*sys.exc_info())
      raise
    return self

  def _load(self) -> None:
    spec = self.spec
    if spec.num_ctas != 1:
      raise ProfilerError(f"kernel {spec.name}: num_ctas={spec.num_ctas} (clusters) is not "
                          "supported by the replay")
    expected = len(spec.params) + 2
    if spec.ptx_param_count is not None and spec.ptx_param_count != expected:
      raise ProfilerError(
          f"kernel {spec.name}: its PTX takes {spec.ptx_param_count} parameters but the replay "
          f"would pass {expected} ({len(spec.params)} arrays + 2 Triton scratch pointers); "
          "the Triton version's calling convention differs from what pallas-prof knows")
    d = driver._driver()
    image = np.frombuffer(spec.cubin, dtype=np.uint8).copy()
    self.module = call("cuModuleLoadData", image.ctypes.data)
    self.function = call("cuModuleGetFunction", self.module, spec.name.encode())
    if spec.shared > 49152:
      optin = self.ctx.attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
      if spec.shared > optin:
        raise ProfilerError(f"kernel {spec.name} needs {spec.shared} bytes of shared memory; "
                            f"the device allows {optin} per block")
      static = int(call("cuFuncGetAttribute",
                        d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.function))
      # what Triton's own launcher does for kernels above 48 KiB
      call("cuFuncSetCacheConfig", self.function, d.CUfunc_cache.CU_FUNC_CACHE_PREFER_SHARED)
      call("cuFuncSetAttribute", self.function,
           d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static)
    self.stream = call("cuStreamCreate", int(d.CUstream_flags.CU_STREAM_NON_BLOCKING))
    self.l2_bytes = self.ctx.attribute("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE")

  def prepare(self, n_sets: int | None = None) -> None:
    """Allocates the rotated sets and fills the inputs with fresh random values."""
    spec = self.spec
    aliased_outputs = {o: i for i, o in spec.aliases}
    owned = [p for p in spec.params if not (p.role == "output" and p.index in aliased_outputs)]
    strides = {id(p): _round_up(p.nbytes, ALIGN) for p in owned}
    self.set_bytes = sum(strides.values())
    free, _ = driver.free_memory()
    if n_sets is None:
      n_sets = plan_sets(self.set_bytes, self.l2_bytes, free)
    if self.given_inputs is not None:
      n_sets = len(self.given_inputs)
    self.n_sets = n_sets
    rng = np.random.default_rng(self.seed)
    base = {}
    for p in owned:
      buf = driver.DeviceBuffer(strides[id(p)] * n_sets)
      self.buffers.append(buf)
      base[(p.role, p.index)] = buf.ptr
      if p.role == "input":
        self._fill_input(p, buf, strides[id(p)], rng)
    scratch = self._scratch()
    for s in range(n_sets):
      ptrs, outs, zero = [], [], []
      for p in spec.params:
        if p.role == "output" and p.index in aliased_outputs:
          source = next(q for q in spec.inputs if q.index == aliased_outputs[p.index])
          ptr = base[("input", source.index)] + s * strides[id(source)]
        else:
          ptr = base[(p.role, p.index)] + s * strides[id(p)]
        ptrs.append(ptr)
        if p.role == "output":
          outs.append(ptr)
          if p.index in spec.zeroed_outputs:
            zero.append((ptr, p.nbytes))
      ptrs += scratch
      holders = [np.array([ptr], dtype=np.uint64) for ptr in ptrs]
      args = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
      self._param_arrays.append((holders, args))
      self._out_ptrs.append(outs)
      self._zero_ptrs.append(zero)
    if spec.zeroed_outputs:
      self.notes.append(f"outputs {spec.zeroed_outputs} are zeroed before every launch "
                        "(outside the timed events), as the JAX path does")

  def _fill_input(self, p: ParamSpec, buf, stride: int, rng) -> None:
    dtype = np_dtype(p.dtype)
    per_set = stride // dtype.itemsize
    if self.given_inputs is not None:
      host = np.zeros(per_set * self.n_sets, dtype=dtype)
      for s, arrays in enumerate(self.given_inputs):
        a = np.ascontiguousarray(np.asarray(arrays[p.index], dtype=dtype)).reshape(-1)
        if a.size != int(np.prod(p.shape)):
          raise ProfilerError(f"given input {p.index} of set {s} has {a.size} elements; the "
                              f"kernel's {p.name} has shape {p.shape}")
        host[s * per_set:s * per_set + a.size] = a
    else:
      host = random_values(rng, per_set * self.n_sets, dtype)
    n = int(np.prod(p.shape, dtype=np.int64))
    self.host_inputs.append(host[:n].reshape(p.shape).copy())
    call("cuMemcpyHtoD", buf.ptr, host.ctypes.data, host.nbytes)

  def _scratch(self) -> list[int]:
    out = []
    programs = self.spec.programs * self.spec.num_ctas
    for size, align in ((self.spec.global_scratch_size, self.spec.global_scratch_align),
                        (self.spec.profile_scratch_size, self.spec.profile_scratch_align)):
      if size > 0:
        buf = driver.DeviceBuffer(_round_up(size * programs, max(align, 1)))
        self.buffers.append(buf)
        out.append(buf.ptr)
      else:
        out.append(0)
    return out

  # -- launching ----------------------------------------------------------------------------
  def launch(self, set_index: int) -> None:
    spec = self.spec
    s = set_index % self.n_sets
    for ptr, nbytes in self._zero_ptrs[s]:
      call("cuMemsetD8Async", ptr, 0, nbytes, self.stream)
    gx, gy, gz = spec.launch_grid
    call("cuLaunchKernel", self.function, gx, gy, gz, spec.num_warps * spec.warp_size, 1, 1,
         spec.shared, self.stream, self._param_arrays[s][1].ctypes.data, 0)

  def synchronize(self) -> None:
    call("cuStreamSynchronize", self.stream)

  def read_outputs(self, set_index: int = 0) -> list[np.ndarray]:
    self.synchronize()
    outs = []
    for p, ptr in zip(self.spec.outputs, self._out_ptrs[set_index % self.n_sets]):
      host = np.empty(p.shape, dtype=np_dtype(p.dtype))
      call("cuMemcpyDtoH", host.ctypes.data, ptr, host.nbytes)
      outs.append(host)
    return outs

  def poison_check(self) -> tuple[list[int | None], list[np.ndarray]]:
    """Launches set 0 twice on poisoned outputs; per output the count of
    elements never written (None where poisoning does not apply), and the
    outputs of the second launch."""
    aliased = {o for _, o in self.spec.aliases}
    checked = [p.index not in aliased and p.index not in self.spec.zeroed_outputs
               for p in self.spec.outputs]
    results = []
    for poison in POISONS:
      for ok, p, ptr in zip(checked, self.spec.outputs, self._out_ptrs[0]):
        if ok:
          call("cuMemsetD8Async", ptr, poison, p.nbytes, self.stream)
      self.launch(0)
      results.append(self.read_outputs(0))
    counts = [unwritten_elements(a, b) if ok else None
              for ok, a, b in zip(checked, results[0], results[1])]
    return counts, results[1]

  def time_launches(self, min_launches: int = 100, min_seconds: float = 0.2,
                    warmup_seconds: float = 0.05, min_warmup: int = 5,
                    on_window: Callable[[str], None] | None = None,
                    max_seconds: float = MAX_SECONDS) -> dict[str, Any]:
    """Sustained mode: warm-up, then back-to-back timed launches, CUDA events
    around each one."""
    return self._time(False, None, min_launches, min_seconds, warmup_seconds, min_warmup,
                      on_window, max_seconds)

  def time_cold(self, min_launches: int = 100, min_seconds: float = 0.2,
                guard: ThrottleGuard | None = None, warmup_seconds: float = 0.02,
                min_warmup: int = 3, on_window: Callable[[str], None] | None = None,
                max_seconds: float = MAX_SECONDS) -> dict[str, Any]:
    """Cold mode: before each timed launch the L2 flush kernel (outside the
    events); the throttle guard checks the clock after each batch of about
    CHECK_INTERVAL_S and has a throttled batch redone."""
    if self._flush is None:
      cc = (10 * self.ctx.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
            + self.ctx.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
      self._flush = l2flush.L2Flush(cc, self.l2_bytes, self.stream)
    guard = guard or ThrottleGuard.off("no guard given")
    return self._time(True, guard, min_launches, min_seconds, warmup_seconds, min_warmup,
                      on_window, max_seconds)

  def _time(self, cold: bool, guard: ThrottleGuard | None, min_launches: int, min_seconds: float,
            warmup_seconds: float, min_warmup: int, on_window, max_seconds: float) -> dict:
    pool = self._event_pool()
    try:
      warm_times, wall_per_launch = self._warm_up(pool, cold, warmup_seconds, min_warmup)
      wanted = launch_plan(float(np.median(warm_times)), min_launches, min_seconds)
      per_batch = check_batch(wall_per_launch) if guard is not None else BATCH
      times: list[float] = []
      if on_window:
        on_window("start")
      window_start = time.perf_counter()
      pace_s = 0.0
      while not enough(len(times), sum(times), wanted, min_launches, min_seconds,
                       time.perf_counter() - window_start, max_seconds):
        n = 1 if pace_s else min(per_batch, max(wanted - len(times), 1))
        if pace_s:
          time.sleep(pace_s)
        got = self._timed_batch(pool, n, cold)
        if guard is None or guard.keep(n):
          times += got
        elif cold and not pace_s:
          pace_s = pacing_gap(float(np.median(warm_times)))
      window = time.perf_counter() - window_start
      if on_window:
        on_window("stop")
      return {"mode": "cold" if cold else "sustained", "times_s": times,
              "warmup_launches": len(warm_times), "window_s": window, "pace_s": pace_s}
    finally:
      for a, b in pool:
        call("cuEventDestroy", a)
        call("cuEventDestroy", b)

  def _event_pool(self) -> list[tuple[Any, Any]]:
    flags = int(driver._driver().CUevent_flags.CU_EVENT_DEFAULT)
    return [(call("cuEventCreate", flags), call("cuEventCreate", flags)) for _ in range(BATCH)]

  def _warm_up(self, pool, cold: bool, warmup_seconds: float,
               min_warmup: int) -> tuple[list[float], float]:
    """Doubling batches until min_warmup launches and warmup_seconds of kernel time;
    the per-launch times and the wall time per launch (flush and sync included)."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_warmup or sum(times) < warmup_seconds:
      times += self._timed_batch(pool, min(BATCH, max(min_warmup, 8, len(times))), cold)
      if time.perf_counter() - start > max(10 * warmup_seconds, 5.0):
        break
    return times, (time.perf_counter() - start) / len(times)

  def _timed_batch(self, pool, n: int, cold: bool = False) -> list[float]:
    """n launches, each on the next input set, between their own event pair; cold:
    the flush kernel before each (after the zeroing memsets, so it evicts their lines)."""
    for i in range(n):
      start, end = pool[i]
      s = self._counter % self.n_sets
      self._counter += 1
      for ptr, nbytes in self._zero_ptrs[s]:
        call("cuMemsetD8Async", ptr, 0, nbytes, self.stream)
      if cold:
        self._flush.launch(self.stream)
      call("cuEventRecord", start, self.stream)
      self._launch_only(s)
      call("cuEventRecord", end, self.stream)
    call("cuEventSynchronize", pool[n - 1][1])
    return [float(call("cuEventElapsedTime", pool[i][0], pool[i][1])) / 1e3 for i in range(n)]

  def _launch_only(self, set_index: int) -> None:
    spec = self.spec
    gx, gy, gz = spec.launch_grid
    call("cuLaunchKernel", self.function, gx, gy, gz, spec.num_warps * spec.warp_size, 1, 1,
         spec.shared, self.stream, self._param_arrays[set_index % self.n_sets][1].ctypes.data, 0)

  # -- teardown -----------------------------------------------------------------------------
  def __exit__(self, *exc) -> None:
    errors = []
    try:
      if self.stream is not None:
        call("cuStreamSynchronize", self.stream)
    except ProfilerError as e:
      errors.append(e)
    for buf in self.buffers:
      try:
        buf.close()
      except ProfilerError as e:
        errors.append(e)
    self.buffers = []
    for action in (lambda: self._flush is not None and self._flush.close(),
                   lambda: self.stream is not None and call("cuStreamDestroy", self.stream),
                   lambda: self.module is not None and call("cuModuleUnload", self.module)):
      try:
        action()
      except ProfilerError as e:
        errors.append(e)
    self.stream = self.module = self._flush = None
    if self._ctx_manager is not None:
      self._ctx_manager.__exit__(None, None, None)
      self._ctx_manager = None
    if errors and exc[0] is None:
      raise errors[0]


def _round_up(n: int, align: int) -> int:
  return (int(n) + align - 1) // align * align


def replay(ck, *, device: int = 0, min_launches: int = 100, min_seconds: float = 0.2,
           mode: str = "both", aliases=(), zeroed_outputs=(),
           reference: str | Callable | None = None, tolerance: tuple[float, float] | None = None,
           sampler=None, seed: int | None = None, inputs=None, n_sets: int | None = None,
           throttle: ThrottleGuard | bool = True,
           max_seconds: float = MAX_SECONDS) -> RuntimeStats:
  """Times a CompiledKernel (or LaunchSpec) on GPU `device`.

  mode: "cold", "sustained" or "both" (see the module docstring); the result's
    median_s etc. are the cold mode's whenever it was timed.
  reference: None, "interpreter" (the CPU interpreter on the same inputs), or
    a function of the input arrays returning the outputs (e.g. a jnp version).
  sampler: an nvml.Sampler, started and stopped around the sustained window
    (the cold one when only cold is timed).
  inputs: optional list of sets, each a list of input arrays, instead of random ones.
  throttle: True (a guard on the device's NVML clocks, off where NVML is not),
    False (no guard), or a ThrottleGuard (e.g. throttle.for_device(device,
    threshold=0.95)); used by the cold mode only.
  max_seconds: wall-time cap per mode once min_launches are timed.
  """
  modes = check_mode(mode)
  spec = ck if isinstance(ck, LaunchSpec) else LaunchSpec.from_compiled(ck, aliases,
                                                                        zeroed_outputs)
  with Replayer(spec, device, seed, inputs) as r:
    r.prepare(n_sets)
    unwritten, outputs = r.poison_check()
    correctness = None
    if reference is not None:
      correctness = _check(ck, r, outputs, reference, tolerance, aliases)
    guard = _guard(throttle, device) if "cold" in modes else None
    try:
      timings = _time_modes(r, modes, min_launches, min_seconds, guard, sampler, max_seconds)
    finally:
      if guard is not None and guard is not throttle:     # ours: release NVML
        guard.close()
    return _runtime_stats(r, device, timings, guard, unwritten, correctness)


def _guard(throttle, device: int) -> ThrottleGuard:
  if isinstance(throttle, ThrottleGuard):
    return throttle
  if not throttle:
    return ThrottleGuard.off("turned off by the caller")
  from .throttle import for_device
  return for_device(device)


def _time_modes(r: Replayer, modes, min_launches, min_seconds, guard, sampler,
                max_seconds) -> dict[str, dict]:
  """Each mode's timing; the sampler watches the last mode's window (sustained, when
  timed: where a throttled GPU shows; the cold mode has the guard)."""
  out = {}
  for m in modes:
    watch = sampler if m == modes[-1] else None
    on_window = ((lambda what, s=watch: s.start() if what == "start" else s.stop())
                 if watch is not None else None)
    if m == "cold":
      out[m] = r.time_cold(min_launches, min_seconds, guard, on_window=on_window,
                           max_seconds=max_seconds)
    else:
      out[m] = r.time_launches(min_launches, min_seconds, on_window=on_window,
                               max_seconds=max_seconds)
  return out


def timing_stats(timing: dict) -> TimingStats:
  return TimingStats(mode=timing["mode"], launches=len(timing["times_s"]),
                     warmup_launches=timing["warmup_launches"],
                     paced_gap_s=timing.get("pace_s") or 0.0,
                     timed_window_s=timing["window_s"], **summarize(timing["times_s"]))


def _runtime_stats(r: Replayer, device: int, timings: dict[str, dict], guard, unwritten,
                   correctness) -> RuntimeStats:
  per_mode = {m: timing_stats(t) for m, t in timings.items()}
  main = per_mode.get("cold") or per_mode["sustained"]
  notes = list(r.notes) + [f"random inputs seeded with {r.seed}"]
  bad = [f"output {i}: {n} elements never written" for i, n in enumerate(unwritten) if n]
  notes += bad
  throttle = guard.summary() if guard is not None else None
  if throttle is not None and throttle.note:
    notes.append(f"cold timing: {throttle.note}")
  headline = {k: getattr(main, k) for k in ("median_s", "p10_s", "p90_s", "min_s", "mean_s")}
  return RuntimeStats(
      device_index=device, launches=main.launches, warmup_launches=main.warmup_launches,
      timed_window_s=main.timed_window_s, input_sets=r.n_sets, set_bytes=r.set_bytes,
      l2_bytes=r.l2_bytes, outputs_written=not bad, unwritten_elements=unwritten,
      correctness=correctness, notes=notes, mode=main.mode, cold=per_mode.get("cold"),
      sustained=per_mode.get("sustained"), throttle=throttle,
      l2_flush_bytes=r._flush.nbytes if r._flush is not None else None, **headline)


def _check(ck, r: Replayer, outputs, reference, tolerance, aliases) -> Correctness:
  spec = r.spec
  if reference == "interpreter":
    gk = getattr(ck, "generated", None)
    if gk is None:
      return Correctness("interpreter", False, [], [], [], "no GeneratedKernel to interpret")
    from ..backend.launch import run_interpreted
    shapes = [(p.shape, np_dtype(p.dtype)) for p in spec.outputs]
    refs = run_interpreted(gk, r.host_inputs, shapes, tuple(aliases))
    what = "CPU interpreter"
  else:
    refs = reference(*r.host_inputs)
    if not isinstance(refs, (list, tuple)):
      refs = [refs]
    refs = [np.asarray(x) for x in refs]
    what = getattr(reference, "__name__", "reference function")
  return compare(outputs, refs, what, tolerance)


# --- command line for ncu ----------------------------------------------------------------------

def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description="Launch a saved kernel (LaunchSpec directory) N times; used under ncu.")
  parser.add_argument("spec_dir")
  parser.add_argument("--launches", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--device", type=int, default=0)
  parser.add_argument("--seed", type=int, default=None)
  parser.add_argument("--mode", choices=("plain",) + MODES, default="plain",
                      help="plain (default, what ncu runs): warm-up + N launches, no timing and "
                      "no L2 flush (ncu flushes the caches itself); cold / sustained / both: "
                      "time as replay() does, at least N timed launches, and print the stats")
  parser.add_argument("--min-seconds", type=float, default=0.2)
  args = parser.parse_args(argv)
  spec = LaunchSpec.load(args.spec_dir)
  if args.mode != "plain":
    stats = replay(spec, device=args.device, min_launches=args.launches,
                   min_seconds=args.min_seconds, mode=args.mode, seed=args.seed)
    print(json.dumps({"kernel": spec.name, **stats.to_dict()}))
    return 0
  with Replayer(spec, args.device, args.seed) as r:
    r.prepare()
    for i in range(args.warmup + args.launches):
      r.launch(i)
    r.synchronize()
  print(json.dumps({"kernel": spec.name, "launches": args.warmup + args.launches,
                    "input_sets": r.n_sets}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
