"""The fuzz program with every float32 jnp and lax call worked in float64 and rounded back
to float32: each operation correctly rounded, as IEEE asks of an add and as a good libm
gets within an ulp for tanh or exp.

XLA's CPU reference is not that. Its float32 tanh is an approximation clamped at a bound
(in JAX's Pallas interpreter, tanh(-10) comes out -0.9999998, three ulps above the float32
nearest, -1.0), and its exp is an ulp off here and there. Through a discontinuity
(ceil(tanh(-10)): -0.0 where -1.0 is right) or a sin of thousands, that ulp becomes a
whole difference from pallas-prof, whose libdevice tanh and exp are within their
documented ulps of the exact value (the GPU fuzzer's seed 20261222 found both,
tests/fuzz/test_rounded.py).

    namespace_rounded_from_float64(scope)   the fuzzer's namespace with jnp and lax so
                                            wrapped (run it under jax.enable_x64(True))

A call whose float64 form fails (a dtype it insists on) keeps its own result.
"""
from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .proxy import ModuleProxy

# float32 only: a 16-bit call worked in float64 would round a whole cumsum or dot once,
# and so excuse pallas-prof skipping a 16-bit rounding XLA makes (check.py's
# xla_low_precision_accumulates asks for something that accumulates first)
WIDENED = (np.dtype(np.float32),)


def _is_narrow_float(x) -> bool:
  dtype = getattr(x, "dtype", None)
  return dtype is not None and hasattr(x, "shape") and np.dtype(dtype) in WIDENED


def _widen(x):
  return x.astype(jnp.float64) if _is_narrow_float(x) else x


def rounded_from_float64(fn):
  """fn worked in float64 on its float arguments, each result rounded to the dtype fn
  itself gives it."""
  def call(*args, **kwargs):
    narrow = fn(*args, **kwargs)
    leaves = jax.tree.leaves(narrow)
    if not any(_is_narrow_float(leaf) for leaf in leaves):
      return narrow
    try:
      wide = fn(*jax.tree.map(_widen, args), **jax.tree.map(_widen, kwargs))
      return jax.tree.map(lambda w, n: w.astype(n.dtype) if _is_narrow_float(n) else n,
                          wide, narrow)
    except (TypeError, ValueError):
      return narrow
  call.__name__ = getattr(fn, "__name__", "call")
  return call


def _rounded_if_a_function(value):
  """Functions rounded_from_float64; types and submodules as they are."""
  if callable(value) and not isinstance(value, (type, types.ModuleType)):
    return rounded_from_float64(value)
  return value


def namespace_rounded_from_float64(scope: dict, **replaced) -> dict:
  """`replaced`: names of jnp or lax to take as given ({"jnp.cumsum": f, ...})."""
  out = dict(scope)
  for name, module in (("jnp", jnp), ("lax", lax)):
    given = {k[len(name) + 1:]: v for k, v in replaced.items() if k.startswith(name + ".")}
    out[name] = ModuleProxy(module, _rounded_if_a_function, **given)
  return out
