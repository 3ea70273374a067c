"""The pattern that ended the process under Triton 3.9's Proton, as a program: jitted
forward+backward functions run until XLA has made its CUDA graphs, then many in-situ
captures over them. Each capture's launch counts are known by construction (every call
runs one forward and one backward Pallas kernel), so a capture that drops or doubles
records is caught, not only one that dies.

    python -m tests.profiler.timing.capture_pattern --source cupti [--functions 10 --captures 50]

Prints one JSON line: the source used, the captures made, the launches that came from
CUDA graphs, and every capture whose counts were wrong. Exits 0 only if all were right.
test_capture_gpu.py runs it in a child process (an abort would end that process, not
the test run); bench/probes/capture_abort_probe.sh runs it with Proton on triton 3.9.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

# command buffers for fusions and custom calls, from the first call, whatever the size:
# the CUDA graphs exist before any capture starts (the condition that killed the process)
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_enable_command_buffer="
                           "FUSION,CUSTOM_CALL,CUBLAS --xla_gpu_graph_min_graph_size=1").strip()


def make_function(i: int):
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl

  scale = float(i + 1)
  rows, cols, block_rows = 1024, 384 + 8 * i, 32       # widths not powers of two

  def fwd_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * scale + jnp.sin(x)

  def bwd_kernel(x_ref, g_ref, o_ref):
    o_ref[...] = g_ref[...] * (scale + jnp.cos(x_ref[...]))

  spec = pl.BlockSpec((block_rows, cols), lambda r: (r, 0))
  grid = (rows // block_rows,)

  @jax.custom_vjp
  def f(x):
    return pl.pallas_call(fwd_kernel, grid=grid, in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

  def f_fwd(x):
    return f(x), x

  def f_bwd(x, g):
    return (pl.pallas_call(bwd_kernel, grid=grid, in_specs=[spec, spec], out_specs=spec,
                           out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, g),)

  f.defvjp(f_fwd, f_bwd)
  loss = jax.jit(jax.value_and_grad(lambda x: jnp.sum(f(x) ** 2)))
  x = jax.random.normal(jax.random.PRNGKey(i), (rows, cols), jnp.float32)
  return loss, x


def main(argv=None) -> int:
  parser = argparse.ArgumentParser()
  parser.add_argument("--source", choices=("cupti", "proton"), required=True)
  parser.add_argument("--functions", type=int, default=10)
  parser.add_argument("--captures", type=int, default=50)
  parser.add_argument("--calls", type=int, default=3)
  parser.add_argument("--via-tuner", action="store_true",
                      help="capture through the tuner's clock (tune/calltime.gpu_kernels)")
  args = parser.parse_args(argv)

  import jax
  import pallas_prof
  from pallas_prof.profiler.timing import insitu
  from pallas_prof.tune import calltime
  pallas_prof.install()

  functions = [make_function(i) for i in range(args.functions)]
  for fn, x in functions:              # compiled, and run until XLA's graphs are made
    for _ in range(3):
      jax.block_until_ready(fn(x))
  wrong, graph_launches = [], 0
  for c in range(args.captures):
    fn, x = functions[c % len(functions)]
    if args.via_tuner:
      kernels = calltime.gpu_kernels(lambda: fn(x), args.calls)
    else:
      with insitu.capture(source=args.source) as cap:
        out = None
        for _ in range(args.calls):
          out = fn(x)
        jax.block_until_ready(out)
      kernels = cap.result.kernels
    counts = {name: k.launches for name, k in kernels.items() if name in ("fwd_kernel", "bwd_kernel")}
    if counts != {"fwd_kernel": args.calls, "bwd_kernel": args.calls}:
      wrong.append({"capture": c, "pallas_launches": counts,
                    "all": {name: k.launches for name, k in kernels.items()}})
    graph_launches += sum(k.from_graphs for k in kernels.values())
    jax.block_until_ready(fn(x))       # launches between captures, outside any
  print(json.dumps({"source": args.source, "captures": args.captures,
                    "functions": args.functions, "calls": args.calls,
                    "graph_launches": graph_launches, "wrong": wrong[:5],
                    "wrong_count": len(wrong)}), flush=True)
  return 0 if not wrong else 1


if __name__ == "__main__":
  sys.exit(main())
