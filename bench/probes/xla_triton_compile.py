"""Whether XLA's own Triton could take the TTIR->PTX step of pallas-prof's first call.

    python bench/probes/xla_triton_compile.py [--ops softmax,mha,matmul] [--repeats 3]
        [--out record.json]

Why: on the H200 (bench/results/archive/README.md, "Issue #17 part 5") the `triton` wheel took 248 ms
from TTIR to PTX for the 8192^3 matmul where XLA's Triton, inside the built-in's XLA
compile, took ~136 ms: the wheel's LLVM and MLIR are built with assertions. jax 0.10.2's
source reaches XLA's Triton from Python for jaxlib after 0.10.2,
`jax._src.lib.triton.compile(platform, ttir_bytes, arch, num_warps=, num_ctas=,
num_stages=)` -> PTX and shared memory. Answered on the H200 (2026-12-02, call A): jax
0.11.2 has no such entry; its built-in hands the TTIR to XLA in the
`__gpu$xla.gpu.triton` custom call, so XLA's PTX never reaches Python there. Where a
jaxlib has the entry, this probe asks, per kernel pallas-prof lowers:
  - does XLA's Triton accept the wheel's TTIR (dialect versions may differ)?
  - how long does it take, against the wheel's ttgir+llir+ptx stages for the same TTIR?
  - does its PTX keep line info (the profiler maps SASS to equations through it), how
    many registers and spills does ptxas give it, and is its shared memory the same?
  - launched by the profiler's replay on the same inputs, are the outputs the wheel's
    (bit for bit) and is the kernel as fast (median cold time)?
Without a GPU (or without the handler, jaxlib <= 0.10.2) it says so and checks only that
the wheel's TTIR parses in jaxlib's MLIR with its Triton dialect.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def lower_ops(ops: list[str]) -> list:
  """pallas-prof's kernels of a few of JAX's GPU ops, lowered (not run)."""
  import jax
  import jax.numpy as jnp
  from jax.experimental.pallas.ops.gpu import attention, softmax
  from pallas_prof.backend import kernel_registry
  sys.path.insert(0, os.path.join(ROOT, "examples"))
  import matmul as example            # examples/matmul.py, the suite's matmul
  kernel_registry.clear()
  if "softmax" in ops:
    jax.jit(softmax.softmax).lower(jnp.ones((4096, 5120), jnp.float32))
  if "mha" in ops:
    q = jnp.ones((4, 4096, 16, 64), jnp.bfloat16)
    jax.jit(lambda q: attention.mha(q, q, q, segment_ids=None, causal=True)).lower(q)
  if "matmul" in ops:
    a = jnp.ones((8192, 8192), jnp.bfloat16)
    jax.jit(lambda a, b: example.matmul(a, b, bm=128, bn=256, bk=64, num_warps=8,
                                        num_stages=3)).lower(a, a)
  if "muladd" in ops or "erf" in ops:
    from jax import lax
    from jax.experimental import pallas as pl
    x = jnp.ones((4096, 1000), jnp.float32)

    def elementwise(f):
      def kernel(x_ref, o_ref):
        o_ref[...] = f(x_ref[...])
      return pl.pallas_call(kernel, out_shape=x, grid=(4096 // 8,),
                            in_specs=[pl.BlockSpec((8, 1000), lambda i: (i, 0))],
                            out_specs=pl.BlockSpec((8, 1000), lambda i: (i, 0)))
    if "muladd" in ops:       # a multiply feeding an add: contracted to an FMA or not
      jax.jit(elementwise(lambda v: v * 1.37 + v * v)).lower(x)
    if "erf" in ops:          # a libdevice call (__nv_erff)
      jax.jit(elementwise(lax.erf)).lower(x)
  return kernel_registry.kernels()


def ttir_bytecode(ttir: str) -> bytes:
  """The TTIR text as MLIR bytecode, parsed in jaxlib's context with its Triton dialect
  (what the built-in hands XLA); raises where jaxlib's dialect rejects the wheel's TTIR."""
  import io
  from jax._src.lib.mlir import ir
  from jax._src.lib.triton import dialect as tt_dialect
  ctx = ir.Context()
  tt_dialect.register_dialect(ctx)
  with ctx, ir.Location.unknown():
    module = ir.Module.parse(ttir)
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
  return buf.getvalue()


def ptxas_counts(ck) -> dict:
  """Registers and spill bytes ptxas gives a CompiledKernel's PTX (compile.assemble_cubin,
  the profiler's own step)."""
  from pallas_prof.backend.compiling.compile import assemble_cubin
  try:
    full = assemble_cubin(ck)
  except Exception as e:  # noqa: BLE001 - the finding
    return {"ptxas_error": f"{type(e).__name__}: {str(e)[:400]}"}
  return {"registers": full.registers, "spill_stores": full.spill_stores}


def probe_kernel(record, repeats: int, on_gpu: bool) -> dict:
  from pallas_prof.backend.compiling.compile import compile_kernel
  ck = compile_kernel(record.generated, ("cuda", 90))
  wheel_ms = sum(ck.stage_seconds.get(s, 0.0) for s in ("ttgir", "llir", "ptx")) * 1e3
  row = {"kernel": record.label, "num_warps": ck.num_warps, "num_stages": ck.num_stages,
         "wheel_ttgir_llir_ptx_ms": round(wheel_ms, 1), "wheel_shared": ck.shared_bytes,
         "wheel_ptx_has_loc": ".loc" in ck.ptx}
  try:
    module = ttir_bytecode(ck.asm["ttir"])
    row["jaxlib_parses_wheel_ttir"] = True
  except Exception as e:  # noqa: BLE001 - the finding
    row["jaxlib_parses_wheel_ttir"] = False
    row["parse_error"] = f"{type(e).__name__}: {str(e)[:400]}"
    return row
  from jax._src.lib import triton as xla_triton
  if not (hasattr(xla_triton, "compile") and hasattr(xla_triton, "has_compilation_handler")):
    # jax 0.11.2 (the H200's, 2026-12-02): the module only re-exports the dialect; the
    # built-in hands its TTIR to XLA in the `__gpu$xla.gpu.triton` custom call instead
    row["xla_compile"] = ("not run: this jaxlib has no Python entry to XLA's Triton "
                          "(jax._src.lib.triton.compile, has_compilation_handler)")
    return row
  if not on_gpu or not xla_triton.has_compilation_handler("cuda"):
    row["xla_compile"] = "not run: no CUDA Triton compilation handler in this process"
    return row
  times, result = [], None
  for _ in range(repeats + 1):
    t0 = time.perf_counter()
    try:
      result = xla_triton.compile("cuda", module, "9.0", num_warps=ck.num_warps, num_ctas=1,
                                  num_stages=ck.num_stages)
    except Exception as e:  # noqa: BLE001 - the finding
      row["xla_compile_error"] = f"{type(e).__name__}: {str(e)[:600]}"
      return row
    times.append((time.perf_counter() - t0) * 1e3)
  xla_ck = dataclasses.replace(ck, key=ck.key + "-xla",
                               asm={"ttir": ck.asm["ttir"], "ptx": result.asm},
                               metadata={**ck.metadata, "shared": result.smem_bytes})
  row.update(xla_ttir_to_ptx_ms=round(statistics.median(times[1:]), 1),
             xla_first_ms=round(times[0], 1), xla_shared=result.smem_bytes,
             xla_ptx_has_loc=".loc" in result.asm,
             wheel_ptxas=ptxas_counts(ck), xla_ptxas=ptxas_counts(xla_ck))
  row["launched"] = launch_both(ck, xla_ck)
  return row


def launch_both(ck, xla_ck, seed: int = 7) -> dict:
  """Both PTXs assembled and launched by the profiler's replay on the same random
  inputs: whether XLA's build gives the wheel's outputs bit for bit (else the largest
  difference), and each one's median cold time (L2 flushed before each launch)."""
  import numpy as np
  from pallas_prof.backend.running.launch_spec import LaunchSpec
  from pallas_prof.backend.compiling.compile import assemble_cubin
  from pallas_prof.profiler.timing.replayer import Replayer
  out, results = {}, {}
  for label, k in (("wheel", ck), ("xla", xla_ck)):
    try:
      with Replayer(LaunchSpec.from_compiled(assemble_cubin(k)), 0, seed) as r:
        r.prepare(1)
        _, outputs = r.poison_check()
        timing = r.time_cold(min_launches=100, min_seconds=0.3)
      results[label] = [np.asarray(o, np.float64) for o in outputs]
      out[f"{label}_cold_median_us"] = round(float(np.median(timing["times_s"])) * 1e6, 2)
    except Exception as e:  # noqa: BLE001 - the finding
      out[f"{label}_error"] = f"{type(e).__name__}: {str(e)[:400]}"
  if len(results) == 2:
    diffs = [float(np.nanmax(np.abs(a - b))) if a.size else 0.0
             for a, b in zip(results["wheel"], results["xla"])]
    out["outputs_bitwise_equal"] = all(
        np.array_equal(a, b, equal_nan=True) for a, b in zip(results["wheel"], results["xla"]))
    out["max_abs_difference"] = max(diffs, default=0.0)
    if "wheel_cold_median_us" in out and "xla_cold_median_us" in out:
      out["xla_over_wheel_time"] = round(out["xla_cold_median_us"] / out["wheel_cold_median_us"], 3)
  return out


def main(argv=None) -> dict:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--ops", default="softmax,mha,matmul,muladd,erf")
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--out")
  args = ap.parse_args(argv)
  import jax
  import pallas_prof
  pallas_prof.install()
  on_gpu = jax.default_backend() == "gpu"
  rows = [probe_kernel(r, args.repeats, on_gpu) for r in lower_ops(args.ops.split(","))]
  record = {"command": "python bench/probes/xla_triton_compile.py " + " ".join(argv or sys.argv[1:]),
            "jax": jax.__version__, "backend": jax.default_backend(), "kernels": rows}
  print(json.dumps(record, indent=1))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(record, f, indent=1)
  return record


if __name__ == "__main__":
  main()
