"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float16[33]): 20 of 33 elements differ: [5]: np.float16(205.1) vs np.float16(32.1); [6]: np.float16(217.0) vs np.float16(44.2); [7]: np.float16(227.8) vs np.float16(54.75); [8]: np.float16(228.8) vs np.float16(55.75); [9]: np.float16(238.6) vs np.float16(65.7)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x1[:, None], axis=0) * x0[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x1 * x1)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -300, 300)\n  v7 = jnp.sum(v6, axis=1)\n  v8 = jnp.clip(v7, -300, 300)\n  v9 = jnp.cumsum(v6, axis=1)\n  v10 = jnp.clip(v9, -300, 300)\n  v11 = jnp.abs(v3)\n  v12 = jnp.clip(v11, -300, 300)\n  v13 = lax.cumsum(v6, axis=1, reverse=False)\n  v14 = jnp.clip(v13, -300, 300)\n  return (v8, v10, v12, v14,)\n",
 "inputs": [
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
    33
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    3,
    33
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 5209,
 "tolerance": 0.01,
 "scale": 79200.0,
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
