"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float32[7, 7]): 28 of 49 elements differ: [2, 2]: np.float32(-0.3576665) vs np.float32(-0.8135046); [2, 3]: np.float32(-1.6637123) vs np.float32(5.3647027); [2, 4]: np.float32(62.948063) vs np.float32(-1.2567496); [2, 5]: np.float32(92.326645) vs np.float32(-1.4693499); [2, 6]: np.float32(-1.5903354) vs np.float32(9.387587)

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x0[:, None], axis=0) * x2[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x0 * x2)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -10000, 10000)\n  v7 = jnp.sum(v6, axis=1)\n  v8 = jnp.clip(v7, -10000, 10000)\n  v9 = v5 + v4\n  v10 = jnp.clip(v9, -10000, 10000)\n  v11 = jnp.cumsum(v8[:, None], axis=0) * x2[None, :]\n  v12 = jnp.exp(jnp.clip(-v11, -5, 5))\n  v13 = jnp.cumsum((v8 * x0)[:, None] * v12, axis=0)\n  v14 = jnp.clip(v13, -10000, 10000)\n  v15 = jnp.sum(v14, axis=1)\n  v16 = jnp.clip(v15, -10000, 10000)\n  v17 = jnp.cumsum(x0[:, None], axis=0) * x1[None, :]\n  v18 = jnp.exp(jnp.clip(-v17, -5, 5))\n  v19 = jnp.cumsum((x0 * v15)[:, None] * v18, axis=0)\n  v20 = jnp.clip(v19, -10000, 10000)\n  v21 = jnp.sum(v20, axis=1)\n  v22 = jnp.clip(v21, -10000, 10000)\n  return (v10, v16, v22,)\n",
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
    2
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
  }
 ],
 "seed": 1595,
 "tolerance": 0.0002,
 "scale": 1000000.0,
 "features": [
  "binary",
  "clip",
  "cumsum",
  "reduce",
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
