"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float32[48]): 12 of 48 elements differ: [1]: np.float32(202.9075) vs np.float32(218.3064); [2]: np.float32(344.24448) vs np.float32(239.4178); [3]: np.float32(929.5027) vs np.float32(425.52582); [4]: np.float32(1523.2094) vs np.float32(520.56067); [5]: np.float32(4194.707) vs np.float32(3192.0583)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x0[:, None], axis=0) * x1[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x0 * x0)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -10000, 10000)\n  v7 = jnp.sum(v6, axis=1)\n  v8 = jnp.clip(v7, -10000, 10000)\n  v9 = jnp.cumsum(v5, axis=0)\n  v10 = jnp.clip(v9, -10000, 10000)\n  v11 = lax.cumsum(v3, axis=1, reverse=True)\n  v12 = x2 + v10\n  v13 = jnp.clip(v12, -10000, 10000)\n  v14 = jnp.round(v3)\n  return (v8, v11, v13, v14,)\n",
 "inputs": [
  {
   "shape": [
    48
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
  },
  {
   "shape": [
    48,
    3
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 300,
 "tolerance": 0.0002,
 "scale": 1000000.0,
 "features": [
  "binary",
  "clip",
  "cumsum",
  "reduce",
  "unary"
 ],
 "fragile": true,
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
