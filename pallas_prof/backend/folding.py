"""Constant folding: an elementwise equation whose operands are all constants
is evaluated at lowering time with JAX on the CPU (so with XLA's semantics)
and becomes a constant of the kernel, e.g. `log 2.0` in JAX's attention kernel.
"""
from __future__ import annotations

import numpy as np

from . import emit
from .codegen import Value

# Primitives safe to evaluate eagerly: pure, elementwise, no params that name refs.
FOLDABLE = frozenset({
    "abs", "acos", "acosh", "add", "and", "asin", "asinh", "atan", "atan2", "atanh", "cbrt",
    "ceil", "clamp", "convert_element_type", "cos", "cosh", "div", "eq", "erf", "erf_inv",
    "erfc", "exp", "exp2", "expm1", "floor", "ge", "gt", "integer_pow", "is_finite", "le",
    "lgamma", "log", "log1p", "log2", "logistic", "one_minus_square", "lt", "max", "min", "mul", "ne", "neg", "nextafter",
    "not", "or", "pow", "rem", "round", "rsqrt", "select_n", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sinh", "sqrt", "square",
    "sub", "tan", "tanh", "xor", "population_count", "clz",
})


def try_fold(eqn, invals) -> Value | None:
  if eqn.primitive.name not in FOLDABLE or eqn.primitive.multiple_results:
    return None
  if not invals or not all(isinstance(v, Value) and v.const is not None and not v.shape
                           for v in invals):
    return None
  import jax
  args = [np.asarray(v.const, dtype=v.dtype) for v in invals]
  with jax.default_device(jax.devices("cpu")[0]):
    out = np.asarray(eqn.primitive.bind(*args, **eqn.params))
  return emit.const(out, out.dtype)
