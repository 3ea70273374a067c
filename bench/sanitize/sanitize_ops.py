"""JAX's Pallas GPU ops, forward and backward, through pallas-prof at small
sizes: the workload bench/sanitize/sanitize_gpu.sh runs under compute-sanitizer.

    python3 bench/sanitize/sanitize_ops.py [norms] [mha]   # on a GPU; one line per op (default: all)

Each op is checked against its XLA reference, so a run that the sanitizer
passes also computed the right numbers. Sizes are small (the sanitizer makes
every kernel 10-100x slower) but not multiples of the ops' blocks where the
op allows it.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import pallas_prof

pallas_prof.install()


def _close(name, got, want, tol):
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    err = float(jnp.max(jnp.abs(g.astype(jnp.float32) - w.astype(jnp.float32))))
    scale = float(jnp.max(jnp.abs(w.astype(jnp.float32)))) + 1.0
    ok = np.isfinite(err) and err <= tol * scale
    print(f"{name}: max |error| {err:.3g} ({'ok' if ok else 'WRONG'})", flush=True)
    if not ok:
      raise SystemExit(f"{name}: pallas-prof differs from the reference")


def main(parts) -> None:
  from jax.experimental.pallas.ops.gpu import attention, layer_norm, rms_norm, softmax
  parts = set(parts or ("norms", "mha"))
  key = iter(jax.random.split(jax.random.PRNGKey(0), 16))
  if "norms" in parts:
    _norms(key, softmax, layer_norm, rms_norm)
  if "mha" in parts:
    _mha(key, attention)


def _norms(key, softmax, layer_norm, rms_norm):
  x = jax.random.normal(next(key), (37, 300), jnp.float32)
  _close("softmax fwd", jax.jit(softmax.softmax)(x), jax.nn.softmax(x, -1), 1e-5)

  for mod, kind in ((layer_norm, "layer_norm"), (rms_norm, "rms_norm")):
    h = jax.random.normal(next(key), (2, 24, 320), jnp.float32)
    w = jax.random.normal(next(key), (320,), jnp.float32)
    b = jax.random.normal(next(key), (320,), jnp.float32)
    f, ref = getattr(mod, kind), getattr(mod, f"{kind}_reference")
    _close(f"{kind} fwd", jax.jit(f)(h, w, b), ref(h, w, b), 1e-4)
    loss = lambda fn: lambda h, w, b: jnp.sum(jnp.sin(fn(h, w, b)))
    _close(f"{kind} bwd", jax.jit(jax.grad(loss(f), argnums=(0, 1, 2)))(h, w, b),
           jax.grad(loss(ref), argnums=(0, 1, 2))(h, w, b), 1e-3)


def _mha(key, attention):
  q, k, v = (jax.random.normal(next(key), (1, 256, 2, 64), jnp.float16) for _ in range(3))
  mha = functools.partial(attention.mha, segment_ids=None, causal=True,
                          block_sizes=attention.BlockSizes.get_default())
  ref = functools.partial(attention.mha_reference, segment_ids=None, causal=True)
  # each step says so first: under compute-sanitizer a process that dies shows where
  print("mha fwd: reference (XLA)", flush=True)
  want = jax.block_until_ready(ref(q, k, v))
  print("mha fwd: pallas-prof", flush=True)
  got = jax.block_until_ready(jax.jit(mha)(q, k, v))
  _close("mha fwd", got, want, 2e-2)
  loss = lambda fn: lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) ** 2)
  print("mha bwd: reference (XLA)", flush=True)
  want = jax.block_until_ready(jax.grad(loss(ref), argnums=(0, 1, 2))(q, k, v))
  print("mha bwd: pallas-prof", flush=True)
  got = jax.block_until_ready(jax.jit(jax.grad(loss(mha), argnums=(0, 1, 2)))(q, k, v))
  _close("mha bwd", got, want, 5e-2)


if __name__ == "__main__":
  import sys
  main(sys.argv[1:])
