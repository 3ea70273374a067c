"""GeneratedKernel -> CompiledKernel: triton.compile for an explicit GPU target.

Works on machines without a GPU (the triton wheel ships ptxas). Every stage
(ttir, ttgir, llir, ptx, cubin) is timed through Triton's stage-inspection
hook and its text kept; ptxas's own report gives registers, spills and stack.
Results are cached by content (generated source, options, target, tool
versions) in memory and on disk, so a second process reuses them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import re
import threading
import time
from typing import Any

from . import compat, hooks
from .codegen import signature_type
from .errors import LoweringError
from .lowering import GeneratedKernel, cache_dir
from .triton_run import (STAGES, StageRecord, _lock, _metadata_dict, run_ptxas,  # noqa: F401
                         run_triton, triton_lock)

DEFAULT_TARGET = ("cuda", 90)
# Per-block shared memory a kernel may use (opt-in maximum), by compute capability.
SHARED_MEMORY_LIMIT = {70: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912,
                       89: 101376, 90: 232448, 100: 232448, 120: 101376}

_memory_cache: dict[str, "CompiledKernel"] = {}
_module_cache: dict[tuple[str, bool], Any] = {}
CACHE_FORMAT = 4   # 4: libdevice linked with its reflect queries answered


@dataclasses.dataclass
class CompileRecord:
  """What one compile did, for observers: times, stages, resources, error."""
  kernel: str
  key: str
  target: str
  start_ns: int
  end_ns: int
  stages: list[StageRecord]
  cache: str                    # "miss", "memory" or "disk"
  attributes: dict[str, Any]
  error: BaseException | None = None
  source_key: str | None = None  # GeneratedKernel.key: which lowering this compile belongs to
  # when the compile was asked for; before start_ns when it waited for the compile
  # worker (behind other compiles, or for the worker's start-up and Triton's import)
  requested_ns: int | None = None


@dataclasses.dataclass
class CompiledKernel:
  name: str
  key: str
  target: tuple[str, int]
  asm: dict[str, Any]            # stage -> text (cubin: bytes)
  metadata: dict[str, Any]       # Triton's metadata (shared, num_warps, scratch sizes, ...)
  stage_seconds: dict[str, float]
  compile_seconds: float
  registers: int | None
  spill_stores: int | None
  spill_loads: int | None
  stack_bytes: int | None
  ptxas_log: str
  generated: GeneratedKernel | None = None
  cache: str = "miss"
  # seconds this compile waited for the compile worker before Triton started on it:
  # queued behind other compiles (the background warm-up's) plus the worker's
  # start-up (Python, `import triton`) when it was not ready yet
  worker_wait_seconds: float = 0.0

  @property
  def shared_bytes(self) -> int:
    return int(self.metadata.get("shared", 0))

  @property
  def num_warps(self) -> int:
    return int(self.metadata["num_warps"])

  @property
  def num_stages(self) -> int:
    return int(self.metadata["num_stages"])

  @property
  def ptx(self) -> str:
    return self.asm["ptx"]

  @property
  def cubin(self) -> bytes:
    return self.complete().asm["cubin"]

  @property
  def cubin_deferred(self) -> bool:
    return not self.asm.get("cubin")

  def complete(self) -> "CompiledKernel":
    """Assembles the cubin if it was deferred; returns self.

    A kernel launched through XLA only needs its PTX (jaxlib assembles it),
    so the GPU path skips Triton's ptxas stage on the critical path of the
    first call; registers, spills and the SASS come when someone asks.
    """
    if self.cubin_deferred:
      _assemble_cubin(self)
    return self

  @property
  def spills(self) -> int | None:
    if self.spill_stores is None:
      return None
    return (self.spill_stores or 0) + (self.spill_loads or 0)

  def resources(self, complete: bool = True) -> dict[str, Any]:
    """Shared memory, registers, spills, stack, warps, stages, target.

    complete=False does not assemble a deferred cubin (registers and spills
    are then None)."""
    if complete:
      self.complete()
    return {"shared_bytes": self.shared_bytes, "registers": self.registers,
            "spill_stores": self.spill_stores, "spill_loads": self.spill_loads,
            "stack_bytes": self.stack_bytes, "num_warps": self.num_warps,
            "num_stages": self.num_stages, "target": f"{self.target[0]}:{self.target[1]}"}


# --- loading generated modules ---------------------------------------------------------

@contextlib.contextmanager
def _interpret_knob(enabled: bool):
  from . import compat
  previous = compat.set_triton_interpret(enabled)
  try:
    yield
  finally:
    compat.set_triton_interpret(previous)


def load_module(gk: GeneratedKernel, *, interpret: bool):
  """Imports the generated file; with interpret=True its @triton.jit functions
  become Triton interpreter functions (and libdevice a numpy stand-in)."""
  return load_module_from_path(gk.path, interpret=interpret)


def load_module_from_path(path: str, *, interpret: bool = False):
  """One import per (file, mode): Triton reads kernels back from real files."""
  cache_key = (path, interpret)
  with _lock:
    module = _module_cache.get(cache_key)
    if module is not None:
      return module
    name = f"pallas_prof_generated.{'interp' if interpret else 'jit'}.{os.path.basename(path)[:-3]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with _interpret_knob(interpret):
      spec.loader.exec_module(module)
    if interpret:
      from . import interpreter_libdevice
      module.libdevice = interpreter_libdevice
    _module_cache[cache_key] = module
    return module


# --- the compile ------------------------------------------------------------------------------

def compile_options(gk: GeneratedKernel) -> dict[str, Any]:
  """Triton options for a generated kernel, chosen so that a kernel computes what
  XLA and JAX's built-in backend compute, bit for bit where they agree:

  enable_reflect_ftz=False: libdevice keeps f32 denormals (sqrt, rsqrt, log,
  exp2, ...), as XLA's GPU compiler does; Triton's default flushes them to zero.
  enable_fp_fusion=False: a separate multiply and add stay two roundings, as in
  XLA (measured on the H200: x*1.37 + x*x differed from XLA in 29 % of elements
  with Triton's default FMA contraction, in none without it; see
  bench/probes/bitwise_probe.py). CompilerParams(enable_fp_fusion=True) opts back in.
  extern_libs: XLA's libdevice rather than the one in Triton's wheel (their powf
  differ in the last bit for ~40 % of inputs).
  """
  return triton_options(gk.num_warps, gk.num_stages,
                        enable_fp_fusion=bool(getattr(gk, "enable_fp_fusion", False)))


def triton_options(num_warps: int, num_stages: int, *,
                   enable_fp_fusion: bool = False) -> dict[str, Any]:
  """compile_options for a kernel of these settings (the warm-up has no GeneratedKernel)."""
  options = {"num_warps": num_warps, "num_stages": num_stages, "enable_reflect_ftz": False,
             "enable_fp_fusion": enable_fp_fusion}
  libdevice = compat.xla_libdevice_path()
  if libdevice:
    options["extern_libs"] = (("libdevice", libdevice),)
  return options


@functools.lru_cache(maxsize=8)
def _file_digest(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()[:16]


def compile_key(gk: GeneratedKernel, target: tuple[str, int]) -> str:
  """Content address of a compile. Cheap: a cache hit never imports triton."""
  from .. import __version__
  options = compile_options(gk)
  parts = [gk.source, f"options={sorted(options.items())}",
           f"libraries={[_file_digest(path) for _, path in options.get('extern_libs', ())]}",
           f"signature={[(p.name, signature_type(p.dtype)) for p in gk.params]}",
           f"target={target[0]}:{target[1]}", f"triton={_triton_version()}",
           f"pallas_prof={__version__}", f"format={CACHE_FORMAT}",
           f"ptxas={_ptxas_version()}", f"prepared_libdevice={_prepared_libdevice()}"]
  return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def _triton_version() -> str:
  from importlib import metadata
  return metadata.version("triton")


@functools.lru_cache(maxsize=None)
def _ptxas_version() -> str:
  """`ptxas --version` of the wheel's ptxas, remembered on disk per binary."""
  import importlib.util
  import subprocess
  spec = importlib.util.find_spec("triton")
  ptxas = os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin", "ptxas")
  try:
    st = os.stat(ptxas)
  except OSError:
    return "none"
  stamp = hashlib.sha256(f"{ptxas}:{st.st_mtime_ns}:{st.st_size}".encode()).hexdigest()[:16]
  memo = os.path.join(cache_dir(), "tools", f"ptxas-{stamp}.txt")
  try:
    with open(memo) as f:
      return f.read()
  except OSError:
    pass
  try:
    out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=30).stdout
    version = out.strip().splitlines()[-1] if out.strip() else "unknown"
  except (OSError, subprocess.SubprocessError):
    return "unknown"
  os.makedirs(os.path.dirname(memo), exist_ok=True)
  with open(memo, "w") as f:
    f.write(version)
  return version


def compile_kernel(gk: GeneratedKernel, target: tuple[str, int] = DEFAULT_TARGET,
                   *, use_disk_cache: bool = True, need_cubin: bool = True) -> CompiledKernel:
  """Compiles a generated kernel for `target` (backend, compute capability).

  need_cubin=False stops after PTX (what jaxlib needs to launch it); the
  cubin is assembled later by CompiledKernel.complete() if anyone asks.
  """
  key = compile_key(gk, target)
  start = time.time_ns()
  with _lock:
    hit = _memory_cache.get(key)
  if hit is not None:
    if need_cubin:
      hit.complete()
    ck = dataclasses.replace(hit, generated=gk, cache="memory", worker_wait_seconds=0.0)
    _notify_cache_hit(ck, start)
    return ck
  if use_disk_cache:
    ck = _load_from_disk(key, gk)
    if ck is not None:
      if need_cubin:
        ck.complete()
      with _lock:
        _memory_cache[key] = ck
      _notify_cache_hit(ck, start)
      return ck
  ck = _compile_now(gk, target, key, need_cubin)
  with _lock:
    _memory_cache[key] = ck
  if use_disk_cache:
    _store_on_disk(ck)
  return ck


def _notify_cache_hit(ck: CompiledKernel, start: int) -> None:
  obs = hooks.observer()
  if getattr(obs, "enabled", False):
    obs.compiled(CompileRecord(kernel=ck.name, key=ck.key, target=f"{ck.target[0]}:{ck.target[1]}",
                               start_ns=start, end_ns=time.time_ns(), stages=[], cache=ck.cache,
                               attributes=ck.resources(complete=False),
                               source_key=ck.generated.key if ck.generated else None))


def compile_request(gk: GeneratedKernel, target: tuple[str, int],
                    need_cubin: bool = True) -> dict[str, Any]:
  """Everything triton.compile needs, as plain data (it may go to a worker process)."""
  return {"op": "compile", "path": gk.path, "name": gk.name,
          "signature": {p.name: "*" + signature_type(p.dtype) for p in gk.params},
          "attrs": {(i,): [["tt.divisibility", 16]] for i in range(len(gk.params))},
          "options": compile_options(gk), "target": tuple(target), "need_cubin": need_cubin,
          "libdevice_cache": libdevice_cache()}


def _prepared_libdevice() -> bool:
  """Whether libdevice is linked with its reflect queries answered up front
  (libdevice_link.py). PALLAS_PROF_PREPARED_LIBDEVICE=0 links Triton's way."""
  return os.environ.get("PALLAS_PROF_PREPARED_LIBDEVICE", "1") != "0"


def libdevice_cache() -> str | None:
  """Where prepared libdevice libraries live; None: link Triton's way."""
  return os.path.join(cache_dir(), "libdevice") if _prepared_libdevice() else None


def _assemble_cubin(ck: "CompiledKernel") -> None:
  from . import compile_worker
  gk = ck.generated
  options = compile_options(gk) if gk is not None else {}
  result = compile_worker.compile({"op": "ptxas", "ptx": ck.asm["ptx"], "target": ck.target,
                                   "options": options})
  if "error" in result:
    err = result["error"]
    raise LoweringError(f"ptxas failed on the kernel's PTX: {err['message'][:400]}",
                        kernel=ck.name, stage="cubin", cause=TritonFailure(err["type"], err["message"]))
  ck.asm["cubin"] = result["cubin"]
  ck.ptxas_log = result["ptxas"]
  for field, value in _parse_ptxas(result["ptxas"]).items():
    setattr(ck, field, value)
  stage = StageRecord("cubin", result["start_ns"], result["end_ns"], len(result["cubin"]))
  ck.stage_seconds = {**ck.stage_seconds, "cubin": stage.seconds}
  ck.compile_seconds += stage.seconds    # the stages keep adding up to the whole
  _notify(CompileRecord(ck.name, ck.key, f"{ck.target[0]}:{ck.target[1]}", stage.start_ns,
                        stage.end_ns, [stage], "miss", ck.resources(complete=False),
                        source_key=gk.key if gk is not None else None))
  _store_on_disk(ck)


class TritonFailure(Exception):
  """A Triton error reported as data (from this process or the compile worker)."""

  def __init__(self, kind: str, message: str, lineno: int | None = None):
    super().__init__(message)
    self.kind = kind
    self.node = type("Node", (), {"lineno": lineno})() if lineno is not None else None

  def __str__(self) -> str:
    return f"{self.kind}: {self.args[0]}" if self.args[0] else self.kind


def _compile_now(gk: GeneratedKernel, target: tuple[str, int], key: str,
                 need_cubin: bool = True) -> CompiledKernel:
  from . import compile_worker
  request = compile_request(gk, target, need_cubin)
  requested = time.time_ns()
  try:
    result = compile_worker.compile(request)
  except compile_worker.WorkerCrashed as crash:
    error = LoweringError(
        f"Triton's compiler crashed ({crash.how}) in the {crash.stage or 'ttir'} stage",
        hint="pallas-prof compiles in a worker process, so your program survives this; "
             "`pallas-prof show` prints the generated kernel, and a smaller block or "
             "another num_warps/num_stages often avoids the crash",
        kernel=gk.name, stage=crash.stage, details={"compiler output": crash.output_tail},
        jaxpr_text=gk.jaxpr_text, cause=crash)
    now = time.time_ns()
    _notify(CompileRecord(gk.name, key, f"{target[0]}:{target[1]}", now, now, [], "miss",
                          {"pallas.kernel": gk.name}, error, source_key=gk.key))
    raise error from None
  return _finish_compile(gk, target, key, result, requested)


def _worker_wait(result: dict[str, Any], requested: int | None) -> dict[str, float]:
  """ms the compile waited before Triton started on it: queued behind other
  compiles, and the rest (the worker's start-up and `import triton` when it
  was not ready; otherwise the request's trip, well under a millisecond)."""
  if requested is None:
    return {}
  queued = result.get("queued_ns", 0)
  rest = max(0, result["start_ns"] - requested - queued)
  return {"worker_queue_ms": queued / 1e6, "worker_startup_ms": rest / 1e6}


def _finish_compile(gk, target, key, result, requested: int | None = None) -> CompiledKernel:
  records = [StageRecord(*r) for r in result["records"]]
  start, end = result["start_ns"], result["end_ns"]
  target_text = f"{target[0]}:{target[1]}"
  wait = _worker_wait(result, requested)
  if "error" in result:
    err = result["error"]
    failure = TritonFailure(err["type"], err["message"], err.get("lineno"))
    lowering_error = compile_error(gk, failure, _next_stage(records))
    _notify(CompileRecord(gk.name, key, target_text, start, end, records, "miss",
                          {"pallas.kernel": gk.name, **wait}, lowering_error, source_key=gk.key,
                          requested_ns=requested))
    raise lowering_error
  ptxas = _parse_ptxas(result["ptxas"])
  ck = CompiledKernel(name=gk.name, key=key, target=tuple(target), asm=result["asm"],
                      metadata=result["metadata"],
                      stage_seconds={r.stage: r.seconds for r in records},
                      compile_seconds=(end - start) / 1e9, ptxas_log=result["ptxas"],
                      generated=gk, cache="miss",
                      worker_wait_seconds=sum(wait.values()) / 1e3, **ptxas)
  try:
    _check_shared_memory(ck, gk)
  except LoweringError as e:
    _notify(CompileRecord(gk.name, key, target_text, start, end, records, "miss",
                          {**ck.resources(complete=False), **wait}, e, source_key=gk.key,
                          requested_ns=requested))
    raise
  _notify(CompileRecord(gk.name, key, target_text, start, end, records, "miss",
                        {**ck.resources(complete=False), **wait,
                         "libdevice_link": result.get("libdevice_link")}, source_key=gk.key,
                        requested_ns=requested))
  return ck


def _notify(record: CompileRecord) -> None:
  obs = hooks.observer()
  if getattr(obs, "enabled", False):
    obs.compiled(record)


def _next_stage(records: list[StageRecord]) -> str:
  done = {r.stage for r in records}
  for s in STAGES:
    if s not in done:
      return s
  return "cubin"


_PTXAS_PATTERNS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


def _parse_ptxas(log: str) -> dict[str, int | None]:
  out = {}
  for key, pattern in _PTXAS_PATTERNS.items():
    m = pattern.search(log)
    out[key] = int(m.group(1)) if m else None
  return out


def _check_shared_memory(ck: CompiledKernel, gk: GeneratedKernel) -> None:
  limit = SHARED_MEMORY_LIMIT.get(ck.target[1])
  if limit is None or ck.shared_bytes <= limit:
    return
  eqns = equations_in_ir(gk, ck.asm.get("ttgir", ""), ("local_alloc",))
  raise LoweringError(
      f"the kernel needs {ck.shared_bytes} bytes of shared memory; sm_{ck.target[1]} "
      f"allows {limit} per block",
      hint="use smaller blocks (BlockSpec / pl.ds sizes), fewer num_stages, or a "
           "narrower dtype for the operands staged through shared memory",
      kernel=gk.name, eqn=eqns[0] if eqns else None, stage="ttgir",
      details={"shared memory users": ", ".join(f"[{e.index}] {e.primitive} @ {e.location}"
                                               for e in eqns) or "unknown",
               "num_stages": gk.num_stages},
      jaxpr_text=gk.jaxpr_text)


def equations_in_ir(gk: GeneratedKernel, ir_text: str, ops: tuple[str, ...] = ()):
  """The equations whose generated lines produced the IR ops named in `ops`."""
  from .lineinfo import equations_in_ir as _equations_in_ir
  return _equations_in_ir(gk, ir_text, ops)


def compile_error(gk: GeneratedKernel, error: BaseException, stage: str) -> LoweringError:
  """A Triton failure as a LoweringError pointing at the equation if we can."""
  text = str(error)
  eqn = None
  line = getattr(getattr(error, "node", None), "lineno", None)
  if line is not None:
    # Triton numbers lines from the kernel's `def`
    eqn = gk.eqn_at_line(line + _def_line(gk) - 1)
  if eqn is None:
    from .lineinfo import generated_lines_in_message
    eqn = next((e for e in map(gk.eqn_at_line, generated_lines_in_message(gk, text))
                if e is not None), None)
  first = text.strip().splitlines()[-1] if text.strip() else type(error).__name__
  hint = "this is Triton rejecting the generated code; run `pallas-prof show` on the kernel " \
         "to read it, and try smaller blocks or another num_warps/num_stages"
  if "out of resource" in text or "shared memory" in text.lower():
    hint = "use smaller blocks or fewer num_stages"
  return LoweringError(f"Triton failed in the {stage} stage: {first[:400]}", hint=hint,
                       kernel=gk.name, eqn=eqn, stage=stage, cause=error,
                       jaxpr_text=gk.jaxpr_text)


def _def_line(gk: GeneratedKernel) -> int:
  for i, line in enumerate(gk.source.splitlines(), start=1):
    if line.startswith(f"def {gk.name}("):
      return i
  return 1


# --- the disk cache --------------------------------------------------------------------------

def _disk_dir(key: str) -> str:
  return os.path.join(cache_dir(), "compiled", key[:2], key)


def _store_on_disk(ck: CompiledKernel) -> None:
  directory = _disk_dir(ck.key)
  tmp = f"{directory}.tmp{os.getpid()}_{threading.get_ident()}"
  try:
    os.makedirs(tmp, exist_ok=True)
    for stage, text in ck.asm.items():
      mode = "wb" if isinstance(text, bytes) else "w"
      with open(os.path.join(tmp, stage), mode) as f:
        f.write(text)
    meta = {k: getattr(ck, k) for k in ("name", "key", "metadata", "stage_seconds",
                                         "compile_seconds", "registers", "spill_stores",
                                         "spill_loads", "stack_bytes", "ptxas_log")}
    meta["target"] = list(ck.target)
    meta["stages"] = sorted(ck.asm)
    with open(os.path.join(tmp, "meta.json"), "w") as f:
      json.dump(meta, f)
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    if os.path.isdir(directory) and not os.path.exists(os.path.join(directory, "cubin")) \
        and ck.asm.get("cubin"):
      import shutil
      shutil.rmtree(directory, ignore_errors=True)   # the deferred entry, now completed
    os.replace(tmp, directory)
  except OSError:
    # another process stored it first, or the disk is read-only: not fatal
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


def _load_from_disk(key: str, gk: GeneratedKernel) -> CompiledKernel | None:
  directory = _disk_dir(key)
  try:
    with open(os.path.join(directory, "meta.json")) as f:
      meta = json.load(f)
    asm = {}
    for stage in meta["stages"]:
      mode = "rb" if stage == "cubin" else "r"
      with open(os.path.join(directory, stage), mode) as f:
        asm[stage] = f.read()
  except (OSError, ValueError, KeyError):
    return None
  return CompiledKernel(name=meta["name"], key=key, target=tuple(meta["target"]), asm=asm,
                        metadata=meta["metadata"], stage_seconds=meta["stage_seconds"],
                        compile_seconds=meta["compile_seconds"], registers=meta["registers"],
                        spill_stores=meta["spill_stores"], spill_loads=meta["spill_loads"],
                        stack_bytes=meta["stack_bytes"], ptxas_log=meta["ptxas_log"],
                        generated=gk, cache="disk")


_warmup_thread: threading.Thread | None = None
# what the background warm-up did, seconds from its start (for diagnostics and
# the benchmarks): worker_started_s, rules_imported_s, compiled_s, or error
warmup_status: dict[str, Any] = {}


def start_warmup(compute_capability: int) -> None:
  """Starts the compile worker and compiles a tiny kernel there, in the background.

  Triton's one-time start-up (imports, LLVM, libdevice, ptxas) then overlaps
  the user's own start-up instead of delaying the first pallas_call; a real
  compile simply waits for the worker. PALLAS_PROF_WARMUP=0 skips it.
  """
  global _warmup_thread
  if _warmup_thread is not None or os.environ.get("PALLAS_PROF_WARMUP", "1") == "0":
    return
  from . import compile_worker

  def warm():
    t0 = time.perf_counter()
    try:
      compile_worker.start()           # the worker boots (Python, Triton's import) ...
      warmup_status["worker_started_s"] = time.perf_counter() - t0
      from . import rules  # noqa: F401 - ... while this process imports the lowering rules
      warmup_status["rules_imported_s"] = time.perf_counter() - t0
      result = compile_worker.warm_up(compute_capability)
      warmup_status["compiled_s"] = time.perf_counter() - t0
      if result.get("error"):
        warmup_status["error"] = f"{result['error']['type']}: {result['error']['message'][:500]}"
      warmup_status["stages_s"] = {name: (end - start) / 1e9
                                   for name, start, end, *_ in result.get("records", [])}
    except Exception as e:  # noqa: BLE001 - a failed warm-up only loses the head start
      warmup_status["error"] = f"{type(e).__name__}: {str(e)[:500]}"

  _warmup_thread = threading.Thread(target=warm, name="pallas-prof-warmup", daemon=True)
  _warmup_thread.start()


def clear_memory_cache() -> None:
  with _lock:
    _memory_cache.clear()
