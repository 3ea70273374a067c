"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 1 (float32[1]): 1 of 1 elements differ: [0]: np.float32(10000.0) vs np.float32(7575.297)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x0[:, None], axis=0) * x0[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x0 * x1)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -10000, 10000)\n  v7 = jnp.sum(v6, axis=1)\n  v8 = jnp.clip(v7, -10000, 10000)\n  v9 = jnp.max(x2, axis=0, keepdims=False)\n  v10 = jnp.sum(v8, axis=0, keepdims=False)\n  v11 = jnp.clip(v10, -10000, 10000)\n  v12 = jnp.reshape(v11, (1,))\n  return (v9, v12,)\n",
 "inputs": [
  {
   "shape": [
    7
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    7
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    7,
    7
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 2535090,
 "tolerance": 0.0002,
 "scale": 70000.0,
 "features": [
  "clip",
  "cumsum",
  "reduce",
  "scalar output",
  "unary"
 ],
 "fragile": false,
 "num_warps": 4
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
