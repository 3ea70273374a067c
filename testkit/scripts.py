"""User scripts the tests and the probes run through `pallas-prof run`. Moved from
tests/cli/test_newcomer.py, which bench/probes/runtime_error_gpu.sh imported."""
from __future__ import annotations

import textwrap

# a kernel that reads past its ref (issue 30, item 3): caught in the bounds-checked mode and
# on a CPU; an illegal address on a GPU in the default mode
READS_PAST = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
      i = pl.program_id(0)
      o_ref[...] = x_ref[pl.ds(i * 8 + 4, 8)] * 2.0

    f = jax.jit(pl.pallas_call(kernel, grid=(4,), in_specs=[pl.BlockSpec((32,), lambda i: (0,))],
                               out_specs=pl.BlockSpec((8,), lambda i: (i,)),
                               out_shape=jax.ShapeDtypeStruct((32,), jnp.float32)))
    print(f(jnp.arange(32, dtype=jnp.float32)))
    """)
