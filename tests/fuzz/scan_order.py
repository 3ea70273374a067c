"""A 16-bit float scan in the order a GPU sums it, for the fuzzer's reference.

A cumsum or cumprod of float16 rounds after every step, so its result depends on the
order of the steps (pallas-prof scans bfloat16 in float32, rounding once; the order
there is emulated too, and matches only where it makes no difference). XLA's CPU (the fuzzer's reference) steps through the
axis one element after another. Triton's scan on the GPU combines lanes as a warp does:
in segments of 32 lanes, each lane takes the lane 1, 2, 4, 8 and 16 before it
(Hillis and Steele), then each segment takes the total of the segments before it. Both
orders are right. Through an ill-conditioned step after the scan (sin of a value in
the tens, a clip and a product over 33 elements), their last-bit differences become
differences a tolerance cannot take.

The H200 fuzz run of 2026-12-03 at d875290 (seed 20261218) found two such programs, and
this order reproduced the GPU's numbers bit for bit: float16[5, 1] `cumsum` then
`sin(v @ v.T)` (v = [1.096, -0.746, -4.42, -8.28, -5.78] on the GPU, -4.418 and -5.773
one element at a time), and float16[33] `cumsum(reverse)`, clip, `cumprod(reverse)`
(1.063 where XLA gives 1.097).

    warp_scan(x, axis, reverse, "add" | "mul")   the scan in that order, in x's dtype
    namespace_with_warp_scans(scope)              the fuzzer's namespace with jnp's and
                                                  lax's cumsum and cumprod in that order

The reference with these is run op by op (not jitted), so every step rounds to the
dtype as the GPU's does.
"""
from __future__ import annotations

import types

import jax.numpy as jnp
from jax import lax

LANES = 32
LOW_FLOATS = (jnp.float16, jnp.bfloat16)


def warp_scan(x, axis: int = 0, reverse: bool = False, op: str = "add", lanes: int = LANES):
  x = jnp.asarray(x)
  if x.dtype not in LOW_FLOATS:
    return (lax.cumsum if op == "add" else lax.cumprod)(x, axis=axis, reverse=reverse)
  combine = jnp.add if op == "add" else jnp.multiply
  identity = 0 if op == "add" else 1
  x = jnp.moveaxis(x, axis, -1)
  n = x.shape[-1]
  m = -(-n // lanes) * lanes
  # the padded lanes hold the identity, after the elements, as the kernel's block does
  x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, m - n)], constant_values=identity)
  if reverse:
    x = jnp.flip(x, -1)
  seg = x.reshape(x.shape[:-1] + (m // lanes, lanes))
  step = 1
  while step < lanes:
    before = jnp.concatenate([jnp.full(seg.shape[:-1] + (step,), identity, seg.dtype),
                              seg[..., :-step]], axis=-1)
    seg = combine(before, seg)
    step *= 2
  parts = [seg[..., 0, :]]
  for k in range(1, seg.shape[-2]):
    parts.append(combine(parts[-1][..., -1:], seg[..., k, :]))
  out = jnp.concatenate(parts, axis=-1)
  if reverse:
    out = jnp.flip(out, -1)
  return jnp.moveaxis(out[..., :n], -1, axis)


def _jnp_cumsum(a, axis=None, dtype=None, out=None):
  a = jnp.asarray(a) if dtype is None else jnp.asarray(a).astype(dtype)
  if axis is None:
    a, axis = a.reshape(-1), 0
  return warp_scan(a, axis, False, "add")


def _jnp_cumprod(a, axis=None, dtype=None, out=None):
  a = jnp.asarray(a) if dtype is None else jnp.asarray(a).astype(dtype)
  if axis is None:
    a, axis = a.reshape(-1), 0
  return warp_scan(a, axis, False, "mul")


class _Proxy(types.ModuleType):
  """A module's names, some replaced."""

  def __init__(self, module, **replaced):
    super().__init__(module.__name__)
    self._module, self._replaced = module, replaced

  def __getattr__(self, name):
    if name in ("_module", "_replaced"):
      raise AttributeError(name)
    return self._replaced.get(name) or getattr(self._module, name)


def namespace_with_warp_scans(scope: dict) -> dict:
  out = dict(scope)
  out["jnp"] = _Proxy(jnp, cumsum=_jnp_cumsum, cumprod=_jnp_cumprod)
  out["lax"] = _Proxy(lax, cumsum=lambda x, axis=0, reverse=False: warp_scan(x, axis, reverse, "add"),
                      cumprod=lambda x, axis=0, reverse=False: warp_scan(x, axis, reverse, "mul"))
  return out
