"""Issue 41's XProf proof on a GPU: flash attention forward and backward, profiled the JAX
way. JAX's own Pallas attention (jax.experimental.pallas.ops.gpu.attention.mha, whose
custom VJP has Pallas backward kernels) runs under pallas-prof, inside
jax.profiler.trace(DIR) when --trace DIR is given (without it the script is for
`pallas-prof run --xprof DIR`, which opens the trace itself).

    python3 bench/xprof/flash_attention_gpu.py --trace /tmp/xprof_jax
    pallas-prof run --xprof /tmp/xprof_run bench/xprof/flash_attention_gpu.py

XProf's converters then read the profile back on any machine (bench/xprof/read_profile.py).
"""
import contextlib
import sys

import jax
import jax.numpy as jnp

import pallas_prof

pallas_prof.install()

from jax.experimental.pallas.ops.gpu import attention   # noqa: E402  after install()

BATCH, SEQ, HEADS, DIM = 2, 2048, 8, 64


def loss(q, k, v):
  return attention.mha(q, k, v, segment_ids=None, causal=True).astype(jnp.float32).sum()


def main(argv):
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  q, k, v = (jax.random.normal(key, (BATCH, SEQ, HEADS, DIM), jnp.float16) for key in keys)
  step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
  jax.block_until_ready(step(q, k, v))        # compiled outside the trace
  trace = contextlib.nullcontext()
  if "--trace" in argv:
    trace = jax.profiler.trace(argv[argv.index("--trace") + 1])
  with trace:
    for _ in range(3):
      value, grads = step(q, k, v)
    jax.block_until_ready(grads)
  print(f"mha fwd+bwd {BATCH}x{SEQ}x{HEADS}x{DIM} float16: loss {float(value):.4g}, "
        f"grad norms {[float(jnp.linalg.norm(g.astype(jnp.float32))) for g in grads]}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
