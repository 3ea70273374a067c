"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (int32[26, 1]): 8 of 26 elements differ: [1, 0]: np.int32(-87) vs np.int32(-97); [3, 0]: np.int32(-84) vs np.int32(-76); [7, 0]: np.int32(-74) vs np.int32(-81); [12, 0]: np.int32(-94) vs np.int32(-95); [14, 0]: np.int32(-87) vs np.int32(-95)

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
 "kind": "kernel",
 "source": "def kernel(x0_ref, o_ref):\n  x0 = x0_ref[...]\n  v1 = jnp.cumsum(x0, axis=1)\n  v2 = -x0\n  v3 = jnp.min(v2, axis=1, keepdims=True)\n  v4 = jnp.min(v3, axis=1, keepdims=True)\n  v5 = jnp.sum(v3, axis=1, keepdims=True)\n  o_ref[...] = v5\n\ncall = dict(grid=(2,), in_specs=[pl.BlockSpec((20, 24), lambda i: (i, 0))],\n            out_specs=pl.BlockSpec((20, 1), lambda i: (i, 0)),\n            out_shape=jax.ShapeDtypeStruct((26, 1), jnp.int32))\n",
 "inputs": [
  {
   "shape": [
    26,
    24
   ],
   "dtype": "int32",
   "low": -100,
   "high": 100,
   "special": false
  }
 ],
 "seed": 4159,
 "tolerance": 0.0,
 "scale": 1.0,
 "features": [
  "overhang 14",
  "row cumsum",
  "row reduction",
  "rows",
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
