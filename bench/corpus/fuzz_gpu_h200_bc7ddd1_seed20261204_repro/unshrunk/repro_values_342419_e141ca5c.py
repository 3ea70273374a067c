"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float32[3, 3]): 2 of 9 elements differ: [2, 1]: np.float32(1538.3505) vs np.float32(1810.5693); [2, 2]: np.float32(2882.7546) vs np.float32(1810.7638)

Run from the repository root: python3 {this file} [gpu] [sm90]
"""
import json
import os
import sys
sys.path.insert(0, os.getcwd())
from testkit.fuzz.programs import InputSpec, Program
from testkit.fuzz.check import check

PROGRAM = json.loads(r'''
{
 "kind": "values",
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x2[:, None], axis=0) * x0[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x2 * x2)[:, None] * v4, axis=0)\n  v6 = jnp.sum(v5, axis=1)\n  v7 = jnp.clip(v6, -10000, 10000)\n  v8 = lax.cumsum(v5, axis=1, reverse=False)\n  v9 = jnp.clip(v8, -10000, 10000)\n  v10 = jnp.cumsum(x2[:, None], axis=0) * v7[None, :]\n  v11 = jnp.exp(jnp.clip(-v10, -5, 5))\n  v12 = jnp.cumsum((x2 * v7)[:, None] * v11, axis=0)\n  v13 = jnp.clip(v12, -10000, 10000)\n  return (v9, v13,)\n",
 "inputs": [
  {
   "shape": [
    3
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    19
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    3
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 342419,
 "tolerance": 0.0002,
 "scale": 1000000.0,
 "features": [
  "clip",
  "cumsum",
  "reduce",
  "unary"
 ],
 "fragile": false,
 "num_warps": null
}
''')
PROGRAM["inputs"] = tuple(InputSpec(**dict(i, shape=tuple(i["shape"])))
                          for i in PROGRAM["inputs"])
PROGRAM["features"] = tuple(PROGRAM["features"])
program = Program(**PROGRAM)
print(program.source)
if "gpu" in sys.argv[1:]:
  import jax
  print(check(program, jax.devices("gpu")[0]))
else:
  print(check(program))
if "sm90" in sys.argv[1:]:
  from testkit.fuzz.sm90 import compile_sm90
  print(compile_sm90(program))
