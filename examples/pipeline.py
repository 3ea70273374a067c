"""Several Pallas kernels in one program (layer norm -> matmul -> softmax -> add),
each called more than once: the script `pallas-prof run` reports on.

    pallas-prof run examples/pipeline.py            # small on CPU, 4096-wide on a GPU
    python examples/pipeline.py --n 512             # another width (a multiple of 128)
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layer_norm  # noqa: E402
import matmul  # noqa: E402
import softmax  # noqa: E402
import vector_add  # noqa: E402


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  on_gpu = jax.default_backend() == "gpu"
  n = int(argv[argv.index("--n") + 1]) if "--n" in argv else (4096 if on_gpu else 128)
  keys = jax.random.split(jax.random.PRNGKey(seed), 4)
  x = jax.random.normal(keys[0], (n, n), jnp.float32)
  w = (jax.random.normal(keys[1], (n, n), jnp.float32) / np.sqrt(n)).astype(jnp.bfloat16)
  gamma, beta = jnp.ones((n,)), jnp.zeros((n,))
  mm = dict(bm=128, bn=128, bk=64, num_warps=4, num_stages=3) if on_gpu else dict(bm=64, bn=64, bk=32)
  worst = 0.0
  for step in range(3):
    h = layer_norm.layer_norm(x, gamma, beta)
    y = matmul.matmul(h.astype(jnp.bfloat16), w, **mm).astype(jnp.float32)
    p = softmax.softmax(y)
    out = vector_add.add(p.reshape(-1), x.reshape(-1)).reshape(n, n)
    ref = jax.nn.softmax(jnp.dot(layer_norm.reference(x, gamma, beta).astype(jnp.bfloat16), w,
                                 preferred_element_type=jnp.float32).astype(jnp.bfloat16)
                         .astype(jnp.float32), axis=-1) + x
    worst = max(worst, float(jnp.max(jnp.abs(out - ref))))
  print(f"pipeline n={n}: 3 steps, max |error| = {worst:.3g}")
  return 0 if worst < 2e-2 else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
