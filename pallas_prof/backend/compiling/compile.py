"""GeneratedKernel -> CompiledKernel: triton.compile for an explicit GPU target.

Works on machines without a GPU (the triton wheel ships ptxas). Every stage
(ttir, ttgir, llir, ptx, cubin) is timed through Triton's stage-inspection
hook and its text kept; ptxas's own report gives registers, spills and stack.
Triton runs in the compile worker (compile_worker.py); results are cached by
content (compile_cache.py), so a second process reuses them. Failures become
CompileErrors that name the equations and say why (compile_errors.py).

A failure that may be the machine's (a worker that died, a full disk, a cached
compile that turns out unusable) is retried once on a fresh worker with the
cache bypassed before it is believed (failures/machine_faults.py): a crash
that reproduces is Triton's, a machine failure that reproduces is raised as one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from typing import Any

from . import amd_resources, compile_cache, compile_worker, ptx_rewrites
from ... import events as keys
from ...event_payloads import CompileRecord  # noqa: F401 - its old home, still importable
from .. import hooks
from ..artifacts import DEFAULT_TARGET, CompiledKernel, GeneratedKernel, target_text
from ..kernel_files import checked_in_place
from ..lowering.codegen import signature_type
from ..targets import as_target
# clear_memory_cache, compile_options: part of this module's interface (tests, bench)
from .compile_cache import (clear_memory_cache, compile_key, compile_options,  # noqa: F401
                            forget, libdevice_cache, load_from_disk, remember, remembered,
                            set_aside_on_disk, store_on_disk)
from .failures import machine_faults
from .failures.compile_errors import TritonFailure, check_shared_memory, compile_error, next_stage
from ..errors import CompileError
from .triton_run import StageRecord, triton_lock  # noqa: F401 - triton_lock: Triton's global lock

def compile_kernel(gk: GeneratedKernel, target: tuple[str, int] = DEFAULT_TARGET,
                   *, use_disk_cache: bool = True, need_cubin: bool = True) -> CompiledKernel:
  """Compiles a generated kernel for `target`: a targets.Target, ("cuda", 90) or
  ("hip", "gfx942") (targets.parse_target reads "sm_80" or "gfx942").

  need_cubin=False stops after PTX (what jaxlib needs to launch it); the
  cubin is assembled later by assemble_cubin() if anyone asks. An AMD
  target's hsaco is always made (LLVM assembles it in the same process).
  """
  target = as_target(target)
  key = compile_key(gk, target)
  start = time.time_ns()
  ck = _cached(gk, key, use_disk_cache, need_cubin)
  if ck is not None:
    _notify_cache_hit(ck, start)
    return ck
  ck = _compile_now(gk, target, key, need_cubin)
  remember(ck)
  if use_disk_cache:
    store_on_disk(ck)
  return ck


def _cached(gk: GeneratedKernel, key: str, use_disk_cache: bool,
            need_cubin: bool) -> CompiledKernel | None:
  """The compile of `key` this process remembers, else the disk's, else None. A cached
  compile that cannot be used (no PTX, or ptxas fails on its PTX) is damaged data, not
  Triton's failure: forgotten, set aside on disk, and compiled again."""
  hit = remembered(key)
  if hit is not None:
    ck = dataclasses.replace(hit, generated=gk, cache="memory", worker_wait_seconds=0.0)
  else:
    ck = load_from_disk(key, gk) if use_disk_cache else None
    if ck is None:
      return None
    remember(ck)
  try:
    if not ck.asm.get(ck.target.assembly_stage):
      raise ValueError(f"its {ck.target.assembly_stage} is empty")
    return assemble_cubin(ck) if need_cubin else ck
  except (CompileError, ValueError) as e:
    forget(key)
    set_aside_on_disk(key)
    machine_faults.recovered(gk, f"its cached compile ({ck.cache}) could not be used "
                                 f"({str(e).splitlines()[0][:200]})")
    return None


def assemble_cubin(ck: CompiledKernel) -> CompiledKernel:
  """ck with its cubin and ptxas's figures (registers, spills, stack): ck itself
  when it has them, else a new CompiledKernel (the one this process remembers
  under ck.key when it has one, else one made by Triton's ptxas step).

  A kernel launched through XLA only needs its PTX (jaxlib assembles it), so
  the GPU path skips ptxas on the critical path of the first call; the
  profiler and the report ask for the cubin when they need it.
  """
  if not ck.cubin_deferred:
    return ck
  known = remembered(ck.key)
  if known is not None and not known.cubin_deferred:
    return dataclasses.replace(known, generated=ck.generated, cache=ck.cache,
                               worker_wait_seconds=ck.worker_wait_seconds)
  gk = ck.generated
  options = compile_cache.compile_options(gk, ck.target) if gk is not None else {}
  result = _ptxas({"op": "ptxas", "ptx": ck.asm["ptx"], "target": ck.target,
                   "options": options}, ck)
  if "error" in result:
    failure = TritonFailure.from_answer(result["error"])
    failure.ir.setdefault("ptx", ck.asm["ptx"])
    if gk is None:
      raise CompileError(f"ptxas failed on the kernel's PTX: {failure.args[0][:400]}",
                         kernel=ck.name, stage="cubin", cause=failure)
    raise compile_error(gk, failure, "cubin", compile_request(gk, ck.target))
  stage = StageRecord("cubin", result["start_ns"], result["end_ns"], len(result["cubin"]))
  full = dataclasses.replace(
      ck, asm={**ck.asm, "cubin": result["cubin"]}, ptxas_log=result["ptxas"],
      stage_seconds={**ck.stage_seconds, "cubin": stage.seconds},
      compile_seconds=ck.compile_seconds + stage.seconds,   # the stages keep adding up to the whole
      **parse_ptxas(result["ptxas"]))
  _notify(CompileRecord(ck.name, ck.key, target_text(ck.target), stage.start_ns,
                        stage.end_ns, [stage], "miss", full.resources(),
                        source_key=gk.key if gk is not None else None))
  remember(full)
  store_on_disk(full)
  return full


def _ptxas(request: dict[str, Any], ck: CompiledKernel) -> dict[str, Any]:
  """The worker's ptxas answer; a worker that dies is retried once on a fresh one, and a
  second death is a CompileError (the machine's, or a crash of Triton's ptxas step)."""
  worker_for(ck.target)
  try:
    return compile_worker.compile(request)
  except compile_worker.WorkerCrashed as crash:
    first = crash
  compile_worker.replace()
  try:
    return compile_worker.compile(request)
  except compile_worker.WorkerCrashed as crash:
    gk = ck.generated
    if gk is None:
      raise CompileError(f"ptxas's step died twice ({first.how}, then {crash.how} on a "
                         "fresh worker)", kernel=ck.name, stage="cubin",
                         hint="run again; if it keeps dying, look at the machine's memory "
                              "(`dmesg`) and disk") from None
    raise machine_faults.after_retry(gk, _crash_error(gk, ck.key, ck.target, first, True),
                                     _crash_error(gk, ck.key, ck.target, crash)) from None


def _notify_cache_hit(ck: CompiledKernel, start: int) -> None:
  obs = hooks.observer()
  if obs.enabled:
    obs.compiled(CompileRecord(kernel=ck.name, key=ck.key, target=target_text(ck.target),
                               start_ns=start, end_ns=time.time_ns(), stages=[], cache=ck.cache,
                               attributes=_attributes(ck),
                               source_key=ck.generated.key if ck.generated else None))


def compile_request(gk: GeneratedKernel, target: tuple[str, int],
                    need_cubin: bool = True) -> dict[str, Any]:
  """Everything triton.compile needs, as plain data (it may go to a worker process)."""
  # checked now, as the launch path checks it (kernel_files.checked_source): the worker
  # compiles the file only if it still holds these bytes
  return {"op": "compile", "path": checked_in_place(gk.path, gk.source), "name": gk.name,
          "source_sha256": hashlib.sha256(gk.source.encode()).hexdigest(),
          "warp_size": as_target(target).warp_size,
          "signature": {p.name: "*" + signature_type(p.dtype) for p in gk.params},
          "attrs": {(i,): [["tt.divisibility", 16]] for i in range(len(gk.params))},
          "options": compile_cache.compile_options(gk, target), "target": tuple(target),
          "need_cubin": need_cubin,
          # an AMD compile links Triton's ocml and ockl its own way (no NVIDIA libdevice)
          "libdevice_cache": libdevice_cache() if as_target(target).backend == "cuda" else None,
          "ptx_rewrites": ptx_rewrites.enabled()}


def compile_kernels(gks: list[GeneratedKernel], target: tuple[str, int] = DEFAULT_TARGET,
                    *, need_cubin: bool = True,
                    parallel: int | None = None) -> list[CompiledKernel | CompileError]:
  """compile_kernel of each, the ones not cached compiled at once (up to `parallel`,
  default the cores) by children of the compile worker: the tuner's candidates.
  A compile that fails gives its CompileError in its place; the others go on."""
  out: list[CompiledKernel | CompileError | None] = [None] * len(gks)
  target = as_target(target)
  misses = []
  for i, gk in enumerate(gks):
    key = compile_key(gk, target)
    if remembered(key) is not None or load_from_disk(key, gk) is not None:
      try:
        out[i] = compile_kernel(gk, target, need_cubin=need_cubin)
      except CompileError as e:
        out[i] = e
    else:
      misses.append((i, gk, key))
  worker_for(target)
  answers = compile_worker.compile_many([compile_request(gk, target, need_cubin)
                                         for _, gk, _ in misses], parallel)
  for (i, gk, key), answer in zip(misses, answers, strict=True):
    try:
      try:
        if isinstance(answer, compile_worker.WorkerCrashed):
          raise _crash_error(gk, key, target, answer, first_try=True)
        ck = _finish_compile(gk, target, key, answer)  # no wait figures: a batch queues its own
      except CompileError as first:
        if not machine_faults.worth_a_retry(first):
          raise
        ck = _compile_again(gk, target, key, need_cubin, first)
      remember(ck)
      store_on_disk(ck)
      out[i] = ck
    except CompileError as e:
      out[i] = e
  return out


def _crash_error(gk: GeneratedKernel, key: str, target, crash,
                 first_try: bool = False) -> CompileError:
  """A worker that died compiling `gk`, as a CompileError: the machine's when what ended
  it was (machine_faults.of_crash), else Triton's crash (with its reproducer, once
  it is not a first try, which a retry may yet get past)."""
  tail = crash.output_tail.strip().splitlines()
  cause = machine_faults.of_crash(crash)
  if cause is not None:
    error = machine_faults.machine_error(gk, cause, crash.stage or "ttir")
    error = error.with_details({"compiler output": "\n".join(tail[-12:]) or "(none)"})
  else:
    failure = TritonFailure("WorkerCrashed", f"Triton's compiler crashed ({crash.how})",
                            output=crash.output_tail)
    error = compile_error(gk, failure, crash.stage or "ttir",
                          None if first_try else compile_request(gk, target), crashed=crash.how)
    error = error.with_details({"compiler output": "\n".join(tail[-12:]) or "(none)"},
                               hint=f"{error.hint}; pallas-prof compiles in a worker process, "
                                    "so your program survives this")
  now = time.time_ns()
  _notify(CompileRecord(gk.name, key, target_text(target), now, now, [], "miss",
                        {keys.PALLAS_KERNEL: gk.name}, error, source_key=gk.key))
  return error


def _compile_now(gk: GeneratedKernel, target: tuple[str, int], key: str,
                 need_cubin: bool = True) -> CompiledKernel:
  """A compile of `gk`; one that failed in a way the machine may have caused
  (machine_faults.worth_a_retry) is retried once before its error is believed."""
  try:
    return _compile_once(gk, target, key, need_cubin, first_try=True)
  except CompileError as first:
    if not machine_faults.worth_a_retry(first):
      raise
    return _compile_again(gk, target, key, need_cubin, first)


def _compile_again(gk: GeneratedKernel, target: tuple[str, int], key: str, need_cubin: bool,
                   first: CompileError) -> CompiledKernel:
  """The retry of a compile that failed with `first`: on a fresh worker (this one
  compiles, never the cache); its failure is raised as machine_faults.after_retry says."""
  compile_worker.replace()
  try:
    ck = _compile_once(gk, target, key, need_cubin)
  except CompileError as again:
    if again.fault == "machine":
      compile_worker.replace()      # the next compile must not meet this worker's state
    raise machine_faults.after_retry(gk, first, again) from None
  machine_faults.recovered(gk, first.reason)
  return ck


def _compile_once(gk: GeneratedKernel, target: tuple[str, int], key: str, need_cubin: bool,
                  first_try: bool = False) -> CompiledKernel:
  request = compile_request(gk, target, need_cubin)
  worker_for(target)
  requested = time.time_ns()
  try:
    result = compile_worker.compile(request)
  except compile_worker.WorkerCrashed as crash:
    raise _crash_error(gk, key, target, crash, first_try) from None
  return _finish_compile(gk, target, key, result, requested, request)


_worker_target: list = [None]    # the target the compile worker last compiled for


def worker_for(target) -> None:
  """A fresh compile worker when `target` is not the one the worker last compiled for:
  Triton 3.6 carries what one target's compile set up into the next compile in the same
  process (an fp8 e5m2 dot compiled for sm_80 after an e4m3 kernel for sm_90 gets
  sm_89's instructions: bench/targets/triton_fp8_order_repro.py), so each target's
  compiles keep to a worker of their own. Compiles in this process have no such guard."""
  target = as_target(target)
  with triton_lock():
    switched = _worker_target[0] is not None and _worker_target[0] != target
    _worker_target[0] = target
  if switched:
    compile_worker.replace()


def _worker_wait(result: dict[str, Any], requested: int | None) -> dict[str, float]:
  """ms the compile waited before Triton started on it: queued behind other
  compiles, and the rest (the worker's start-up and `import triton` when it
  was not ready; otherwise the request's trip, well under a millisecond)."""
  if requested is None:
    return {}
  queued = result.get("queued_ns", 0)
  rest = max(0, result["start_ns"] - requested - queued)
  return {"worker_queue_ms": queued / 1e6, "worker_startup_ms": rest / 1e6}


def _finish_compile(gk, target, key, result, requested: int | None = None,
                    request: dict | None = None) -> CompiledKernel:
  records = [StageRecord(*r) for r in result["records"]]
  target = as_target(target)
  start, end = result["start_ns"], result["end_ns"]
  target_name = target_text(target)
  wait = _worker_wait(result, requested)
  if "error" in result:
    cause = machine_faults.of_answer(result["error"])
    if cause is not None:
      error = machine_faults.machine_error(gk, cause, next_stage(records, target.backend))
    else:
      failure = TritonFailure.from_answer(result["error"])
      error = compile_error(gk, failure, next_stage(records, target.backend),
                            request or compile_request(gk, target))
    _notify(CompileRecord(gk.name, key, target_name, start, end, records, "miss",
                          {keys.PALLAS_KERNEL: gk.name, **wait}, error, source_key=gk.key,
                          requested_ns=requested))
    raise error
  ck = CompiledKernel(name=gk.name, key=key, target=target, asm=result["asm"],
                      metadata=result["metadata"],
                      stage_seconds={r.stage: r.seconds for r in records},
                      compile_seconds=(end - start) / 1e9, ptxas_log=result["ptxas"],
                      generated=gk, cache="miss",
                      worker_wait_seconds=sum(wait.values()) / 1e3,
                      **_resource_fields(target, result))
  try:
    check_shared_memory(ck, gk)
  except CompileError as e:
    _notify(CompileRecord(gk.name, key, target_name, start, end, records, "miss",
                          {**ck.resources(), **wait}, e, source_key=gk.key,
                          requested_ns=requested))
    raise
  _notify(CompileRecord(gk.name, key, target_name, start, end, records, "miss",
                        {**_attributes(ck), **wait,
                         "libdevice_link": result.get("libdevice_link")}, source_key=gk.key,
                        requested_ns=requested))
  return ck


def _attributes(ck: CompiledKernel) -> dict[str, Any]:
  """A compile's figures for observers, with what its kernel was lowered otherwise for
  (workarounds.py) when it was."""
  notes = ck.generated.workarounds if ck.generated is not None else ()
  return {**ck.resources(), **({"workarounds": list(notes)} if notes else {})}


def _notify(record: CompileRecord) -> None:
  obs = hooks.observer()
  if obs.enabled:
    obs.compiled(record)


_PTXAS_PATTERNS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


def _resource_fields(target, result: dict[str, Any]) -> dict[str, Any]:
  """Registers, spills and stack from ptxas's report (NVIDIA) or the AMDGCN assembly."""
  if target.backend == "hip":
    return amd_resources.compiled_fields(result["asm"].get("amdgcn", ""), result["metadata"])
  return parse_ptxas(result["ptxas"])


def parse_ptxas(log: str) -> dict[str, int | None]:
  """Registers, stack and spills from ptxas's verbose report (None: not reported)."""
  out = {}
  for key, pattern in _PTXAS_PATTERNS.items():
    m = pattern.search(log)
    out[key] = int(m.group(1)) if m else None
  return out
