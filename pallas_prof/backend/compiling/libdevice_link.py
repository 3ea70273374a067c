"""Links libdevice into a kernel with its __nvvm_reflect queries already answered.

Triton links libdevice into a kernel's LLVM module and runs LLVM's O3 on it
before anything answers libdevice's `__nvvm_reflect("__CUDA_FTZ")` queries:
NVPTX's NVVMReflect pass only runs later, in code generation. So every
inlined libdevice call carries both its flush-to-zero and its IEEE branches
through O3, whose cost grows faster than linearly with them. JAX's softmax
on a row of 8192 f32 with 4 warps inlines __nv_expf 64 times: O3 took several
times longer than with the queries answered, and linking the whole libdevice
bitcode is paid by every compile (bench/first_call/compile_path_cpu.py; the figures in
bench/results/archive/comment_figures.md): the llir stage took longer than
JAX's built-in backend needs for the whole kernel.

So this links libdevice functions into an otherwise empty module, answers the
queries exactly as NVVMReflect would (__CUDA_FTZ from the compile's
enable_reflect_ftz, __CUDA_ARCH from the target) and keeps the result as a
textual module on disk, which the kernel then links instead of the whole
bitcode: once for the COMMON functions most kernels call (exp, log, sqrt,
powf, tanh, erf, ...; the compile worker's warm-up prepares it), and once per other set
of functions a kernel declares. It is the same code with the same constants,
folded earlier: the PTX has the same arithmetic instructions (LLVM may turn a
branch into a select), and on an H200 the results of 32 functions were the
same bits either way (bench/probes/bitwise_probe.py).

Anything unexpected (a query this does not know, a declaration it cannot
restate) falls back to Triton's own link of the original library. A prepared
library is cache data: its first line is the digest of the rest, checked before
it is linked (a damaged one is moved aside and prepared again).

JAX-free, like triton_run.py: the compile worker loads it by path.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import tempfile
import threading
import time
from typing import Callable, Sequence

FORMAT = 3   # 2: libraries keyed by function names; 3: sealed with their digest
MAX_LIBRARY_BYTES = 1 << 28
# `declare !dbg !3 float @__nv_expf(float)`: the return type is the last word before the name
_DECLARE = re.compile(r"^declare [^@\n]*?(\S+) @(__nv_\w+)\(([^)]*)\)", re.M)
_STRING = re.compile(r'^(@[\w.$]+) = [^\n]*?c"([^"]*?)\\00"', re.M)
_REFLECT_CALL = re.compile(
    r"(?:(?:tail|notail|musttail) )?call i32 @__nvvm_reflect\("
    r"ptr (?:addrspacecast \(ptr addrspace\(\d+\) )?(@[\w.$]+)(?: to ptr\))?\)(?: #\d+)?")
_LLVM_TO_MLIR = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16",
                 "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
                 "ptr": "!llvm.ptr"}

# The functions most kernels call, prepared together once per cache: a kernel
# whose libdevice calls are all here links this (parsed as text, quick) instead
# of preparing its own set (which links the whole bitcode, slow). Large or rare functions (trigonometry, powf's f64 twin, fmod,
# erfc, ...) would make every link parse them, so they get libraries of their own.
_F_UNARY = ("exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "tanh", "erf",
            "floor", "ceil", "rint", "round", "trunc")
COMMON: dict[str, tuple[str, list[str]]] = {
    **{f"__nv_{f}f": ("float", ["float"]) for f in _F_UNARY},
    "__nv_powf": ("float", ["float", "float"]),
    **{f"__nv_{f}": ("double", ["double"]) for f in ("exp", "log", "sqrt", "rsqrt")},
    "__nv_popc": ("i32", ["i32"]), "__nv_clz": ("i32", ["i32"]),
    "__nv_mulhi": ("i32", ["i32", "i32"]), "__nv_umulhi": ("i32", ["i32", "i32"]),
}
_digests: dict[tuple[str, int, int], str] = {}
_digest_lock = threading.Lock()


def link(llvm_mod, paths: Sequence[str], *, original_link: Callable, cache_dir: str,
         ftz: bool, arch: int) -> str:
  """Links `paths` into `llvm_mod`, through a prepared library where possible.

  Returns how it linked: "prepared" (from disk) or "prepared-new", with
  "-common" when through the library of COMMON functions; or "original"."""
  # names from the module's function list: printing the module to read the
  # declarations' types is slow for a large kernel (JAX's attention), so that happens
  # only when a new set of functions is prepared. A libdevice
  # function has one signature, so its name is enough to key a library.
  names = sorted(f.name for f in llvm_mod.get_functions()
                 if f.is_declaration() and f.name.startswith("__nv_"))
  if not names or not cache_dir:
    original_link(llvm_mod, list(paths))
    return "original"
  # cheapest first (bench/first_call/compile_path_cpu.py): this set's own library if there is one;
  # else the common one if it covers the set (text to parse); else prepare this set
  # (it links the bitcode)
  own = _path(cache_dir, paths, names, ftz, arch)
  prepared, how = (own, "prepared") if _whole(own) else (None, "")
  if prepared is None and set(names) <= COMMON.keys():
    prepared, how = _prepared(paths, COMMON, original_link, cache_dir, ftz, arch)
    how = how and how + "-common"
  if prepared is None:
    declared = _declarations(str(llvm_mod))
    prepared, how = _prepared(paths, declared, original_link, cache_dir, ftz, arch)
  if prepared is None:
    original_link(llvm_mod, list(paths))
    return "original"
  try:
    original_link(llvm_mod, [prepared])
  except Exception:  # noqa: BLE001 - an unreadable prepared file (a cut write, a full
    # disk, another LLVM): drop it, link the original; the next compile prepares again
    _remove(prepared)
    original_link(llvm_mod, list(paths))
    return "original"
  return how


def _remove(path: str) -> None:
  try:
    os.unlink(path)
  except OSError:
    pass


def _path(cache_dir: str, paths, functions, ftz: bool, arch: int) -> str:
  return os.path.join(cache_dir, f"{_key(paths, functions, ftz, arch)}.ll")


def _prepared(paths, functions, original_link, cache_dir: str, ftz: bool, arch: int):
  """(path of the prepared library for `functions`, "prepared" | "prepared-new"),
  or (None, "") where it cannot be prepared."""
  path = _path(cache_dir, paths, functions, ftz, arch)
  if _whole(path):
    return path, "prepared"
  try:
    text = _prepare(paths, functions, original_link, ftz, arch)
  except Exception:  # noqa: BLE001 - whatever fails here, Triton's own link still works
    text = None
  if text is None:
    return None, ""
  try:
    _write_atomically(path, text)
  except OSError:          # a read-only or full cache: link Triton's way
    return None, ""
  return path, "prepared-new"


def _declarations(module_text: str) -> dict[str, tuple[str, list[str]]]:
  """libdevice functions the kernel declares: name -> (return type, argument types)."""
  out = {}
  for ret, name, args in _DECLARE.findall(module_text):
    types = [a.strip().split(" ")[0] for a in args.split(",") if a.strip()]
    out[name] = (ret, types)
  return out


def _key(paths, names, ftz: bool, arch: int) -> str:
  """Content address of the library of `names` (any iterable of function names)."""
  parts = [f"format={FORMAT}", f"ftz={int(ftz)}", f"arch={arch}", _triton_version()]
  parts += [_file_digest(p) for p in paths]
  parts += sorted(names)
  return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _prepare(paths, declared, original_link, ftz: bool, arch: int) -> str | None:
  """The declared functions linked alone, their reflect queries answered, as LLVM text."""
  # lazy: keeps triton out of this module's import (start-up time)
  from triton._C.libtriton import ir, llvm
  lines = []
  for name, (ret, args) in sorted(declared.items()):
    mlir_args = [_LLVM_TO_MLIR.get(a) for a in args]
    mlir_ret = "!llvm.void" if ret == "void" else _LLVM_TO_MLIR.get(ret)
    if mlir_ret is None or None in mlir_args:
      return None
    result = "" if ret == "void" else f" -> {mlir_ret}"
    lines.append(f"  llvm.func @{name}({', '.join(mlir_args)}){result}")
  context = ir.context()
  ir.load_dialects(context)
  with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
    f.write("module {\n" + "\n".join(lines) + "\n}\n")
  try:
    module = ir.parse_mlir_module(f.name, context)
  finally:
    os.unlink(f.name)
  llvm_context = llvm.context()
  library = llvm.to_module(module, llvm_context)
  original_link(library, list(paths))
  return answer_reflect(str(library), ftz=ftz, arch=arch)


def answer_reflect(text: str, *, ftz: bool, arch: int) -> str | None:
  """`text` with every __nvvm_reflect call replaced by NVVMReflect's answer, and
  every function made linkable (Triton makes linked functions internal again).
  None if a query is not one NVVMReflect answers from what we know."""
  strings = dict(_STRING.findall(text))
  # NVVMReflect's answers in Triton's LLVM: FTZ from the module flag Triton sets
  # for enable_reflect_ftz, the architecture as sm * 10, and 0 for __CUDA_PREC_SQRT
  # (no module flag: __nv_sqrtf is sqrt.approx.f32 either way, as in XLA, which
  # compiles with -nvptx-prec-sqrtf32=0). test_libdevice_link compares the PTX.
  answers = {"__CUDA_FTZ": int(bool(ftz)), "__CUDA_ARCH": arch * 10, "__CUDA_PREC_SQRT": 0}
  unknown = []

  def answer(m: re.Match) -> str:
    value = answers.get(strings.get(m.group(1), ""))
    if value is None:
      unknown.append(m.group(0))
      return m.group(0)
    return f"add i32 0, {value}"

  text = _REFLECT_CALL.sub(answer, text)
  if unknown or re.search(r"call [^\n]*@__nvvm_reflect\(", text):
    return None
  return re.sub(r"^define internal ", "define ", text, flags=re.M)


def _file_digest(path: str) -> str:
  st = os.stat(path)
  stamp = (path, st.st_mtime_ns, st.st_size)
  with _digest_lock:
    digest = _digests.get(stamp)
    if digest is None:
      with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
      _digests[stamp] = digest
  return digest


@functools.lru_cache(maxsize=1)
def _triton_version() -> str:
  return f"triton={_triton_compat().triton_release()}"


def _triton_compat():
  """triton_compat.py, beside this file: through the package, or by path in the compile
  worker, which loads both files without one (triton_run._sibling)."""
  if __package__:
    return importlib.import_module(f"{__package__}.triton_compat")
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triton_compat.py")
  spec = importlib.util.spec_from_file_location("pallas_prof_triton_compat", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


SEAL = "; pallas-prof sha256 "    # a prepared library's first line: an LLVM comment


def _write_atomically(path: str, text: str) -> None:
  """Writes a prepared library whole or not at all, in an owner-only folder, sealed: its
  first line the digest of the rest, which _whole() checks before it is linked."""
  files = _safe_files()
  files.private_dir(os.path.dirname(path))
  files.write_atomic(path, f"{SEAL}{hashlib.sha256(text.encode()).hexdigest()}\n{text}")


def _whole(path: str) -> bool:
  """Whether the prepared library at `path` is there as it was written; a damaged one (its
  digest line not that of the rest, or not a regular file) is moved aside."""
  files = _safe_files()
  try:
    data = files.read_regular(path, MAX_LIBRARY_BYTES)
  except FileNotFoundError:
    return False
  except OSError:
    data = b""
  head, _, body = data.partition(b"\n")
  if head == f"{SEAL}{hashlib.sha256(body).hexdigest()}".encode():
    return True
  try:
    os.rename(path, f"{path}.bad-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
  except OSError:
    pass
  return False


def _safe_files():
  """pallas_prof/safe_files.py: through the package, or by path in the compile worker,
  which loads this module without it (safe_files imports the standard library only)."""
  global _safe_files_module
  if _safe_files_module is None:
    if __package__:
      # lazy: the compile worker runs this file by its path, without the package
      from ... import safe_files as module
    else:
      here = os.path.dirname(os.path.abspath(__file__))
      spec = importlib.util.spec_from_file_location(
          "pallas_prof_safe_files", os.path.join(here, os.pardir, os.pardir, "safe_files.py"))
      module = importlib.util.module_from_spec(spec)
      spec.loader.exec_module(module)
    _safe_files_module = module
  return _safe_files_module


_safe_files_module = None
