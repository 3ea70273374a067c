"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

CompileError: cannot compile kernel `fuzz_489` (ttir stage): the ttir stage failed: AttributeError("module 'triton.language.extra.hip.libdevice' has no attribute 'rint'")
  from [92] round at <fuzz program 489>:8: cj:f16[3] = round[rounding_method=1] j
  how the lines were found: Triton's front end named the generated line
  fault: pallas-prof's: Triton's front end rejected the source pallas-prof generated: a bug of pallas-prof's lowering (please report it with the generated source)
  hint: this is pallas-prof generating code Triton rejects: please report it with the generated source (/tmp/pallas-prof-cache/kernels/fuzz_489_9a395876109e68d0.py); `pallas-prof show` prints it

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
 "kind": "values",
 "source": "def fn(x0, x1, x2):\n  v3 = lax.pad(x2, jnp.float16(-2), [(1, 1, 1)])\n  v4 = x2 * x2\n  v5 = jnp.where(((lax.broadcasted_iota(jnp.int32, (3,), 0) < (jnp.min(v3) * 8).astype(jnp.int32) % 5) | (lax.broadcasted_iota(jnp.int32, (3,), 0) >= (jnp.min(v3) * 8).astype(jnp.int32) % 5 + 1)), v3, v3 * 2)\n  v6 = v3 * v3\n  v7 = jnp.where(((lax.broadcasted_iota(jnp.int32, (1,), 0) >= ((jnp.max(v5) * 5).astype(jnp.int32) % 3 - 1)) & (lax.broadcasted_iota(jnp.int32, (1,), 0) < ((jnp.max(v5) * 5).astype(jnp.int32) % 3 - 1) + 1)), 3, v4)\n  v8 = v4 * x0\n  v9 = jnp.round(v3)\n  return (v6, v7, v8, v9,)\n",
 "inputs": [
  {
   "shape": [
    1
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    1
   ],
   "dtype": "int32",
   "low": -100,
   "high": 100,
   "special": false
  },
  {
   "shape": [
    1
   ],
   "dtype": "float16",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 489,
 "tolerance": 0.01,
 "scale": 64.0,
 "features": [
  "compound select",
  "live use",
  "pad",
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
