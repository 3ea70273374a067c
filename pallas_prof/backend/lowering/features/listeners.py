"""What the lowering tells the features that watch it, instead of branching for each.

The kernel's lowering (lower.py) and the jaxpr walker (dispatch.py) call
every listener of the kernel (KernelContext.listeners, in order) at fixed
points; a listener overrides the ones it needs, the rest do nothing:

  kernel set-up     after_inputs (parameters between the inputs and the outputs),
                    after_outputs (parameters after them), launch (the launch
                    grid is known, no code yet), prologue_done (every operand's
                    block is set up; the body comes next)
  each equation     before_equation / after_equation around it, whatever
                    lowered it (a rule, constant folding, an earlier equal
                    equation); before_rule / after_rule around its rule only
  kernel end        end: parameters after the body's

The features: WorkFacts (FLOPs of elementwise and reduction equations), MemoryOrder
(barriers before reads of memory written since the last one; loads forgotten after
writes), BoundsChecks (the bounds-checked mode's parameters), TmaDescriptors (what
TMA needs: the written refs, the descriptors, known multiples) and Probes (the
profiler's probed variant). A new feature is one more listener in `listeners_for`.
"""
from __future__ import annotations

import math

import numpy as np

from ... import compat
from ...artifacts import KernelParam
from ..codegen import is_float
from ..effects import ANY_REF, jaxpr_write_targets, refs_read, write_targets
from ..rules.table import REDUCTION, TRANSCENDENTAL, work_of


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


class LoweringListener:
  """A feature of the lowering: override the points it acts at."""

  def after_inputs(self, kernel, layout: "ParamLayout") -> list[KernelParam]:
    return []

  def after_outputs(self, kernel) -> None:
    pass

  def launch(self, kernel) -> None:
    pass

  def prologue_done(self, kernel, jaxpr, refs) -> None:
    pass

  def before_equation(self, kernel, event: EquationEvent) -> None:
    pass

  def before_rule(self, kernel, event: EquationEvent) -> None:
    pass

  def after_rule(self, kernel, event: EquationEvent, out) -> None:
    pass

  def after_equation(self, kernel, event: EquationEvent, out) -> None:
    pass

  def end(self, kernel) -> list[KernelParam]:
    return []


class ParamLayout:
  """The kernel's operands, for listeners that add parameters beside them."""
  __slots__ = ("labels", "n_in", "n_out", "block_mappings", "input_output_aliases")

  def __init__(self, labels, n_in, n_out, block_mappings, input_output_aliases):
    self.labels, self.n_in, self.n_out = labels, n_in, n_out
    self.block_mappings, self.input_output_aliases = block_mappings, input_output_aliases


class WorkFacts(LoweringListener):
  """The FLOPs of an elementwise or reduction equation (its rule's registered `work`),
  from its avals, unless the rule recorded its own: one per element of the result (of
  the operand, for a reduction), float results only."""

  def after_rule(self, kernel, event, out) -> None:
    eqn = event.eqn
    kind = work_of(eqn.primitive)
    if kind is None or not eqn.outvars or not is_float(eqn.outvars[0].aval.dtype):
      return
    aval = eqn.invars[0].aval if kind == REDUCTION and eqn.invars else eqn.outvars[0].aval
    key = "transcendentals" if kind == TRANSCENDENTAL else "elementwise_flops"
    event.info.facts.setdefault(key, math.prod(aval.shape))


class MemoryOrder(LoweringListener):
  """A barrier before an access to memory written since the last one (KernelContext.
  sync_before); after an equation that may write, every load of what it wrote is
  forgotten (also what the rule itself loaded, a swap's old value; a loop body that
  writes forgets them on entry too: dispatch.lower_jaxpr)."""

  def before_rule(self, kernel, event) -> None:
    kernel.sync_before(refs_read(event.eqn, event.invals, event.live))

  def after_rule(self, kernel, event, out) -> None:
    writes = write_targets(event.eqn, _operand_values(event.eqn, event.invals))
    if writes is not None:
      kernel.forget_loads(None if writes is ANY_REF else writes)
      kernel.note_writes(writes)


def _operand_values(eqn, invals):
  """var -> value of an equation's (non-literal) operands."""
  values = {}
  for var, value in zip(eqn.invars, invals):
    if not isinstance(var, compat.Literal):
      values[var] = value
  return values.get


class BoundsChecks(LoweringListener):
  """The bounds-checked mode's parameters: one after the inputs per output that no input
  is aliased to, holding its starting values (the launcher aliases it to the output and
  fills it with poison, NaN or all ones, or zeros where the output must start at zero,
  atomics, so that on every platform what the kernel never writes shows; the kernel
  never reads it); the flag buffer after the outputs. The checks themselves are the
  memory rules' (bounds.emit_check)."""

  def after_inputs(self, kernel, layout) -> list[KernelParam]:
    aliased = {int(o) for _, o in (layout.input_output_aliases or ())}
    params = []
    for o in range(layout.n_out):
      if o in aliased:
        continue
      bm, label = layout.block_mappings[layout.n_in + o], layout.labels[layout.n_in + o]
      name = kernel.builder.add_param(f"{label}_start")
      params.append(KernelParam(name=name, label=f"{label} (starting values)",
                                dtype=np.dtype(bm.array_aval.dtype).name,
                                shape=tuple(bm.array_aval.shape), role="initial", index=o))
    return params

  def after_outputs(self, kernel) -> None:
    kernel.bounds.param = kernel.builder.add_param(kernel.bounds.param)

  def end(self, kernel) -> list[KernelParam]:
    from .bounds import flag_length
    return [KernelParam(name=kernel.bounds.param, label="bounds flags", dtype="int32",
                        shape=(flag_length(kernel.bounds.sites),), role="check", index=0)]


class TmaDescriptors(LoweringListener):
  """What TMA needs: before the body, the refs the kernel may write (never read
  through TMA), the outputs stored once, and in the real pass the descriptors the
  planning pass wants; after each integer scalar equation, what its result is a
  known multiple of (tma.note_equation)."""

  def prologue_done(self, kernel, jaxpr, refs) -> None:
    from .tma import emit_descriptors, stored_once
    plan = kernel.tma
    written = jaxpr_write_targets(jaxpr, dict(zip(jaxpr.invars, refs)))
    plan.written = (frozenset() if written is None else
                    None if written is ANY_REF else kernel.aliases_of(written))
    plan.store_once = stored_once(kernel, jaxpr, refs)
    if plan.wanted:
      plan.names = emit_descriptors(kernel, plan.wanted)

  def after_rule(self, kernel, event, out) -> None:
    from .tma import note_equation
    note_equation(kernel, event.eqn, event.invals, out)


class Probes(LoweringListener):
  """The profiler's probed variant (probes.ProbeEmitter): its buffer parameter, the
  entry probe, and a boundary between top-level equations."""

  def after_outputs(self, kernel) -> None:
    kernel.probes.add_param(kernel.builder)

  def launch(self, kernel) -> None:
    kernel.probes.start(kernel.builder, kernel.launch_grid)

  def prologue_done(self, kernel, jaxpr, refs) -> None:
    kernel.probes.prologue_done(kernel.builder)

  def before_equation(self, kernel, event) -> None:
    if _top_level(event):
      eqn = event.eqn
      # index math (scalars in, scalars out: program ids, offsets) keeps a run of loads
      # going; an equation that makes a block (an iota, even of no operands) does not
      kernel.probes.before_equation(kernel.builder, event.info, all(
          getattr(getattr(v, "aval", None), "shape", ()) == ()
          for v in (*eqn.invars, *eqn.outvars)))

  def after_equation(self, kernel, event, out) -> None:
    if _top_level(event):
      eqn, b = event.eqn, kernel.builder
      shapes = [getattr(v.aval, "shape", ()) for v in eqn.outvars]
      results = tuple(out or ()) if eqn.primitive.multiple_results else (out,)
      kernel.probes.after_equation(b, event.info, b.num_lines > event.first_line,
                                   all(s == () for s in shapes), sum(map(math.prod, shapes)),
                                   results)

  def end(self, kernel) -> list[KernelParam]:
    # its parameter comes last, after the bounds flags
    kernel.probes.end(kernel.builder)
    layout = kernel.probes.layout()
    return [KernelParam(name=layout.param, label="probe buffer", dtype="uint64",
                        shape=(layout.words,), role="probes", index=0)]


def _top_level(event: EquationEvent) -> bool:
  return event.parent is None and event.region == "kernel"


def listeners_for(kernel) -> tuple[LoweringListener, ...]:
  """The kernel's listeners, in the order they act (the order of the parameters and
  prologue code they add): what every kernel has, then the features it was asked for."""
  out: list[LoweringListener] = [WorkFacts()]
  if kernel.bounds is not None:
    out.append(BoundsChecks())
  if kernel.tma is not None:
    out.append(TmaDescriptors())
  if kernel.probes is not None:
    out.append(Probes())
  out.append(MemoryOrder())
  return tuple(out)
