"""What jaxlib's custom call gets (issue #17 part 5): the kernel's code without
line info and no TTIR, while the CompiledKernel (the profiler's PTX and cubin)
keeps its line info.

The stripped PTX goes through ptxas here (the one in Triton's wheel, which the
CPU machine has too), for kernels of each kind that broke bf75fd8's version:
a stack frame (`.local ... __local_depot0`, from printf and from libdevice's
sin/cos argument reduction), libdevice calls, a dot, atomics. The machine code
must be the same as from the whole PTX.
"""
from __future__ import annotations

import os
import re
import subprocess

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import compat, kernel_registry
from pallas_prof.backend.running import launch
from pallas_prof.backend.compiling import triton_compat
from pallas_prof.backend.compiling.compile import compile_kernel


def _compiled(kernel, out_shape, *args, grid=(), in_specs=None, out_specs=None, name, **cp):
  kernel_registry.clear()
  specs = {"in_specs": in_specs, "out_specs": out_specs} if in_specs else {}
  call = pl.pallas_call(kernel, out_shape=out_shape, grid=grid, name=name,
                        compiler_params=pallas_prof.CompilerParams(**cp), **specs)
  jax.jit(call).lower(*args)
  return compile_kernel(kernel_registry.find(name)[-1].generated, ("cuda", 90))


def _layer_norm_5120():
  """The kernel of the issue's measurement: a 5120-wide layer norm, bf16."""
  def kernel(x_ref, w_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    centered = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    o_ref[...] = (centered * jax.lax.rsqrt(var + 1e-5) * w_ref[...]).astype(o_ref.dtype)

  x = jax.ShapeDtypeStruct((64, 5120), jnp.bfloat16)
  w = jax.ShapeDtypeStruct((1, 5120), jnp.float32)
  return _compiled(kernel, x, x, w, grid=(64,), name="ln5120", num_warps=8,
                   in_specs=[pl.BlockSpec((1, 5120), lambda i: (i, 0)),
                             pl.BlockSpec((1, 5120), lambda i: (0, 0))],
                   out_specs=pl.BlockSpec((1, 5120), lambda i: (i, 0)))


def _debug_print():
  def kernel(x_ref, o_ref):
    pl.debug_print("total is", jnp.sum(x_ref[...]))
    o_ref[...] = x_ref[...] + 1
  x = jax.ShapeDtypeStruct((2, 4), jnp.int32)
  return _compiled(kernel, x, x, name="payload_print")


def _sin_cos_f32():
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.sin(x_ref[...]) * jnp.cos(x_ref[...]) + jnp.exp(x_ref[...])
  x = jax.ShapeDtypeStruct((8, 128), jnp.float32)
  return _compiled(kernel, x, x, name="payload_sincos")


def _dot():
  def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
  a = jax.ShapeDtypeStruct((64, 64), jnp.bfloat16)
  return _compiled(kernel, jax.ShapeDtypeStruct((64, 64), jnp.float32), a, a, name="payload_dot")


def _atomic():
  from pallas_prof import triton as plgpu

  def kernel(x_ref, o_ref):
    plgpu.atomic_add(o_ref, (slice(None),), x_ref[...])
  x = jax.ShapeDtypeStruct((128,), jnp.float32)
  return _compiled(kernel, x, x, name="payload_atomic")


KERNELS = {"layer_norm_5120": _layer_norm_5120, "debug_print": _debug_print,
           "sin_cos_f32": _sin_cos_f32, "dot": _dot, "atomic": _atomic}


@pytest.fixture(scope="module")
def compiled():
  return {name: make() for name, make in KERNELS.items()}


def _tool(name: str) -> str:
  import triton
  path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
  if not os.path.exists(path):
    pytest.skip(f"no {name} in the triton wheel")
  return path


@pytest.fixture(autouse=True)
def _no_line_info_asked(monkeypatch):
  for name in ("JAX_TRITON_PTXAS_EXTRA_FLAGS", "JAX_TRITON_PTXAS_DEVICE_DEBUG",
               launch.JAXLIB_PTX_ENV):
    monkeypatch.delenv(name, raising=False)


def _sass(ptx: str, path) -> tuple[str, int]:
  """ptxas as jaxlib runs it (sm_90a, no -lineinfo): the disassembled code and the cubin's size."""
  arch = re.search(r"^\.target\s+(\w+)", ptx, re.M).group(1)
  path.with_suffix(".ptx").write_text(ptx)
  # the ptxas Triton itself runs for this target (3.9: ptxas-blackwell, whose
  # PTX ISA the wheel's plain ptxas rejects)
  ptxas = triton_compat.ptxas_path(int(re.search(r"\d+", arch).group(0)))
  done = subprocess.run([ptxas, f"-arch={arch}", str(path.with_suffix(".ptx")), "-o",
                         str(path.with_suffix(".cubin"))], capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  code = subprocess.run([_tool("nvdisasm"), "-c", str(path.with_suffix(".cubin"))], check=True,
                        capture_output=True, text=True).stdout
  return code, path.with_suffix(".cubin").stat().st_size


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_ptxas_makes_the_same_code_of_the_stripped_ptx(compiled, name, tmp_path):
  full = compiled[name].ptx
  small = launch.jaxlib_ptx(full)
  assert ".loc" in full and ".debug_info" in full
  assert not re.search(r"^\s*\.(loc|file)\s", small, re.M) and ".section" not in small
  assert "//" not in small
  assert len(small) < (0.6 if name == "layer_norm_5120" else 0.9) * len(full)
  sass_full, size_full = _sass(full, tmp_path / "full")
  sass_small, size_small = _sass(small, tmp_path / "small")
  assert "EXIT" in sass_small and sass_full == sass_small
  # the full PTX gives ptxas a line table even without -lineinfo; the small one none
  assert size_small < size_full


def test_a_stack_frame_declaration_is_kept(compiled):
  """bf75fd8 dropped `.local .align 8 .b8 __local_depot0[16];` (it starts with
  ".loc"): ptxas then rejected every kernel with a stack frame."""
  for name in ("debug_print", "sin_cos_f32"):
    full = compiled[name].ptx
    declared = [ln.strip() for ln in full.splitlines() if "__local_depot" in ln and ".local" in ln]
    assert declared, f"{name} has no stack frame: the test lost its point"
    small = launch.jaxlib_ptx(full)
    assert all(d in small for d in declared)


def test_unexpected_sections_and_strings_leave_the_ptx_alone():
  odd = ".version 8.7\n.section .nv.constant0 {\n.b8 1\n}\n"
  assert launch.jaxlib_ptx(odd) == odd
  unbalanced = ".version 8.7\n\t.section\t.debug_info\n\t{\n.b8 1\n"
  assert launch.jaxlib_ptx(unbalanced) == unbalanced
  text = '.pragma "a//b"; // a comment\n'
  assert launch.jaxlib_ptx(text) == '.pragma "a//b";\n'


def test_the_custom_call_gets_the_small_ptx_and_the_artifact_keeps_its_own(compiled,
                                                                           monkeypatch):
  ck = compiled["layer_norm_5120"]
  before = (ck.ptx, ck.asm.get("ttir"))
  made = {}

  class FakeGpuTriton:             # jaxlib's gpu_triton, which a CPU-only jaxlib lacks
    def TritonKernel(self, name, num_warps, num_ctas, shared, ptx, ttir, cc, *scratch):
      made.update(ptx=ptx, ttir=ttir, name=name)
      return "kernel"

    def create_array_parameter(self, nbytes, divisibility):
      return (nbytes, divisibility)

    def TritonKernelCall(self, kernel, gx, gy, gz, params):
      return (kernel, (gx, gy, gz), params)

  monkeypatch.setattr(compat, "gpu_triton", lambda: FakeGpuTriton())
  launch.triton_kernel_call(ck)
  assert made["ptx"] == launch.jaxlib_ptx(ck.ptx) and made["ttir"] == ""
  assert (ck.ptx, ck.asm.get("ttir")) == before        # the profiler's line info untouched
  assert ".loc" in ck.ptx and before[1]
  # a user who asks jaxlib's ptxas for line info, or for the whole PTX, gets it whole
  monkeypatch.setenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", "-O3 -lineinfo")
  launch.triton_kernel_call(ck)
  assert made["ptx"] == ck.ptx
  monkeypatch.delenv("JAX_TRITON_PTXAS_EXTRA_FLAGS")
  monkeypatch.setenv(launch.JAXLIB_PTX_ENV, "whole")
  launch.triton_kernel_call(ck)
  assert made["ptx"] == ck.ptx
