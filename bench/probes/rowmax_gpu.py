"""The GPU fuzz's smallest wrong kernel (seed 20261204): a row max of a (17, 12)
int32 block, through pallas-prof and through JAX's built-in Triton backend, on
several inputs; and a cumsum of a broadcast column (its scan programs' shape)."""
import sys, os
sys.path.insert(0, os.getcwd())
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
import pallas_prof


def rowmax(x0_ref, o_ref):
  o_ref[...] = jnp.max(-x0_ref[...], axis=1, keepdims=True)


def colscan(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.cumsum(x[:, None], axis=0) * x[None, :]


for name, params in (("pallas-prof", pallas_prof.CompilerParams()),
                     ("pallas-prof w1", pallas_prof.CompilerParams(num_warps=1)),
                     ("builtin", plgpu.CompilerParams())):
  for seed in range(3):
    rng = np.random.default_rng(seed)
    x = rng.integers(-100, 100, (17, 12)).astype(np.int32)
    try:
      r = pl.pallas_call(rowmax, grid=(1,), in_specs=[pl.BlockSpec((17, 12), lambda i: (i, 0))],
                         out_specs=pl.BlockSpec((17, 1), lambda i: (i, 0)),
                         out_shape=jax.ShapeDtypeStruct((17, 1), jnp.int32), compiler_params=params)(x)
      bad = np.nonzero(np.asarray(r)[:, 0] != (-x).max(1))[0]
      print(name, "rowmax seed", seed, "wrong rows", bad.tolist(), np.asarray(r)[bad, 0].tolist(), (-x).max(1)[bad].tolist())
    except Exception as e:
      print(name, "rowmax error", type(e).__name__, str(e)[:120])
    for n in (2, 3, 7):
      v = rng.uniform(-4, 4, (n,)).astype(np.float32)
      try:
        r = pl.pallas_call(colscan, out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32), compiler_params=params)(v)
        want = np.cumsum(v.astype(np.float64))[:, None] * v[None, :]
        bad = np.argwhere(np.abs(np.asarray(r) - want) > 1e-4 * np.maximum(1, np.abs(want)))
        print(name, "colscan", n, "seed", seed, "wrong", len(bad), bad[:3].tolist())
      except Exception as e:
        print(name, "colscan", n, "error", type(e).__name__, str(e)[:100])
