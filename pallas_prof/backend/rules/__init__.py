"""The lowering rules, by family, in one table.

A rule is a small function `rule(ctx, *operands, **eqn.params) -> Value(s)`.
It emits Triton source through `ctx` and returns typed Values. It raises
`Unsupported(reason, hint)` for what it cannot do; the dispatcher adds the
equation and the user's line.
"""
from __future__ import annotations

from typing import Callable

RULES: dict[object, Callable] = {}

# Primitives we deliberately do not lower, with what to do instead.
ALIASES: dict[str, str] = {
    "run_scoped": "pl.run_scoped allocates scratch memory, which the Triton model has no "
                  "place for; keep intermediates as values instead",
    "semaphore_signal": "semaphores are a TPU / Mosaic GPU feature; use atomics "
                        "(plgpu.atomic_add, atomic_cas) on a counter array",
    "semaphore_wait": "semaphores are a TPU / Mosaic GPU feature; use atomics",
    "dma_start": "DMAs are a TPU / Mosaic GPU feature; read refs directly in Triton kernels",
    "sort": "sorting inside a kernel is not supported; sort outside the pallas_call",
    "cumsum": "supported along any axis; this form was not",
}


def register(*primitives):
  def wrap(fn):
    for p in primitives:
      if p is not None:
        RULES[p] = fn
    return fn
  return wrap


def supported_primitive_names() -> list[str]:
  return sorted({p.name for p in RULES})


from . import (control_flow, dot, elementwise, memory, misc, reductions,  # noqa: E402,F401
               shape)
