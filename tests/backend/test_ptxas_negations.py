"""PTX whose integer negations ptxas cannot lose (the GPU fuzzer's seed 20261204).

ptxas 12.8 to 13.0 fold integer negations into a three-input max (VIMNMX3)
and drop one: `jnp.max(-x, axis=1)` of an int32 (17, 12) block was wrong on
the H200 in the rows whose maximum sat in the dropped lane (ptxas 13.4 is
right). pallas-prof writes each integer `neg` of the PTX as `not` + `add 1`
(ptx_rewrites.py), the same value, before ptxas or jaxlib sees it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import compile as pcompile
from pallas_prof.backend import lineinfo, ptx_rewrites, registry


def test_integer_negations_become_not_and_add():
  ptx = (".version 8.7\n.target sm_90a\n\tneg.s32 \t%r16, %r3;\n\tneg.s16 \t%rs2, %rs1;\n"
         "\tneg.f32 \t%r9, %r8;\n\tneg.s64 \t%rd2, %rd1;\n")
  text, n = ptx_rewrites.rewrite(ptx)
  assert n == 2
  assert "\tnot.b32 \t%r16, %r3;\n\tadd.s32 \t%r16, %r16, 1;" in text
  assert "\tnot.b16 \t%rs2, %rs1;\n\tadd.s16 \t%rs2, %rs2, 1;" in text
  assert "neg.f32" in text and "neg.s64" in text       # floats carry a sign bit; no 3-way 64-bit max
  assert "neg.s32" not in text and "neg.s16" not in text
  assert text.index("pallas-prof: 2 integer negation") < text.index(".version")
  assert ptx_rewrites.rewrite("\tadd.s32 %r1, %r2, %r3;\n") == ("\tadd.s32 %r1, %r2, %r3;\n", 0)


def test_not_and_add_is_negation_for_every_int32():
  x = np.array([0, 1, -1, 96, -96, 2**31 - 1, -2**31], np.int32)
  assert np.array_equal(np.invert(x) + np.int32(1), -x)


def rowmax(x_ref, o_ref):
  o_ref[...] = jnp.max(-x_ref[...], axis=1, keepdims=True)


def _call(num_warps=4):
  return pl.pallas_call(rowmax, grid=(1,), in_specs=[pl.BlockSpec((17, 12), lambda i: (i, 0))],
                        out_specs=pl.BlockSpec((17, 1), lambda i: (i, 0)),
                        out_shape=jax.ShapeDtypeStruct((17, 1), jnp.int32),
                        compiler_params=pallas_prof.CompilerParams(num_warps=num_warps),
                        name="rowmax_neg")


def test_the_kernel_ptxas_miscompiled_reaches_ptxas_without_neg(rng):
  x = rng.integers(-100, 100, (17, 12)).astype(np.int32)
  registry.clear()
  np.testing.assert_array_equal(np.asarray(_call()(x))[:, 0], (-x).max(1))   # the interpreter
  gk = registry.kernels()[-1].generated
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)
  assert "neg.s32" not in ck.ptx and "not.b32" in ck.ptx
  assert "integer negation(s) written as not+add" in ck.ptx
  # the SASS ptxas makes of it negates through LOP3 (~x) and an add of 1, and forms no
  # three-input max: the instruction whose negation it dropped
  sass = lineinfo.disassemble(ck.cubin, "-c")
  assert "VIMNMX3" not in sass and "LOP3.LUT" in sass


@pytest.mark.gpu
@pytest.mark.parametrize("num_warps", [1, 4])
def test_row_max_of_negated_ints_on_the_gpu(num_warps):
  gpu = jax.devices("gpu")[0]
  for seed in range(6):
    x = np.random.default_rng(seed).integers(-100, 100, (17, 12)).astype(np.int32)
    out = np.asarray(_call(num_warps)(jax.device_put(x, gpu)))[:, 0]
    np.testing.assert_array_equal(out, (-x).max(1), err_msg=f"seed {seed}")
