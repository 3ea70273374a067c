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
from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import lineinfo, ptx_rewrites
from pallas_prof.backend import kernel_registry


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
  kernel_registry.clear()
  np.testing.assert_array_equal(np.asarray(_call()(x))[:, 0], (-x).max(1))   # the interpreter
  gk = kernel_registry.kernels()[-1].generated
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


# --- nested 16-bit selects (seed 18680's ptxas miscompile, reached from a user's select) ----

FN_HEAD = ".version 8.7\n.target sm_90a\n.entry k()\n{\n\t.reg .pred \t%p<16>;\n"


def test_nested_selects_on_a_shared_else_value_become_one():
  ptx = FN_HEAD + ("\tselp.b16 \t%rs23, %rs22, %rs20, %p15;\n"
                   "\tselp.b16 \t%rs24, %rs23, %rs20, %p14;\n\tst.b16 [%rd1], %rs24;\n}\n")
  text, n = ptx_rewrites.fuse_nested_selects(ptx)
  assert n == 1
  assert "\tand.pred \t%p16, %p14, %p15;\n\tselp.b16 \t%rs24, %rs22, %rs20, %p16;" in text
  assert "%rs23" not in text and ".reg .pred \t%p<17>;" in text


def test_nested_selects_on_a_shared_then_value_become_one():
  ptx = FN_HEAD + ("\tselp.b16 \t%rs23, %rs22, %rs20, %p15;\n"
                   "\tselp.b16 \t%rs24, %rs22, %rs23, %p14;\n\tst.b16 [%rd1], %rs24;\n}\n")
  text, n = ptx_rewrites.fuse_nested_selects(ptx)
  assert n == 1 and "\tor.pred \t%p16, %p14, %p15;\n\tselp.b16 \t%rs24, %rs22, %rs20, %p16;" in text


@pytest.mark.parametrize("case", ["inner used again", "32-bit", "not adjacent", "two functions"])
def test_selects_that_are_not_the_pattern_stay(case):
  pair = ("\tselp.b16 \t%rs23, %rs22, %rs20, %p15;\n"
          "\tselp.b16 \t%rs24, %rs23, %rs20, %p14;\n")
  body = {"inner used again": pair + "\tst.b16 [%rd2], %rs23;\n",
          "32-bit": pair.replace("b16", "b32").replace("%rs", "%r"),
          "not adjacent": pair.replace("%p15;\n", "%p15;\n\tmov.b16 \t%rs9, %rs8;\n"),
          "two functions": pair}[case]
  ptx = FN_HEAD + body + "}\n" + (FN_HEAD if case == "two functions" else "")
  assert ptx_rewrites.fuse_nested_selects(ptx) == (ptx, 0)


def test_both_selects_truth_tables():
  for p in (False, True):
    for q in (False, True):
      x, e = "x", "e"
      assert (((x if p else e) if q else e) == (x if (q and p) else e))
      assert ((x if q else (x if p else e)) == (x if (q or p) else e))


USER_WINDOW = """
def fn(x0, x1, x2):
  v3 = jnp.min(x2, axis=0)
  v4 = v3 * v3
  v5 = v3 * v4
  s = jnp.min(x0).astype(jnp.int32) % 21
  lanes = lax.broadcasted_iota(jnp.int32, (19,), 0)
  v6 = jnp.where((lanes >= s) & (lanes < s + 3), v3 * 2, v3)
  return (v5, x1 * v6, jnp.broadcast_to(v4, (1, 19)))
"""


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_users_window_select_reaches_ptxas_as_one_select(dtype, rng):
  """The fuzzer's sm_90 mode found seed 18680's SASS (@P0 SEL R3, R6, R3, !P3 read
  by HMUL2 and HFMA2) in this user code, which rules/shape.py's window_test cannot reach."""
  from jax import lax
  from testkit.fuzz.sass_hazards import in_place_predicated_selects
  from testkit.helpers import run_on_values
  scope = {"jnp": jnp, "lax": lax}
  exec(USER_WINDOW, scope)
  xs = [jnp.asarray(rng.uniform(-4, 4, (10, 19)), dtype) for _ in range(3)]
  kernel_registry.clear()
  run_on_values(scope["fn"], *xs, name="user_window")
  ck = pcompile.compile_kernel(kernel_registry.kernels()[-1].generated, ("cuda", 90),
                               use_disk_cache=False)
  assert "nested 16-bit selects written as one select" in ck.ptx
  assert in_place_predicated_selects(lineinfo.disassemble(ck.cubin, "-c")) == []
