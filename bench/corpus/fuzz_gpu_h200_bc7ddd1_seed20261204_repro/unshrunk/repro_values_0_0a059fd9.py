"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float16[5]): 1 of 5 elements differ: [1]: np.float16(300.0) vs np.float16(190.8)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x0[:, None], axis=0) * x0[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x0 * x0)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -300, 300)\n  v7 = jnp.sum(v6, axis=1)\n  v8 = jnp.clip(v7, -300, 300)\n  v9 = -x0\n  v10 = lax.rsqrt(jnp.abs(v6) + 1)\n  return (v8, v9, v10,)\n",
 "inputs": [
  {
   "shape": [
    5
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    3
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    5
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 0,
 "tolerance": 0.01,
 "scale": 12000.0,
 "features": [
  "clip",
  "cumsum",
  "reduce",
  "unary"
 ],
 "fragile": false,
 "num_warps": 8
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
