"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (int32[17, 1]): 5 of 17 elements differ: [2, 0]: np.int32(94) vs np.int32(96); [4, 0]: np.int32(90) vs np.int32(49); [10, 0]: np.int32(100) vs np.int32(82); [12, 0]: np.int32(61) vs np.int32(90); [13, 0]: np.int32(16) vs np.int32(97)

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
 "source": "def kernel(x0_ref, o_ref):\n  x0 = x0_ref[...]\n  v1 = -x0\n  v2 = jnp.max(v1, axis=1, keepdims=True)\n  o_ref[...] = v2\n\ncall = dict(grid=(1,), in_specs=[pl.BlockSpec((17, 12), lambda i: (i, 0))],\n            out_specs=pl.BlockSpec((17, 1), lambda i: (i, 0)),\n            out_shape=jax.ShapeDtypeStruct((17, 1), jnp.int32))\n",
 "inputs": [
  {
   "shape": [
    17,
    12
   ],
   "dtype": "int32",
   "low": -100,
   "high": 100,
   "special": false
  }
 ],
 "seed": 0,
 "tolerance": 0.0,
 "scale": 1.0,
 "features": [
  "overhang 0",
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
