"""A difference the pallas-prof fuzzer found (shrunk by hypothesis).

output 2 (int32[9, 9]): 5 of 81 elements differ: [0, 0]: np.int32(7) vs np.int32(0); [3, 7]: np.int32(5) vs np.int32(0); [4, 3]: np.int32(5) vs np.int32(0); [7, 2]: np.int32(7) vs np.int32(0); [8, 2]: np.int32(7) vs np.int32(0)

Run from the repository root: python3 {this file}
"""
import json
from testkit.fuzz.programs import InputSpec, Program
from testkit.fuzz.check import check

PROGRAM = json.loads(r'''
{
 "kind": "values",
 "source": "def fn(x0):\n  v1 = jnp.where(x0 > x0, x0, x0)\n  v2 = jnp.broadcast_to(x0[:, :, 0:1], (9, 9, 9))\n  v3 = v1.astype(jnp.float32)\n  v4 = jnp.clip(v3, -10000, 10000)\n  v5 = lax.fori_loop(0, 2, lambda i, c: jnp.tanh(c) * 0.5 + v4 * 0.25 + i.astype(c.dtype) * 0.125, v3)\n  v6 = jnp.tanh(v3)\n  v7 = jnp.argmin(v6, axis=2, keepdims=False)\n  return (v2, v5, v7,)\n",
 "inputs": [
  {
   "shape": [
    9,
    9,
    9
   ],
   "dtype": "uint32",
   "low": 0,
   "high": 100,
   "special": false
  }
 ],
 "seed": 2,
 "tolerance": 0.0002,
 "scale": 1000000.0,
 "features": [
  "argreduce",
  "broadcast",
  "cast",
  "clip",
  "fori_loop",
  "select",
  "unary"
 ],
 "fragile": true
}
''')
PROGRAM["inputs"] = tuple(InputSpec(**dict(i, shape=tuple(i["shape"])))
                          for i in PROGRAM["inputs"])
PROGRAM["features"] = tuple(PROGRAM["features"])
program = Program(**PROGRAM)
print(program.source)
print(check(program))
