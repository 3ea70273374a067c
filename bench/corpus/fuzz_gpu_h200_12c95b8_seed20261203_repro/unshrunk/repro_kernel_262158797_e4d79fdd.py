"""A difference the pallas-prof fuzzer found (shrunk by hypothesis).

pallas-prof failed where the reference ran: LoweringError: cannot compile in kernel `fuzz_262158797` (llir): Triton failed in the llir stage: RuntimeError: PassManager::run failed
  hint: this is Triton rejecting the generated code; run `pallas-prof show` on the kernel to read it, and try smaller blocks or another num_warps/num_stages

Run from the repository root: python3 {this file}
"""
import json
from testkit.fuzz.programs import InputSpec, Program
from testkit.fuzz.check import check

PROGRAM = json.loads(r'''
{
 "kind": "kernel",
 "source": "def kernel(x0_ref, o_ref):\n  x0 = x0_ref[...]\n  v1 = x0 | x0\n  v2 = v1.astype(jnp.bool)\n  v3 = jnp.argmax(x0, axis=1, keepdims=True)\n  v4 = jnp.where(v3 < v3, v3, v3)\n  v5 = jnp.cumsum(v3, axis=1)\n  v6 = jnp.argmax(v5, axis=1, keepdims=True)\n  o_ref[...] = v6\n\ncall = dict(grid=(2,), in_specs=[pl.BlockSpec((16, 22), lambda i: (i, 0))],\n            out_specs=pl.BlockSpec((16, 1), lambda i: (i, 0)),\n            out_shape=jax.ShapeDtypeStruct((25, 1), jnp.int32))\n",
 "inputs": [
  {
   "shape": [
    25,
    22
   ],
   "dtype": "int32",
   "low": -100,
   "high": 100,
   "special": false
  }
 ],
 "seed": 262158797,
 "tolerance": 0.0,
 "scale": 1.0,
 "features": [
  "binary",
  "cast",
  "overhang 7",
  "row argmax",
  "row cumsum",
  "rows",
  "select"
 ],
 "fragile": false
}
''')
PROGRAM["inputs"] = tuple(InputSpec(**dict(i, shape=tuple(i["shape"])))
                          for i in PROGRAM["inputs"])
PROGRAM["features"] = tuple(PROGRAM["features"])
program = Program(**PROGRAM)
print(program.source)
print(check(program))
