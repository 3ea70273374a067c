"""JAX's own Pallas GPU ops (jax.experimental.pallas.ops.gpu, the Triton ones) and kernels
another process saved, for the target matrix (issue 40: "JAX's own ops (the conformance and
suite kernels)").

`jax_op_kernels` lowers each op the installed jax has, forward and, where the op has a VJP,
backward, at shapes a model uses that are not powers of two where the op allows it (the
ops' own block sizes are powers of two; the arrays they tile need not be). An op that does
not lower with pallas-prof installed is a row of its own, "not lowered", with the reason:
nothing is left out silently.

`saved_kernels` reads the GeneratedKernels bench/targets/dump_kernels.py wrote in another
process (JAX's conformance tests on a GPU machine, or any pytest run) back through the
artifact's own serialisation.
"""
from __future__ import annotations

import glob
import importlib
import os


def _cases():
  """(op label, module name, function building (fn, *argument shapes)) of every op."""
  import jax
  import jax.numpy as jnp
  s = jax.ShapeDtypeStruct
  f32, f16, bf16, i32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32

  def grad(fn, *shapes):
    """fn's backward: jax.grad of a sum over its (first) output."""
    def loss(*args):
      out = fn(*args)
      out = out[0] if isinstance(out, tuple) else out
      return out.astype(jnp.float32).sum()
    return jax.jit(jax.grad(loss, argnums=tuple(range(len(shapes))))), *shapes

  # (batch, tokens, hidden) of a 5120-wide model: the ops normalise each token's row
  norm_shapes = (s((4, 750, 5120), bf16), s((5120,), bf16), s((5120,), bf16))

  def mha(m, causal):
    # batch 2, 1152 tokens (a multiple of the op's 128-token block, as it requires, not a
    # power of two), 12 heads of 64
    return (lambda q, k, v: m.mha(q, k, v, None, causal=causal)), *(s((2, 1152, 12, 64), f16),) * 3

  cases = [
      ("layer_norm", "layer_norm", lambda m: (jax.jit(m.layer_norm), *norm_shapes)),
      ("layer_norm backward", "layer_norm", lambda m: grad(m.layer_norm, *norm_shapes)),
      ("rms_norm", "rms_norm", lambda m: (jax.jit(m.rms_norm), *norm_shapes)),
      ("rms_norm backward", "rms_norm", lambda m: grad(m.rms_norm, *norm_shapes)),
      ("softmax", "softmax", lambda m: (jax.jit(m.softmax), s((3000, 1000), f32))),
      ("mha", "attention", lambda m: (jax.jit(mha(m, False)[0]), *mha(m, False)[1:])),
      ("mha causal", "attention", lambda m: (jax.jit(mha(m, True)[0]), *mha(m, True)[1:])),
      ("mha backward", "attention", lambda m: grad(*mha(m, False))),
      ("mha causal backward", "attention", lambda m: grad(*mha(m, True))),
      # decoding one token against a 3072-token cache (split 16 ways, as the op does):
      # 32 query heads, 8 KV heads of 128
      ("mqa decode", "decode_attention", lambda m: (
          jax.jit(m.mqa), s((4, 32, 128), bf16), s((4, 3072, 128), bf16),
          s((4, 3072, 128), bf16))),
      # gqa's blocks are 128 tokens, and its splits a whole number of them: 6144 tokens
      ("gqa decode", "decode_attention", lambda m: (
          jax.jit(m.gqa), s((4, 32, 128), bf16), s((4, 6144, 8, 128), bf16),
          s((4, 6144, 8, 128), bf16))),
      # 48 pages of 16 tokens per sequence (a multiple of the op's 16 splits, as it
      # requires) out of 300, 8 KV heads: lengths up to 768
      ("paged_attention", "paged_attention", lambda m: (
          jax.jit(m.paged_attention), s((4, 32, 128), bf16), s((8, 300, 16, 128), bf16),
          s((8, 300, 16, 128), bf16), s((4, 48), i32), s((4,), i32))),
  ]
  for label, module, build in cases:
    yield label, f"jax.experimental.pallas.ops.gpu.{module}", build


def jax_op_kernels(lowered) -> tuple[list, list[tuple[str, str]]]:
  """The kernels of every op of jax.experimental.pallas.ops.gpu that this jax has, lowered by
  `lowered(group, label, fn, *args)` (matrix.py's); and (op, reason) for each op that did not
  lower (an op this jax lacks, or one pallas-prof refuses, said, not hidden)."""
  out, not_lowered = [], []
  for label, module_name, build in _cases():
    try:
      module = importlib.import_module(module_name)
    except ImportError as e:
      not_lowered.append((label, f"{module_name} is not in this jax: {e}"))
      continue
    try:
      out += lowered("jax_ops", label, *build(module))
    except Exception as e:  # noqa: BLE001 - an op that does not lower is a row, with its reason
      not_lowered.append((label, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"))
  return out, not_lowered


def saved_kernels(folder: str, make_row) -> tuple[list, list[tuple[str, str]]]:
  """The kernels bench/targets/dump_kernels.py saved under `folder` (<n>.json), each as
  `make_row("conformance", label, gk)`, label = the test that lowered it and the kernel's
  name; and (file, reason) for each file that is not such a kernel (a saved file is data
  from another process: checked, not trusted)."""
  from bench.targets.dump_kernels import read_kernel
  files = sorted(glob.glob(os.path.join(glob.escape(folder), "*.json"))
                 + glob.glob(os.path.join(glob.escape(folder), "*", "*.json")),   # xdist workers'
                 key=lambda p: (len(p), p))
  if not files:
    raise FileNotFoundError(
        f"--saved {folder}: no <n>.json kernels there; write them with "
        f"PALLAS_PROF_DUMP_KERNELS={folder} pytest -p bench.targets.dump_kernels ...")
  out, bad, seen = [], [], set()
  for path in files:
    try:
      test, gk = read_kernel(path)
    except (OSError, ValueError) as e:
      bad.append((path, str(e).splitlines()[0][:300]))
      continue
    if gk.key in seen:
      continue
    seen.add(gk.key)
    out.append(make_row("conformance", f"{test or 'unknown test'}: {gk.name}", gk))
  return out, bad
