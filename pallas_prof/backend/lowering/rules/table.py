"""The table of lowering rules: primitive -> rule, and how rules get into it.

A rule is a small function `rule(ctx, *operands, **eqn.params) -> Value(s)`.
It emits Triton source through `ctx` and returns typed Values. It raises
`Unsupported(reason, hint)` for what it cannot do; the dispatcher adds the
equation and the user's line. The rule modules of each family register
themselves here; rules/__init__.py imports them all.
"""
from __future__ import annotations

import sys
import threading
from typing import Callable

RULES: dict[object, Callable] = {}

# Rules whose primitive lives in a module we do not import ourselves: JAX's
# Triton-flavoured primitives (plgpu.atomic_add, ...; pallas-prof's own, in
# pallas_prof.triton, are registered as any other). Importing that module
# imports JAX's own Triton lowering and its MLIR dialects (tens of ms:
# bench/results/archive/comment_figures.md), which would land on the process's first kernel. A kernel can only
# contain one of those primitives once the user's code has imported the
# module, so each rule is bound to its primitive at the first lookup that
# finds the module imported.
_DEFERRED: list[tuple[str, str, Callable]] = []   # (module, primitive's name there, rule)
_deferred_lock = threading.Lock()

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


# The work an elementwise or reduction equation does, for the profiler's work
# model: one FLOP per output element (ARITHMETIC), one transcendental function
# evaluation per output element (TRANSCENDENTAL), one FLOP per input element
# (REDUCTION); counted for float results only. The dispatcher records it on
# the equation's record from the avals (rules that know better record their own).
ARITHMETIC, TRANSCENDENTAL, REDUCTION = "arithmetic", "transcendental", "reduction"
WORK: dict[object, str] = {}

# What a rule cannot do, in words, by primitive name (`pallas-prof rules`).
LIMITS: dict[str, str] = {}

# The device-library functions (`libdevice.<name>`: CUDA's libdevice on NVIDIA, ocml on
# AMD) a rule may call, by primitive name: stated where the rule registers, so the list of
# every function the lowering can emit (what an AMD target must have, what the
# interpreter's numpy stand-in must give) is read from the table, never kept beside it.
LIBRARY: dict[str, frozenset[str]] = {}

# The primitives an equation of which, all operands constants, may be evaluated at lowering
# time (folding.py): pure, elementwise, no params that name refs. Stated where the rule
# registers; a rule that does not say so is never folded.
FOLDABLE: set[str] = set()


def register(*primitives, work: str | None = None, limits: str | None = None,
             library: tuple[str, ...] = (), foldable: bool = False):
  """`@register(p, ...)`: `fn` lowers the primitives; `work` is one of
  ARITHMETIC/TRANSCENDENTAL/REDUCTION, `limits` what the rule refuses, `library` the
  device-library functions its text calls, `foldable` whether folding.py may evaluate
  an all-constant equation of it eagerly."""
  def wrap(fn):
    for p in primitives:
      if p is not None:
        RULES[p] = fn
        if work is not None:
          WORK[p] = work
        if limits:
          LIMITS[p.name] = limits
        if library:
          LIBRARY[p.name] = LIBRARY.get(p.name, frozenset()) | frozenset(library)
        if foldable:
          FOLDABLE.add(p.name)
    return fn
  return wrap


def register_deferred(module: str, attr: str, limits: str | None = None):
  """register(), for the primitive `module.attr`, once that module is imported."""
  def wrap(fn):
    with _deferred_lock:
      _DEFERRED.append((module, attr, fn))
    if limits:
      LIMITS[attr[:-2] if attr.endswith("_p") else attr] = limits
    return fn
  return wrap


def work_of(primitive) -> str | None:
  return WORK.get(primitive)


def primitives_doing(work: str) -> frozenset[str]:
  """The names of the primitives whose rules record `work` (ARITHMETIC, TRANSCENDENTAL or
  REDUCTION): whoever needs to know which equations evaluate a transcendental function
  (the advice) reads it here, from the rules that emit them, not from a list of its own.
  Complete once the rule families are imported (import it from the rules package)."""
  return frozenset(p.name for p, kind in WORK.items() if kind == work)


def library_functions() -> frozenset[str]:
  """Every device-library function a rule may emit, from the rules' register() calls.
  Complete once the rule families are imported (import it from the rules package)."""
  return frozenset().union(*LIBRARY.values())


def foldable_primitives() -> frozenset[str]:
  """The names of the primitives folding.py may evaluate eagerly (register(foldable=True))."""
  return frozenset(FOLDABLE)


def _bind_deferred() -> None:
  with _deferred_lock:
    for item in list(_DEFERRED):
      module_name, attr, fn = item
      module = sys.modules.get(module_name)
      primitive = getattr(module, attr, None)   # None too while another thread imports it
      if primitive is not None:
        RULES[primitive] = fn
        _DEFERRED.remove(item)


def rule_for(primitive) -> Callable | None:
  """The dispatcher's lookup: RULES[primitive], binding deferred rules on a miss."""
  rule = RULES.get(primitive)
  if rule is None and _DEFERRED:
    _bind_deferred()
    rule = RULES.get(primitive)
  return rule


def all_rules() -> dict[object, Callable]:
  """Every rule, for listings and hints: the deferred ones once their module is imported
  (never imported here: pallas-prof's own Triton-flavoured primitives, in the table
  from the start, lower what JAX's do)."""
  if _DEFERRED:
    _bind_deferred()
  return RULES


def supported_primitive_names() -> list[str]:
  return sorted({p.name for p in all_rules()})


def rule_limits() -> dict[str, str]:
  """Primitive name -> what its rule refuses (empty for rules that take every
  form JAX gives them, complex numbers apart, which no rule takes)."""
  return {name: LIMITS.get(name, "") for name in supported_primitive_names()}

