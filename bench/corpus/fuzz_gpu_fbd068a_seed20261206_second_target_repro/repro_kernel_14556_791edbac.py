"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

CompileError: cannot compile kernel `fuzz_14556` (ttir stage): the ttir stage failed: AttributeError("module 'triton.language.extra.hip.libdevice' has no attribute 'rint'")
  from [4] round at <fuzz program 14556>:9: h:f32[10] = round[rounding_method=1] g
  how the lines were found: Triton's front end named the generated line
  fault: pallas-prof's: Triton's front end rejected the source pallas-prof generated: a bug of pallas-prof's lowering (please report it with the generated source)
  hint: this is pallas-prof generating code Triton rejects: please report it with the generated source (/tmp/pallas-prof-cache/kernels/fuzz_14556_da67c29859be84e5.py); `pallas-prof show` prints it

Run from the repository root: python3 {this file} [gpu] [sm90] [sm_80] [gfx942]
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
 "source": "def kernel(x0_ref, x1_ref, o_ref, live_ref):\n  gi = pl.program_id(0) * 10 + lax.broadcasted_iota(jnp.int32, (10,), 0)\n  x1 = x1_ref[...]\n  v2 = x1 * x1 + 1\n  x0 = plgpu.load(x0_ref, mask=((gi % 3) != 1) & (gi < 8), other=v2)\n  v4 = x0 * v2\n  v5 = jnp.where((~((x1 >= 2) & (gi > 0))), x0, v4)\n  v6 = lax.rsqrt(jnp.abs(v2) + 1)\n  v7 = jnp.round(v2)\n  o_ref[...] = v7\n  live_ref[...] = v2 * x1\n\ncall = dict(grid=(2,), in_specs=[pl.BlockSpec((10,), lambda i: (i,)), pl.BlockSpec((10,), lambda i: (i,))],\n            out_specs=[pl.BlockSpec((10,), lambda i: (i,)), pl.BlockSpec((10,), lambda i: (i,))],\n            out_shape=[jax.ShapeDtypeStruct((12,), jnp.float32),\n                       jax.ShapeDtypeStruct((12,), jnp.float32)])\n",
 "inputs": [
  {
   "shape": [
    12
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    12
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 14556,
 "tolerance": 0.0002,
 "scale": 289.0,
 "features": [
  "compound select",
  "grid overhang 8",
  "live",
  "live use",
  "masked_load other=live",
  "unary"
 ],
 "fragile": true,
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
for target in [a for a in sys.argv[1:] if a in ("sm_80", "gfx942")]:
  from testkit.fuzz.second_target import compile_for_target
  print(compile_for_target(program, target))
