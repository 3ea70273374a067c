"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float32[3, 3]): 4 of 9 elements differ: [1, 2]: np.float32(1912.1296) vs np.float32(39.614105); [2, 0]: np.float32(549.7613) vs np.float32(213.70442); [2, 1]: np.float32(3608.335) vs np.float32(3644.9678); [2, 2]: np.float32(3824.7092) vs np.float32(79.8353)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x1[:, None], axis=0) * x1[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x1 * x1)[:, None] * v4, axis=0)\n  v6 = lax.cumsum(v5, axis=0, reverse=False)\n  v7 = jnp.clip(v6, -10000, 10000)\n  return (v7,)\n",
 "inputs": [
  {
   "shape": [
    1
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
    1,
    3
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 1,
 "tolerance": 0.0002,
 "scale": 21600.0,
 "features": [
  "clip",
  "cumsum",
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
