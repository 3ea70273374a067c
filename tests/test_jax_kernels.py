"""JAX's own Pallas GPU kernels (jax.experimental.pallas.ops.gpu) through pallas-prof.

Forward and backward, against their jax.numpy references, on whatever
platform runs the tests: Triton's interpreter on CPU, the real kernels on a
GPU (larger shapes there).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallas_prof
from testkit.helpers import assert_close, random_array
from testkit.jax_ops import gpu_op, gpu_ops

ON_GPU = jax.default_backend() == "gpu"


@pytest.fixture(autouse=True)
def installed():
  pallas_prof.install()
  yield
  pallas_prof.uninstall()


def _vjp_both(f, ref, args, rng, dtype):
  out, f_vjp = jax.vjp(f, *args)
  ref_out, ref_vjp = jax.vjp(ref, *args)
  cot = jnp.asarray(random_array(rng, out.shape, dtype))
  return out, ref_out, f_vjp(cot), ref_vjp(cot)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_norm_forward_and_backward(rng, norm):
  layer_norm, rms_norm = gpu_ops("layer_norm", "rms_norm")
  module = {"layer_norm": layer_norm, "rms_norm": rms_norm}[norm]
  shape = (4, 64, 1024) if ON_GPU else (2, 3, 96)
  x, w, b = (jnp.asarray(random_array(rng, s, jnp.float32)) for s in (shape, shape[-1:], shape[-1:]))
  f = getattr(module, norm)
  ref = getattr(module, f"{norm}_reference")
  out, ref_out, grads, ref_grads = _vjp_both(f, ref, (x, w, b), rng, jnp.float32)
  assert_close(out, ref_out, atol=1e-4 if not ON_GPU else 1e-3, rtol=1e-4 if not ON_GPU else 1e-3)
  for g, rg, name in zip(grads, ref_grads, ("dx", "dw", "db")):
    assert_close(g, rg, atol=2e-3 if not ON_GPU else 2e-2, rtol=2e-3 if not ON_GPU else 2e-2,
                 err_msg=name)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_norm_forward_loads_x_once(rng, norm):
  """The forward kernels read x in three (rms_norm: two) loops over column
  blocks; with one block per row each loop runs once, is emitted straight,
  and the later reads of x reuse the first load (nothing is stored between)."""
  layer_norm, rms_norm = gpu_ops("layer_norm", "rms_norm")
  from pallas_prof.backend import kernel_registry
  module = {"layer_norm": layer_norm, "rms_norm": rms_norm}[norm]
  x, w, b = (jnp.asarray(random_array(rng, s, jnp.float32)) for s in ((2, 3, 96), (96,), (96,)))
  kernel_registry.clear()
  jax.clear_caches()           # lower here, whatever this worker lowered before
  out = getattr(module, norm)(x, w, b)
  assert_close(out, getattr(module, f"{norm}_reference")(x, w, b), atol=1e-4, rtol=1e-4)
  [record] = [r for r in kernel_registry.find(f"{norm}_forward_kernel")
              if "(2, 3)" in r.generated.source.splitlines()[1]]
  source = record.generated.source
  assert source.count("tl.load(x_ref") == 1, source
  assert "for " not in source, source
  # the merged read keeps the first read's policy (measured faster on an H200)
  [load] = [line for line in source.splitlines() if "tl.load(x_ref" in line]
  assert "eviction_policy='evict_last'" in load and "evict_first" not in load, load


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_norm_forward_loads_x_once_with_two_blocks_per_row(rng, norm):
  """Rows of 8192 bf16: block_size is capped at 4096, so each column loop
  runs twice; the loops are emitted straight-line and the later loops reuse
  the first one's loads of x (nothing stored to x's buffer in between)."""
  layer_norm, rms_norm = gpu_ops("layer_norm", "rms_norm")
  from pallas_prof.backend import kernel_registry
  module = {"layer_norm": layer_norm, "rms_norm": rms_norm}[norm]
  x, w, b = (jnp.asarray(random_array(rng, s, jnp.float32)).astype(jnp.bfloat16)
             for s in ((1, 4, 8192), (8192,), (8192,)))
  kernel_registry.clear()
  jax.clear_caches()
  out = getattr(module, norm)(x, w, b)
  want = getattr(module, f"{norm}_reference")(x.astype(jnp.float32), w.astype(jnp.float32),
                                               b.astype(jnp.float32))
  assert_close(out.astype(jnp.float32), want, atol=5e-2, rtol=2e-2)
  [record] = [r for r in kernel_registry.find(f"{norm}_forward_kernel")
              if "bfloat16[4,8192]" in r.generated.source.splitlines()[2]]
  source = record.generated.source
  assert source.count("tl.load(x_ref") == 2, source    # one per 4096-column chunk
  assert "for " not in source and "# iteration 2 of 2" in source, source
  assert "evict_first" not in source, source


@pytest.mark.parametrize("causal", [False, True])
def test_mha_forward_and_backward(rng, causal):
  attention = gpu_op("attention")
  shape = (2, 512, 4, 64) if ON_GPU else (1, 64, 2, 32)
  q, k, v = (jnp.asarray(random_array(rng, shape, jnp.float16, low=-1, high=1)) for _ in range(3))
  bs = attention.BlockSizes(block_q=64, block_k=64, block_q_dkv=32, block_kv_dkv=32,
                            block_q_dq=32, block_kv_dq=32) if ON_GPU else \
      attention.BlockSizes(block_q=32, block_k=32, block_q_dkv=32, block_kv_dkv=32,
                           block_q_dq=32, block_kv_dq=32)
  f = functools.partial(attention.mha, segment_ids=None, causal=causal, block_sizes=bs)
  def ref(q, k, v):
    return attention.mha_reference(q, k, v, segment_ids=None, causal=causal).astype(q.dtype)
  out, ref_out, grads, ref_grads = _vjp_both(f, ref, (q, k, v), rng, jnp.float16)
  assert_close(out, ref_out, atol=2e-2, rtol=2e-2)
  for g, rg, name in zip(grads, ref_grads, ("dq", "dk", "dv")):
    assert_close(g, rg, atol=5e-2, rtol=5e-2, err_msg=name)


def test_softmax(rng):
  softmax = gpu_op("softmax")
  x = jnp.asarray(random_array(rng, (64, 1000) if ON_GPU else (5, 100), jnp.float32))
  assert_close(softmax.softmax(x), jax.nn.softmax(x, axis=-1), atol=1e-6)


def test_decode_attention(rng):
  decode_attention = gpu_op("decode_attention")
  b, h, s, d = (4, 16, 1024, 64) if ON_GPU else (2, 4, 64, 32)
  q = jnp.asarray(random_array(rng, (b, h, d), jnp.float32, low=-1, high=1))
  k = jnp.asarray(random_array(rng, (b, s, d), jnp.float32, low=-1, high=1))
  v = jnp.asarray(random_array(rng, (b, s, d), jnp.float32, low=-1, high=1))
  out = decode_attention.mqa(q, k, v, k_splits=4 if ON_GPU else 2, block_k=64 if ON_GPU else 16)
  tol = 2e-2 if ON_GPU else 1e-3    # TF32 dots on the GPU (DEFAULT precision)
  assert_close(out, decode_attention.mqa_reference(q, k, v), atol=tol, rtol=tol)


def test_paged_attention(rng):
  paged_attention = gpu_op("paged_attention")
  batch, heads, kv_heads, dim = 2, 32, 2, 64
  page_size, pages_per_seq = 16, 8
  total_pages = batch * pages_per_seq
  q = jnp.asarray(random_array(rng, (batch, heads, dim), jnp.float32, low=-1, high=1))
  k_pages = jnp.asarray(random_array(rng, (kv_heads, total_pages, page_size, dim), jnp.float32,
                                     low=-1, high=1))
  v_pages = jnp.asarray(random_array(rng, (kv_heads, total_pages, page_size, dim), jnp.float32,
                                     low=-1, high=1))
  block_tables = jnp.asarray(rng.permutation(total_pages).reshape(batch, pages_per_seq)
                             .astype(np.int32))
  lengths = jnp.asarray(rng.integers(1, pages_per_seq * page_size, size=batch).astype(np.int32))
  out = paged_attention.paged_attention(q, k_pages, v_pages, block_tables, lengths,
                                        block_h=16, pages_per_compute_block=2, k_splits=2)
  tol = 2e-2 if ON_GPU else 1e-3    # TF32 dots on the GPU (DEFAULT precision)
  # the reference wants contiguous K/V: gather the pages of each sequence
  k = k_pages[:, block_tables].reshape(kv_heads, batch, -1, dim).transpose(1, 2, 0, 3)
  v = v_pages[:, block_tables].reshape(kv_heads, batch, -1, dim).transpose(1, 2, 0, 3)
  ref = paged_attention.paged_attention_reference(q, k, v, lengths)
  assert_close(out, ref, atol=tol, rtol=tol)
