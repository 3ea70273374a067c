"""Constant folding: an elementwise equation whose operands are all constants
is evaluated at lowering time and becomes a constant of the kernel, e.g.
`log 2.0` in JAX's attention kernel, or the offsets of an unrolled loop.

Operations that IEEE and two's complement define exactly (integer and float
add, subtract, multiply, comparisons, bitwise logic, max/min, select) are
evaluated with numpy: same bits as XLA, and no XLA compile (an eager JAX op
costs one XLA compile per new op in the process, a visible part of a norm
kernel's first lowering: bench/results/archive/comment_figures.md). The rest (division, transcendental
functions, conversions) go through JAX on the CPU, so with XLA's semantics.
"""
from __future__ import annotations

import jax
import numpy as np

from . import emit
from .rules.table import FOLDABLE   # filled by the rules' register(foldable=True)
from .codegen import Value

# Exact in numpy as in XLA, for every dtype they accept (NaNs propagate through
# max/min in both; integer overflow wraps in both).
NUMPY_EXACT = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "neg": np.negative,
    "max": np.maximum, "min": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
    "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "not": np.invert,
}


def _numpy_fold(eqn, args):
  name = eqn.primitive.name
  out_dtype = np.dtype(eqn.outvars[0].aval.dtype)
  if not all(a.dtype.kind in "biuf" for a in args) or out_dtype.kind not in "biuf":
    return None               # bfloat16 and other ml_dtypes: through JAX
  if name == "select_n":
    return np.asarray(args[1 + int(args[0])], dtype=out_dtype)
  if name == "convert_element_type":
    # exact or round-to-nearest in both; float -> int (XLA saturates) goes through JAX
    if args[0].dtype.kind == "f" and out_dtype.kind in "biu":
      return None
    with np.errstate(all="ignore"):
      return np.asarray(args[0].astype(out_dtype))
  fn = NUMPY_EXACT.get(name)
  if fn is None or any(v is not None for v in eqn.params.values()):
    return None
  if any(a.dtype != args[0].dtype for a in args):
    return None
  with np.errstate(all="ignore"):
    out = fn(*args)
  return np.asarray(out, dtype=out_dtype)


def try_fold(eqn, invals) -> Value | None:
  if eqn.primitive.name not in FOLDABLE or eqn.primitive.multiple_results:
    return None
  if not invals or not all(isinstance(v, Value) and v.const is not None and not v.shape
                           for v in invals):
    return None
  args = [np.asarray(v.const, dtype=v.dtype) for v in invals]
  out = _numpy_fold(eqn, args)
  if out is None:
    with jax.default_device(jax.devices("cpu")[0]):
      out = np.asarray(eqn.primitive.bind(*args, **eqn.params))
  return emit.const(out, out.dtype)
