"""What the split's recognizers (pattern.py, inplace.py) ask of a kernel's jaxpr: who uses
a value, who made it, whether it is zero."""
from __future__ import annotations

import numpy as np

from ...backend import compat

LOOPS = ("scan", "while")
SUMS = ("add", "add_any")
CONVERT = "convert_element_type"


class NotSplittable(ValueError):
  """The kernel does not fit the pattern; the message says why, in words."""


def is_lit(v) -> bool:
  return isinstance(v, compat.Literal)


def uses(eqns, var) -> list[int]:
  return [i for i, e in enumerate(eqns) if any(not is_lit(v) and v is var for v in e.invars)]


def producer(eqns, var):
  return next((e for e in eqns if any(o is var for o in e.outvars)), None)


def zero(eqns, v, outside=lambda v: False) -> bool:
  """Whether v is zero: a literal, or one broadcast, cast or reshaped; `outside(v)` for a
  value made outside `eqns` (a call's operand)."""
  if is_lit(v):
    return bool(np.all(np.asarray(v.val) == 0))
  e = producer(eqns, v)
  if e is None:
    return outside(v)
  return (e.primitive.name in ("broadcast_in_dim", CONVERT, "reshape") and
          len(e.invars) == 1 and zero(eqns, e.invars[0], outside))
