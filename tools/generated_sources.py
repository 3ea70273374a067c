"""Writes the Triton source pallas-prof generates for every example and for
JAX's Pallas GPU ops, one file per kernel, plus SHA256SUMS over them.

    JAX_PLATFORMS=cpu python3 tools/generated_sources.py OUT_DIR [--examples DIR]

Lowering needs no GPU: the examples run on the CPU (Triton's interpreter) and
JAX's ops are only lowered (`jax.jit(f).lower(...)`). Run it at two commits
and compare the folders (`diff -r`, or the SHA256SUMS files) to show that a
change left the generated code as it was. The examples' paths and line
numbers are part of the source (the header and each line's comment), and so
are this script's for the ops' backward passes: give both runs the same
--examples folder and the same copy of this script.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib.util
import io
import os
import sys


def _example_cases(examples_dir: str):
  for name in sorted(os.listdir(examples_dir)):
    if not name.endswith(".py"):
      continue
    path = os.path.join(examples_dir, name)

    def run(path=path, name=name):
      spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", path)
      module = importlib.util.module_from_spec(spec)
      with contextlib.redirect_stdout(io.StringIO()):
        spec.loader.exec_module(module)
        module.main([])
    yield f"example_{name[:-3]}", run


def _ops_cases():
  import jax
  import jax.numpy as jnp
  try:
    from jax.experimental.pallas.ops.gpu import (attention, decode_attention, layer_norm,
                                                 paged_attention, rms_norm, softmax)
  except ImportError:
    # jax 0.12.1 took its Triton ops out: the examples' kernels alone (said on stderr)
    print(f"jax {jax.__version__} has no Triton ops in jax.experimental.pallas.ops.gpu: "
          "their kernels are left out", file=sys.stderr)
    return
  f32, f16 = jnp.float32, jnp.float16

  def spec(shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)

  def forward_and_backward(f, *args):
    def loss(*a):
      return jnp.sum(f(*a).astype(jnp.float32))
    return [lambda: jax.jit(f).lower(*args), lambda: jax.jit(jax.grad(loss, range(len(args)))).lower(*args)]

  cases = {"softmax": [lambda: jax.jit(softmax.softmax).lower(spec((64, 1000)))]}
  norm_args = (spec((2, 3, 96)), spec((96,)), spec((96,)))
  cases["layer_norm"] = forward_and_backward(layer_norm.layer_norm, *norm_args)
  cases["rms_norm"] = forward_and_backward(rms_norm.rms_norm, *norm_args)
  bs = attention.BlockSizes(block_q=32, block_k=32, block_q_dkv=32, block_kv_dkv=32,
                            block_q_dq=32, block_kv_dq=32)
  qkv = [spec((1, 64, 2, 32), f16)] * 3
  for causal in (False, True):
    mha = functools.partial(attention.mha, segment_ids=None, causal=causal, block_sizes=bs)
    cases[f"mha_causal{int(causal)}"] = forward_and_backward(mha, *qkv)
  mqa = functools.partial(decode_attention.mqa, k_splits=2, block_k=16)
  cases["decode_attention"] = [lambda: jax.jit(mqa).lower(
      spec((2, 4, 32)), spec((2, 64, 32)), spec((2, 64, 32)))]
  paged = functools.partial(paged_attention.paged_attention, block_h=16,
                            pages_per_compute_block=2, k_splits=2)
  cases["paged_attention"] = [lambda: jax.jit(paged).lower(
      spec((2, 32, 64)), spec((2, 16, 16, 64)), spec((2, 16, 16, 64)),
      spec((2, 8), jnp.int32), spec((2,), jnp.int32))]
  for name, steps in cases.items():
    def run(steps=steps):
      for step in steps:
        step()
    yield f"ops_{name}", run


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("out")
  parser.add_argument("--examples", default=os.path.join(os.path.dirname(
      os.path.dirname(os.path.abspath(__file__))), "examples"))
  args = parser.parse_args(argv)
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  import jax
  import pallas_prof
  from pallas_prof.backend import kernel_registry
  pallas_prof.install()
  os.makedirs(args.out, exist_ok=True)
  sums = []
  for case, run in list(_example_cases(args.examples)) + list(_ops_cases()):
    kernel_registry.clear()
    jax.clear_caches()
    run()
    seen = set()
    for n, record in enumerate(kernel_registry.kernels()):
      gk = record.generated
      if gk.key in seen:
        continue
      seen.add(gk.key)
      name = f"{case}.{n:02d}.{gk.name}.py"
      with open(os.path.join(args.out, name), "w") as f:
        f.write(gk.source)
      sums.append(f"{hashlib.sha256(gk.source.encode()).hexdigest()}  {name}")
    print(f"{case}: {len(seen)} kernels", file=sys.stderr)
  with open(os.path.join(args.out, "SHA256SUMS"), "w") as f:
    f.write("\n".join(sums) + "\n")
  print(f"{len(sums)} kernels written to {args.out}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
