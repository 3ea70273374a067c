"""A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
sm_90 compile, or a hazard lead to run on a GPU).

pallas-prof failed where the reference ran: CompileError: cannot compile kernel `fuzz_584` (llir stage): Triton 3.6.0: its ConvertTritonGPUToLLVM pass hit a failed assertion: ScanOpToLLVM.cpp:158 in AddPartialReduce: `numScanBlocks * numParallelBlocks * parallelElementsPerThread * scanElementsPerThreads == srcValues.size()`
  from [5] cumsum at <fuzz program 584>:2: k:f32[24,1] = cumsum[axis=0 reverse=False] j
  from [19] cumsum at <fuzz program 584>:4: y:f32[24,24] = cumsum[axis=0 reverse=False] x
  from [41] cumsum at <fuzz program 584>:8: y:f32[24,24] = cumsum[axis=0 reverse=False] x
  failing pass: ConvertTritonGPUToLLVM (llir stage)
  assertion: ScanOpToLLVM.cpp:158 in AddPartialReduce: `numScanBlocks * numParallelBlocks * parallelElementsPerThread * scanElementsPerThreads == srcValues.size()`
  failing op: tt.scan
  its ops in the kernel: [5] cumsum at <fuzz program 584>:2: tt.scan <axis = 0, reverse = false> : (tensor<32x1xf32, #blocked>) -> tensor<32x1xf32, #blocked>  with #blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [2, 1], order = [1, 0]}>
    [19] cumsum at <fuzz program 584>:4: tt.scan <axis = 0, reverse = false> : (tensor<32x32xf32, #blocked>) -> tensor<32x32xf32, #blocked>  with #blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [2, 1], order = [1, 0]}>
    [41] cumsum at <fuzz program 584>:8: tt.scan <axis = 0, reverse = false> : (tensor<32x32xf32, #blocked>) -> tensor<32x32xf32, #blocked>  with #blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [2, 1], order = [1, 0]}>
  how the lines were found: the failing op has no location; the assertion is in ScanOpToLLVM.cpp, which lowers tt.scan ops: the kernel's tt.scan ops, found with their locations in ttgir
  fault: Triton's, not your kernel's: one of Triton's internal consistency checks failed: a bug of Triton's, whatever the kernel
  reproducer: python /tmp/pallas-prof-cache/kernels/fuzz_584_785d67deab629219.sm90.repro.py  (MLIR's own: /tmp/pallas-prof-cache/kernels/fuzz_584_785d67deab629219.sm90.failure.mlir)
  workaround: tried, none compiled:
    squeeze: its ConvertTritonGPUToLLVM pass hit a failed assertion: ScanOpToLLVM.cpp:158 in AddPartialReduce: `numScanBlocks * numParallelBlocks * parallelElementsPerThread * scanElementsPerThreads == srcValues.size()`
    transpose: its ConvertTritonGPUToLLVM pass hit a failed assertion: ScanOpToLLVM.cpp:158 in AddPartialReduce: `numScanBlocks * numParallelBlocks * parallelElementsPerThread * scanElementsPerThreads == srcValues.size()`
    triangular: its ConvertTritonGPUToLLVM pass hit a failed assertion: ScanOpToLLVM.cpp:158 in AddPartialReduce: `numScanBlocks * numParallelBlocks * parallelElementsPerThread * scanElementsPerThreads == srcValues.size()`
    num_warps=4: its ConvertTritonGPUToLLVM pass hit a failed assertion: ScanOpToLLVM.cpp:158 in AddPartialReduce: `numScanBlocks * numParallelBlocks * parallelElementsPerThre

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
 "source": "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x1[:, None], axis=0) * x2[None, :]\n  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x1 * x0)[:, None] * v4, axis=0)\n  v6 = jnp.clip(v5, -10000, 10000)\n  v7 = jnp.cumsum(x1[:, None], axis=0) * x2[None, :]\n  v8 = jnp.exp(jnp.clip(-v7, -5, 5))\n  v9 = jnp.cumsum((x1 * x1)[:, None] * v8, axis=0)\n  v10 = jnp.clip(v9, -10000, 10000)\n  v11 = x2[:, None]\n  return (v6, v10, v11,)\n",
 "inputs": [
  {
   "shape": [
    24
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    24
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  },
  {
   "shape": [
    24
   ],
   "dtype": "float32",
   "low": -4,
   "high": 4,
   "special": false
  }
 ],
 "seed": 584,
 "tolerance": 0.0002,
 "scale": 57600.0,
 "features": [
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
