"""Packed 16-bit integer adds whose constant ptxas drops (the GPU fuzzer's seed 1250, issue 32).

`jnp.min(x0, axis=0, keepdims=True) // 7` of int16 [5, 9, 9] blocks was off by
one on the H200 in row 8 of the last axis but one, in the lanes where the
remainder test flipped. LLVM tests `x % 7 != 0` as `x * 28087 + 4681 > 9362`
(unsigned 16-bit) and packs two lanes' adds into one `add.s16x2` of the
constant 0x12491249. Each thread holds 16 rows of which 9 are stored, so row 8's
pair has one dead half, and ptxas 12.8 and 12.9 narrow that add to
`VIADD.16x2 R8, R8, 0x0`: the constant is gone (13.4 keeps it). With + 0 in row 8, a SASS-level
model gives exactly the GPU's 15, 10, 10 and 25 wrong elements on the four
inputs it ran (bench/results/repro_runs_h200_663b2e6_seed1250_int16.json).
pallas-prof writes each packed integer add as two 16-bit adds of its halves
(backend/compiling/ptx_rewrites.py), which ptxas keeps. On the CPU these tests compile for
sm_90 and read the SASS; on a GPU they check the numbers.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import lineinfo, ptx_rewrites, triton_compat
from pallas_prof.backend import kernel_registry
from testkit.fuzz.sass_hazards import lost_packed_constants
from testkit.helpers import run_on_values, xla_on_cpu


def test_a_packed_add_becomes_two_adds_of_its_halves():
  ptx = (".version 8.7\n.target sm_90a\n\tadd.s16x2 \t%r318, %r316, %r317;\n"
         "\tadd.u16x2 \t%r9, %r8, %r7;\n\tadd.s32 \t%r1, %r2, %r3;\n\tadd.f16x2 \t%r4, %r5, %r6;\n"
         "\tmax.s16x2 \t%r234, %r183, %r233;\n")
  text, n = ptx_rewrites.rewrite(ptx)
  assert n == 2
  assert ("\t{\n\t.reg .b16 %ppa<2>, %ppb<2>;\n\tmov.b32 \t{%ppa0, %ppa1}, %r316;\n"
          "\tmov.b32 \t{%ppb0, %ppb1}, %r317;\n\tadd.s16 \t%ppa0, %ppa0, %ppb0;\n"
          "\tadd.s16 \t%ppa1, %ppa1, %ppb1;\n\tmov.b32 \t%r318, {%ppa0, %ppa1};\n\t}") in text
  assert "add.u16 \t%ppa1, %ppa1, %ppb1;\n\tmov.b32 \t%r9, {%ppa0, %ppa1};" in text
  assert "16x2 \t%r318" not in text and "add.u16x2" not in text
  # the others stay: 32-bit and float adds, and packed min/max, which ptxas narrows right
  assert "add.s32 \t%r1" in text and "add.f16x2" in text and "max.s16x2" in text
  assert text.index("packed 16-bit integer add(s) written as two") < text.index(".version")


# --- the pattern alone, in hand-written PTX, through Triton's ptxas ------------------------

def _ptx(half: str, constant: int = 0x12491249) -> str:
  """Two loaded int16 packed, a constant added with add.s16x2, one half stored."""
  kept = {"lo": "%rs3", "hi": "%rs4"}[half]
  return (".version 8.7\n.target sm_90a\n.address_size 64\n"
          ".visible .entry k(.param .u64 pa, .param .u64 po)\n{\n"
          "\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n"
          "\tld.param.u64 %rd1, [pa];\n\tld.param.u64 %rd2, [po];\n"
          "\tld.global.b16 %rs1, [%rd1];\n\tld.global.b16 %rs2, [%rd1+2];\n"
          f"\tmov.b32 %r1, {{%rs1, %rs2}};\n\tmov.b32 %r3, {constant};\n"
          "\tadd.s16x2 %r2, %r1, %r3;\n\tmov.b32 {%rs3, %rs4}, %r2;\n"
          f"\tst.global.b16 [%rd2], {kept};\n\tret;\n}}\n")


def _sass_of_ptx(ptx: str) -> str:
  ptxas = triton_compat.ptxas_path(90)
  with tempfile.TemporaryDirectory(prefix="pallas-prof-ptx-") as d:
    src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    with open(src, "w") as f:
      f.write(ptx)
    subprocess.run([ptxas, "-arch=sm_90a", "-O3", src, "-o", out], check=True,
                   capture_output=True, timeout=120)
    with open(out, "rb") as f:
      return lineinfo.disassemble(f.read(), "-c")


def _ptxas_release() -> str:
  """"12.8", "13.4", ...: the release of the ptxas Triton runs for sm_90."""
  line = triton_compat.ptxas_release(triton_compat.ptxas_path(90))
  m = re.search(r"cuda_(\d+\.\d+)", line)
  return m.group(1) if m else line


# Triton 3.6's ptxas and 3.9's plain one drop the constant; 3.9 assembles sm_90 with
# ptxas-blackwell 13.4, which keeps it (as it keeps the negations of ptx_rewrites.py)
DROPS_THE_CONSTANT = {"12.8": True, "12.9": True, "13.4": False}


@pytest.mark.parametrize("half", ["lo", "hi"])
def test_ptxas_drops_the_constant_and_the_split_add_keeps_it(half):
  """The packed add with one half read, as ptxas compiles it: a ptxas of the table that
  changes its answer fails here (then the rewrite may go), one not in it is not judged."""
  sass = _sass_of_ptx(_ptx(half, 0x00070003))
  kept = "0x3" if half == "lo" else "0x7"        # the stored half's own constant
  release = _ptxas_release()
  if DROPS_THE_CONSTANT.get(release) is True:
    assert len(lost_packed_constants(sass)) == 1 and kept not in sass, sass
  elif DROPS_THE_CONSTANT.get(release) is False:
    assert lost_packed_constants(sass) == [] and re.search(rf"VIADD\.16x2[^;]*\b{kept}\b", sass)
  text, n = ptx_rewrites.rewrite(_ptx(half, 0x00070003))
  fixed = _sass_of_ptx(text)
  assert n == 1 and lost_packed_constants(fixed) == []
  assert re.search(rf"\b(IADD3|VIADD|IADD)\b[^;]*\b{kept}\b", fixed), fixed


# --- through pallas-prof -----------------------------------------------------------------

def floordiv7(x):
  return x // 7


def repro_1250(x0, x1):
  """The fuzzer's program (seed 1250), as it found it."""
  from jax import lax
  v2 = jnp.min(x0, axis=0, keepdims=True)
  v4 = lax.shift_left(v2, v2 & 23)
  v5 = jnp.where(x1 != v2, v2, x1)
  return (jnp.maximum(v4, 2), jnp.min(v4, axis=0, keepdims=True), v5 // 7,
          jnp.clip(x1.astype(jnp.float32), -10000, 10000))


def _ints(shape, seed):
  return np.random.default_rng(seed).integers(-100, 100, shape, endpoint=True).astype(np.int16)


def _sass(fn, xs):
  kernel_registry.clear()
  jax.clear_caches()
  run_on_values(fn, *xs, name="packed_add")
  ck = pcompile.compile_kernel(kernel_registry.kernels()[-1].generated, ("cuda", 90),
                               use_disk_cache=False)
  return ck, lineinfo.disassemble(ck.cubin, "-c")


CASES = {"floordiv7": (floordiv7, [(5, 9, 9)]), "repro_1250": (repro_1250, [(5, 9, 9)] * 2)}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rewrites", ["0", "1"])
def test_no_packed_add_loses_its_constant(case, rewrites, monkeypatch):
  """Triton 3.6 packs these kernels' adds so that one has a dead half, and its ptxas
  drops that add's constant (3.9 pairs them otherwise, and its ptxas-blackwell 13.4
  keeps constants; the rewrite changes no value there)."""
  import triton
  monkeypatch.setenv(ptx_rewrites.ENV, rewrites)
  fn, shapes = CASES[case]
  ck, sass = _sass(fn, [_ints(s, i) for i, s in enumerate(shapes)])
  if rewrites == "1":
    assert lost_packed_constants(sass) == []
    assert "add.s16x2" not in ck.ptx and "packed 16-bit integer add(s) written as two" in ck.ptx
  elif triton.__version__.startswith("3.6"):
    assert len(lost_packed_constants(sass)) == 1, "the miscompile this guards against"


@pytest.mark.parametrize("shape", [(5, 9, 9), (3, 9, 13), (7, 17), (33,)])
def test_floor_division_of_int16_matches_xla(shape):
  x = _ints(shape, 3)
  x.flat[:4] = [-28, -100, -91, -32768]          # exact, inexact, exact, the minimum
  np.testing.assert_array_equal(np.asarray(run_on_values(floordiv7, x)), x // 7)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(5, 9, 9), (3, 9, 13), (7, 17), (33,)])
def test_floor_division_of_int16_on_the_gpu(shape):
  gpu = jax.devices("gpu")[0]
  for seed in range(4):
    x = _ints(shape, seed)
    out = run_on_values(floordiv7, jax.device_put(x, gpu))
    np.testing.assert_array_equal(np.asarray(out), x // 7, err_msg=f"seed {seed}")


@pytest.mark.gpu
def test_the_fuzzers_program_on_the_gpu():
  gpu = jax.devices("gpu")[0]
  for seed in range(4):
    xs = [_ints((5, 9, 9), 2 * seed), _ints((5, 9, 9), 2 * seed + 1)]
    out = run_on_values(repro_1250, *[jax.device_put(x, gpu) for x in xs])
    for o, r in zip(out, xla_on_cpu(repro_1250, *xs)):
      np.testing.assert_array_equal(np.asarray(o), np.asarray(r), err_msg=f"seed {seed}")
