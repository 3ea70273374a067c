"""The one place that knows how Triton releases differ (3.6 to 3.9).

compat.py is JAX's counterpart. Everything here imports Triton lazily and
nothing of pallas_prof at import (pallas_prof/settings.py only inside a function the
worker never calls): the compile worker loads this file by path, beside triton_run.py,
with no package around it.

It is also the one door to Triton's compiler: triton_version() (and triton_release(), the
text), gpu_target() and compile_source() (ASTSource, triton.compile, FP fusion always
stated); no other module imports ASTSource or GPUTarget, calls triton.compile or reads
triton.__version__ (tests/structure/test_triton_seam.py).

What differs, and where it is used:
- the stage-inspection hook's protocol (triton_run): 3.9 also calls the hook
  with no arguments and takes a `(key, hash)` back for its cache key;
- which ptxas assembles a target's PTX (compile_cache, compile, tests): 3.9
  assembles sm_90 with `ptxas-blackwell` (CUDA 13.x), whose PTX ISA the older
  `ptxas` beside it rejects;
- the PTX ISA version Triton emits by default, and its cap for a driver
  (launch through jaxlib: the driver or jaxlib's own ptxas must accept it);
- where its tools live (nvdisasm, for lineinfo);
- which AMD archs take a tf32 dot (platform_paths, for the ROCm lowering): Triton's
  own answer per release.

Not here: the interpreter's internals that interpreter_runtime.py patches.
That module is inlined verbatim into ejected programs, which run without
pallas-prof, so it imports nothing but Triton and numpy; it holds no
version-specific code today (its patches run unchanged on 3.6 and 3.9, which
tests/backend/running/test_interpreter_runtime.py checks on both test legs).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
from importlib import metadata
import importlib.util
import os
import re
import subprocess
import sysconfig
from typing import Callable


# --- which Triton, and its compile entry point ------------------------------------------
# Every other module asks here: a renamed or moved entry point (ASTSource, GPUTarget,
# triton.compile) or a new default is one edit in this file (docs/compiling.md, "A new
# Triton release", traces what else a release touches). tests/structure/test_triton_seam.py
# keeps them here.

@functools.lru_cache(maxsize=1)
def triton_release() -> str:
  """The installed Triton's version as its distribution states it ("3.9.0"), read from
  the package metadata: without importing Triton, which a cache key or a report may ask
  for before anything compiles. A Triton without metadata (a source checkout on the path)
  says its own `__version__`; "?" where there is no Triton at all."""
  try:
    return metadata.version("triton")
  except metadata.PackageNotFoundError:
    pass
  try:
    # lazy: optional: triton may be absent
    import triton
  except ImportError:
    return "?"
  return str(getattr(triton, "__version__", "?"))


def triton_version() -> tuple[int, int]:
  """(major, minor) of the installed Triton, for comparisons: (3, 9) for "3.9.0"."""
  m = re.match(r"(\d+)\.(\d+)", triton_release())
  if m is None:
    raise RuntimeError(f"Triton's version {triton_release()!r} is not MAJOR.MINOR...: "
                       "pallas-prof supports Triton 3.6 to 3.9")
  return int(m.group(1)), int(m.group(2))


# pallas-prof's default for Triton's `enable_fp_fusion`: a multiply and an add stay two
# roundings, as XLA computes them (compile_cache.triton_options states it for the kernels;
# CompilerParams(enable_fp_fusion=True) opts in). Always passed, never left to Triton's
# default: Triton 3.9 warns when it is unset and 3.10 changes it
# (tests/backend/compiling/test_triton_seam.py pins what reaches triton.compile).
FP_FUSION = False


def compile_options(options: dict) -> dict:
  """`options` for triton.compile, with FP fusion stated (pallas-prof's default unless given)."""
  out = dict(options)
  out.setdefault("enable_fp_fusion", FP_FUSION)
  return out


def gpu_target(backend: str, arch, warp_size: int = 32):
  """Triton's GPUTarget: ("cuda", 90, 32) for an H100/H200, ("hip", "gfx942", 64) for an MI300."""
  # lazy: keeps triton out of this module's import (start-up time)
  from triton.backends.compiler import GPUTarget
  return GPUTarget(backend, arch, warp_size)


def compile_source(fn, signature: dict, *, target, options: dict, attrs: dict | None = None,
                   constexprs: dict | None = None):
  """triton.compile of the @triton.jit function `fn` for `target` (gpu_target's), with
  FP fusion always stated (compile_options). Returns Triton's CompiledKernel."""
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  from triton.compiler import ASTSource
  src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
  return triton.compile(src, target=target, options=compile_options(options))


# Triton's compile as a standalone program spells it (failures/reproducer.py writes one
# that runs without pallas-prof): kept beside compile_source so that both change together.
STANDALONE_IMPORTS = ("from triton.backends.compiler import GPUTarget\n"
                      "from triton.compiler import ASTSource")


def standalone_compile(fn: str, signature: str, attrs: str, target: str, options: str) -> str:
  """The call, as text, from the standalone program's expressions for the function, the
  signature, the attributes, GPUTarget's arguments ("'cuda', 90, 32") and the options."""
  return (f"triton.compile(ASTSource(fn={fn}, signature={signature}, attrs={attrs}),\n"
          f"                   target=GPUTarget({target}), options={options})")


# --- the stage-inspection hook ------------------------------------------------------------

HOOK_KEY = "pallas-prof-stage-timer-v1"


def stages_hook(inspect: Callable) -> Callable:
  """`inspect(backend, stages, options, language, capability)` as the hook
  that this Triton calls.

  Triton 3.9 calls `knobs.runtime.add_stages_inspection_hook()` with no
  arguments first, for a (key, hash) that joins its cache key (the hook may
  change what the stages produce); 3.6 only ever calls it with the stages.
  The timing wrapper changes no output, so its key is a constant."""
  def hook(*args):
    if not args:
      return HOOK_KEY, hashlib.sha256(HOOK_KEY.encode()).hexdigest()
    return inspect(*args)
  return hook


# --- ptxas and the PTX ISA version ---------------------------------------------------------

def ptxas_tool(arch: int):
  """Triton's NvidiaTool (path, CUDA release) that assembles `arch`'s PTX."""
  # lazy: keeps triton out of this module's import (start-up time)
  from triton.backends.nvidia import compiler as nvidia
  return nvidia.get_ptxas(arch)


def ptxas_path(arch: int = 90) -> str:
  """The ptxas binary this Triton runs for `arch` (what its PTX was written for).

  Without Triton's tools (a broken install), the wheel's plain `ptxas`."""
  try:
    return ptxas_tool(arch).path
  except (ImportError, RuntimeError, OSError):
    # Triton's lookup raises RuntimeError when the binary is missing, OSError when it
    # cannot run it, ImportError without Triton's NVIDIA backend
    import importlib.util
    spec = importlib.util.find_spec("triton")
    root = os.path.dirname(spec.origin) if spec and spec.origin else ""
    return os.path.join(root, "backends", "nvidia", "bin", "ptxas")


def ptx_isa_for_cuda(cuda_version: str) -> int:
  """The newest PTX ISA (as Triton numbers it: 87 is 8.7) a CUDA release
  knows: its ptxas, or a driver of that CUDA version, loads PTX up to it."""
  major, minor = (int(p) for p in cuda_version.split(".")[:2])
  if major >= 13:
    return 90 + (major - 13) * 10 + minor
  if major == 12:
    return 80 + minor - (1 if minor >= 6 else 0)
  if major == 11:
    return 70 + minor
  raise ValueError(f"CUDA {cuda_version} is older than any Triton pallas-prof supports")


@functools.lru_cache(maxsize=None)
def default_ptx_isa(arch: int = 90) -> int:
  """The PTX ISA version Triton writes for `arch` when no option caps it."""
  return ptx_isa_for_cuda(ptxas_tool(arch).version)


@functools.lru_cache(maxsize=None)
def hip_dot_input_precisions(arch: str) -> tuple[str, ...]:
  """The input precisions Triton's AMD backend takes for a float32 dot on `arch` (tl.dot's
  input_precision): tf32 only where the arch has it. Triton's own answer, so each release's."""
  # lazy: keeps triton out of this module's import (start-up time)
  from triton.backends.amd.compiler import HIPBackend
  # fp fusion given: Triton 3.9 warns about its unset default otherwise
  options = HIPBackend(gpu_target("hip", arch, 64)).parse_options(compile_options({}))
  return tuple(options.allowed_dot_input_precisions)


def cuda_version_of_driver(driver_version: int) -> str:
  """cuDriverGetVersion's integer (13000) as a CUDA release ("13.0")."""
  return f"{driver_version // 1000}.{(driver_version % 1000) // 10}"


def ptx_isa_cap(driver_version: int, default_isa: int) -> int | None:
  """The `ptx_version` option for a kernel this machine's driver will run, or
  None where Triton's default (`default_isa`) already loads.

  The driver loads PTX (and jaxlib's assembler, of the same CUDA major, takes
  it) only up to its CUDA release's ISA: Triton 3.9 writes PTX 9.4 for sm_90
  (CUDA 13.4's ptxas-blackwell), which a 13.0 driver rejects."""
  cap = ptx_isa_for_cuda(cuda_version_of_driver(driver_version))
  return cap if cap < default_isa else None


def cuda_driver_version() -> int | None:
  """cuDriverGetVersion (13000 for CUDA 13.0), or None without a CUDA driver.

  PALLAS_PROF_CUDA_DRIVER_VERSION stands in for it (tests; a machine whose
  driver is not the one that will run the kernels). Asked in this process only: the
  compile worker loads this file without the package, hence the import here."""
  # lazy: the compile worker runs this file by its path, without the package
  from ... import settings
  stand_in = settings.value("PALLAS_PROF_CUDA_DRIVER_VERSION")
  if stand_in is not None:
    return stand_in or None
  return _driver_version()


@functools.lru_cache(maxsize=1)
def _driver_version() -> int | None:
  try:
    lib = ctypes.CDLL("libcuda.so.1")
  except OSError:
    return None
  version = ctypes.c_int(0)
  try:
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
      return None
  except AttributeError:
    return None
  return version.value or None


_RELEASE = re.compile(r"(?:release |cuda_)(\d+)\.(\d+)")


def cuda_release_of(ptxas_version: str) -> str | None:
  """The CUDA release ("13.4") in `ptxas --version`'s text ("Build cuda_13.4.r13.4/...")."""
  m = _RELEASE.search(ptxas_version or "")
  return f"{m.group(1)}.{m.group(2)}" if m else None


PTX_VERSION_LINE = re.compile(r"^\s*\.version\s+(\d+)\.(\d+)", re.MULTILINE)


def ptx_isa_of(ptx: str) -> int | None:
  """The `.version` a PTX text declares, as Triton numbers it (94 for 9.4)."""
  m = PTX_VERSION_LINE.search(ptx)
  return int(m.group(1)) * 10 + int(m.group(2)) if m else None


@functools.lru_cache(maxsize=None)
def ptxas_release(path: str) -> str:
  """`ptxas --version`'s last line for one binary ("unknown" if it won't say)."""
  try:
    out = subprocess.run([path, "--version"], capture_output=True, text=True,
                         timeout=30).stdout
  except (OSError, subprocess.SubprocessError):
    return "unknown"
  return out.strip().splitlines()[-1] if out.strip() else "unknown"


# --- tools ----------------------------------------------------------------------------------

def tool_path(name: str) -> str:
  """One of the CUDA tools in Triton's wheel (nvdisasm, cuobjdump), where Triton's own
  lookup (triton/knobs.py, env_nvidia_tool) finds it: TRITON_<NAME>_PATH, else the wheel's
  backends/nvidia/bin. Found without importing Triton where the file is there, since
  `pallas-prof show` needs nvdisasm and nothing else of Triton; else Triton says why not."""
  binary = name + (sysconfig.get_config_var("EXE") or "")
  spec = importlib.util.find_spec("triton")
  wheel = os.path.dirname(spec.origin) if spec and spec.origin else None
  for path in (os.environ.get(f"TRITON_{binary.upper().replace('-', '_')}_PATH"),
               wheel and os.path.join(wheel, "backends", "nvidia", "bin", binary)):
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
      return path
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  return getattr(triton.knobs.nvidia, name).path
