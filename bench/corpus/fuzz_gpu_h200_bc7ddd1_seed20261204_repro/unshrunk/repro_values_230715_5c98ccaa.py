"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float16[64, 64]): 1 of 4096 elements differ: [51, 32]: np.float16(141.0) vs np.float16(146.0)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x2[:, None], axis=0) * x2[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x2 * x0)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -300, 300)\n  v7 = -x1\n  v8 = lax.cumsum(v7, axis=0, reverse=False)\n  v9 = v4 * v3\n  v10 = jnp.clip(v9, -300, 300)\n  v11 = v8[:, None]\n  return (v6, v10, v11,)\n",
 "inputs": [
  {
   "shape": [
    64
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
    64
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 230715,
 "tolerance": 0.01,
 "scale": 153600.0,
 "features": [
  "binary",
  "clip",
  "column",
  "cumsum",
  "unary"
 ],
 "fragile": false,
 "num_warps": 2
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
