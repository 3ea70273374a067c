"""What a compile is keyed by, and where its results are kept.

A compile is addressed by its content: the generated source, Triton's
options, the libraries linked, the target and every tool's version, and the
layout its result is stored in (CompiledKernel.SCHEMA): an entry of an older
layout is never found. Results are kept in memory for this process and on
disk (CompiledKernel.save, sealed with a manifest and checked when loaded:
cache_files.py) for the next. Computing a key imports no Triton,
except once per Triton install and machine, to learn which ptxas it runs.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
from typing import Any

from ... import settings
from ...version import __version__
from .. import cache_files, compat
from . import ptx_rewrites, triton_compat
from ..errors import CompileError
from .failures.compile_diagnostics import Diagnosis
from ...run_layout import STAGE_FILES
from ..artifacts import DEFAULT_TARGET, CompiledKernel, GeneratedKernel, target_text
from ..lowering.codegen import signature_type
from ..kernel_files import cache_dir
from ..targets import as_target
from .triton_run import triton_lock

# 7: PTX rewritten around three ptxas miscompiles (ptx_rewrites.py); 8: entries sealed
# with a manifest (an entry without one would read as damaged); 9: one source location per
# inline asm block (ptx_rewrites.py: an older cubin's line info charges code to later lines)
CACHE_FORMAT = 9

_memory: dict[str, CompiledKernel] = {}


# --- Triton's options ------------------------------------------------------------------

def compile_options(gk: GeneratedKernel, target: tuple[str, int] = DEFAULT_TARGET
                    ) -> dict[str, Any]:
  """Triton options for a generated kernel, chosen so that a kernel computes what
  XLA and JAX's built-in backend compute, bit for bit where they agree:

  enable_reflect_ftz=False: libdevice keeps f32 denormals (sqrt, rsqrt, log,
  exp2, ...), as XLA's GPU compiler does; Triton's default flushes them to zero.
  enable_fp_fusion=False: a separate multiply and add stay two roundings, as in
  XLA (on the H200, x*1.37 + x*x differed from XLA with Triton's default FMA
  contraction, in none without it; see bench/probes/bitwise_probe.py).
  CompilerParams(enable_fp_fusion=True) opts back in.
  extern_libs: XLA's libdevice rather than the one in Triton's wheel (their powf
  differ in the last bit for many inputs).
  ptx_version: on a machine with a CUDA driver, no newer PTX than it loads
  (launch_ptx_version).
  An AMD target takes none of libdevice, its reflect flag or PTX (Triton links
  its own ocml and ockl); it keeps the separate roundings.
  """
  options = gk.options
  if as_target(target).backend == "hip":
    return {"num_warps": options.num_warps, "num_stages": options.num_stages,
            "enable_fp_fusion": options.enable_fp_fusion}
  return triton_options(options.num_warps, options.num_stages,
                        enable_fp_fusion=options.enable_fp_fusion,
                        ptx_version=launch_ptx_version(int(target[1])))


def triton_options(num_warps: int, num_stages: int, *, enable_fp_fusion: bool = False,
                   ptx_version: int | None = None) -> dict[str, Any]:
  """compile_options for a kernel of these settings (the warm-up has no GeneratedKernel)."""
  options = {"num_warps": num_warps, "num_stages": num_stages, "enable_reflect_ftz": False,
             "enable_fp_fusion": enable_fp_fusion}
  libdevice = compat.xla_libdevice_path()
  if libdevice:
    options["extern_libs"] = (("libdevice", libdevice),)
  if ptx_version is not None:
    options["ptx_version"] = ptx_version
  return options


# cuDriverGetVersion of CUDA 11.0: the oldest release whose PTX ISA pallas-prof knows
# (triton_compat.ptx_isa_for_cuda); Triton supports none older
OLDEST_DRIVER = 11000


def driver_too_old(driver: int) -> CompileError:
  """The error of a CUDA driver older than any Triton supports: it names the driver and
  what to do, and ends a compile as any CompileError does (the run reports it)."""
  release = triton_compat.cuda_version_of_driver(driver)
  stand_in = settings.value("PALLAS_PROF_CUDA_DRIVER_VERSION") is not None
  source = ("PALLAS_PROF_CUDA_DRIVER_VERSION" if stand_in
            else "the machine's driver (cuDriverGetVersion)")
  hint = ("set PALLAS_PROF_CUDA_DRIVER_VERSION to the driver that will run the kernels, or "
          "unset it to ask the machine's" if stand_in else
          "update the NVIDIA driver to one of CUDA "
          f"{triton_compat.cuda_version_of_driver(OLDEST_DRIVER)} or newer (`nvidia-smi` "
          "shows the CUDA version it supports)")
  reason = (f"the CUDA driver is CUDA {release} ({driver}, from {source}), older than CUDA "
            f"{triton_compat.cuda_version_of_driver(OLDEST_DRIVER)}, the oldest whose PTX "
            "Triton writes: no kernel can be compiled for it")
  return CompileError(reason, hint=hint, stage="ptx", diagnosis=Diagnosis(
      stage="ptx", kind="machine", summary=reason, fault="machine",
      fault_reason="the machine's CUDA driver is older than any Triton supports"))


def launch_ptx_version(arch: int) -> int | None:
  """The PTX ISA to write for a kernel that this machine's GPU will run, when
  Triton's default is newer than the CUDA driver loads (Triton 3.9 writes PTX
  9.4 for sm_90; a 13.0 driver takes up to 9.0), else None (Triton's default).
  Without a driver (a CPU machine compiling for sm_90) nothing is capped."""
  driver = triton_compat.cuda_driver_version()
  if not driver:
    return None
  if driver < OLDEST_DRIVER:
    raise driver_too_old(driver)
  release = triton_compat.cuda_release_of(_ptxas_version(arch))
  if release is None:
    return None
  return triton_compat.ptx_isa_cap(driver, triton_compat.ptx_isa_for_cuda(release))


def prepared_libdevice() -> bool:
  """Whether libdevice is linked with its reflect queries answered up front
  (libdevice_link.py). PALLAS_PROF_PREPARED_LIBDEVICE=0 links Triton's way."""
  return settings.value("PALLAS_PROF_PREPARED_LIBDEVICE")


def libdevice_cache() -> str | None:
  """Where prepared libdevice libraries live; None: link Triton's way."""
  return cache_files.folder("libdevice") if prepared_libdevice() else None


# --- the key -------------------------------------------------------------------------------

def compile_key(gk: GeneratedKernel, target: tuple[str, int]) -> str:
  """Content address of a compile. Cheap: a cache hit never imports triton."""
  target = as_target(target)
  options = compile_options(gk, target)
  parts = [gk.source, f"options={sorted(options.items())}",
           f"libraries={[_file_digest(path) for _, path in options.get('extern_libs', ())]}",
           f"signature={[(p.name, signature_type(p.dtype)) for p in gk.params]}",
           f"target={target_text(target)}", f"triton={triton_compat.triton_release()}",
           f"pallas_prof={__version__}", f"format={CACHE_FORMAT}",
           f"schema={CompiledKernel.SCHEMA}", *_assembler_parts(target)]
  return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _assembler_parts(target) -> list[str]:
  """What turns the target's IR into its binary: ptxas, libdevice's link and the PTX
  rewrites for NVIDIA; for AMD, LLVM inside Triton (its version is in the key)."""
  if as_target(target).backend == "hip":
    return ["assembler=triton-llvm-amdgpu"]
  return [f"ptxas={_ptxas_version(int(target[1]))}", f"prepared_libdevice={prepared_libdevice()}",
          f"ptx_rewrites={ptx_rewrites.enabled()}"]


@functools.lru_cache(maxsize=8)
def _file_digest(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _ptxas_version(arch: int = 90) -> str:
  """`--version` of the ptxas Triton runs for `arch` (Triton 3.9 assembles
  sm_90 with ptxas-blackwell, 3.6 with ptxas), remembered on disk per Triton
  install, tool override and binary: Triton's compiler module is imported
  only to fill that memo."""
  spec = importlib.util.find_spec("triton")
  if spec is None or not spec.origin:
    return "none"
  overrides = [os.environ.get(v, "") for v in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")]
  try:
    st = os.stat(spec.origin)
  except OSError:
    return "none"
  stamp = hashlib.sha256(f"{spec.origin}:{st.st_mtime_ns}:{triton_compat.triton_release()}:"
                         f"{arch}:{overrides}".encode()).hexdigest()[:16]
  memo = os.path.join(cache_dir(), "tools", f"ptxas-sm{arch}-{stamp}.json")
  known = cache_files.read_sealed(memo)
  if known is not None:
    return known
  path = triton_compat.ptxas_path(arch)
  if not os.path.exists(path):
    return "none"
  version = triton_compat.ptxas_release(path)
  if version == "unknown":
    return version
  try:
    cache_files.write_sealed(memo, version)
  except OSError:      # neither the cache nor a temporary folder: ask ptxas again next time
    pass
  return version


# --- in memory -------------------------------------------------------------------------------

def remembered(key: str) -> CompiledKernel | None:
  with triton_lock():
    return _memory.get(key)


def remember(ck: CompiledKernel) -> None:
  with triton_lock():
    _memory[ck.key] = ck


def forget(key: str) -> None:
  with triton_lock():
    _memory.pop(key, None)


def clear_memory_cache() -> None:
  with triton_lock():
    _memory.clear()


# --- on disk ---------------------------------------------------------------------------------

def _disk_dir(key: str) -> str:
  return os.path.join(cache_dir(), "compiled", key[:2], key)


def store_on_disk(ck: CompiledKernel) -> None:
  """Saves ck under its key, whole or not at all, sealed with a manifest of its files
  (cache_files.store_entry; not fatal where the cache cannot be written)."""
  directory = _disk_dir(ck.key)
  if not ck.cubin_deferred and os.path.isdir(directory) and \
      STAGE_FILES[ck.target.binary_stage] not in cache_files.entry_files(directory):
    cache_files.discard(directory)     # the deferred entry, now completed
  cache_files.store_entry(directory, ck.save)


def load_from_disk(key: str, gk: GeneratedKernel) -> CompiledKernel | None:
  """The entry stored under `key` if it is whole and is that key's (else it is moved
  aside: cache_files.load_entry), as a disk hit; None otherwise."""
  def load(directory: str) -> CompiledKernel:
    ck = CompiledKernel.load(directory, generated=gk)
    if ck.key != key:
      raise ValueError(f"it holds the compile of key {ck.key[:16]}..., not {key[:16]}...")
    return ck

  ck = cache_files.load_entry(_disk_dir(key), load)
  if ck is None:
    return None
  return dataclasses.replace(ck, cache="disk", worker_wait_seconds=0.0)


def set_aside_on_disk(key: str, why: str = "its compile could not be used") -> None:
  """Moves the entry of `key` aside (cache_files.move_aside): an entry that turned out
  unusable after it loaded, so that the next store_on_disk can replace it."""
  directory = _disk_dir(key)
  if os.path.isdir(directory):
    cache_files.move_aside(directory, why)
