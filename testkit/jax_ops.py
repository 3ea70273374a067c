"""JAX's own Pallas GPU kernels, the Triton ones (jax.experimental.pallas.ops.gpu: softmax,
layer_norm, rms_norm, attention, decode_attention, paged_attention), as the tests run them.

JAX 0.12.1 took them out of its package (its Triton backend is deprecated). On a JAX without
them a test that runs them is skipped, and says why; the older leg of the test command
(jax 0.10.2) runs it."""
from __future__ import annotations

import importlib

import jax
import pytest

PACKAGE = "jax.experimental.pallas.ops.gpu"


def missing_reason(name: str) -> str:
  return (f"jax {jax.__version__} has no {PACKAGE}.{name} (JAX took its Triton kernels out "
          "in 0.12.1): the test command's jax 0.10.2 leg runs this test")


def gpu_op(name: str):
  """The module of JAX's op `name`, or the test skipped where this JAX has none."""
  module = f"{PACKAGE}.{name}"
  try:
    return importlib.import_module(module)
  except ModuleNotFoundError as e:
    if e.name != module:
      raise
    pytest.skip(missing_reason(name))


def gpu_ops(*names: str):
  return tuple(gpu_op(n) for n in names)
