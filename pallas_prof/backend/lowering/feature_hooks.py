"""The points where the lowering tells the features that watch it, and asks them.

The kernel's lowering (lower.py), the jaxpr walker (dispatch.py), the rules and
the access code call the kernel's listeners (KernelContext.listeners, a
Listeners) at fixed points; a listener (a feature: features/listeners.py)
overrides the ones it needs, the rest do nothing. Each feature keeps its own
state on its listener, so nothing but the listener knows it is there:

  kernel set-up     after_inputs (parameters between the inputs and the outputs),
                    after_outputs (parameters after them), launch (the launch
                    grid is known, no code yet), prologue_done (every operand's
                    block is set up; the body comes next)
  each jaxpr        enter_jaxpr / leave_jaxpr around a jaxpr lowered in its own
                    scope (a loop body, a branch)
  each equation     before_equation / after_equation around it, whatever
                    lowered it (a rule, constant folding, an earlier equal
                    equation); before_rule / after_rule around its rule only
  asked by rules    read / write (a ref access another way; None / False: the
                    plain one), lower_scan (a cumulative scan another way),
                    checks_indices and check_access (the bounds checks of an
                    access), index_sum / index_multiple (what an index is a
                    known multiple of)
  kernel end        end: parameters after the body's
"""
from __future__ import annotations

from typing import Callable

from ..artifacts import KernelParam


class EquationEvent:
  """One equation as the walker lowers it: what listeners are told."""
  __slots__ = ("eqn", "info", "invals", "live", "parent", "region", "first_line")

  def __init__(self, eqn, info, invals, live, parent, region: str):
    self.eqn = eqn
    self.info = info                # codegen.EqnInfo: index, line, facts
    self.invals = invals            # its operands' values
    self.live = live                # variables something reads after (None: unknown)
    self.parent = parent            # the EqnInfo of the equation it is nested in, or None
    self.region = region            # "kernel", "body", "branch 1", ...
    # the builder's line count where its lowering began (after before_equation's lines)
    self.first_line = 0


class ParamLayout:
  """The kernel's operands, for listeners that add parameters beside them."""
  __slots__ = ("labels", "n_in", "n_out", "block_mappings", "input_output_aliases")

  def __init__(self, labels, n_in, n_out, block_mappings, input_output_aliases):
    self.labels, self.n_in, self.n_out = labels, n_in, n_out
    self.block_mappings, self.input_output_aliases = block_mappings, input_output_aliases


class LoweringListener:
  """A feature of the lowering: override the points it acts at."""

  def after_inputs(self, kernel, layout: ParamLayout) -> list[KernelParam]:
    return []

  def after_outputs(self, kernel) -> None:
    pass

  def launch(self, kernel) -> None:
    pass

  def prologue_done(self, kernel, jaxpr, refs) -> None:
    pass

  def enter_jaxpr(self, kernel, jaxpr, env: dict, loop: bool) -> None:
    pass

  def leave_jaxpr(self, kernel) -> None:
    pass

  def before_equation(self, kernel, event: EquationEvent) -> None:
    pass

  def before_rule(self, kernel, event: EquationEvent) -> None:
    pass

  def after_rule(self, kernel, event: EquationEvent, out) -> None:
    pass

  def after_equation(self, kernel, event: EquationEvent, out) -> None:
    pass

  def read(self, ctx, ref, shape, mask, other, load_options: dict):
    """The value of a read of `ref` (a view of `shape`) made another way, or None."""
    return None

  def write(self, ctx, ref, shape, value_for: Callable, mask, eviction_policy) -> bool:
    """Whether it stored `value_for()` (the value, as the view's dtype and shape) to
    `ref` another way; False: the plain store follows."""
    return False

  def lower_scan(self, ctx, x, axis: int, kind: str, reverse: bool, out_dtype,
                 scan, reduce):
    """A cumulative scan of x lowered another way, or None."""
    return None

  @property
  def checks_indices(self) -> bool:
    """Whether every ref access checks its indices (the bounds-checked mode)."""
    return False

  def check_access(self, ctx, site_fields: dict, local_indices, active, shape) -> str | None:
    """The in-bounds mask's name of a checked access, or None (this one checks nothing)."""
    return None

  def check_block(self, ctx, block, access: str, active, shape) -> str | None:
    """The name of a scalar that is true where the block an access reads or writes
    (access.refs.BlockIndices) lies inside its array, or None (this one checks nothing)."""
    return None

  def index_sum(self, kernel, result, terms) -> None:
    """result = the sum of value * factor over `terms` ((Value, int) pairs)."""

  def index_multiple(self, kernel, value, multiple: int) -> None:
    """`value` is a known multiple of `multiple`."""

  def end(self, kernel) -> list[KernelParam]:
    return []


class Listeners(tuple):
  """A kernel's listeners, in the order they act: each point told to all, each
  question answered by the first listener that answers it."""

  def enter_jaxpr(self, kernel, jaxpr, env: dict, loop: bool) -> None:
    for listener in self:
      listener.enter_jaxpr(kernel, jaxpr, env, loop)

  def leave_jaxpr(self, kernel) -> None:
    for listener in reversed(self):
      listener.leave_jaxpr(kernel)

  def read(self, ctx, ref, shape, mask=None, other=None, load_options=None):
    for listener in self:
      value = listener.read(ctx, ref, shape, mask, other, load_options or {})
      if value is not None:
        return value
    return None

  def write(self, ctx, ref, shape, value_for, mask=None, eviction_policy=None) -> bool:
    return any(listener.write(ctx, ref, shape, value_for, mask, eviction_policy)
               for listener in self)

  def lower_scan(self, ctx, x, axis, kind, reverse, out_dtype, scan, reduce):
    for listener in self:
      out = listener.lower_scan(ctx, x, axis, kind, reverse, out_dtype, scan, reduce)
      if out is not None:
        return out
    return None

  @property
  def checks_indices(self) -> bool:
    return any(listener.checks_indices for listener in self)

  def check_access(self, ctx, site_fields, local_indices, active, shape) -> str | None:
    for listener in self:
      ok = listener.check_access(ctx, site_fields, local_indices, active, shape)
      if ok is not None:
        return ok
    return None

  def check_block(self, ctx, block, access, active, shape) -> str | None:
    for listener in self:
      ok = listener.check_block(ctx, block, access, active, shape)
      if ok is not None:
        return ok
    return None

  def index_sum(self, kernel, result, terms) -> None:
    for listener in self:
      listener.index_sum(kernel, result, terms)

  def index_multiple(self, kernel, value, multiple: int) -> None:
    for listener in self:
      listener.index_multiple(kernel, value, multiple)
