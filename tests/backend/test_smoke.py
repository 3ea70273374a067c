"""End-to-end smoke tests: JAX's own GPU kernels and our examples on the CPU path."""
from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from testkit.helpers import assert_close, random_array
from testkit.jax_ops import gpu_op

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def installed():
  pallas_prof.install()
  yield
  pallas_prof.uninstall()


def test_jax_softmax(installed, rng):
  softmax = gpu_op("softmax")
  x = jnp.asarray(random_array(rng, (5, 100), jnp.float32))
  assert_close(softmax.softmax(x), jax.nn.softmax(x, axis=-1), atol=1e-6)


def test_jax_layer_norm_forward(installed, rng):
  layer_norm = gpu_op("layer_norm")
  x = jnp.asarray(random_array(rng, (2, 3, 200), jnp.float32))
  w = jnp.asarray(random_array(rng, (200,), jnp.float32))
  b = jnp.asarray(random_array(rng, (200,), jnp.float32))
  assert_close(layer_norm.layer_norm(x, w, b), layer_norm.layer_norm_reference(x, w, b), atol=1e-4)


def test_jax_rms_norm_forward(installed, rng):
  rms_norm = gpu_op("rms_norm")
  x = jnp.asarray(random_array(rng, (2, 3, 200), jnp.float32))
  w = jnp.asarray(random_array(rng, (200,), jnp.float32))
  b = jnp.asarray(random_array(rng, (200,), jnp.float32))
  assert_close(rms_norm.rms_norm(x, w, b), rms_norm.rms_norm_reference(x, w, b), atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_jax_mha_forward(installed, rng, causal):
  attention = gpu_op("attention")
  q, k, v = (jnp.asarray(random_array(rng, (1, 64, 2, 32), jnp.float16)) for _ in range(3))
  bs = attention.BlockSizes(block_q=32, block_k=32)
  out = attention.mha(q, k, v, segment_ids=None, causal=causal, block_sizes=bs)
  ref = attention.mha_reference(q, k, v, segment_ids=None, causal=causal)
  assert_close(out, ref, atol=2e-2, rtol=2e-2)


def test_jax_decode_attention(installed, rng):
  decode_attention = gpu_op("decode_attention")
  q = jnp.asarray(random_array(rng, (2, 4, 32), jnp.float32))
  k = jnp.asarray(random_array(rng, (2, 64, 32), jnp.float32))
  v = jnp.asarray(random_array(rng, (2, 64, 32), jnp.float32))
  out = decode_attention.mqa(q, k, v, k_splits=2, block_k=16)
  # on a GPU the kernel's f32 dots use TF32 (DEFAULT precision, as JAX's backend)
  tol = 2e-2 if jax.default_backend() == "gpu" else 1e-4
  assert_close(out, decode_attention.mqa_reference(q, k, v), atol=tol, rtol=tol)


@pytest.mark.parametrize("example", ["vector_add", "softmax", "layer_norm", "matmul",
                                     "flash_attention"])
def test_examples_run_and_match(example):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", f"{example}.py")],
                          capture_output=True, text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  assert "error" in result.stdout
