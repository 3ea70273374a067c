"""One source location per inline asm block (backend/compiling/ptx_rewrites.py, issue 47).

LLVM 21 numbers the lines of an inline asm block from the statement's line on, and
ptxas took those as source lines: the code of a block, and what followed it, went to
the kernel's next lines. The rewrite drops the `.loc` lines inside blocks. These tests
read it on PTX text, then through Triton's ptxas and nvdisasm (no GPU): the same SASS,
each instruction on the line of the statement that wrote it.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

from pallas_prof.backend.compiling import lineinfo, ptx_rewrites, triton_compat


def _kernel_ptx() -> str:
  """A load at line 15 as LLVM 21 writes an inline asm load (locs 15, 16, 17 inside the
  block), then a multiply at line 15 again and a store at line 20."""
  return (".version 8.7\n.target sm_90a\n.address_size 64\n"
          ".visible .entry k(.param .u64 pa, .param .u64 po)\n{\n"
          "\t.reg .b32 %r<8>;\n\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<4>;\n"
          "\t.loc 1 10 0\n"
          "\tld.param.u64 %rd1, [pa];\n\tld.param.u64 %rd2, [po];\n"
          "\t.loc 1 15 9\n"
          "\t// begin inline asm\n"
          "\tmov.u32 %r1, 0x0;\n"
          "\t.loc 1 16 9\n"
          "\tmov.u32 %r2, 0x0;\n"
          "\t.loc 1 17 9\n"
          "\tld.global.b32 { %r1 }, [ %rd1 + 0 ];\n"
          "\t// end inline asm\n"
          "\tmov.b32 %f1, %r1;\n\tmul.f32 %f2, %f1, 0f40400000;\n"
          "\t.loc 1 20 5\n"
          "\tst.global.f32 [%rd2], %f2;\n\tret;\n}\n"
          "\t.file\t1 \"/tmp/k.py\"\n")


def test_the_locations_inside_a_block_are_dropped_and_nothing_else():
  ptx = _kernel_ptx()
  text, dropped = ptx_rewrites.one_location_per_asm_block(ptx)
  assert dropped == 2
  assert ".loc 1 16 9" not in text and ".loc 1 17 9" not in text
  # the statement's location before the block, and every location outside, stay
  for kept in (".loc 1 10 0", ".loc 1 15 9", ".loc 1 20 5"):
    assert kept in text
  # only `.loc` lines go: every other line is there, in order
  assert [l for l in ptx.splitlines() if ".loc" not in l] == \
         [l for l in text.splitlines() if ".loc" not in l]


def test_a_block_before_any_location_keeps_its_first_and_each_function_starts_afresh():
  ptx = (".visible .entry a()\n{\n\t// begin inline asm\n\t.loc 1 3 1\n\tmov.u32 %r1, 0;\n"
         "\t.loc 1 4 1\n\tmov.u32 %r2, 0;\n\t// end inline asm\n}\n"
         ".visible .func b()\n{\n\t// begin inline asm\n\t.loc 1 30 1\n\tmov.u32 %r1, 0;\n"
         "\t// end inline asm\n}\n")
  text, dropped = ptx_rewrites.one_location_per_asm_block(ptx)
  assert dropped == 1
  assert ".loc 1 3 1" in text and ".loc 1 4 1" not in text
  assert ".loc 1 30 1" in text     # the second function had no location in effect


def test_ptx_without_inline_asm_or_locations_in_blocks_passes_through_unchanged():
  plain = ".visible .entry k()\n{\n\t.loc 1 5 0\n\tret;\n}\n"
  assert ptx_rewrites.one_location_per_asm_block(plain) == (plain, 0)
  # Triton 3.6's LLVM: a block with no `.loc` inside
  older = _kernel_ptx().replace("\t.loc 1 16 9\n", "").replace("\t.loc 1 17 9\n", "")
  assert ptx_rewrites.one_location_per_asm_block(older) == (older, 0)


def _sass_rows(ptx: str):
  try:
    ptxas = triton_compat.ptxas_path(90)
  except Exception as e:      # a triton without the CUDA backend's tools
    pytest.skip(f"no ptxas for sm_90 in this triton: {e}")
  with tempfile.TemporaryDirectory(prefix="pallas-prof-ptx-") as d:
    src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    with open(src, "w") as f:
      f.write(ptx)
    subprocess.run([ptxas, "-arch=sm_90a", "-O3", "-lineinfo", src, "-o", out], check=True,
                   capture_output=True, timeout=120)
    with open(out, "rb") as f:
      rows, _, _ = lineinfo.parse_sass(lineinfo.disassemble(f.read(), "-g"))
  return [(text, where[1] if where else None) for _, _, text, _, where in rows]


def test_ptxas_compiles_the_same_instructions_and_charges_the_block_to_its_statement():
  before = _sass_rows(_kernel_ptx())
  after = _sass_rows(ptx_rewrites.one_location_per_asm_block(_kernel_ptx())[0])
  assert [t for t, _ in before] == [t for t, _ in after]
  lines_before = {line for _, line in before}
  lines_after = {line for _, line in after}
  # the asm block's own numbering reached the line table before the rewrite...
  assert lines_before & {16, 17}, before
  # ...and after it only the kernel's statements are there
  assert lines_after <= {10, 15, 20, None}, after
  loads = [line for text, line in after if text.startswith("LDG")]
  assert loads == [15]
  multiplies = [line for text, line in after if text.startswith(("FMUL", "FFMA"))]
  assert multiplies and set(multiplies) == {15}, after
