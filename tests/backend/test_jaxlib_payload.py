"""What jaxlib's custom call gets: the kernel's code without line info, while
the CompiledKernel (the profiler's PTX and cubin) keeps it (issue #17 part 5)."""
from __future__ import annotations

import os
import re
import subprocess

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import compat, launch, registry
from pallas_prof.backend.compile import compile_kernel


def _layer_norm_5120():
  """The kernel of the issue's measurement: a 5120-wide layer norm, bf16."""
  def kernel(x_ref, w_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    centered = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    o_ref[...] = (centered * jax.lax.rsqrt(var + 1e-5) * w_ref[...]).astype(o_ref.dtype)

  def call(x, w):
    return pl.pallas_call(kernel, grid=(x.shape[0],),
                          in_specs=[pl.BlockSpec((1, 5120), lambda i: (i, 0)),
                                    pl.BlockSpec((1, 5120), lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((1, 5120), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pallas_prof.CompilerParams(num_warps=8))(x, w)

  registry.clear()
  jax.jit(call).lower(jnp.ones((64, 5120), jnp.bfloat16), jnp.ones((1, 5120), jnp.float32))
  (rec,) = registry.kernels()
  return compile_kernel(rec.generated, ("cuda", 90))


def _tool(name: str) -> str:
  import triton
  path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
  if not os.path.exists(path):
    pytest.skip(f"no {name} in the triton wheel")
  return path


@pytest.fixture(scope="module")
def layer_norm():
  return _layer_norm_5120()


def test_jaxlib_gets_the_same_code_without_line_info(layer_norm, tmp_path, monkeypatch):
  monkeypatch.delenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", raising=False)
  monkeypatch.delenv("JAX_TRITON_PTXAS_DEVICE_DEBUG", raising=False)
  ck = layer_norm
  full, small = ck.ptx, launch.jaxlib_ptx(ck.ptx)
  assert ".loc" in full and ".debug_info" in full
  for gone in (".loc", ".file", ".section", "//"):
    assert gone not in small, gone
  assert len(small) < 0.6 * len(full)
  # ptxas as jaxlib runs it (no -lineinfo): the same machine code from both texts
  arch = re.search(r"^\.target\s+(\w+)", full, re.M).group(1)
  sass = {}
  for name, text in (("full", full), ("small", small)):
    (tmp_path / f"{name}.ptx").write_text(text)
    subprocess.run([_tool("ptxas"), f"-arch={arch}", str(tmp_path / f"{name}.ptx"), "-o",
                    str(tmp_path / f"{name}.cubin")], check=True, capture_output=True)
    sass[name] = subprocess.run([_tool("nvdisasm"), "-c", str(tmp_path / f"{name}.cubin")],
                                check=True, capture_output=True, text=True).stdout
  assert sass["full"] == sass["small"] and "EXIT" in sass["small"]
  # the full PTX gives ptxas a line table even without -lineinfo; the small one none
  assert (tmp_path / "small.cubin").stat().st_size < (tmp_path / "full.cubin").stat().st_size


def test_the_custom_call_gets_the_small_ptx_and_the_artifact_keeps_its_own(layer_norm,
                                                                           monkeypatch):
  ck = layer_norm
  before = (ck.ptx, ck.cubin)
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
  monkeypatch.delenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", raising=False)
  launch.triton_kernel_call(ck)
  assert made["ptx"] == launch.jaxlib_ptx(ck.ptx) and made["ttir"] == ""
  assert (ck.ptx, ck.cubin) == before               # the profiler's line info untouched
  # a user who asks jaxlib's ptxas for line info gets the PTX whole
  monkeypatch.setenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", "-O3 -lineinfo")
  launch.triton_kernel_call(ck)
  assert made["ptx"] == ck.ptx


@pytest.mark.gpu
def test_on_the_gpu_jaxlib_runs_the_small_payload_and_computes_the_same(monkeypatch):
  """jaxlib (the real one) takes the PTX without line info and no TTIR, and the
  kernel computes what XLA computes; the payload is printed for the record."""
  import zlib

  import numpy as np
  monkeypatch.delenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", raising=False)
  ck = _layer_norm_5120()
  call = launch.triton_kernel_call(ck)
  proto = call.to_proto(ck.name, b"")
  assert b".loc" not in proto and b".debug_info" not in proto and b"tt.func" not in proto
  full = len(zlib.compress(ck.ptx.encode() + ck.asm["ttir"].encode()))
  print(f"payload: {len(zlib.compress(proto))} bytes compressed (PTX + TTIR whole: {full})")
  rng = np.random.default_rng()
  x = jnp.asarray(rng.standard_normal((64, 5120)), jnp.bfloat16)
  w = jnp.asarray(rng.standard_normal((1, 5120)), jnp.float32)
  def kernel(x_ref, w_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    centered = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    o_ref[...] = (centered * jax.lax.rsqrt(var + 1e-5) * w_ref[...]).astype(o_ref.dtype)

  spec = pl.BlockSpec((1, 5120), lambda i: (i, 0))
  got = jax.jit(lambda a, b: pl.pallas_call(       # pallas-prof's CompilerParams select it
      kernel, grid=(64,), in_specs=[spec, pl.BlockSpec((1, 5120), lambda i: (0, 0))],
      out_specs=spec, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype),
      compiler_params=pallas_prof.CompilerParams(num_warps=8))(a, b))(x, w)
  x32 = np.asarray(x, np.float32)
  c = x32 - x32.mean(-1, keepdims=True)
  ref = c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * np.asarray(w)
  np.testing.assert_allclose(np.asarray(got, np.float32), ref, rtol=2e-2, atol=2e-2)
