"""The PTX of a TF32 dot's two B layouts, compiled for sm_90 on any machine (no GPU):
how the B block is copied into shared memory (cp.async of 4 bytes, `.ca`, or 16, `.cg`) and
which MMA it runs. The static half of bench/probes/tf32_layout.py's question.

    PYTHONPATH=$PWD python3 bench/probes/tf32_layout_ptx.py
"""
from __future__ import annotations

import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax.numpy as jnp  # noqa: E402

import pallas_prof  # noqa: E402
from bench.probes.tf32_layout import call  # noqa: E402
from pallas_prof.backend import kernel_registry  # noqa: E402
from pallas_prof.backend.compiling.for_targets import compile_for  # noqa: E402

OPS = r"^\s*(wgmma\.mma_async|mma\.sync|cp\.async\.c[ag]\.shared\.global|ld\.global)"


def main() -> int:
  pallas_prof.install()
  m, n, k = 512, 256, 256
  a, b = jnp.ones((m, k), jnp.float32), jnp.ones((k, n), jnp.float32)
  for bm, bn, bk, warps in ((128, 128, 32, 4), (128, 128, 32, 8), (128, 64, 32, 4)):
    for kind in ("plain", "kmajor"):
      kernel_registry.clear()
      call(kind, m, n, k, bm, bn, bk, warps, 3)(a, b)
      (record,) = kernel_registry.kernels()
      ptx = compile_for(record.generated, "sm_90").compiled.asm["ptx"]
      ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
      counts = collections.Counter(re.findall(OPS, ptx, re.M))
      print(f"{kind:6s} {bm}x{bn}x{bk} {warps} warps: {dict(sorted(counts.items()))}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
