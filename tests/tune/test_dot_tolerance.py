"""Outputs compared to the precision the kernel's dots multiply at: a variant of a float32
kernel whose dots round their inputs to TF32 (attention's probabilities, rounded against
another running maximum) moves outputs by a few TF32 units, which is not a wrong answer;
an element computed wrongly still differs."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.artifacts import DotFacts
from pallas_prof.backend.running.interpreter_runtime import round_to_tf32
from pallas_prof.tune.choice import dot_rtol, kernel_dot_rtol, same_outputs

TF32_UNIT = 2.0 ** -11


def _dot(operand_dtype: str, precision: str | None) -> DotFacts:
  return DotFacts(batch=1, m=64, n=64, k=64, operand_dtype=operand_dtype, precision=precision)


def test_the_coarsest_rounding_among_the_dots_sets_the_tolerance():
  assert dot_rtol([]) == 0.0
  assert dot_rtol([_dot("float32", "ieee")]) == 0.0
  assert dot_rtol([_dot("float32", "tf32")]) == 4 * TF32_UNIT
  assert dot_rtol([_dot("float32", None)]) == 4 * TF32_UNIT     # Triton's default is TF32
  assert dot_rtol([_dot("float32", "ieee"), _dot("bfloat16", None)]) == 4 * 2.0 ** -8
  assert dot_rtol([_dot("float16", None), None]) == 4 * TF32_UNIT


def _attention_row_block(s: np.ndarray, v: np.ndarray, block_k: int) -> np.ndarray:
  """softmax(s) @ v as a flash attention computes it block by block: each block's p is
  taken against the running maximum so far and rounded to TF32 for the dot, as the GPU's
  tf32 p @ v does; the rescaling and the sums in float32."""
  rows = s.shape[0]
  m = np.full((rows, 1), -np.inf, np.float32)
  l = np.zeros((rows, 1), np.float32)
  acc = np.zeros((rows, v.shape[1]), np.float32)
  for start in range(0, s.shape[1], block_k):
    sb = s[:, start:start + block_k]
    m_new = np.maximum(m, sb.max(axis=1, keepdims=True))
    alpha = np.exp(m - m_new).astype(np.float32)
    p = np.exp(sb - m_new).astype(np.float32)
    l = alpha * l + p.sum(axis=1, keepdims=True)
    acc = alpha * acc + round_to_tf32(p) @ round_to_tf32(v[start:start + block_k])
    m = m_new
  return (acc / l).astype(np.float32)


def _two_key_rows(rows: int, keys: int, rng) -> np.ndarray:
  """Scores where each row weighs two keys, one in each half of the first 64, the second
  larger by a random delta: a block of 32 keys meets the first alone (its p is 1, exact,
  rescaled later in float32), a block of 64 meets both (its p is exp(-delta), rounded to
  TF32 for the dot) - the difference the H200 showed between two block_k."""
  s = np.full((rows, keys), -30.0, np.float32)
  first = rng.integers(0, 32, rows)
  second = rng.integers(32, 64, rows)
  s[np.arange(rows), first] = 0.0
  s[np.arange(rows), second] = rng.uniform(0.0, 0.7, rows).astype(np.float32)
  return s


def test_a_tf32_attentions_other_block_k_is_the_same_answer_and_a_wrong_one_is_not():
  rng = np.random.default_rng(7)
  s = _two_key_rows(512, 256, rng)
  v = rng.standard_normal((256, 64)).astype(np.float32)
  a, b = _attention_row_block(s, v, 32), _attention_row_block(s, v, 64)
  scale = np.abs(b).max()
  # the construction means something: the two block sizes differ beyond float32's 1e-4
  assert np.abs(a - b).max() > 1e-4 * scale
  assert "by more than 0.0001" in same_outputs([a], [b])
  rtol = dot_rtol([_dot("float32", "tf32")])
  assert same_outputs([a], [b], rtol) is None
  s_wrong = s.copy()
  s_wrong[0, :] = -30.0           # one row's keys left out but one: a wrong mask
  s_wrong[0, 100] = 0.0
  wrong = _attention_row_block(s_wrong, v, 64)
  assert same_outputs([wrong], [b], rtol) == \
      f"output 0: 64 of {b.size} elements differ from the default's by more than 0.002 of its " \
      "largest magnitude"
  # integers stay bit for bit whatever the dots
  assert same_outputs([np.arange(4)], [np.arange(4) + (np.arange(4) == 2)], rtol) is not None


@pytest.fixture
def installed(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  pallas_prof.install()
  kernel_registry.clear()
  yield
  pallas_prof.uninstall()


def _matmul(x, y, precision=None, name="mm"):
  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], precision=precision,
                         preferred_element_type=jnp.float32)
  return pl.pallas_call(kernel, name=name,
                        out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), jnp.float32))(x, y)


@pytest.mark.parametrize("dtype, precision, want", [
    (jnp.float32, None, 4 * TF32_UNIT),
    (jnp.float32, lax.Precision.HIGHEST, 0.0),
    (jnp.bfloat16, None, 4 * 2.0 ** -8),
])
def test_a_lowered_kernels_dots_say_their_rounding(installed, dtype, precision, want):
  x = jnp.asarray(np.random.default_rng(0).standard_normal((32, 48)), dtype)
  y = jnp.asarray(np.random.default_rng(1).standard_normal((48, 16)), dtype)
  got = _matmul(x, y, precision)
  np.testing.assert_allclose(np.asarray(got), np.asarray(x, np.float32) @ np.asarray(y, np.float32),
                             rtol=2e-2, atol=2e-2)
  kernels = [r.generated for r in kernel_registry.kernels() if r.name.startswith("mm")]
  assert kernels and kernel_dot_rtol(kernels) == want
