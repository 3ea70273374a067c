"""Compile options that decide bit-level agreement with XLA: FMA contraction and
which libdevice is linked. (What each changes on the GPU was measured with
bench/probes/bitwise_probe.py; these tests pin the choices and their plumbing.)"""
from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import compat, kernel_registry
from pallas_prof.backend.compiling import compile as pcompile, triton_compat


def _lower(kernel, params=None, n=256):
  kernel_registry.clear()
  jax.clear_caches()
  call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
                        compiler_params=params or pallas_prof.CompilerParams())
  jax.jit(call).lower(jnp.ones(n), jnp.ones(n))
  (rec,) = kernel_registry.kernels()
  return rec.generated


def _mul_add(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] * y_ref[...] + x_ref[...]


def _ptx_body(gk) -> str:
  ptx = pcompile.compile_kernel(gk, ("cuda", 90)).ptx
  return ptx[ptx.index(".entry"):]


def test_a_multiply_and_an_add_stay_two_roundings_by_default():
  gk = _lower(_mul_add)
  assert pcompile.compile_options(gk)["enable_fp_fusion"] is False
  body = _ptx_body(gk)
  assert re.search(r"\bmul\.rn\.f32", body) and re.search(r"\badd\.rn\.f32", body), body[-1500:]
  assert "fma.rn.f32" not in body


def test_compiler_params_opt_back_into_fma_contraction():
  gk = _lower(_mul_add, pallas_prof.CompilerParams(enable_fp_fusion=True))
  assert gk.enable_fp_fusion and "enable_fp_fusion=True" in gk.source.splitlines()[1]
  assert pcompile.compile_options(gk)["enable_fp_fusion"] is True
  assert "fma.rn.f32" in _ptx_body(gk)
  plain = _lower(_mul_add)
  assert pcompile.compile_key(gk, ("cuda", 90)) != pcompile.compile_key(plain, ("cuda", 90))


def test_libdevice_follows_xla_and_can_be_overridden(monkeypatch, tmp_path):
  fake_root = tmp_path / "cuda"
  (fake_root / "nvvm" / "libdevice").mkdir(parents=True)
  lib = fake_root / "nvvm" / "libdevice" / "libdevice.10.bc"
  lib.write_bytes(b"not really bitcode")
  compat.xla_libdevice_path.cache_clear()
  try:
    monkeypatch.setenv("XLA_FLAGS", f"--xla_gpu_cuda_data_dir={fake_root}")
    assert compat.xla_libdevice_path() == str(lib)
    compat.xla_libdevice_path.cache_clear()
    monkeypatch.setenv("PALLAS_PROF_LIBDEVICE", "triton")
    assert compat.xla_libdevice_path() is None
    gk = _lower(_mul_add)
    assert "extern_libs" not in pcompile.compile_options(gk)
    compat.xla_libdevice_path.cache_clear()
    monkeypatch.setenv("PALLAS_PROF_LIBDEVICE", str(lib))
    assert pcompile.compile_options(gk)["extern_libs"] == (("libdevice", str(lib)),)
  finally:
    compat.xla_libdevice_path.cache_clear()


def test_the_libdevice_file_is_part_of_the_compile_key(monkeypatch, tmp_path):
  gk = _lower(_mul_add)
  keys = []
  for content in (b"one", b"two"):
    lib = tmp_path / f"libdevice-{content.decode()}.bc"
    lib.write_bytes(content)
    monkeypatch.setenv("PALLAS_PROF_LIBDEVICE", str(lib))
    compat.xla_libdevice_path.cache_clear()
    keys.append(pcompile.compile_key(gk, ("cuda", 90)))
  compat.xla_libdevice_path.cache_clear()
  assert keys[0] != keys[1]


CUDA_LIBDEVICE = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"


@pytest.mark.skipif(not os.path.isfile(CUDA_LIBDEVICE), reason="no CUDA libdevice on this machine")
def test_a_libdevice_call_compiles_against_the_cuda_libdevice(monkeypatch):
  monkeypatch.delenv("PALLAS_PROF_LIBDEVICE", raising=False)
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  compat.xla_libdevice_path.cache_clear()

  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.power(jnp.abs(x_ref[...]), y_ref[...])
  try:
    gk = _lower(kernel)
    assert pcompile.compile_options(gk)["extern_libs"][0][1].endswith("libdevice.10.bc")
    with_cuda = _ptx_body(gk)
    monkeypatch.setenv("PALLAS_PROF_LIBDEVICE", "triton")
    compat.xla_libdevice_path.cache_clear()
    with_triton = _ptx_body(gk)
  finally:
    compat.xla_libdevice_path.cache_clear()
  if triton_compat.triton_version() >= (3, 9):
    # Triton 3.9's wheel ships a libdevice whose powf compiles as CUDA's does
    # (checked with triton.compile alone): the PTX cannot tell them apart
    assert with_cuda == with_triton
  else:
    # the two libdevices implement powf differently (Triton's through ex2/lg2.approx):
    # the PTX shows which one was linked
    assert "ex2.approx" in with_triton
    assert with_cuda != with_triton


@pytest.mark.parametrize("field,value,words", [
    ("num_warps", 3, "power of two from 1 to 32"), ("num_warps", 0, "power of two"),
    ("num_warps", 64, "at most 1024"), ("num_warps", 4.0, "power of two"),
    ("num_stages", 0, "integer >= 1"), ("launch_group", -2, "integer >= 0"),
    ("compute_capability", 9, "like 80 or 90"), ("zero_outputs", (-1,), "output indices")])
def test_compiler_params_refuse_what_triton_or_cuda_would_refuse_later(field, value, words):
  """At the user's line, with the field and what it takes: num_warps=3 otherwise ran
  on the CPU and failed inside Triton's GPU compile, num_warps=64 compiled a block of
  2048 threads CUDA cannot launch, launch_group=-2 was ignored without a word."""
  import pallas_prof
  with pytest.raises(ValueError) as info:
    pallas_prof.CompilerParams(**{field: value})
  assert f"CompilerParams({field}={value!r})" in str(info.value) and words in str(info.value)


def test_compiler_params_take_the_values_they_document():
  import numpy as np
  import pallas_prof
  for w in (1, 2, 4, 8, 16, 32, np.int64(8)):
    assert pallas_prof.CompilerParams(num_warps=w).num_warps == w
  p = pallas_prof.CompilerParams(num_stages=1, launch_group=0, compute_capability=90,
                                 zero_outputs=(0, 2))
  assert (p.num_stages, p.launch_group, p.zero_outputs) == (1, 0, (0, 2))
