"""triton_compat as the door to Triton's compiler (issue 50, item 3): what reaches
triton.compile, FP fusion above all.

Triton 3.10 changes `enable_fp_fusion`'s default (3.9 warns when it is left unset):
pallas-prof keeps a multiply and an add two roundings, as XLA does, unless a kernel's
CompilerParams opt in, so the option is always passed. These tests read the options
triton.compile is called with (a stand-in records them), whatever the installed
Triton's default.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling import compile as pcompile, triton_compat, triton_run


@triton.jit
def _copy(x_ptr, o_ptr):
  tl.store(o_ptr, tl.load(x_ptr))


class _Recorded(Exception):
  pass


@pytest.fixture
def calls(monkeypatch):
  """triton.compile replaced by a recorder that refuses to compile."""
  seen = []

  def record(src, target=None, options=None):
    seen.append({"src": src, "target": target, "options": dict(options)})
    raise _Recorded("recorded, not compiled")

  monkeypatch.setattr(triton, "compile", record)
  return seen


def test_compile_source_states_fp_fusion_when_the_caller_does_not(calls):
  with pytest.raises(_Recorded):
    triton_compat.compile_source(_copy, {"x_ptr": "*fp32", "o_ptr": "*fp32"},
                                 target=triton_compat.gpu_target("cuda", 90),
                                 options={"num_warps": 4})
  (call,) = calls
  assert call["options"] == {"num_warps": 4, "enable_fp_fusion": False}
  assert call["src"].fn is _copy and call["src"].signature == {"x_ptr": "*fp32",
                                                               "o_ptr": "*fp32"}
  assert (call["target"].backend, call["target"].arch, call["target"].warp_size) == \
      ("cuda", 90, 32)


def test_compile_source_keeps_a_stated_fp_fusion(calls):
  with pytest.raises(_Recorded):
    triton_compat.compile_source(_copy, {"x_ptr": "*fp32", "o_ptr": "*fp32"},
                                 target=triton_compat.gpu_target("cuda", 90),
                                 options={"num_warps": 4, "enable_fp_fusion": True},
                                 attrs={(0,): [["tt.divisibility", 16]]})
  assert calls[0]["options"]["enable_fp_fusion"] is True
  assert triton_compat.FP_FUSION is False


def _lowered(params):
  def mul_add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * y_ref[...] + x_ref[...]
  kernel_registry.clear()
  jax.clear_caches()
  call = pl.pallas_call(mul_add, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                        compiler_params=params)
  jax.jit(call).lower(jnp.ones(256), jnp.ones(256))
  (rec,) = kernel_registry.kernels()
  return rec.generated


@pytest.mark.parametrize("params, fusion", [
    (pallas_prof.CompilerParams(), False),
    (pallas_prof.CompilerParams(enable_fp_fusion=True), True)])
def test_a_kernels_compile_passes_its_fp_fusion_to_triton(calls, params, fusion):
  """The whole way from CompilerParams through the compile request to triton.compile
  (run in this process: the worker runs the same run_triton)."""
  gk = _lowered(params)
  result = triton_run.run_triton(pcompile.compile_request(gk, ("cuda", 90)))
  assert result["error"]["type"] == "_Recorded"
  (call,) = calls
  assert call["options"]["enable_fp_fusion"] is fusion
  assert call["options"]["num_warps"] == gk.num_warps


def test_triton_version_is_the_releases_major_and_minor():
  major, minor = triton_compat.triton_version()
  assert triton_compat.triton_release().startswith(f"{major}.{minor}.")
  assert (3, 6) <= (major, minor) <= (3, 9)
