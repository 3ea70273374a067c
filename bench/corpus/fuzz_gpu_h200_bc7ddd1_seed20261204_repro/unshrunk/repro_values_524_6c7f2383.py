"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 2 (float16[5, 7]): 10 of 35 elements differ: [1, 1]: np.float16(-0.1714) vs np.float16(7.46); [1, 2]: np.float16(-0.1714) vs np.float16(7.46); [1, 3]: np.float16(-0.1714) vs np.float16(7.46); [1, 4]: np.float16(-0.1714) vs np.float16(7.46); [1, 6]: np.float16(-0.1714) vs np.float16(7.46)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x0[:, None], axis=0) * x2[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x0 * x0)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -300, 300)\n  v7 = jnp.arctan2(x1, x1)\n  v8 = jnp.cumsum(x0[:, None], axis=0) * v7[None, :]\n  v9 = jnp.exp(jnp.clip(-v8, -5, 5))\n  v10 = jnp.cumsum((x0 * x0)[:, None] * v9, axis=0)\n  v11 = jnp.clip(v10, -300, 300)\n  v12 = jnp.sum(v11, axis=1)\n  v13 = jnp.clip(v12, -300, 300)\n  v14 = v8 + v11\n  v15 = jnp.clip(v14, -300, 300)\n  v16 = x1[:, None] * v12[None, :]\n  v17 = jnp.clip(v16, -300, 300)\n  return (v6, v13, v15, v17,)\n",
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
    7
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
 "seed": 524,
 "tolerance": 0.01,
 "scale": 12000.0,
 "features": [
  "binary",
  "clip",
  "cumsum",
  "outer",
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
