"""Hopper TMA block loads and stores through Triton's tensor descriptors
(CompilerParams(tma=True)).

A read of a kernel ref whose view is a dense block (slices of stride 1, or
single indices, on every dimension) becomes `desc.load([starts])` of a
`tl.make_tensor_descriptor` over the whole array, made once in the kernel's
prologue: the copy engine (TMA) moves the block into shared memory, which lets
Triton's pipeliner overlap a loop's loads with its dots. The descriptor is
made inside the kernel because jaxlib's custom call passes arrays, not host
CUtensorMaps; making one writes it to Triton's global scratch, which jaxlib
(jax >= 0.11) and the profiler's replay allocate per program.

Every other read is the plain pointer load, and the reason is kept
(`GeneratedKernel.tma_notes`, a line of the source's header, and a
TmaFallbackWarning at the user's line when the user asked for tma=True).
A descriptor load is used only where it provably reads what the plain load
reads:
- TMA's own limits: 2 to 5 dimensions, every non-last array stride a multiple of
  16 bytes, a block's dimensions powers of two (Triton tensors are) of at most
  256 elements and its last one at least 16 bytes, 1/2/4/8-byte elements;
- the start along the last dimension a known multiple of 16 bytes (Triton's
  interpreter asserts it; on the GPU it keeps the copies aligned): a block
  start `program id * block`, a literal, `i * c` with such a c, sums of those,
  pl.multiple_of;
- no mask, `other`, cache modifier or volatile read asked for (pl.load);
- a ref the kernel never writes, nor one that may share its memory (TMA reads
  through the async proxy, which a plain store in the same kernel does not
  order against);
- not the bounds-checked mode (it checks each index itself);
- sm_90 or newer (Triton's interpreter also runs them).
Elements of a block past the end of the array read as zeros. The plain load masks
them and, with no `other`, leaves them unspecified (zeros under the interpreter and
in Triton's pipelined copies), as Pallas does: what a kernel stores from them
differs only where Pallas promises nothing. Where the plain load needs no mask the
block lies inside the array.

A write stores through a descriptor (`desc.store`, elements outside the array
clipped, as the plain store's mask drops them) under the same block rules, when it
is the one top-level plain store of an output that nothing in the kernel reads and
that shares memory with no other ref (a TMA store is not ordered against the
program's other accesses to that memory); any other store stays plain and says why.

Which starts are multiples of what is recorded as equations are lowered
(`note_equation`, and the index_sum / index_multiple hooks the views and the
BlockSpecs call), only while TMA is asked for.

The kernel is lowered once. A descriptor is named where the body first reads or
writes through it, and made in the prologue (at the point the prologue ended)
when the body is done: TmaDescriptors, the feature's listener, keeps all of it.

Status: checked under Triton's interpreter (bit for bit against the plain kernel)
and compiled for sm_90 (TMA copies pipelined in the TTGIR, cp.async.bulk.tensor in
the PTX), not yet run on a GPU; bench/cost/tma_gpu.sh is that check. Until it has run,
TMA stays opt-in and out of the tuner's default configs.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ... import compat
from ..codegen import Value, is_bool, is_packed4
from ..effects import ANY_REF, REF_READERS, REF_SWAPS, jaxpr_write_targets, write_targets
from ..feature_hooks import LoweringListener
from ...tma_note import TmaNote
from .. import triton_names as tl

MAX_BOX = 256          # TMA's largest block dimension
MIN_INNER_BYTES = 16   # TMA moves at least 16 bytes along the last dimension
ALIGN_BYTES = 16


@dataclasses.dataclass
class TmaPlan:
  """One kernel's tensor descriptors: which (ref, block shape) pairs the body reads
  or writes through one, under which variable, and why the other accesses do not."""
  names: dict = dataclasses.field(default_factory=dict)    # (param, block shape) -> variable
  wanted: dict = dataclasses.field(default_factory=dict)   # (param, block shape) -> RefValue
  written: frozenset | None = None     # refs the kernel may write (aliases included); None: any
  notes: dict = dataclasses.field(default_factory=dict)    # TmaNote -> None (ordered set)
  multiples: dict = dataclasses.field(default_factory=dict)   # variable -> known multiple
  store_once: frozenset = frozenset()  # refs one top-level store writes and nothing reads
  loaded: set = dataclasses.field(default_factory=set)     # keys the body loaded through
  stored: set = dataclasses.field(default_factory=set)     # keys the body stored through
  prologue_end: int = 0                # the body line the descriptors go before

  @property
  def used(self) -> bool:
    return bool(self.names)


# --- what a start is a multiple of ------------------------------------------------

def known_multiple(plan: TmaPlan, v: Value) -> int:
  """The largest m known to divide v (0: v is 0; 1: nothing known)."""
  if v.const is not None:
    try:
      return abs(int(v.const))
    except (TypeError, ValueError):
      return 1
  return plan.multiples.get(v.expr, 1)


def note_multiple(plan: TmaPlan, v: Value, m: int) -> None:
  if isinstance(v, Value) and v.const is None and not v.shape and m != 1:
    plan.multiples[v.expr] = m


def note_sum(plan: TmaPlan, result: Value, terms) -> None:
  """result = sum of value * factor over `terms` ((Value, int) pairs)."""
  m = 0
  for v, factor in terms:
    m = math.gcd(m, known_multiple(plan, v) * abs(int(factor)))
  note_multiple(plan, result, m)


def note_equation(plan: TmaPlan, eqn, invals, out) -> None:
  """Records what an integer scalar equation's result is a known multiple of."""
  if not isinstance(out, Value) or out.shape or out.const is not None:
    return
  if not np.issubdtype(np.dtype(out.dtype), np.integer):
    return
  name = eqn.primitive.name
  ms = [known_multiple(plan, v) if isinstance(v, Value) else 1 for v in invals]
  if name == "mul" and len(ms) == 2:
    note_multiple(plan, out, ms[0] * ms[1])
  elif name in ("add", "sub") and len(ms) == 2:
    note_multiple(plan, out, math.gcd(ms[0], ms[1]))
  elif name in ("convert_element_type", "multiple_of") and ms:
    m = ms[0]
    if name == "multiple_of":
      values = list(eqn.params.get("values", ()))
      m = math.lcm(m, int(values[0])) if values and m else m
    if name == "convert_element_type" and not np.issubdtype(np.dtype(invals[0].dtype), np.integer):
      return
    note_multiple(plan, out, m)


# --- which reads and writes may use TMA ----------------------------------------------

def refusal(plan: TmaPlan, ctx, ref, mask=None, other=None, load_options=None) -> str | None:
  """Why this read cannot load through a tensor descriptor; None if it can."""
  why = _access_refusal(ctx.kernel, ref)
  if why is not None:
    return why
  options = {k: v for k, v in (load_options or {}).items() if v}
  if mask is not None or other is not None:
    return "a masked pl.load"
  if options:
    return f"load options {sorted(options)}"
  if plan.written is None or ref.name in plan.written:
    return ("the kernel writes this ref or one that may share its memory (a TMA load is "
            "not ordered after the kernel's plain stores)")
  return _block_refusal(plan, ref)


def store_refusal(plan: TmaPlan, ctx, ref, mask=None, eviction_policy=None) -> str | None:
  """Why this write cannot store through a tensor descriptor; None if it can. Only
  the one write of an output the kernel never reads, outside loops and branches:
  a TMA store is not ordered against the kernel's other accesses to that memory."""
  why = _access_refusal(ctx.kernel, ref)
  if why is not None:
    return why
  if mask is not None or eviction_policy:
    return "a masked store or one with an eviction policy"
  if ctx.info.parent is not None:
    return "a store inside a loop or branch"
  if ref.name not in plan.store_once:
    return ("the kernel writes this ref more than once, reads it, or it may share memory "
            "with another ref")
  return _block_refusal(plan, ref)


def _access_refusal(kernel, ref) -> str | None:
  if kernel.compute_capability < 90:
    return f"TMA needs sm_90 or newer (compiling for sm_{kernel.compute_capability})"
  if kernel.listeners.checks_indices:
    return "the bounds-checked mode checks every index of a plain access"
  dtype = np.dtype(ref.dtype)
  if is_packed4(dtype) or is_bool(dtype) or dtype.itemsize not in (1, 2, 4, 8):
    return f"{dtype.name} elements"
  if np.dtype(ref.index_dtype) != np.int32:
    return "64-bit indices (an array of 2**31 elements or more)"
  rank = len(ref.array_shape)
  if not 2 <= rank <= 5:
    return f"a {rank}-D array (TMA here: 2 to 5 dimensions)"
  return None


def _block_refusal(plan: TmaPlan, ref) -> str | None:
  itemsize = np.dtype(ref.dtype).itemsize
  for axis, stride in enumerate(ref.strides[:-1]):
    if stride * itemsize % ALIGN_BYTES:
      return (f"the array's stride along dimension {axis} is {stride * itemsize} bytes, "
              f"not a multiple of {ALIGN_BYTES}")
  box = block_shape(ref)
  if box is None:
    return "an integer-array index"
  for axis, (size, d) in enumerate(zip(box, ref.dims, strict=True)):
    if d.stride != 1:
      return f"a strided slice (stride {d.stride}) along dimension {axis}"
    if size & (size - 1):
      return f"the block's dimension {axis} has {size} elements, not a power of two"
    if size > MAX_BOX:
      return f"the block's dimension {axis} has {size} elements (TMA: at most {MAX_BOX})"
  if box[-1] * itemsize < MIN_INNER_BYTES:
    return (f"the block's last dimension is {box[-1] * itemsize} bytes (TMA: at least "
            f"{MIN_INNER_BYTES})")
  inner = known_multiple(plan, ref.dims[-1].start)
  if inner * itemsize % ALIGN_BYTES:
    return (f"the start along the last dimension ({ref.dims[-1].start}) is not known to be a "
            f"multiple of {ALIGN_BYTES // itemsize} elements ({ALIGN_BYTES} bytes); "
            "pl.multiple_of says it is")
  return None


def stored_once(kernel, jaxpr, refs) -> frozenset:
  """The refs exactly one top-level plain store (swap, or masked_swap without a
  mask) writes, which nothing reads and which share memory with no other ref."""
  env = dict(zip(jaxpr.invars, refs, strict=True))
  live = {v for e in jaxpr.eqns for v in e.invars if not isinstance(v, compat.Literal)}
  live |= {v for v in jaxpr.outvars if not isinstance(v, compat.Literal)}
  writes: dict[str, int] = {}
  stores, reads = set(), set()
  for eqn in jaxpr.eqns:
    targets = write_targets(eqn, env.get)
    if targets is ANY_REF:
      return frozenset()
    for name in targets or ():
      writes[name] = writes.get(name, 0) + 1
    name = eqn.primitive.name
    if name in REF_SWAPS and targets and eqn.outvars and eqn.outvars[0] in live:
      reads |= targets                   # the old value is read
    elif name in REF_SWAPS and targets:
      stores |= targets
    for e in eqn.effects:
      if isinstance(e, compat.ReadEffect):
        index = getattr(e, "input", None)
        var = eqn.invars[index] if isinstance(index, int) and index < len(eqn.invars) else index
        value = env.get(var) if not isinstance(var, (int, type(None), compat.Literal)) else None
        if value is None:
          return frozenset()             # a read of something other than a kernel ref
        reads.add(value.name)
    if name in REF_READERS:
      reads |= {env[v].name for v in eqn.invars
                if not isinstance(v, compat.Literal) and env.get(v) is not None}
  return frozenset(n for n in stores if writes.get(n) == 1 and n not in reads
                   and kernel.aliases_of([n]) == frozenset([n]))


def block_shape(ref) -> tuple[int, ...] | None:
  """The descriptor's block: each slice's size, 1 for an integer index; None for a gather."""
  if any(d.kind == "gather" for d in ref.dims):
    return None
  return tuple(d.size if d.kind == "slice" else 1 for d in ref.dims)


def _descriptor(kernel, plan: TmaPlan, ref, key) -> str:
  """The descriptor's variable, named where the body first uses it (made in the
  prologue when the body is done: emit_descriptors)."""
  if key not in plan.names:
    plan.wanted[key] = ref
    plan.names[key] = kernel.builder.fresh(f"{ref.label}_desc")
  return plan.names[key]


def read(plan: TmaPlan, ctx, ref, shape) -> Value:
  """The descriptor load of a view that `refusal` accepted."""
  key = (ref.name, block_shape(ref))
  desc = _descriptor(ctx.kernel, plan, ref, key)
  plan.loaded.add(key)
  starts = ", ".join(str(d.start) for d in ref.dims)
  expr = f"{desc}.load([{starts}])"
  if tuple(shape) != key[1]:
    expr = f"{tl.reshape}({expr}, {list(shape)})"
  label = ref.label[:-4] if ref.label.endswith("_ref") else f"{ref.label}_val"
  return ctx.value(label, expr, ref.dtype, shape, opaque=True)


def write(plan: TmaPlan, ctx, ref, value: Value) -> None:
  """Stores `value` (the view's shape) through a descriptor, for a write that
  `store_refusal` accepted."""
  box = block_shape(ref)
  key = (ref.name, box)
  desc = _descriptor(ctx.kernel, plan, ref, key)
  plan.stored.add(key)
  if tuple(value.shape) != box:
    value = ctx.value(f"{value}_box", f"{tl.reshape}({value}, {list(box)})", value.dtype, box)
  starts = ", ".join(str(d.start) for d in ref.dims)
  ctx.b.emit(f"{desc}.store([{starts}], {value})")


def note_refused(plan: TmaPlan, ctx, ref, reason: str, store: bool = False) -> None:
  info = ctx.info
  what = f"the store to {ref.label}" if store else ref.label
  plan.notes.setdefault(TmaNote(what, info.file, info.line, reason))


def emit_descriptors(kernel, plan: TmaPlan) -> None:
  """The prologue's descriptors, one per (ref, block shape) the body used, where the
  prologue ended."""
  b = kernel.builder
  for at, ((param, box), ref) in enumerate(plan.wanted.items(), start=plan.prologue_end):
    b.emit_at(at, f"{plan.names[(param, box)]} = {tl.make_tensor_descriptor}("
                  f"{param}, shape={list(ref.array_shape)}, strides={list(ref.strides)}, "
                  f"block_shape={list(box)})",
              note=f"TMA descriptor of {ref.label}'s {box} blocks")


def header_lines(plan: TmaPlan | None) -> list[str]:
  if plan is None:
    return []
  loads = sorted({f"{plan.wanted[k].label} {k[1]}" for k in plan.loaded})
  stores = sorted({f"{plan.wanted[k].label} {k[1]}" for k in plan.stored})
  lines = (["TMA loads (tensor descriptors): blocks of " + ", ".join(loads)] if loads else []) \
      + (["TMA stores (tensor descriptors): blocks of " + ", ".join(stores)] if stores else [])
  lines = lines or ["TMA asked for, no load or store could use it"]
  # each note at its file's name, not its path: the header is part of the kernel's key
  return lines + [f"TMA not used for {note.portable()}" for note in plan.notes]


class TmaDescriptors(LoweringListener):
  """The TMA feature, which owns the kernel's TmaPlan: before the body, the refs the
  kernel may write (never read through TMA) and the outputs stored once; after each
  integer scalar equation, and for each index the views and BlockSpecs compute, what
  it is a known multiple of; each read and write it can take, through a descriptor;
  after the body, the descriptors in the prologue."""

  def __init__(self):
    self.plan = TmaPlan()

  def prologue_done(self, kernel, jaxpr, refs) -> None:
    plan = self.plan
    written = jaxpr_write_targets(jaxpr, dict(zip(jaxpr.invars, refs, strict=True)))
    plan.written = (frozenset() if written is None else
                    None if written is ANY_REF else kernel.aliases_of(written))
    plan.store_once = stored_once(kernel, jaxpr, refs)
    plan.prologue_end = kernel.builder.num_lines

  def after_rule(self, kernel, event, out) -> None:
    note_equation(self.plan, event.eqn, event.invals, out)

  def index_sum(self, kernel, result, terms) -> None:
    note_sum(self.plan, result, terms)

  def index_multiple(self, kernel, value, multiple) -> None:
    note_multiple(self.plan, value, multiple)

  def read(self, ctx, ref, shape, mask, other, load_options):
    why = refusal(self.plan, ctx, ref, mask, other, load_options)
    if why is not None:
      note_refused(self.plan, ctx, ref, why)
      return None
    return read(self.plan, ctx, ref, shape)

  def write(self, ctx, ref, shape, value_for, mask, eviction_policy) -> bool:
    why = store_refusal(self.plan, ctx, ref, mask, eviction_policy)
    if why is not None:
      note_refused(self.plan, ctx, ref, why, store=True)
      return False
    write(self.plan, ctx, ref, value_for())
    return True

  def end(self, kernel) -> list:
    emit_descriptors(kernel, self.plan)
    return []
