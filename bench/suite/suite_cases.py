"""The canonical suite's cases: JAX's own GPU Pallas ops, a matmul and a vector add.

Each op comes at three shapes, with feature widths that are not powers of two
(5120, 3072+64 = 3136) and both bf16 and f32 across the three (the dtype goes
with the shape: a full cross product would not fit one GPU call). At full size
every input set is larger than the H200's 50 MB L2 where the op allows; `small`
gives the same case at a size Triton's interpreter runs in seconds on a CPU,
keeping the shape's character (a width that is not a power of two stays so).

A case builds a `Built`: its arguments, the Pallas function (which pallas-prof
or the built-in backend lowers, whichever is installed), XLA's version, and a
reference that computes in float32 from the same inputs upcast, against which
every column's output is checked before it is timed.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))

BF16, F32 = jnp.bfloat16, jnp.float32


@dataclasses.dataclass(frozen=True)
class Case:
  op: str                  # e.g. "layer_norm fwd+bwd"
  shape: tuple             # full-size shape (what the name shows)
  small_shape: tuple       # the dry run's shape
  dtype: Any
  build: Callable          # build(shape, dtype, key) -> Built
  params: tuple = ()       # op parameters that depend on the size: ((name, full, small), ...)
  tune: tuple = ()         # configs the tuned column tries besides the default ({}): dicts of
                           # keyword arguments of the case's variant()

  @property
  def name(self) -> str:
    return self.label()

  def label(self, small: bool = False) -> str:
    shape = self.small_shape if small else self.shape
    return f"{self.op} {'x'.join(map(str, shape))} {jnp.dtype(self.dtype).name}"

  def make(self, key, small: bool = False) -> "Built":
    shape = self.small_shape if small else self.shape
    params = {name: (s if small else f) for name, f, s in self.params}
    return self.build(shape, self.dtype, key, **params)


@dataclasses.dataclass
class Built:
  args: tuple
  variant: Callable        # variant(config) -> the Pallas function with those parameters;
                           # variant({}) is the default. Lowered by whichever Pallas backend
                           # is installed
  xla: Callable            # the same computation in plain jax.numpy / lax
  reference: Callable      # float32 from upcast inputs (the check's truth)
  tol: float               # largest ||out - ref|| / ||ref|| accepted, per output
  bytes: int               # fewest bytes the op must move (inputs read, outputs written once)
  flops: int | None = None
  module: Any = None       # the module whose functions make the Pallas function (the op's
                           # own: JAX's in site-packages, or an example's) ...
  from_module: Callable | None = None   # ... and from_module(m) -> the default Pallas function
                           # made of module m's functions (the suite's "advised" column runs
                           # advise on a copy of the module and times a patched copy)
  with_tile: Callable | None = None     # with_tile(m, change) -> the Pallas function of module
                           # m with a kept dot tile (advice/dots/joint.py's change: "tile"
                           # [rows, cols], "num_warps", "num_stages") set through the op's own
                           # parameters, as its user would (the advised column's kind c)
  with_params: Callable | None = None   # with_params(m, {name: value}) -> the Pallas function
                           # of module m with a kept block change's rebound kernel keyword
                           # (advice/blockshape.py's "rebind": attention's block_q) set as the
                           # op's parameter of that name, as its user would

  @property
  def pallas(self) -> Callable:
    return self.variant({})


def _fixed(fn):
  """The variant() of an op that has no parameters to tune."""
  def variant(config):
    if config:
      raise ValueError(f"this op takes no tuning parameters, got {config}")
    return fn
  return variant


def _normal(key, shape, dtype, scale=1.0):
  return (jax.random.normal(key, shape, jnp.float32) * scale).astype(dtype)


def _nbytes(*arrays) -> int:
  return sum(int(np.prod(a.shape)) * jnp.dtype(a.dtype).itemsize for a in arrays)


def _upcast(fn):
  """fn on float32 copies of the float arguments (integer ones as they are)."""
  def ref(*args):
    return fn(*(a.astype(F32) if jnp.issubdtype(a.dtype, jnp.floating) else a for a in args))
  return ref


def _tol(dtype, f32=1e-4, low=2e-2) -> float:
  return f32 if jnp.dtype(dtype) == jnp.float32 else low


def _vjp_fn(f, n_primals: int):
  """(primals..., cotangent) -> (output, grads...): forward and backward as training runs them."""
  def fwd_bwd(*args):
    out, pullback = jax.vjp(f, *args[:n_primals])
    return (out, *pullback(args[n_primals]))
  return fwd_bwd


# --- the ops ------------------------------------------------------------------------------------

def softmax(shape, dtype, key):
  from jax.experimental.pallas.ops.gpu import softmax as mod
  x = _normal(key, shape, dtype)
  xla = lambda x: jax.nn.softmax(x, axis=-1)
  return Built((x,), lambda cfg: functools.partial(mod.softmax, **cfg), xla, _upcast(xla),
               _tol(dtype, 1e-5), 2 * _nbytes(x), module=mod,
               from_module=lambda m: m.softmax)


def norm(kind, backward, shape, dtype, key):
  from jax.experimental.pallas.ops.gpu import layer_norm, rms_norm
  mod = {"layer_norm": layer_norm, "rms_norm": rms_norm}[kind]
  k = jax.random.split(key, 4)
  x = _normal(k[0], shape, dtype)
  w = _normal(k[1], shape[-1:], dtype)
  b = _normal(k[2], shape[-1:], dtype)
  pallas, xla = getattr(mod, kind), getattr(mod, f"{kind}_reference")
  if not backward:
    return Built((x, w, b), _fixed(pallas), xla, _upcast(xla), _tol(dtype),
                 2 * _nbytes(x) + _nbytes(w, b), module=mod,
                 from_module=lambda m: getattr(m, kind))
  ct = _normal(k[3], shape, dtype)
  xla_vjp = _vjp_fn(xla, 3)
  # forward (x in, y out) and backward (x, dy in; dx, dw, db out)
  return Built((x, w, b, ct), _fixed(_vjp_fn(pallas, 3)), xla_vjp, _upcast(xla_vjp),
               _tol(dtype, 1e-3, 5e-2), 5 * _nbytes(x) + 3 * _nbytes(w, b), module=mod,
               from_module=lambda m: _vjp_fn(getattr(m, kind), 3))


def mha(causal, backward, shape, dtype, key, block=128):
  from jax.experimental.pallas.ops.gpu import attention
  b, s, h, d = shape
  k = jax.random.split(key, 4)
  q, kk, v = (_normal(k[i], shape, dtype) for i in range(3))
  scale = 1.0 / d ** 0.5

  def variant(cfg, mod=attention):
    cfg = dict(cfg)
    bq, bk = cfg.pop("block_q", block), cfg.pop("block_k", block)
    bwd = cfg.pop("bwd", min(32, block))          # JAX's default backward blocks
    bs = mod.BlockSizes(block_q=bq, block_k=bk, block_q_dkv=bwd, block_kv_dkv=bwd,
                        block_q_dq=bwd, block_kv_dq=bwd)
    fn = functools.partial(mod.mha, segment_ids=None, sm_scale=scale, causal=causal,
                           block_sizes=bs, **cfg)
    return _vjp_fn(fn, 3) if backward else fn
  # the forward kernel's block_q and block_k are the op's own parameters of those names (the
  # backward kernels' keywords of the same names are other BlockSizes fields)
  of_module = dict(module=attention, from_module=lambda m: variant({}, m),
                   with_params=None if backward else lambda m, params: variant(params, m))

  def xla(q, k, v):
    return attention.mha_reference(q, k, v, segment_ids=None, sm_scale=scale,
                                   causal=causal).astype(q.dtype)
  flops = 4 * b * h * s * s * d // (2 if causal else 1)
  tol = _tol(dtype, 5e-3, 2e-2)       # f32 dots run as TF32 on the GPU
  if not backward:
    return Built((q, kk, v), variant, xla, _upcast(xla), tol, 4 * _nbytes(q), flops, **of_module)
  ct = _normal(k[3], shape, dtype)
  xla_vjp = _vjp_fn(xla, 3)
  return Built((q, kk, v, ct), variant, xla_vjp, _upcast(xla_vjp), 2 * tol,
               12 * _nbytes(q), flops * 7 // 2,      # backward: 2.5x the forward's FLOPs
               **of_module)


def decode_attention(shape, dtype, key, block_k=256, k_splits=16):
  from jax.experimental.pallas.ops.gpu import decode_attention as mod
  b, h, s, d = shape
  k = jax.random.split(key, 3)
  q = _normal(k[0], (b, h, d), dtype)
  kk = _normal(k[1], (b, s, d), dtype)
  v = _normal(k[2], (b, s, d), dtype)
  variant = lambda cfg, m=mod: functools.partial(m.mqa, **{"block_k": block_k,
                                                          "k_splits": k_splits, **cfg})
  xla = mod.mqa_reference
  return Built((q, kk, v), variant, xla, _upcast(xla), _tol(dtype, 5e-3, 2e-2),
               _nbytes(q, kk, v) + _nbytes(q), 4 * b * h * s * d, module=mod,
               from_module=lambda m: variant({}, m))


def paged_attention(shape, dtype, key, pages_per_compute_block=8, k_splits=16):
  from jax.experimental.pallas.ops.gpu import paged_attention as mod
  batch, heads, kv_heads, seq, dim, page = shape
  pages_per_seq = seq // page
  total = batch * pages_per_seq
  k = jax.random.split(key, 6)
  q = _normal(k[0], (batch, heads, dim), dtype)
  k_pages = _normal(k[1], (kv_heads, total, page, dim), dtype)
  v_pages = _normal(k[2], (kv_heads, total, page, dim), dtype)
  tables = jax.random.permutation(k[3], total).reshape(batch, pages_per_seq).astype(jnp.int32)
  lengths = jax.random.randint(k[4], (batch,), seq // 2, seq + 1, jnp.int32)
  variant = lambda cfg, m=mod: functools.partial(m.paged_attention, **{
      "block_h": 16, "pages_per_compute_block": pages_per_compute_block, "k_splits": k_splits,
      **cfg})

  def xla(q, k_pages, v_pages, tables, lengths):
    # the reference wants each sequence's K/V contiguous: gather its pages
    gather = lambda p: (p[:, tables].reshape(kv_heads, batch, -1, dim).transpose(1, 2, 0, 3))
    return mod.paged_attention_reference(q, gather(k_pages), gather(v_pages), lengths)
  return Built((q, k_pages, v_pages, tables, lengths), variant, xla, _upcast(xla),
               _tol(dtype, 5e-3, 2e-2), _nbytes(q, k_pages, v_pages) + _nbytes(q),
               4 * batch * heads * seq * dim, module=mod, from_module=lambda m: variant({}, m))


def matmul(shape, dtype, key, bm=128, bn=128, bk=64, num_warps=4, num_stages=3):
  import matmul as example            # examples/matmul.py
  m, n, kdim = shape
  ka, kb = jax.random.split(key)
  a, b = _normal(ka, (m, kdim), dtype), _normal(kb, (kdim, n), dtype)
  defaults = dict(bm=bm, bn=bn, bk=bk, num_warps=num_warps, num_stages=num_stages)

  def variant(cfg):
    cfg = {**defaults, **cfg}
    group = cfg.pop("launch_group", 0)
    tma = cfg.pop("tma", False)
    if not group and not tma:
      return functools.partial(example.matmul, **cfg)
    # the example's kernel launched in groups (CompilerParams(launch_group)) and/or with
    # TMA loads and stores (CompilerParams(tma)), for pallas-prof's tuned column only:
    # the built-in backend runs variant({})
    from bench.cost.tma import matmul as with_params
    return functools.partial(with_params, group=group, tma=tma, name=None, **cfg)

  def xla(a, b):
    return jnp.dot(a, b, preferred_element_type=F32).astype(a.dtype)
  return Built((a, b), variant, xla, _upcast(xla), _tol(dtype, 5e-3, 1e-2),
               _nbytes(a, b) + m * n * jnp.dtype(dtype).itemsize, 2 * m * n * kdim,
               module=example, from_module=lambda mod: functools.partial(mod.matmul, **defaults),
               with_tile=lambda mod, change: functools.partial(mod.matmul, **_tiled(defaults, change)))


def _tiled(defaults: dict, change: dict) -> dict:
  """examples/matmul.py's parameters with a kept dot tile: bm, bn (the tile's rows and
  columns), num_warps and num_stages, as advise's edit names them."""
  bm, bn = change["tile"]
  return {**defaults, "bm": bm, "bn": bn, "num_warps": change["num_warps"],
          "num_stages": change["num_stages"]}


def vector_add(shape, dtype, key):
  import vector_add as example        # examples/vector_add.py
  kx, ky = jax.random.split(key)
  x, y = _normal(kx, shape, dtype), _normal(ky, shape, dtype)
  xla = lambda x, y: x + y
  return Built((x, y), _fixed(example.add), xla, _upcast(xla), _tol(dtype, 0.0, 1e-2),
               3 * _nbytes(x), module=example, from_module=lambda m: m.add)


# --- the suite ----------------------------------------------------------------------------------

def _norm_cases(kind, backward):
  op = f"{kind} {'fwd+bwd' if backward else 'fwd'}"
  build = functools.partial(norm, kind, backward)
  return [Case(op, (1, 8192, 8192), (1, 3, 256), BF16, build),
          Case(op, (4, 2048, 5120), (2, 3, 80), F32, build),
          Case(op, (8, 2048, 3136), (2, 2, 136), BF16, build)]


def _mha_cases(causal, backward):
  op = f"mha {'fwd+bwd' if backward else 'fwd'} {'causal' if causal else 'full'}"
  build = functools.partial(mha, causal, backward)
  blocks = (("block", 128, 32),)
  tune = (({"bwd": 64},) if backward else ({"block_q": 128, "block_k": 64},)) + (
      {"block_q": 64, "block_k": 64}, {"num_stages": 3})
  # the backward's configs also try the forward's blocks that its forward-only case kept
  # (suite_h200_d17c20b.json: bf16 block_q 64 and block_k 64, 0.80-0.91 of the built-in;
  # f32 block_q 128, 0.52-0.59), beside the backward's own blocks
  both = ({"bwd": 64, "block_q": 64, "block_k": 64},) if backward else ()
  f32_fwd = ({"block_q": 128, "block_k": 64}, {"block_q": 128, "block_k": 64, "num_warps": 4}) \
      if backward else ()
  return [Case(op, (4, 4096, 16, 64), (1, 64, 2, 32), BF16, build, blocks, tune + both),
          # f32 blocks of 128x128 would need more shared memory than Hopper has
          Case(op, (2, 5120, 8, 128), (1, 96, 2, 32), F32, build, (("block", 64, 32),),
               tune[:1] + ({"num_warps": 4}, {"num_stages": 3}) + f32_fwd),
          Case(op, (8, 3072, 12, 64), (2, 64, 1, 16), BF16, build, blocks, tune + both)]


SOFTMAX_TUNE = ({"num_warps": 8}, {"num_warps": 16})
DECODE_TUNE = ({"block_k": 128}, {"k_splits": 8}, {"num_warps": 8})
PAGED_TUNE = ({"pages_per_compute_block": 16}, {"k_splits": 8}, {"num_warps": 4})
# TMA ({"tma": True}) joins these once bench/cost/tma_gpu.sh has shown it right on a GPU
MATMUL_TUNE = ({"launch_group": 8}, {"num_stages": 4}, {"num_stages": 2})


CASES: list[Case] = [
    Case("softmax", (8192, 8192), (5, 100), F32, softmax, tune=SOFTMAX_TUNE),
    Case("softmax", (8192, 5120), (3, 80), BF16, softmax, tune=SOFTMAX_TUNE),
    Case("softmax", (16384, 3136), (4, 136), F32, softmax, tune=SOFTMAX_TUNE),
    *_norm_cases("layer_norm", False), *_norm_cases("layer_norm", True),
    *_norm_cases("rms_norm", False), *_norm_cases("rms_norm", True),
    *_mha_cases(True, False), *_mha_cases(False, False),
    *_mha_cases(True, True), *_mha_cases(False, True),
    Case("decode_attention", (32, 32, 8192, 128), (2, 4, 64, 32), BF16, decode_attention,
         (("k_splits", 16, 2), ("block_k", 256, 16)), DECODE_TUNE),
    Case("decode_attention", (32, 16, 5120, 64), (2, 4, 80, 16), F32, decode_attention,
         (("k_splits", 16, 5), ("block_k", 64, 16)), ({"block_k": 32},) + DECODE_TUNE[1:]),
    Case("decode_attention", (16, 64, 16384, 128), (1, 16, 96, 32), BF16, decode_attention,
         (("k_splits", 16, 2), ("block_k", 256, 16)), DECODE_TUNE),
    # (batch, heads, kv_heads, seq, head_dim, page_size)
    Case("paged_attention", (32, 32, 8, 4096, 128, 16), (2, 16, 2, 128, 32, 16), BF16,
         paged_attention, (("pages_per_compute_block", 8, 2), ("k_splits", 16, 2)), PAGED_TUNE),
    Case("paged_attention", (16, 32, 4, 5120, 64, 16), (2, 32, 2, 160, 16, 16), F32,
         paged_attention, (("pages_per_compute_block", 4, 5), ("k_splits", 16, 2)), PAGED_TUNE),
    Case("paged_attention", (64, 16, 2, 3072, 128, 32), (1, 16, 1, 96, 32, 16), BF16,
         paged_attention, (("pages_per_compute_block", 4, 2), ("k_splits", 12, 3)),
         ({"pages_per_compute_block": 8}, {"k_splits": 6}, {"num_warps": 4})),
    Case("matmul", (8192, 8192, 8192), (64, 96, 64), BF16, matmul,
         (("bm", 128, 32), ("bn", 256, 32), ("bk", 64, 32), ("num_warps", 8, 4)),
         MATMUL_TUNE + ({"bm": 256, "bn": 128},)),
    Case("matmul", (5120, 3136, 4096), (64, 80, 48), F32, matmul,
         (("bm", 128, 32), ("bn", 64, 16), ("bk", 32, 16)), MATMUL_TUNE + ({"num_warps": 8},)
         # issue 49: XLA ran this 3x faster (TF32 both): tiles of 128x64 re-read the operands
         + ({"bn": 128, "num_warps": 8}, {"bn": 256, "num_warps": 8})
         # advise's num_warps 4 -> 2 held on this matmul (dots_h200_fc6f360_triton39.json)
         + ({"num_warps": 2},)),
    Case("matmul", (3136, 5120, 3072), (80, 64, 96), BF16, matmul,
         (("bm", 64, 16), ("bn", 128, 32), ("bk", 64, 32)), MATMUL_TUNE + ({"num_warps": 8},)
         # XLA ran it in 0.78 of our time (suite_h200_d17c20b.json); the 8192^3 case's tiles
         # of 128x256 with 8 warps reach XLA's rate there
         + ({"bm": 128, "bn": 256, "num_warps": 8}, {"bm": 128, "bn": 128, "num_warps": 8})),
    Case("vector_add", (1 << 26,), (5000,), F32, vector_add),
    Case("vector_add", (5120 * 8192 + 7,), (3000 + 7,), BF16, vector_add),
    Case("vector_add", (3136 * 8192,), (3136,), F32, vector_add),
]


def ordered(cases: list[Case], quick: bool = False, first: tuple = ()) -> list[Case]:
  """Every op's first shape before any op's second: a run cut short by its time
  budget still covers every op. --quick keeps the first shape of each op.
  `first`: ops (names) that go ahead of the others in each round."""
  by_op: dict[str, list[Case]] = {}
  for c in sorted(cases, key=lambda c: c.op not in first):
    by_op.setdefault(c.op, []).append(c)
  rounds = 1 if quick else max(len(v) for v in by_op.values())
  return [v[i] for i in range(rounds) for v in by_op.values() if i < len(v)]
