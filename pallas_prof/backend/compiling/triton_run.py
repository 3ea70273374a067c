"""Triton's compile of a generated kernel, as plain data in and out.

What the compile worker runs (compile_worker.py), and so free of JAX and of
the rest of pallas-prof: the worker imports only this and Triton, which
keeps its start-up short. compile.py runs it in-process when the worker is
off, and re-exports its names.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import io
import json
import linecache
import os
import threading
import time
from typing import Any

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
# an AMD target's (the worker has no package: targets.HIP_STAGES, written out again)
HIP_STAGES = ("ttir", "ttgir", "llir", "amdgcn", "hsaco")


def stages_of(backend: str) -> tuple[str, ...]:
  return HIP_STAGES if backend == "hip" else STAGES
_lock = threading.RLock()   # Triton's knobs and interpreter are process-global
_modules: dict[str, Any] = {}


def triton_lock() -> threading.RLock:
  return _lock


@dataclasses.dataclass
class StageRecord:
  stage: str
  start_ns: int
  end_ns: int
  size: int = 0

  @property
  def seconds(self) -> float:
    return (self.end_ns - self.start_ns) / 1e9


class KernelFileChanged(Exception):
  """The kernel's file no longer holds the source the request was made from."""


def _load_kernel_module(path: str, sha256: str | None = None):
  """A generated kernel's module, imported once (Triton reads kernels back from files).

  Run from the file's source, never from a bytecode file beside it: Python would trust
  one whose header matches the source's time and size, and write new ones into the cache,
  which nothing checks. With `sha256` (the request's source), a file that holds other
  bytes is refused (KernelFileChanged), and Triton's reading of the source (inspect, via
  linecache) is given the checked bytes, not the file read again."""
  with _lock:
    module = _modules.get((path, sha256))
    if module is None:
      with open(path, "rb") as f:
        source = f.read()
      if sha256 is not None and hashlib.sha256(source).hexdigest() != sha256:
        raise KernelFileChanged(
            f"the kernel file {path} no longer holds the source it was lowered to "
            f"({len(source)} bytes of other content): something else wrote to pallas-prof's "
            "cache folder meanwhile")
      name = f"pallas_prof_generated.compile.{os.path.basename(path)[:-3]}"
      spec = importlib.util.spec_from_file_location(name, path)
      module = importlib.util.module_from_spec(spec)
      text = source.decode("utf-8")
      linecache.cache[path] = (len(text), None, text.splitlines(True), path)
      exec(compile(source, path, "exec"), module.__dict__)   # noqa: S102 - the kernel's file
      _modules[(path, sha256)] = module
    return module


def import_compiler(arch: int = 90) -> None:
  """What a process's first triton.compile for an NVIDIA target would do on
  top of compiling: import Triton's front end (with Gluon, which it pulls in),
  ask ptxas for its version (twice, through two caches), load
  libdevice_link.py. The worker does it as it starts, before any request, so
  its first compile does not wait for it (rms_norm's first compile: 82 -> 58-64
  ms on the CPU machine). The two `ptxas --version` runs, one after the other,
  go on in a thread while this one imports: the thread only waits for them."""
  # lazy: keeps triton out of this module's import (start-up time)
  import triton.backends.nvidia.compiler as nvidia

  def ask_ptxas():
    try:
      nvidia.get_ptxas_version(arch)      # Triton's tool lookup runs it once, this once more
      nvidia.get_ptxas(arch).version  # noqa: B018 - cached by the lookup above
    except Exception:  # noqa: BLE001 - a compile will report a missing ptxas properly
      pass

  asking = threading.Thread(target=ask_ptxas, name="ptxas-version")
  asking.start()
  try:
    import triton.compiler.code_generator  # noqa: F401
    import triton.compiler.compiler  # noqa: F401
    import triton.language.extra.libdevice  # noqa: F401
    import triton.language.semantic  # noqa: F401
    _libdevice_link_module()
  finally:
    asking.join()


def use_quick_triton_key() -> None:
  """Makes Triton's key for its own cache cheap to compute, in the compile worker.

  triton.compile asks triton_key() for the key of its on-disk cache, and the
  first call hashes Triton's whole shared library, a large part of a first compile
  (bench/first_call/compile_path_cpu.py), in every worker's first compile, so in a program's first
  pallas_call. pallas-prof never reads Triton's cache (always_compile; our own
  cache keys on Triton's version) and the worker runs nothing else, so the
  library's path, size and modification time stand in for its contents.
  """
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  from triton.runtime import cache
  if getattr(cache.triton_key, "pallas_prof_quick", False):
    return
  original = cache.triton_key
  library = os.path.dirname(triton.__file__)
  version = _sibling("triton_compat").triton_release()

  def quick_key() -> str:
    try:
      so = next(os.path.join(library, "_C", n) for n in sorted(os.listdir(
          os.path.join(library, "_C"))) if n.startswith("libtriton"))
      st = os.stat(so)
    except (OSError, StopIteration):
      return original()
    return f"{version}-{so}-{st.st_size}-{st.st_mtime_ns}"

  quick_key.pallas_prof_quick = True
  cache.triton_key = quick_key


def _sibling(name: str):
  """A module beside this file: imported through the package, or by path in the
  worker, which has no package (libdevice_link.py, triton_compat.py)."""
  if __package__:
    return importlib.import_module(f"{__package__}.{name}")
  module = _modules.get(name)
  if module is None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"pallas_prof_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _modules[name] = module
  return module


def _libdevice_link_module():
  return _sibling("libdevice_link")


@contextlib.contextmanager
def _prepared_libdevice(request: dict[str, Any], how: list[str]):
  """While Triton compiles on this thread, its libdevice link goes through
  libdevice_link (reflect queries answered before O3; see there)."""
  cache = request.get("libdevice_cache")
  if not cache:        # (without extern_libs in the options Triton links its own libdevice)
    yield
    return
  # lazy: keeps triton out of this module's import (start-up time)
  from triton._C.libtriton import llvm
  original = llvm.link_extern_libs
  owner = threading.get_ident()
  options = request["options"]
  prepared = _libdevice_link_module()

  def link(llvm_mod, paths):
    if threading.get_ident() != owner:
      return original(llvm_mod, paths)
    how.append(prepared.link(llvm_mod, paths, original_link=original, cache_dir=cache,
                             ftz=bool(options.get("enable_reflect_ftz", True)),
                             arch=int(request["target"][1])))

  llvm.link_extern_libs = link
  try:
    yield
  finally:
    llvm.link_extern_libs = original


def run_triton(request: dict[str, Any], on_stage=None) -> dict[str, Any]:
  """triton.compile with every stage timed and kept; returns plain data.

  Runs in this process or in the compile worker (compile_worker.py). Errors
  come back as data too, so a worker can report them.
  """
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  compat = _sibling("triton_compat")

  try:
    module = _load_kernel_module(request["path"], request.get("source_sha256"))
  except KernelFileChanged as e:    # no compile of other code: said as the compile's error
    now = time.time_ns()
    return {"start_ns": now, "end_ns": now, "records": [], "ptxas": "", "libdevice_link": None,
            "quick_triton_key": False,
            "error": {"type": type(e).__name__, "message": str(e), "lineno": None, "ir": {},
                      "errno": None}}
  records: list[StageRecord] = []
  captured = {}
  stage_texts: dict[str, str] = {}
  start = time.time_ns()
  if on_stage is not None:
    on_stage("ttir")

  def inspect_stages(backend, stages, options, language, capability):
    if not request.get("need_cubin", True) and "cubin" in stages:
      # Triton insists on a binary; an empty one marks the cubin as deferred
      stages["cubin"] = lambda src_module, metadata: b""
    for name in list(stages):
      original = stages[name]
      if name == "cubin" and not request.get("need_cubin", True):
        continue

      def timed(src_module, metadata, _name=name, _original=original):
        # the first stage also carries the front end (AST -> TTIR), and each
        # stage its write to Triton's cache (as Triton's own CompileTimer
        # counts it), so the stages add up to the whole compile
        t0 = time.time_ns() if records else start
        if records:
          records[-1].end_ns = t0
        if on_stage is not None:
          on_stage(_name)
        if _name == "cubin":
          out = io.StringIO()
          with contextlib.redirect_stdout(out):
            result = _original(src_module, metadata)
          captured["ptxas"] = out.getvalue()
        else:
          result = _original(src_module, metadata)
        if _name == "ptx" and isinstance(result, str):
          # before ptxas sees it: the cubin, jaxlib's copy and the replays agree
          result, captured["ptx_asm_locs_dropped"] = (
              _sibling("ptx_rewrites").one_location_per_asm_block(result))
          if request.get("ptx_rewrites", True):
            result, captured["ptx_rewrites"] = _sibling("ptx_rewrites").rewrite(result)
        end = time.time_ns()
        text = result if isinstance(result, (bytes, str)) else str(result)
        if not isinstance(result, bytes):
          # printed now: a later stage may change the module in place (a failed
          # compile's error carries the stages it finished, for its diagnosis)
          stage_texts[_name] = text
        records.append(StageRecord(_name, t0, end, len(text)))
        return result
      stages[name] = timed

  result: dict[str, Any] = {"start_ns": start}
  libdevice_links: list[str] = []
  with _lock, _prepared_libdevice(request, libdevice_links):
    knobs = triton.knobs
    saved = (knobs.runtime.add_stages_inspection_hook, knobs.compilation.always_compile,
             knobs.nvidia.dump_ptxas_log)
    knobs.runtime.add_stages_inspection_hook = compat.stages_hook(inspect_stages)
    knobs.compilation.always_compile = True
    knobs.nvidia.dump_ptxas_log = True
    try:
      target = request["target"]
      compiled = compat.compile_source(
          getattr(module, request["name"]), request["signature"], attrs=request["attrs"],
          target=compat.gpu_target(target[0], target[1], request.get("warp_size", 32)),
          options=request["options"])
      if records:
        # the last stage also carries Triton storing its results (metadata,
        # cache group, loading the CompiledKernel back): the stages tile the compile
        records[-1].end_ns = time.time_ns()
      result["metadata"] = _metadata_dict(compiled.metadata)
      result["asm"] = {stage: compiled.asm[stage] for stage in stages_of(target[0])
                       if stage in compiled.asm and compiled.asm[stage]}
    except Exception as e:  # noqa: BLE001 - returned as data, rewrapped with the equation
      result["error"] = {"type": type(e).__name__, "message": str(e),
                         "lineno": getattr(getattr(e, "node", None), "lineno", None),
                         "ir": stage_texts, "errno": os_errno(e)}
    finally:
      (knobs.runtime.add_stages_inspection_hook, knobs.compilation.always_compile,
       knobs.nvidia.dump_ptxas_log) = saved
  result["end_ns"] = time.time_ns()
  result["libdevice_link"] = libdevice_links[0] if libdevice_links else None
  # lazy: keeps triton out of this module's import (start-up time)
  from triton.runtime import cache
  result["quick_triton_key"] = bool(getattr(cache.triton_key, "pallas_prof_quick", False))
  result["records"] = [dataclasses.astuple(r) for r in records]
  result["ptxas"] = captured.get("ptxas", "")
  return result


def run_ptxas(request: dict[str, Any]) -> dict[str, Any]:
  """Triton's own ptxas step on a PTX text (for a deferred cubin)."""
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  from triton.backends.nvidia.compiler import CUDABackend
  compat = _sibling("triton_compat")
  target = request["target"]
  backend = CUDABackend(compat.gpu_target(target[0], target[1], 32))
  options = backend.parse_options(compat.compile_options(request["options"]))
  start = time.time_ns()
  out = io.StringIO()
  result: dict[str, Any] = {}
  with _lock:
    saved = triton.knobs.nvidia.dump_ptxas_log
    triton.knobs.nvidia.dump_ptxas_log = True
    try:
      with contextlib.redirect_stdout(out):
        result["cubin"] = backend.make_cubin(request["ptx"], {}, options, target[1])
    except Exception as e:  # noqa: BLE001 - returned as data
      result["error"] = {"type": type(e).__name__, "message": str(e), "lineno": None,
                         "errno": os_errno(e)}
    finally:
      triton.knobs.nvidia.dump_ptxas_log = saved
  result.update(start_ns=start, end_ns=time.time_ns(), ptxas=out.getvalue())
  return result


def os_errno(error: BaseException) -> int | None:
  """The errno of the operating-system error in `error`'s chain (Triton writing its
  cache onto a full disk, say), or None: the parent tells the machine's failures
  from Triton's by it."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno is not None:
      return error.errno
    error = error.__cause__ or error.__context__
  return None


def _metadata_dict(md) -> dict[str, Any]:
  d = md._asdict() if hasattr(md, "_asdict") else dict(md)
  out = {}
  for k, v in d.items():
    if k == "target":
      out[k] = {"backend": v.backend, "arch": v.arch, "warp_size": v.warp_size}
    elif isinstance(v, (str, int, float, bool, type(None))):
      out[k] = v
    elif isinstance(v, (list, tuple)):
      out[k] = json.loads(json.dumps(v, default=str))
    else:
      out[k] = str(v)
  return out
