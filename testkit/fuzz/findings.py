"""Programs the fuzzer found, kept as it found them: tests and bench scripts replay them.
Moved from tests/fuzz/test_fuzz_sm90.py (FUZZ_18680), which bench/tests imported."""
from __future__ import annotations

from testkit.fuzz.programs import InputSpec, Program

# seed 18680's program (issue 32), as the fuzzer found it
FUZZ_18680 = Program(
    "values",
    "def fn(x0, x1, x2):\n"
    "  v3 = jnp.min(x2, axis=0, keepdims=False)\n"
    "  v4 = v3 * v3\n"
    "  v5 = v3 * v4\n"
    "  v6 = lax.dynamic_update_slice_in_dim(v3, v3[0:3] * 2, jnp.min(x0).astype(jnp.int32) % 21,"
    " axis=0)\n"
    "  v7 = x1 * v6\n"
    "  v8 = jnp.broadcast_to(v4, (1, 19))\n"
    "  return (v5, v7, v8,)\n",
    tuple(InputSpec((10, 19), "float16") for _ in range(3)), 18680, 1e-2, 300.0,
    ("dynamic_update_slice", "binary", "reduce", "broadcast"))
