"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

output 0 (float16[19]): 1 of 19 elements differ: [17]: np.float16(0.5664) vs np.float16(0.665)

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
 "source": "def kernel(x0_ref, x1_ref, o_ref, live_ref):\n  gi = pl.program_id(0) * 19 + lax.broadcasted_iota(jnp.int32, (19,), 0)\n  x1 = x1_ref[...]\n  v2 = x1 * x1 + 1\n  x0 = plgpu.load(x0_ref, mask=(gi >= 0) & (gi < 1), other=v2)\n  v4 = x0 * v2\n  v5 = jnp.sin(v4)\n  o_ref[...] = v5\n  live_ref[...] = v2 * x1\n\ncall = dict(grid=(1,), in_specs=[pl.BlockSpec((19,), lambda i: (i,)), pl.BlockSpec((19,), lambda i: (i,))],\n            out_specs=[pl.BlockSpec((19,), lambda i: (i,)), pl.BlockSpec((19,), lambda i: (i,))],\n            out_shape=[jax.ShapeDtypeStruct((19,), jnp.float16),\n                       jax.ShapeDtypeStruct((19,), jnp.float16)])\n",
 "inputs": [
  {
   "shape": [
    19
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    19
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 0,
 "tolerance": 0.01,
 "scale": 68.0,
 "features": [
  "grid overhang 0",
  "live",
  "live use",
  "masked_load other=live",
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
