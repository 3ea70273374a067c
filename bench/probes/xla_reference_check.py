"""Which reference is right where pallas-prof and XLA disagree on the GPU:
pallas-prof vs XLA (one multi-output jit, as the tests build their references)
vs XLA (one output) vs numpy, for the cases the CPU test suite failed on the
H200 (jax 0.11.2).

    python bench/probes/xla_reference_check.py      # from the repository root, any machine

On the H200 (bench/results/archive/xla_reference_check_h200.txt): XLA's GPU backend gave
twice the product for an int8 x int8 -> int32 dot, and wrong int32 maxima in a
multi-output jit; pallas-prof matched numpy in both. float64 -> float16: XLA's
GPU backend rounds once (as numpy), pallas-prof through float32 (as XLA's CPU
backend). exp2: how many results differ from XLA's at all.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from testkit.helpers import elementwise_call, random_array, run_on_values  # noqa: E402
rng = np.random.default_rng(0)

def report(name, ours, xla_multi, xla_single, ref):
  f = lambda a: np.asarray(a).ravel()[:6].tolist()
  print(f"{name}: ours==numpy {np.array_equal(np.asarray(ours), ref)}  xla_multi==numpy {np.array_equal(np.asarray(xla_multi), ref)}  xla_single==numpy {np.array_equal(np.asarray(xla_single), ref)}")
  print("   ours", f(ours), "xla_multi", f(xla_multi), "xla_single", f(xla_single), "numpy", f(ref))

# 1. int32 reductions (test_integer_reductions)
x = random_array(rng, (5, 7), "int32", low=1, high=100)
fn = lambda x: {"max": jnp.max(-x, axis=0), "max_plus": jnp.max(x, axis=0) + jnp.asarray(100, jnp.int32),
                "min": jnp.min(x, axis=0)}
ours = run_on_values(fn, x)
multi = jax.jit(fn)(x)
single = jax.jit(lambda x: jnp.max(-x, axis=0))(x)
report("int32 max(-x)", ours["max"], multi["max"], single, np.max(-x, axis=0))

# 2. int8 dot (test_integer_dots mkn1 = (8,5,3))
a, b = random_array(rng, (8, 5), "int8"), random_array(rng, (5, 3), "int8")
fn = lambda a, b: {"int8->int32": jnp.dot(a, b, preferred_element_type=jnp.int32),
                   "int8T": jnp.dot(a.T.T, b, preferred_element_type=jnp.int32),
                   "int16": jnp.dot(a.astype(jnp.int16), b.astype(jnp.int16))}
ours = run_on_values(fn, a, b)
try:
  multi = jax.jit(fn)(a, b)["int8->int32"]
except Exception as e:
  multi = np.array([-1]); print("xla multi failed:", str(e)[:120])
try:
  single = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.int32))(a, b)
except Exception as e:
  single = np.array([-1]); print("xla single failed:", str(e)[:120])
report("int8 dot ->int32", ours["int8->int32"], multi, single, a.astype(np.int32) @ b.astype(np.int32))

# 3. f64 -> f16
with jax.enable_x64(True):
  v = rng.uniform(-4, 4, size=(8, 128)).astype(np.float64)
  v[0, :4] = [1.0 + 2**-11 + 2**-40, 1.0 + 2**-11 - 2**-40, 1.0009765625 + 2**-12, 1.001]
  ours = elementwise_call(lambda t: t.astype(jnp.float16), v)
  single = jax.jit(lambda t: t.astype(jnp.float16))(v)
  report("f64->f16", ours, single, single, v.astype(np.float16))
  bad = np.nonzero(np.asarray(ours) != v.astype(np.float16))
  print("   f64->f16 mismatches", len(bad[0]), [(float(v[i, j]), float(np.asarray(ours)[i, j]), float(v.astype(np.float16)[i, j])) for i, j in zip(*bad)][:4])

# 4. exp2 vs XLA
x = jnp.asarray(rng.standard_normal((8, 128)).astype(np.float32))
ours = elementwise_call(lax.exp2, x); xla = jax.jit(lax.exp2)(x)
print("exp2 differing from XLA:", int(np.sum(np.asarray(ours) != np.asarray(xla))), "of", x.size)
print("jaxpr of exp2 on", jax.__version__, jax.make_jaxpr(lax.exp2)(x))
