"""The features of the lowering, each a listener (feature_hooks.py) that keeps its
own state, and which of them a kernel gets.

WorkFacts (FLOPs of elementwise and reduction equations) and MemoryOrder (barriers
before reads of memory written since the last one; loads forgotten after writes)
are here; each feature asked for by the options has its listener beside its code:
BoundsChecks (the bounds-checked mode's parameters, sites and checks: bounds.py),
TmaDescriptors (tma.py: what TMA needs, the descriptors and the accesses through
them), Probes (the profiler's probed variant: probes.py) and ScanWorkarounds
(other lowerings of scans Triton fails to compile: scan_forms.py). A new feature
is one more listener in `Features`.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ... import compat
from ...artifacts import KernelParam
from ...check_sites import CheckSite
from ..codegen import is_float
from ..effects import ANY_REF, jaxpr_write_targets, refs_read, write_targets
from ..feature_hooks import EquationEvent, LoweringListener, Listeners
from ..rules.table import REDUCTION, TRANSCENDENTAL, work_of
from . import scan_forms
from .bounds import SiteTable, emit_block_check, emit_check, flag_length
from .probes import ProbeEmitter, ProbeLayout, ProbeOptions
from .tma import TmaDescriptors
from .workaround_plan import WorkaroundPlan
from .. import triton_names as tl


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
  """The order of a program's accesses to memory: a barrier (__syncthreads) before an
  access to memory written since the last one, and, after an equation that may write,
  every load of what it wrote forgotten (also what the rule itself loaded, a swap's old
  value); a jaxpr lowered in its own scope that writes (a loop body) forgets them on
  entry too.

  A program's threads each store their part of a block, and nothing orders one
  thread's store before another thread's later load of the same address: on a GPU a
  read after a write of a ref by the same program needs a barrier in between. The
  interpreter runs a program's lanes in lockstep and never shows the difference. Two
  writes of the same address by different threads of one program, with no read between
  them, are not ordered (neither are they by JAX's backend): telling which writes
  overlap would need the addresses, and a barrier between every two writes of a ref
  would slow kernels that write a block in parts (the norms: one per row)."""

  def __init__(self):
    # refs written since the last barrier, or ANY_REF
    self.unsynced: set[str] | object = set()
    # per jaxpr being lowered in its own scope: (unsynced on entry, what it may write)
    self._entered: list[tuple[object, object]] = []

  def before_rule(self, kernel, event) -> None:
    self.sync_before(kernel, refs_read(event.eqn, event.invals, event.live))

  def after_rule(self, kernel, event, out) -> None:
    writes = write_targets(event.eqn, _operand_values(event.eqn, event.invals))
    if writes is not None:
      kernel.forget_loads(None if writes is ANY_REF else writes)
      self.note_writes(writes)

  def enter_jaxpr(self, kernel, jaxpr, env, loop) -> None:
    written = jaxpr_write_targets(jaxpr, env)
    if written is not None:
      # a loop body runs again after its own writes: nothing loaded before the
      # loop (or before the write, in an earlier iteration) of a ref it writes
      # (or one aliasing it) may be reused in it
      kernel.forget_loads(None if written is ANY_REF else written)
    self._entered.append((self.unsynced, written))
    if loop:
      self.note_writes(written)        # the previous iteration's writes

  def leave_jaxpr(self, kernel) -> None:
    # a barrier inside may not have run (a branch not taken, no iteration)
    self.unsynced, written = self._entered.pop()
    self.note_writes(written)

  def note_writes(self, writes) -> None:
    """`writes` (effects.write_targets) happened: later accesses to them need a barrier."""
    if writes is None:
      return
    if writes is ANY_REF or self.unsynced is ANY_REF:
      self.unsynced = ANY_REF
    else:
      self.unsynced = self.unsynced | set(writes)

  def sync_before(self, kernel, refs: set[str]) -> None:
    """Emits a barrier before an access to `refs` if one of them, or a ref that may
    share its memory, was written since the last barrier."""
    if not refs or not self.unsynced:
      return
    if self.unsynced is not ANY_REF:
      hit = kernel.aliases_of(refs)
      if hit is not None and not (hit & self.unsynced):
        return
    kernel.builder.emit(f"{tl.debug_barrier}()   # other threads' writes to this memory land first")
    self.unsynced = set()


def _operand_values(eqn, invals):
  """var -> value of an equation's (non-literal) operands."""
  values = {}
  for var, value in zip(eqn.invars, invals, strict=True):
    if not isinstance(var, compat.Literal):
      values[var] = value
  return values.get


class BoundsChecks(LoweringListener):
  """The bounds-checked mode, which owns the kernel's check sites (SiteTable): one
  parameter after the inputs per output that no input is aliased to, holding its
  starting values (the launcher aliases it to the output and fills it with poison, NaN
  or all ones, or zeros where the output must start at zero, atomics, so that on every
  platform what the kernel never writes shows; the kernel never reads it); the flag
  buffer after the outputs; the check of each access the addressing asks for."""

  def __init__(self):
    self.table = SiteTable()

  @property
  def sites(self) -> tuple[CheckSite, ...]:
    return tuple(self.table.sites)

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
    self.table.param = kernel.builder.add_param(self.table.param)

  @property
  def checks_indices(self) -> bool:
    return True

  def check_access(self, ctx, site_fields, local_indices, active, shape) -> str:
    site = self.table.add(eqn_index=ctx.info.index, **site_fields)
    return emit_check(ctx, self.table.param, site, local_indices, active, shape)

  def check_block(self, ctx, block, access, active, shape) -> str:
    site = self.table.add(eqn_index=ctx.info.index, access=access, checked_axes=block.axes,
                          **dict(block.site))
    return emit_block_check(ctx, self.table.param, site, block, active, shape)

  def end(self, kernel) -> list[KernelParam]:
    return [KernelParam(name=self.table.param, label="bounds flags", dtype="int32",
                        shape=(flag_length(self.table.sites),), role="check", index=0)]


class Probes(LoweringListener):
  """The profiler's probed variant, which owns its ProbeEmitter (probes.py): its
  buffer parameter, the entry probe, and a boundary between top-level equations."""

  def __init__(self, options: ProbeOptions, num_warps: int, top_level_eqns: int):
    self.emitter = ProbeEmitter(options, num_warps, top_level_eqns)

  def layout(self) -> ProbeLayout:
    return self.emitter.layout()

  def after_outputs(self, kernel) -> None:
    self.emitter.add_param(kernel.builder)

  def launch(self, kernel) -> None:
    self.emitter.start(kernel.builder, kernel.launch_grid)

  def prologue_done(self, kernel, jaxpr, refs) -> None:
    self.emitter.prologue_done(kernel.builder)

  def before_equation(self, kernel, event) -> None:
    if _top_level(event):
      eqn = event.eqn
      # index math (scalars in, scalars out: program ids, offsets) keeps a run of loads
      # going; an equation that makes a block (an iota, even of no operands) does not
      self.emitter.before_equation(kernel.builder, event.info, all(
          getattr(getattr(v, "aval", None), "shape", ()) == ()
          for v in (*eqn.invars, *eqn.outvars)))

  def after_equation(self, kernel, event, out) -> None:
    if _top_level(event):
      eqn, b = event.eqn, kernel.builder
      shapes = [getattr(v.aval, "shape", ()) for v in eqn.outvars]
      results = tuple(out or ()) if eqn.primitive.multiple_results else (out,)
      self.emitter.after_equation(b, event.info, b.num_lines > event.first_line,
                                  all(s == () for s in shapes), sum(map(math.prod, shapes)),
                                  results)

  def end(self, kernel) -> list[KernelParam]:
    # its parameter comes last, after the bounds flags
    self.emitter.end(kernel.builder)
    layout = self.emitter.layout()
    return [KernelParam(name=layout.param, label="probe buffer", dtype="uint64",
                        shape=(layout.words,), role="probes", index=0)]


def _top_level(event: EquationEvent) -> bool:
  return event.parent is None and event.region == "kernel"


class ScanWorkarounds(LoweringListener):
  """Other lowerings of the scans a WorkaroundPlan names (scan_forms.py), and what was
  lowered otherwise: (equation index, what changed) notes for the source's header and
  the equations a planned form did fit."""

  def __init__(self, plan: WorkaroundPlan):
    self.plan = plan
    self.notes: list[tuple[int, str]] = []
    self.applied: set[int] = set()

  def lower_scan(self, ctx, x, axis, kind, reverse, out_dtype, scan, reduce):
    form = self.plan.form_of(ctx.info.index)
    if form is None:
      return None
    out = scan_forms.lower(ctx, form, x, axis, kind, reverse, out_dtype, scan, reduce)
    if out is not None:
      self.applied.add(ctx.info.index)
      self.notes.append((ctx.info.index, scan_forms.note(ctx, form, x, axis, kind)))
    return out


@dataclasses.dataclass
class Features:
  """A kernel's features as its options ask for them (None: not asked for), which the
  lowering reads back when the body is done (bounds sites, the TMA plan, probes'
  layout, the workarounds used)."""
  bounds: BoundsChecks | None = None
  tma: TmaDescriptors | None = None
  probes: Probes | None = None
  workarounds: ScanWorkarounds | None = None

  @classmethod
  def asked_by(cls, options, num_eqns: int) -> "Features":
    """The features `options` (options.LoweringOptions) ask for, for a kernel of
    `num_eqns` top-level equations."""
    probes = None
    if options.probes:
      probe_options = options.probes if isinstance(options.probes, ProbeOptions) \
          else ProbeOptions()
      probes = Probes(probe_options, options.num_warps, num_eqns)
    return cls(bounds=BoundsChecks() if options.check_bounds else None,
               tma=TmaDescriptors() if options.tma else None, probes=probes,
               workarounds=ScanWorkarounds(options.workarounds) if options.workarounds
               else None)

  def listeners(self) -> Listeners:
    """The listeners, in the order they act (the order of the parameters and prologue
    code they add): what every kernel has, then the features it was asked for."""
    asked = (self.bounds, self.tma, self.probes, self.workarounds)
    return Listeners((WorkFacts(), *(f for f in asked if f is not None), MemoryOrder()))
