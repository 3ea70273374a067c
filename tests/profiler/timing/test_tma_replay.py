"""The profiler's replay of a kernel with TMA loads (CompilerParams(tma=True)): its
tensor descriptors live in Triton's per-program global scratch, which the replay must
allocate and pass (jaxlib does the same on the JAX path). Run on the host-memory
stand-in of the CUDA driver (fake_cuda.py): the launch's parameters are checked, and
the kernel runs under Triton's interpreter (which makes its descriptors itself)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.profiler.timing import runner
from pallas_prof.profiler.launchspec import LaunchSpec

from ..conftest import load_example


def _tma_matmul():
  example = load_example("matmul")
  spec_a = pl.BlockSpec((64, 128), lambda i, j: (i, 0))
  spec_b = pl.BlockSpec((128, 64), lambda i, j: (0, j))
  call = pl.pallas_call(functools.partial(example.matmul_kernel, block_k=32), grid=(2, 2),
                        in_specs=[spec_a, spec_b], name="tma_replayed",
                        out_specs=pl.BlockSpec((64, 64), lambda i, j: (i, j)),
                        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.bfloat16),
                        compiler_params=pallas_prof.CompilerParams(tma=True))
  jax.jit(call).lower(jax.ShapeDtypeStruct((128, 128), jnp.bfloat16),
                      jax.ShapeDtypeStruct((128, 128), jnp.bfloat16))
  return kernel_registry.find("tma_replayed")[-1].generated


def test_the_replay_allocates_global_scratch_for_the_descriptors(fake_driver):
  gk = _tma_matmul()
  assert gk.tma
  ck = compile_kernel(gk, ("cuda", 90))
  spec = LaunchSpec.from_compiled(ck)
  assert spec.global_scratch_size >= 2 * 128 and spec.global_scratch_align >= 64
  fake = fake_driver(gk, event_ms=1.0, l2_bytes=1 << 20)
  sizes = {}
  real_alloc = fake.cuMemAlloc

  def alloc(nbytes):
    result = real_alloc(nbytes)
    sizes[int(result[1])] = nbytes
    return result
  fake.cuMemAlloc = alloc
  stats = runner.replay(ck, device=0, reference="interpreter", min_launches=5, min_seconds=0.0)
  _, _, _, args = fake.launches[0]
  scratch, profile_scratch = args[len(gk.params)], args[len(gk.params) + 1]
  assert scratch != 0 and profile_scratch == 0
  assert scratch % spec.global_scratch_align == 0
  # a buffer of its own, one slice per program (Triton offsets it by the program's id)
  assert sizes[scratch] >= spec.global_scratch_size * spec.programs == \
      spec.global_scratch_size * 4
  assert stats.outputs_written and stats.correctness.passed
