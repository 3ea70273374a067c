"""The state one kernel's lowering shares across rules: the builder, the grid's
program ids, what each jaxpr being lowered has computed and loaded (Scope),
which refs may share memory. What a feature of the lowering keeps (bounds
sites, the TMA plan, probes, barriers, workarounds) is its listener's
(feature_hooks.py), not a field here.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..options import LoweringOptions
from .codegen import KernelBuilder, Value
from .effects import load_ref_name
from .feature_hooks import Listeners


@dataclasses.dataclass
class Scope:
  """What one jaxpr being lowered (the kernel, a loop body, a branch) has
  already computed, for later lines of it and of the jaxprs nested in it.

  `exprs`: expression -> the variable holding it (RuleContext.assign_once).
  `values`: a pure equation (primitive, params, operands) -> its outputs
  (the dispatcher's common-subexpression step).
  `loads`: a ref read (view, mask, other) -> the value it loaded, only while
  no equation has written to that ref, or to one that may alias it, since
  (KernelContext.forget_loads).

  A nested jaxpr gets its own Scope, dropped when it ends, so nothing it
  computed is used where it may not have run (after a branch, after a loop
  body, or in the next iteration of a loop before it is recomputed). Jaxprs
  emitted as straight-line code (calls, a loop of one iteration) share their
  caller's Scope: what they compute runs exactly once, right there.
  """
  exprs: dict[str, str] = dataclasses.field(default_factory=dict)
  values: dict[tuple, Any] = dataclasses.field(default_factory=dict)
  loads: dict[tuple, Any] = dataclasses.field(default_factory=dict)


class KernelContext:
  """State shared by all rules while one kernel is lowered."""

  def __init__(self, builder: KernelBuilder, name: str, grid: tuple[int, ...],
               program_ids: list[Value], options: LoweringOptions,
               grid_names=None, jaxpr_text: str = ""):
    self.builder = builder
    self.name = name
    self.grid = grid
    self.program_ids = program_ids
    self.options = options        # what the kernel is lowered with (launch_group as asked)
    self.compute_capability = options.compute_capability
    self.grid_names = grid_names
    self.jaxpr_text = jaxpr_text
    self.launch_grid = (1, 1, 1)
    self.launch_group = 0         # > 1: the grid is launched in groups (grid.grouped_launch)
    self.persistent = 0           # > 0: programs launched that loop over the grid (grid.py)
    self.staged_loops = 0         # loops emitted as tl.range(num_stages=options.loop_stages)
    self.num_programs: list[int] = []
    self._eqn_counter = 0
    # equations lowered without being recorded (no equation records, no spans): a jaxpr
    # emitted once more under the indices it was recorded with (RuleContext.reemit_jaxpr)
    self.reemitting = False
    # the features watching the lowering, each holding its own state (feature_hooks.py)
    self.listeners = Listeners()
    self.atomic_refs: set[str] = set()     # params updated with atomics (zeroed on GPU)
    # names the kernel's variables as jaxpr_text does (compat.print_jaxpr);
    # pp_named: the jaxprs whose variables it has named, by id
    self.pp_context = None
    self.jaxpr = None                 # the kernel's jaxpr (printed as jaxpr_text)
    self.eqn_lines: dict[int, int] | None = None   # id(eqn) -> line of jaxpr_text
    self.pp_named: dict[int, Any] = {}
    # the kernel's operands as the lowering binds them to its jaxpr's refs, and each
    # variable bound to one of them (the kernel's and its nested jaxprs'), with the
    # operand's name: an error names the ref by it (describe.ref_names)
    self.operand_refs: tuple = ()
    self.ref_binders: list[tuple[Any, str]] = []
    # one Scope per jaxpr being lowered, innermost last
    self.scopes: list[Scope] = []
    # ref (param) name -> the names of the refs that may share its memory
    # (itself included); None: unknown, any ref may alias any other
    self.may_alias: dict[str, frozenset[str]] | None = None

  def bind(self, var, value) -> None:
    """`var` of a jaxpr being lowered stands for `value`: noted when it is an operand."""
    for ref in self.operand_refs:
      if value is ref:
        self.ref_binders.append((var, ref.label))
        return

  def next_eqn_index(self) -> int:
    i = self._eqn_counter
    self._eqn_counter += 1
    return i

  def peek_eqn_index(self) -> int:
    return self._eqn_counter

  def lookup(self, table: str, key):
    """What this scope or an enclosing one recorded under `key`, else None."""
    for scope in reversed(self.scopes):
      hit = getattr(scope, table).get(key)
      if hit is not None:
        return hit
    return None

  def remember(self, table: str, key, value) -> None:
    if self.scopes:
      getattr(self.scopes[-1], table)[key] = value

  def forget_loads(self, refs=None) -> None:
    """Something may have written to memory: no earlier load of it may be reused.

    `refs`: the names of the refs written, None if unknown (then every load
    is forgotten). Loads of those refs and of every ref that may alias one
    of them (an input and an output tied by input_output_aliases; all refs,
    when the aliasing is unknown) are forgotten, in every scope, not just
    the innermost."""
    hit = self.aliases_of(refs)
    for scope in self.scopes:
      if hit is None:
        scope.loads.clear()
      else:
        for key in [k for k in scope.loads if load_ref_name(k) in hit or
                    load_ref_name(k) is None]:
          del scope.loads[key]

  def aliases_of(self, refs) -> frozenset[str] | None:
    """The refs that may share memory with any of `refs`; None: any ref."""
    if refs is None or self.may_alias is None:
      return None
    out = set()
    for name in refs:
      if name not in self.may_alias:
        return None
      out |= self.may_alias[name]
    return frozenset(out)

