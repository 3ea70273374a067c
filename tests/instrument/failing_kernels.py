"""Kernels that fail, one per failure class, for the error-report tests.

Each failing statement carries a comment `# FAILS: <case>`; the tests find
the line by that tag and check the report points at it.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

import pallas_prof


def _call(kernel, out_shape, *, grid=(), in_specs=None, out_specs=None, num_warps=4,
          num_stages=3, **kwargs):
  extra = {}
  if in_specs is not None:
    extra["in_specs"] = in_specs
  if out_specs is not None:
    extra["out_specs"] = out_specs
  return jax.jit(pl.pallas_call(
      kernel, out_shape=out_shape, grid=grid,
      compiler_params=pallas_prof.CompilerParams(num_warps=num_warps, num_stages=num_stages),
      **extra, **kwargs))


# --- lowering failures --------------------------------------------------------------------------

def sort_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.sort(x)  # FAILS: unsupported_primitive


def dot_algorithm_kernel(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...],  # FAILS: unsupported_parameter
                       precision=lax.DotAlgorithmPreset.ANY_F8_ANY_F8_F32)


def reshape_kernel(x_ref, o_ref):
  y = x_ref[...] * 2.0
  o_ref[...] = y.reshape(3, 20)  # FAILS: non_pow2_reshape


def complex_kernel(x_ref, o_ref):
  z = x_ref[...].astype(jnp.complex64)  # FAILS: complex_dtype
  o_ref[...] = jnp.real(z * z)


def scratch_kernel(x_ref, o_ref, tmp_ref):  # FAILS: scratch_shapes
  tmp_ref[...] = x_ref[...] + 1.0
  o_ref[...] = tmp_ref[...]


def ref_names(case: str) -> list[str]:
  """The refs of the case's kernel, as its parameters name them."""
  two = ["x_ref", "o_ref"]
  return {"unsupported_parameter": ["a_ref", "b_ref", "o_ref"],
          "scratch_shapes": two + ["tmp_ref"],
          "shared_memory": ["a_ref", "b_ref", "o_ref"]}.get(case, two)


def cases():
  """name -> (jitted function, example arguments, stage where it fails)."""
  f32 = jnp.float32
  from jax.experimental.pallas import tpu as pltpu
  return {
      "unsupported_primitive": (
          _call(sort_kernel, jax.ShapeDtypeStruct((16,), f32)),
          (jax.ShapeDtypeStruct((16,), f32),), "lower"),
      "unsupported_parameter": (
          _call(dot_algorithm_kernel, jax.ShapeDtypeStruct((16, 16), f32)),
          (jax.ShapeDtypeStruct((16, 16), f32), jax.ShapeDtypeStruct((16, 16), f32)), "lower"),
      "non_pow2_reshape": (
          _call(reshape_kernel, jax.ShapeDtypeStruct((3, 20), f32)),
          (jax.ShapeDtypeStruct((6, 10), f32),), "lower"),
      "complex_dtype": (
          _call(complex_kernel, jax.ShapeDtypeStruct((8,), f32)),
          (jax.ShapeDtypeStruct((8,), f32),), "lower"),
      "scratch_shapes": (
          _call(scratch_kernel, jax.ShapeDtypeStruct((8, 128), f32),
                scratch_shapes=[pltpu.VMEM((8, 128), f32)]),
          (jax.ShapeDtypeStruct((8, 128), f32),), "lower"),
      "shared_memory": (
          _call(functools.partial(big_dot_kernel, block_k=128),
                jax.ShapeDtypeStruct((256, 256), f32), num_stages=4),
          (jax.ShapeDtypeStruct((256, 1024), jnp.bfloat16),
           jax.ShapeDtypeStruct((1024, 256), jnp.bfloat16)), "compile"),
      "triton_frontend": (
          _call(huge_block_kernel, jax.ShapeDtypeStruct((2048, 1024), f32)),
          (jax.ShapeDtypeStruct((2048, 1024), f32),), "compile"),
  }


# --- compile failures ---------------------------------------------------------------------------

def big_dot_kernel(a_ref, b_ref, o_ref, *, block_k):
  def step(k, acc):
    # the first block staged through shared memory (4 stages of 256x128 and 128x256 bf16)
    a = a_ref[:, pl.ds(k * block_k, block_k)]  # FAILS: shared_memory
    b = b_ref[pl.ds(k * block_k, block_k), :]
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

  steps = a_ref.shape[1] // block_k
  o_ref[...] = lax.fori_loop(0, steps, step, jnp.zeros(o_ref.shape, jnp.float32))


def huge_block_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0  # FAILS: triton_frontend
