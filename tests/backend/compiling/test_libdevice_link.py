"""libdevice linked with its __nvvm_reflect queries answered before LLVM's O3
(backend/compiling/libdevice_link.py): the same code as Triton's own link, compiled faster.

Compiles for sm_90 on a machine without a GPU. Bit-level agreement with XLA on
the GPU is bench/probes/bitwise_probe.py's job; here the PTX of both links is compared:
the same arithmetic instructions, as a multiset. (With the queries answered
before O3, LLVM turns some of libdevice's branches into selects, so the
comparisons, selects and moves that steer the control flow may differ.)
"""
from __future__ import annotations

import collections
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend.compiling import compile as pcompile, libdevice_link, triton_run
from pallas_prof.backend import kernel_registry

UNARY = [jnp.exp, jnp.exp2, jnp.expm1, jnp.log, jnp.log1p, jnp.sqrt, jax.lax.rsqrt, jnp.cbrt,
         jnp.sin, jnp.cos, jnp.tan, jnp.arcsin, jnp.arccos, jnp.arctan, jnp.sinh, jnp.cosh,
         jnp.tanh, jnp.arcsinh, jnp.arccosh, jnp.arctanh, jax.lax.erf, jax.lax.erfc,
         jax.lax.lgamma, jax.nn.sigmoid]


def _many_functions(x_ref, y_ref, o_ref):
  x, y = x_ref[...], y_ref[...]
  acc = jnp.power(x, y) + jnp.arctan2(x, y) + jnp.fmod(x, y)
  for fn in UNARY:
    acc = acc + fn(x)
  o_ref[...] = acc


def _softmax_row(x_ref, o_ref):
  x = x_ref[...]
  e = jnp.exp(x - jnp.max(x))
  o_ref[...] = e / jnp.sum(e)


def _lower(kernel, *shapes):
  kernel_registry.clear()
  jax.clear_caches()
  call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shapes[0], jnp.float32),
                        compiler_params=pallas_prof.CompilerParams(num_warps=4))
  jax.jit(call).lower(*(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
  (rec,) = kernel_registry.kernels()
  return rec.generated


def _compile(gk, *, prepared: bool, monkeypatch, tmp_path):
  monkeypatch.setenv("PALLAS_PROF_PREPARED_LIBDEVICE", "1" if prepared else "0")
  request = pcompile.compile_request(gk, ("cuda", 90), need_cubin=True)
  if prepared:
    request["libdevice_cache"] = str(tmp_path / "libdevice")
  result = triton_run.run_triton(request)
  assert "error" not in result, result.get("error")
  return result


_STEERING = ("setp.", "selp.", "mov.", "bra", "not.pred", "and.pred", "or.pred", "xor.pred")


def _arithmetic(ptx: str) -> collections.Counter:
  """The PTX's instructions by opcode, less those that only steer control flow."""
  body = ptx[ptx.index(".entry"):]
  ops = []
  for line in body.splitlines():
    line = re.sub(r"^@!?%p\d+\s+", "", line.strip())
    if not line or line.startswith((".", "//", "$", "{", "}")) or line.endswith(":"):
      continue
    op = line.split()[0].rstrip(";")
    if not op.startswith(_STEERING):
      ops.append(op)
  return collections.Counter(ops)


def test_prepared_link_gives_the_same_instructions(monkeypatch, tmp_path):
  gk = _lower(_many_functions, (256,), (256,))
  original = _compile(gk, prepared=False, monkeypatch=monkeypatch, tmp_path=tmp_path)
  prepared = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert original["libdevice_link"] is None          # Triton's own link
  assert prepared["libdevice_link"] == "prepared-new"
  a, b = _arithmetic(original["asm"]["ptx"]), _arithmetic(prepared["asm"]["ptx"])
  assert sum(a.values()) > 500          # the functions really were inlined
  assert a["fma.rn.f32"] > 100 and a["ex2.approx.ftz.f32"] > 0
  assert a == b, {op: (a[op], b[op]) for op in set(a) | set(b) if a[op] != b[op]}
  # Triton's link leaves the reflect queries to NVPTX's code generation; ours
  # answers them before O3
  assert "call i32 @__nvvm_reflect" in original["asm"]["llir"]
  assert "__nvvm_reflect" not in prepared["asm"]["llir"]
  (library,) = (tmp_path / "libdevice").glob("*.ll")
  text = library.read_text()
  assert "call i32 @__nvvm_reflect" not in text
  for name in ("__nv_powf", "__nv_atan2f", "__nv_fmodf", "__nv_expf", "__nv_lgammaf"):
    assert re.search(rf"^define [^\n]*@{name}\(", text, re.M), name


def test_triton_s_own_libdevice_is_prepared_too(monkeypatch, tmp_path):
  """Without XLA's libdevice (PALLAS_PROF_LIBDEVICE=triton, or no CUDA installed)
  Triton links the one in its wheel: that link is prepared the same way."""
  from pallas_prof.backend import compat
  monkeypatch.setenv("PALLAS_PROF_LIBDEVICE", "triton")
  compat.xla_libdevice_path.cache_clear()
  try:
    gk = _lower(_softmax_row, (1024,))
    assert "extern_libs" not in pcompile.compile_options(gk)
    result = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  finally:
    compat.xla_libdevice_path.cache_clear()
  assert result["libdevice_link"] == "prepared-new-common"
  assert "__nvvm_reflect" not in result["asm"]["llir"]


def _lgamma_kernel(x_ref, o_ref):
  o_ref[...] = jax.lax.lgamma(x_ref[...]) + jnp.exp(x_ref[...])


def test_common_functions_share_one_library_and_others_get_their_own(monkeypatch, tmp_path):
  """Kernels calling only common functions (exp here) link the common library,
  prepared once; a kernel calling lgamma gets a library of its own functions;
  an own library, once there, is preferred (it links faster)."""
  softmax = _lower(_softmax_row, (1024,))
  first = _compile(softmax, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  second = _compile(softmax, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert (first["libdevice_link"], second["libdevice_link"]) == (
      "prepared-new-common", "prepared-common")
  assert first["asm"]["ptx"] == second["asm"]["ptx"]
  (common,) = (tmp_path / "libdevice").glob("*.ll")
  assert all(f"@{name}(" in common.read_text() for name in libdevice_link.COMMON)

  lgamma = _lower(_lgamma_kernel, (1024,))
  own = _compile(lgamma, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert own["libdevice_link"] == "prepared-new"
  assert len(list((tmp_path / "libdevice").glob("*.ll"))) == 2

  # the softmax's own set, prepared by hand, now wins over the common library
  declared = {"__nv_expf": ("float", ["float"])}
  import os
  import triton
  from triton._C.libtriton import llvm
  options = pcompile.compile_request(softmax, ("cuda", 90))["options"]
  paths = [path for _, path in options.get("extern_libs", ())] or [os.path.join(
      os.path.dirname(triton.__file__), "backends", "nvidia", "lib", "libdevice.10.bc")]
  text = libdevice_link._prepare(paths, declared, llvm.link_extern_libs, False, 90)
  libdevice_link._write_atomically(
      libdevice_link._path(str(tmp_path / "libdevice"), paths, declared, False, 90), text)
  third = _compile(softmax, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert third["libdevice_link"] == "prepared"
  assert _arithmetic(third["asm"]["ptx"]) == _arithmetic(first["asm"]["ptx"])


def test_the_common_library_gives_the_same_instructions(monkeypatch, tmp_path):
  gk = _lower(_softmax_row, (1024,))
  original = _compile(gk, prepared=False, monkeypatch=monkeypatch, tmp_path=tmp_path)
  common = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert common["libdevice_link"] == "prepared-new-common"
  assert _arithmetic(original["asm"]["ptx"]) == _arithmetic(common["asm"]["ptx"])


def test_the_switch_is_part_of_the_compile_key(monkeypatch):
  gk = _lower(_softmax_row, (1024,))
  keys = set()
  for value in ("1", "0"):
    monkeypatch.setenv("PALLAS_PROF_PREPARED_LIBDEVICE", value)
    keys.add(pcompile.compile_key(gk, ("cuda", 90)))
    assert bool(pcompile.compile_request(gk, ("cuda", 90))["libdevice_cache"]) == (value == "1")
  assert len(keys) == 2


LIBRARY = """\
@.str = private unnamed_addr constant [11 x i8] c"__CUDA_FTZ\\00", align 1
@.str.1 = private unnamed_addr constant [12 x i8] c"__CUDA_ARCH\\00", align 1

define internal float @__nv_f(float %a) #0 {
  %1 = call i32 @__nvvm_reflect(ptr @.str) #7
  %2 = tail call i32 @__nvvm_reflect(ptr addrspacecast (ptr addrspace(4) @.str.1 to ptr))
  ret float %a
}
"""


@pytest.mark.parametrize("ftz,arch,expected", [(False, 90, ("0", "900")), (True, 80, ("1", "800"))])
def test_reflect_queries_get_nvvm_reflects_answers(ftz, arch, expected):
  text = libdevice_link.answer_reflect(LIBRARY, ftz=ftz, arch=arch)
  assert "call i32 @__nvvm_reflect" not in text
  assert re.findall(r"add i32 0, (\d+)", text) == list(expected)
  assert "define float @__nv_f(" in text     # linkable by Triton's LinkOnlyNeeded


def test_an_unknown_reflect_query_falls_back_to_the_original_link():
  text = LIBRARY.replace("__CUDA_ARCH", "__CUDA_SOMETHING")
  assert libdevice_link.answer_reflect(text, ftz=False, arch=90) is None
  assert libdevice_link.answer_reflect(text.replace("ptr @.str)", "ptr %p)"), ftz=False,
                                       arch=90) is None


def test_declarations_are_read_with_their_signatures():
  text = ("declare !dbg !3 float @__nv_expf(float)\n"
          "declare double @__nv_pow(double noundef, double)\n"
          "declare i32 @other(i32)\n")
  assert libdevice_link._declarations(text) == {"__nv_expf": ("float", ["float"]),
                                               "__nv_pow": ("double", ["double", "double"])}


def test_an_unreadable_prepared_library_is_dropped_not_fatal(monkeypatch, tmp_path):
  """A library whose seal holds but which LLVM cannot read (another LLVM's text) is dropped
  at the link, which falls back to Triton's own; the next compile prepares it again."""
  gk = _lower(_softmax_row, (1024,))
  first = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  (library,) = (tmp_path / "libdevice").glob("*.ll")
  libdevice_link._write_atomically(str(library), "this is not LLVM IR")
  second = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert second["libdevice_link"] == "original"
  assert not library.exists()
  assert _arithmetic(second["asm"]["ptx"]) == _arithmetic(first["asm"]["ptx"])
  third = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert third["libdevice_link"] == "prepared-new-common"


def test_a_damaged_prepared_library_is_never_linked(monkeypatch, tmp_path):
  """A prepared library is checked against the digest on its first line before it is
  linked: one with a constant changed (well-formed LLVM, other numbers) is moved aside and
  prepared again, and the kernel gets the instructions of the whole one."""
  gk = _lower(_softmax_row, (1024,))
  first = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  (library,) = (tmp_path / "libdevice").glob("*.ll")
  whole = library.read_text()
  assert whole.startswith(libdevice_link.SEAL)
  # a float constant, as this LLVM writes it (hexadecimal or decimal)
  constant = re.search(r"float (0x[0-9A-F]{16}|-?\d\.\d{6}e[+-]\d\d)\b", whole).group(1)
  candidates = (("0x3FF0000000000000", "0x4000000000000000") if constant.startswith("0x")
                else ("1.500000e+00", "2.500000e+00"))
  changed = next(c for c in candidates if c != constant)
  library.write_text(whole.replace(constant, changed, 1))
  second = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert second["libdevice_link"] == "prepared-new-common"
  assert second["asm"]["ptx"] == first["asm"]["ptx"]
  assert library.read_text() == whole
  (aside,) = (tmp_path / "libdevice").glob("*.ll.bad-*")
  assert aside.read_text() == whole.replace(constant, changed, 1)


def test_a_cache_it_cannot_write_means_triton_s_own_link(monkeypatch, tmp_path):
  gk = _lower(_softmax_row, (1024,))
  blocked = tmp_path / "libdevice"
  blocked.write_text("a file where the folder should be")     # makedirs fails
  result = _compile(gk, prepared=True, monkeypatch=monkeypatch, tmp_path=tmp_path)
  assert result["libdevice_link"] == "original"
  assert ".entry" in result["asm"]["ptx"]
