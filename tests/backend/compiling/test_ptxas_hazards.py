"""Generated code that steers clear of a ptxas miscompile (the GPU fuzzer's first miss).

The GPU differential fuzzer (seed 18680, 2026-12-02) found a float16 program
whose output `v3 * v4` was wrong on the H200 in exactly the lanes where an
unrelated dynamic_update_slice of v3 landed. The generated Triton source, its
LLVM IR and its PTX are all right (and the same kernel is right under Triton's
interpreter); ptxas is not. It fused the update's two nested `selp.b16` into
one predicated select that overwrote v3's register in place
(`@P0 SEL R3, R14, R3, !P3`), then paired the multiply that still needed the
old v3 with another into one HFMA2 placed after that overwrite. ptxas 12.8,
12.9 and 13.0 all do it. The window test is now one unsigned comparison, which
gives ptxas a single select into a fresh register.

On the CPU the test compiles for sm_90 and reads the SASS (Triton's own ptxas
and nvdisasm, no GPU needed): no predicated select may write over one of its
own operands there. On a GPU it checks the numbers.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import lineinfo
from pallas_prof.backend import kernel_registry
from testkit.fuzz.sass_hazards import in_place_predicated_selects
from testkit.helpers import run_on_values, xla_on_cpu


def fuzz_18680(x0, x1, x2):
  """The fuzzer's program, as it found it (float16 [10, 19] inputs)."""
  v3 = jnp.min(x2, axis=0, keepdims=False)
  v4 = v3 * v3
  v5 = v3 * v4
  v6 = lax.dynamic_update_slice_in_dim(v3, v3[0:3] * 2, jnp.min(x0).astype(jnp.int32) % 21,
                                       axis=0)
  v7 = x1 * v6
  v8 = jnp.broadcast_to(v4, (1, 19))
  return (v5, v7, v8)


def two_axis_update(x0, x1):
  """The same hazard's shape with a 2-D window and bfloat16."""
  u = x1 * x1
  start = jnp.max(x0).astype(jnp.int32)
  w = lax.dynamic_update_slice(x1, x1[:3, :5] * 2, (start % 11, start % 17))
  return (u * x1, x0 * w)


CASES = {
    "fuzz_18680": (fuzz_18680, [(10, 19)] * 3, np.float16, 17.0),
    "two_axis_bf16": (two_axis_update, [(9, 21), (9, 21)], jnp.bfloat16, 12.0),
}

def _inputs(shapes, dtype, start, seed=0):
  rng = np.random.default_rng(seed)
  xs = [rng.uniform(-4, 4, s).astype(np.float32) for s in shapes]
  xs[0] = np.abs(xs[0]) + start     # a start the update's clamp moves
  return [jnp.asarray(x, dtype) for x in xs]


def _sass_of(fn, xs) -> str:
  kernel_registry.clear()
  jax.clear_caches()
  run_on_values(fn, *xs, name="hazard")
  gk = kernel_registry.kernels()[-1].generated
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)
  return lineinfo.disassemble(ck.cubin, "-c")


def test_the_pattern_finder_sees_the_miscompiled_form():
  assert in_place_predicated_selects("        @P0 SEL R3, R14, R3, !P3 ;") == [
      "@P0 SEL R3, R14, R3, !P3 ;"]
  assert in_place_predicated_selects("        SEL R4, R16, R9, !P0 ;") == []
  assert in_place_predicated_selects("        @!P1 FSEL R7, R2, R9, P2 ;") == []


def test_a_window_is_one_unsigned_comparison():
  from pallas_prof.backend.lowering.rules.shape import window_test
  assert window_test("lanes", "start", 3) == "((lanes - start).to(tl.uint32) < 3)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_predicated_select_overwrites_its_operand(case):
  fn, shapes, dtype, start = CASES[case]
  sass = _sass_of(fn, _inputs(shapes, dtype, start))
  assert "HMUL2" in sass or "HFMA2" in sass, "the 16-bit multiplies ptxas pairs are there"
  assert in_place_predicated_selects(sass) == []


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_values_match_xla(case, seed):
  fn, shapes, dtype, start = CASES[case]
  xs = _inputs(shapes, dtype, start, seed)
  out = run_on_values(fn, *xs)
  ref = xla_on_cpu(fn, *xs)
  for o, r in zip(out, ref):
    np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(r, np.float32),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_kernel_on_the_gpu_matches_xla(case):
  fn, shapes, dtype, start = CASES[case]
  for seed in range(8):
    xs = _inputs(shapes, dtype, start + seed, seed)
    with jax.default_device(jax.devices("gpu")[0]):
      out = run_on_values(fn, *[jax.device_put(x, jax.devices("gpu")[0]) for x in xs])
    ref = xla_on_cpu(fn, *xs)
    for o, r in zip(out, ref):
      np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(r, np.float32),
                                 rtol=2e-2, atol=2e-2, err_msg=f"seed {seed}")
