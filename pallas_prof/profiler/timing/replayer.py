"""The Replayer: loads a LaunchSpec's cubin in a device's primary context,
allocates and fills rotated input sets, launches and times (see runner.py for
the whole replay and its two timing modes)."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from .. import driver
from . import l2flush
from ..driver import ProfilerError, call
from ..launchspec import KernelParam, LaunchSpec, np_dtype
from .policy import (BATCH, MAX_SECONDS, POISONS, check_batch, enough, launch_plan, pacing_gap,
                     plan_sets, random_values, unwritten_elements)
from .throttle import ThrottleGuard

ALIGN = 256


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
    self._ptrs: list[list[int]] = []     # per set, each parameter's pointer
    self._out_ptrs: list[list[int]] = []
    self.l2_bytes = 0
    self.set_bytes = 0
    self.notes: list[str] = []
    self._counter = 0          # timed launches so far: each takes the next input set
    self._flush: l2flush.L2Flush | None = None
    self.shared = spec.shared  # dynamic shared memory each launch asks for (see isolate)

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
      self._ptrs.append(list(ptrs))
      ptrs += scratch
      holders = [np.array([ptr], dtype=np.uint64) for ptr in ptrs]
      args = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
      self._param_arrays.append((holders, args))
      self._out_ptrs.append(outs)
      self._zero_ptrs.append(zero)
    if spec.zeroed_outputs:
      self.notes.append(f"outputs {spec.zeroed_outputs} are zeroed before every launch "
                        "(outside the timed events), as the JAX path does")

  def _fill_input(self, p: KernelParam, buf, stride: int, rng) -> None:
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

  def ctas_per_sm(self) -> int:
    """How many CTAs of this kernel an SM holds at once, as launched now."""
    return int(call("cuOccupancyMaxActiveBlocksPerMultiprocessor", self.function,
                    self.spec.num_warps * self.spec.warp_size, self.shared))

  def isolate(self) -> tuple[int, int]:
    """Launches from now on ask for all the dynamic shared memory a block may have, so an
    SM runs one CTA at a time and its warps share the SM with no other CTA's (the L1
    cache shrinks to what shared memory leaves). The kernel's code and results are the
    same. (CTAs per SM before, after.)"""
    d = driver._driver()
    before = self.ctas_per_sm()
    optin = self.ctx.attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    static = int(call("cuFuncGetAttribute",
                      d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.function))
    dynamic = max(self.spec.shared, optin - static)
    call("cuFuncSetAttribute", self.function,
         d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic)
    self.shared = dynamic
    return before, self.ctas_per_sm()

  # -- launching ----------------------------------------------------------------------------
  def launch(self, set_index: int) -> None:
    spec = self.spec
    s = set_index % self.n_sets
    for ptr, nbytes in self._zero_ptrs[s]:
      call("cuMemsetD8Async", ptr, 0, nbytes, self.stream)
    gx, gy, gz = spec.launch_grid
    call("cuLaunchKernel", self.function, gx, gy, gz, spec.num_warps * spec.warp_size, 1, 1,
         self.shared, self.stream, self._param_arrays[s][1].ctypes.data, 0)

  def synchronize(self) -> None:
    call("cuStreamSynchronize", self.stream)

  def read_outputs(self, set_index: int = 0) -> list[np.ndarray]:
    self.synchronize()
    outs = []
    for p, ptr in zip(self.spec.outputs, self._out_ptrs[set_index % self.n_sets], strict=True):
      host = np.empty(p.shape, dtype=np_dtype(p.dtype))
      call("cuMemcpyDtoH", host.ctypes.data, ptr, host.nbytes)
      outs.append(host)
    return outs

  def _param(self, role: str) -> tuple[int, KernelParam]:
    for i, p in enumerate(self.spec.params):
      if p.role == role:
        return i, p
    raise ProfilerError(f"kernel {self.spec.name} has no {role} parameter")

  def zero_param(self, role: str, set_index: int = 0) -> None:
    """Zeroes the buffer of the (first) parameter with this role, e.g. "probes"."""
    i, p = self._param(role)
    call("cuMemsetD8Async", self._ptrs[set_index % self.n_sets][i], 0, p.nbytes, self.stream)

  def read_param(self, role: str, set_index: int = 0) -> np.ndarray:
    """The buffer of the (first) parameter with this role, after the stream's work."""
    self.synchronize()
    i, p = self._param(role)
    host = np.empty(p.shape, dtype=np_dtype(p.dtype))
    call("cuMemcpyDtoH", host.ctypes.data, self._ptrs[set_index % self.n_sets][i], host.nbytes)
    return host

  def poison_check(self) -> tuple[list[int | None], list[np.ndarray]]:
    """Launches set 0 twice on poisoned outputs; per output the count of
    elements never written (None where poisoning does not apply), and the
    outputs of the second launch."""
    aliased = {o for _, o in self.spec.aliases}
    checked = [p.index not in aliased and p.index not in self.spec.zeroed_outputs
               for p in self.spec.outputs]
    results = []
    for poison in POISONS:
      for ok, p, ptr in zip(checked, self.spec.outputs, self._out_ptrs[0], strict=True):
        if ok:
          call("cuMemsetD8Async", ptr, poison, p.nbytes, self.stream)
      self.launch(0)
      results.append(self.read_outputs(0))
    counts = [unwritten_elements(a, b) if ok else None
              for ok, a, b in zip(checked, results[0], results[1], strict=True)]
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
         self.shared, self.stream, self._param_arrays[set_index % self.n_sets][1].ctypes.data,
         0)

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
