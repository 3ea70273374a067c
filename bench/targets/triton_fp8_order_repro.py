"""Triton compiles an fp8 e5m2 dot for sm_80 wrongly once it has compiled an e4m3
kernel for sm_90 in the same process (found by bench/targets/matrix.py; no GPU needed).

    python3 bench/targets/triton_fp8_order_repro.py

Alone, the dot compiles for sm_80. After the e4m3 kernel's compile for sm_90, the
dot's PTX for sm_80 holds cvt.rn.f16x2.e5m2x2, which PTX has only from sm_89, and
ptxas refuses it. With Triton's cache on, the second compile may come from the
cache and hide it: always_compile is set here. pallas-prof's target matrix and
`compile_for` therefore compile each target in a compile worker of its own.
"""
import os
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SOURCE = '''
import triton
import triton.language as tl

@triton.jit
def to_e4m3(x_ptr, o_ptr):
  offs = tl.arange(0, 128)
  x = tl.load(x_ptr + offs)
  tl.store(o_ptr + offs, x.to(tl.float8e4nv).to(tl.float32))

@triton.jit
def e5m2_dot(a_ptr, b_ptr, o_ptr):
  r = tl.arange(0, 64)
  a = tl.load(a_ptr + r[:, None] * 64 + r[None, :])
  b = tl.load(b_ptr + r[:, None] * 64 + r[None, :])
  tl.store(o_ptr + r[:, None] * 64 + r[None, :], tl.dot(a, b, out_dtype=tl.float32))
'''


def main() -> int:
  path = os.path.join(tempfile.mkdtemp(), "kernels.py")
  with open(path, "w") as f:
    f.write(SOURCE)
  import importlib.util
  spec = importlib.util.spec_from_file_location("repro_kernels", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  triton.knobs.compilation.always_compile = True
  first = "--dot-alone" not in sys.argv
  if first:
    triton.compile(ASTSource(module.to_e4m3, {"x_ptr": "*fp32", "o_ptr": "*fp32"}),
                   target=GPUTarget("cuda", 90, 32))
  try:
    triton.compile(ASTSource(module.e5m2_dot, {"a_ptr": "*fp8e5", "b_ptr": "*fp8e5",
                                               "o_ptr": "*fp32"}),
                   target=GPUTarget("cuda", 80, 32))
  except Exception as e:  # noqa: BLE001 - what this script is for
    print(f"triton {triton.__version__}: the e5m2 dot for sm_80 failed"
          f"{' after the e4m3 kernel for sm_90' if first else ''}: {str(e).splitlines()[0]}")
    return 1
  print(f"triton {triton.__version__}: the e5m2 dot compiles for sm_80"
        f"{' after the e4m3 kernel for sm_90' if first else ' alone'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
