"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 1 (float32[16, 16]): 175 of 256 elements differ: [1, 2]: np.float32(969.7616) vs np.float32(3.8870335); [1, 3]: np.float32(1449.519) vs np.float32(1489.6852); [1, 4]: np.float32(969.48596) vs np.float32(1.4099538); [1, 5]: np.float32(1449.519) vs np.float32(1472.0028); [1, 6]: np.float32(969.48596) vs np.float32(1.0971206)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x0[:, None], axis=0) * x1[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x0 * x0)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -10000, 10000)\n  v7 = jnp.cumsum(x0[:, None], axis=0) * x2[None, :]\n  v8 = jnp.exp(jnp.clip(-v7, -5, 5))\n  v9 = jnp.cumsum((x0 * x0)[:, None] * v8, axis=0)\n  v10 = jnp.clip(v9, -10000, 10000)\n  return (v6, v10,)\n",
 "inputs": [
  {
   "shape": [
    16
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    33
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    16
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 220,
 "tolerance": 0.0002,
 "scale": 38400.0,
 "features": [
  "clip",
  "cumsum",
  "unary"
 ],
 "fragile": false,
 "num_warps": 1
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
