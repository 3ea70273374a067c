"""Does a 1-D kernel whose last block overhangs its arrays write past their end?

    python3 bench/probes/builtin_overhang.py builtin|pallas_prof [n]

examples/vector_add.py (block 1024) on n elements of bf16, n not a multiple of the block,
through JAX's built-in Triton backend or pallas-prof; the result is checked against
x + y. Meant to run under compute-sanitizer's memcheck with
XLA_PYTHON_CLIENT_ALLOCATOR=platform, so that each array is an allocation of its own and
a write past its end is a write outside any allocation (XLA's default pool would hide
it). Why: the suite's vector_add 41943047 bf16 case once read the built-in's output as
written past its end (bench/results/archive/README.md); this asks the sanitizer.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)


def main(argv) -> int:
  import jax
  import jax.numpy as jnp
  import numpy as np
  backend = argv[0]
  n = int(argv[1]) if len(argv) > 1 else (1 << 20) + 7
  import vector_add as example       # installs pallas-prof at import
  from pallas_prof.backend import pallas_call_rule
  pallas_call_rule.route_to_builtin(backend == "builtin")
  kx, ky = jax.random.split(jax.random.key(0))
  x = jax.random.normal(kx, (n,), jnp.bfloat16)
  y = jax.random.normal(ky, (n,), jnp.bfloat16)
  got = np.asarray(jax.block_until_ready(jax.jit(example.add)(x, y)), np.float32)
  want = np.asarray(x + y, np.float32)
  ok = np.array_equal(got, want)
  from pallas_prof.backend import kernel_registry
  lowered_by_us = bool(kernel_registry.kernels())
  print(f"{backend} (pallas-prof lowered it: {lowered_by_us}): n={n}, block overhang {(-n) % example.BLOCK} elements, "
        f"result {'equal to x + y' if ok else 'WRONG'}", flush=True)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
