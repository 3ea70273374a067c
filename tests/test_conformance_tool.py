"""tools/conformance_cpu.py's --poison-outputs: outputs the kernel never writes start as
NaN (integers: all ones) under the interpreter, as uninitialised GPU buffers would not be
zeros, while outputs updated with atomics still start from zero. (It once patched
np.zeros, which the interpreter's launch no longer called: the flag poisoned nothing.)"""
from __future__ import annotations

import importlib.util
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend.running import launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
  spec = importlib.util.spec_from_file_location(
      "conformance_cpu_tool", os.path.join(ROOT, "tools", "conformance_cpu.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _half_writer(x, n):
  """Writes the first 5 of each 7-element block of both outputs, atomically adds into a
  third; 13 elements (not a power of two) in two blocks."""
  def kernel(x_ref, n_ref, o_ref, p_ref, a_ref):
    o_ref[pl.ds(0, 5)] = x_ref[pl.ds(0, 5)]
    p_ref[pl.ds(0, 5)] = n_ref[pl.ds(0, 5)]
    plgpu.atomic_add(a_ref, pl.ds(0, 5), x_ref[pl.ds(0, 5)])
  spec = pl.BlockSpec((7,), lambda i: (i,))
  shapes = (jax.ShapeDtypeStruct((14,), jnp.float32), jax.ShapeDtypeStruct((14,), jnp.int32),
            jax.ShapeDtypeStruct((14,), jnp.float32))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", pallas_prof.UncoveredOutputWarning)
    return [np.asarray(o) for o in pl.pallas_call(
        kernel, out_shape=shapes, grid=(2,), in_specs=[spec] * 2, out_specs=[spec] * 3,
        name="half_writer")(x, n)]


@pytest.mark.no_gpu
def test_poison_outputs_starts_unwritten_elements_as_nan_or_all_ones(monkeypatch, rng):
  pallas_prof.install()
  monkeypatch.setattr(launch, "run_interpreted", launch.run_interpreted)   # undone after
  x = rng.standard_normal(14).astype(np.float32)
  n = rng.integers(-50, 50, 14).astype(np.int32)
  written = np.array([i % 7 < 5 for i in range(14)])
  plain = _half_writer(x, n)
  assert (plain[0][~written] == 0).all()          # the interpreter's own start: zeros
  _tool()._poison_unwritten_outputs()
  out, part, added = _half_writer(x, n)
  np.testing.assert_array_equal(out[written], x[written])
  np.testing.assert_array_equal(part[written], n[written])
  assert np.isnan(out[~written]).all(), out
  assert (part[~written] == -1).all(), part       # all ones
  np.testing.assert_array_equal(added, np.where(written, x, 0))   # atomics: from zero
