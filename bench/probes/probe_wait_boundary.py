"""Can a probe wait for a load's data before it reads the clock? (issue #16, known answer c)

A probe reads %clock64 when its warp issues it, and a load's data is waited for at
its first use, so today a load's wait lands in the group of the equation that first
uses it. To give a load its own group, something must consume the loaded registers
before the clock read. This compiles one kernel three ways for sm_90 (no GPU needed:
the triton wheel's ptxas and nvdisasm) and prints the SASS order of the loads, their
first consumers and the clock read:

    python3 bench/probes/probe_wait_boundary.py

mode 0: no consumer: CS2R SR_CLOCKLO right after the LDGs (the wait comes later).
mode 1: an identity `mov.b32` of each loaded value in inline asm: ptxas removes it.
mode 2: a never-taken predicated store of each loaded value (setp on an impossible bit
        pattern, @p st.global): ISETPs on the loaded registers, the predicated STGs, then
        the clock read: the scoreboard wait comes before the clock (2026-12-02, triton
        3.6.0's ptxas). Whether the GPU then times the wait in the load's group is for a
        run on the device.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def _kernel(x_ptr, o_ptr, t_ptr, MODE: tl.constexpr):
  offs = tl.arange(0, 512)
  x = tl.load(x_ptr + offs)
  if MODE == 1:
    x = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                  is_pure=False, pack=1)
  if MODE == 2:
    addr = (t_ptr + offs).to(tl.int64, bitcast=True)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.eq.b32 p, $1, 0x7fc00123; @p st.global.b32 [$2], $1; "
        "mov.b32 $0, 0; }", "=r,r,l", [x, addr], dtype=tl.int32, is_pure=False, pack=1)
  t = tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64,
                                is_pure=False, pack=1)
  y = x
  for _ in range(4):
    y = tl.exp(y) * 0.5
  tl.store(o_ptr + offs, y)
  tl.store(t_ptr + offs, t)


def sass(mode: int, folder: str) -> list[str]:
  src = triton.compiler.ASTSource(fn=_kernel, signature={"x_ptr": "*fp32", "o_ptr": "*fp32",
                                                         "t_ptr": "*i64", "MODE": "constexpr"},
                                  constexprs={"MODE": mode})
  ck = triton.compile(src, target=GPUTarget("cuda", 90, 32))
  path = os.path.join(folder, f"mode{mode}.cubin")
  with open(path, "wb") as f:
    f.write(ck.asm["cubin"])
  nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                          "nvdisasm")
  text = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True, check=True).stdout
  return [line.split("*/", 1)[-1].strip().rstrip(" ;") for line in text.splitlines()
          if any(k in line for k in ("LDG", "SR_CLOCKLO", "ISETP", "STG", "MOV "))]


def main() -> None:
  with tempfile.TemporaryDirectory() as folder:
    for mode in (0, 1, 2):
      lines = sass(mode, folder)
      clock = next(i for i, line in enumerate(lines) if "SR_CLOCKLO" in line)
      print(f"mode {mode}: before the clock read: {lines[:clock]}")


if __name__ == "__main__":
  main()
