"""Is pallas-prof's generated kernel slower to compile than JAX's built-in
backend's? Both through the same pipeline: the `triton` package, for sm_90.

    python bench/probes/ttir_vs_builtin.py [--ops softmax,rms_norm,layer_norm,mha] [--repeats 4]

Runs on a machine without a GPU. The built-in backend's TTIR is taken from
the StableHLO JAX lowers for CUDA (the `__gpu$xla.gpu.triton` custom call
carries it as MLIR bytecode), printed as text and compiled with
triton.compile; pallas-prof's kernel is compiled as the compile worker does
(prepared libdevice included). Medians of the stage times after a first,
discarded compile. On the GPU the built-in backend compiles its TTIR inside
XLA instead, with XLA's own copy of Triton and LLVM: this compares the
kernels, not the two compilers.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import jax  # noqa: E402


def _function(op: str):
  """(jitted function, abstract arguments) of a benchmark op, as ops_vs_builtin.py runs it."""
  from bench.ops_vs_builtin import OPS_BY_NAME, abstract_args
  spec = OPS_BY_NAME[op]()
  return spec["pallas"](), abstract_args(spec)


def builtin_ttir(op: str) -> tuple[str, int, int]:
  """The built-in backend's TTIR as text, with its num_warps and num_stages."""
  from jax._src.interpreters import mlir as jax_mlir
  from jax._src.lib.mlir import ir
  from jax._src.lib.triton import dialect as tt_dialect
  from pallas_prof.backend import registration
  registration.route_to_builtin(True)
  try:
    fn, args = _function(op)
    module = fn.trace(*args).lower(lowering_platforms=("cuda",)).compiler_ir("stablehlo")
  finally:
    registration.route_to_builtin(False)
  calls = []

  def walk(operation):
    for region in operation.regions:
      for block in region.blocks:
        for child in block.operations:
          if child.operation.name == "stablehlo.custom_call":
            calls.append(child)
          walk(child.operation)

  walk(module.operation)
  config = calls[0].attributes["mhlo.backend_config"]
  bytecode = bytes(ir.StringAttr(config["ir"]).value_bytes)
  context = jax_mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  with context:
    text = ir.Module.parse(bytecode).operation.get_asm(enable_debug_info=True)
  number = lambda attr: int(str(config[attr]).split(":")[0])
  return text, number("num_warps"), number("num_stages")


def ours_request(op: str) -> dict:
  from pallas_prof.backend import compile as pcompile, registry
  registry.clear()
  jax.clear_caches()
  fn, args = _function(op)
  fn.lower(*args)
  (record,) = registry.kernels()
  return pcompile.compile_request(record.generated, ("cuda", 90), need_cubin=False)


def _timed_compile(src, options) -> dict[str, float]:
  import triton
  from triton.backends.compiler import GPUTarget
  times = {}

  def hook(backend, stages, options_, language, capability):
    stages["cubin"] = lambda module, metadata: b""      # as the GPU path: PTX only
    for name in [n for n in stages if n != "cubin"]:
      original = stages[name]

      def timed(module, metadata, _name=name, _original=original):
        t0 = time.perf_counter()
        out = _original(module, metadata)
        times[_name] = (time.perf_counter() - t0) * 1e3
        return out
      stages[name] = timed

  saved = triton.knobs.runtime.add_stages_inspection_hook
  triton.knobs.runtime.add_stages_inspection_hook = hook
  triton.knobs.compilation.always_compile = True
  try:
    triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
  finally:
    triton.knobs.runtime.add_stages_inspection_hook = saved
  return times


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--ops", default="softmax,rms_norm,layer_norm,mha")
  ap.add_argument("--repeats", type=int, default=4)
  args = ap.parse_args(argv)
  os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))
  import pallas_prof
  from pallas_prof.backend import triton_run
  pallas_prof.install()
  print("median ms per stage (TTIR->PTX, sm_90). ours: ttir includes Triton's Python front end, "
        "llir the prepared libdevice link; built-in: Triton's own libdevice link")
  for op in args.ops.split(","):
    request = ours_request(op)
    ours = []
    for _ in range(args.repeats + 1):
      result = triton_run.run_triton(request)
      ours.append({r[0]: (r[2] - r[1]) / 1e6 for r in result["records"]})
    text, warps, stages = builtin_ttir(op)
    with tempfile.NamedTemporaryFile("w", suffix=".ttir", delete=False) as f:
      f.write(text)
    options = {k: v for k, v in request["options"].items() if k != "extern_libs"}
    options.update(num_warps=warps, num_stages=stages)
    theirs = [_timed_compile(f.name, options) for _ in range(args.repeats + 1)]
    os.unlink(f.name)
    median = lambda runs, k: statistics.median(r[k] for r in runs[1:])
    row = lambda runs, keys: "  ".join(f"{k} {median(runs, k):6.1f}" for k in keys)
    print(f"{op:11s} ours     {row(ours, ('ttir', 'ttgir', 'llir', 'ptx'))}")
    print(f"{'':11s} built-in {'':12s}{row(theirs, ('ttgir', 'llir', 'ptx'))}")


if __name__ == "__main__":
  main()
