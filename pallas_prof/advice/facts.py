"""KernelFacts: everything the diagnosis rules read about one kernel, in one place.

From the profiler's KernelProfile (resources, work model, runtime, rates, attribution
with its stall reasons, sampling, probes) and, where the kernel is at hand, the
lowering's GeneratedKernel (per equation: bytes, operand, contiguous run, loop trips,
loop invariance, dots). A profile read back from a report.json has no GeneratedKernel:
then the block shapes come from the profile's typed equation avals and the bytes per
program from the work model, and the facts only the lowering knows (runs, invariance) are absent.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any

from .hardware import Occupancy, SmLimits, limits, occupancy

LOOPS = {"scan", "while", "fori_loop"}
IN_LOOP = 0.9     # of an equation's instructions in a machine loop: it runs in the loop


@functools.cache
def transcendental_primitives() -> frozenset[str]:
  """The primitives whose equations evaluate transcendental functions: the lowering's rule
  table records it with each rule (its work), so a rule added there counts here too."""
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ..backend.lowering.rules import TRANSCENDENTAL, primitives_doing
  return primitives_doing(TRANSCENDENTAL)


@dataclasses.dataclass(frozen=True)
class Stall:
  reason: str
  words: str
  share: float                   # of the equation's (or kernel's) samples
  samples: float


@dataclasses.dataclass(frozen=True)
class EqFacts:
  index: int
  path: str
  primitive: str
  parent: int | None
  text: str
  user_file: str | None
  user_line: int | None
  weight: float = 0.0            # share of the kernel's time (measured) or instructions
  inclusive_weight: float = 0.0
  share_at: float = 0.0          # measured: where the sampled warps stood, before charging
  samples: float | None = None
  stalls: tuple[Stall, ...] = ()
  block_shape: tuple[int, ...] | None = None   # its first result's shape
  dtype: str | None = None
  bytes_read: int = 0
  bytes_written: int = 0
  operand: str | None = None
  contiguous_bytes: int | None = None
  trips: Any = None
  unrolled: bool = False
  stageable: bool = False        # the lowering's: whether loop_stages would pipeline it
  invariant: bool = False
  transcendentals: int = 0
  dot: Any = None                # backend.artifacts.DotFacts
  loop_instructions: int = 0     # of its machine instructions, those inside a machine loop
  sass_instructions: int = 0

  @property
  def location(self) -> str:
    return f"{self.user_file.rsplit('/', 1)[-1]}:{self.user_line}" if self.user_file else "?"

  @property
  def is_load(self) -> bool:
    return self.primitive in ("get", "load") or (self.bytes_read > 0 and not self.bytes_written)

  @property
  def is_store(self) -> bool:
    return self.primitive in ("swap", "store", "masked_swap")

  @property
  def is_memory(self) -> bool:
    return self.primitive in ("get", "swap", "load", "store", "masked_load", "masked_swap") \
        or bool(self.bytes_read or self.bytes_written)

  @property
  def is_loop(self) -> bool:
    return self.primitive in LOOPS and not self.unrolled

  @property
  def in_machine_loop(self) -> bool:
    """Nearly all of its instructions inside a loop of the compiled code (compilers hoist
    loop-invariant code and unroll short loops, so the jaxpr's loop alone proves nothing;
    a function with a loop of its own, as sin's range reduction, has only some there).
    A load or store counts when any of its instructions is (its address arithmetic is often
    hoisted, the access itself is not). True without instruction counts: then the jaxpr's
    loop is all there is to go by."""
    if not self.sass_instructions:
      return True
    if self.is_memory:
      return self.loop_instructions > 0
    return self.loop_instructions >= IN_LOOP * self.sass_instructions

  def stall_share(self, *reasons: str) -> float:
    return sum(s.share for s in self.stalls if s.reason in reasons)


@dataclasses.dataclass(frozen=True)
class KernelFacts:
  label: str
  name: str
  cc: int
  limits: SmLimits
  sms: int
  sms_assumed: bool              # no device: the usual part of the target's SM count
  grid: tuple[int, ...]
  programs: int
  num_warps: int
  num_stages: int
  launch_group: int
  tma: bool
  registers: int | None
  spills: int | None
  shared_bytes: int | None
  occupancy: Occupancy | None
  work: Any                      # profiler.schema.WorkModel
  median_s: float | None
  rates: Any                     # profiler.schema.Rates
  ceilings: Any
  measured: bool                 # the weights are the GPU's (PC samples or ncu)
  weight_basis: str
  equations: dict[int, EqFacts]
  stalls: tuple[Stall, ...]      # the whole kernel's
  sampling: Any                  # profiler.schema.SamplingRun
  lines: tuple                   # attribution.lines (LineWeight)
  kernel_file: str | None        # the kernel function's file and line
  kernel_line: int | None
  generated: Any = None          # the GeneratedKernel, when at hand
  persistent: int = 0            # > 0: programs launched, each looping over the grid
  loop_stages: int = 0           # > 0: loops without a dot pipelined (tl.range's num_stages)

  # --- derived ---
  @property
  def bytes_per_program(self) -> float | None:
    w = self.work
    moved = (w.block_bytes or w.bytes) if w is not None else None
    return moved / self.programs if moved and self.programs else None

  @property
  def waves(self) -> float | None:
    if self.occupancy is None or not self.occupancy.ctas_per_sm:
      return None
    return self.programs / (self.sms * self.occupancy.ctas_per_sm)

  @property
  def threads(self) -> int:
    return self.num_warps * 32

  def largest_block(self) -> EqFacts | None:
    shaped = [e for e in self.equations.values() if e.block_shape]
    return max(shaped, key=lambda e: math.prod(e.block_shape), default=None)

  def children(self, index: int) -> list[EqFacts]:
    """Every equation nested in `index` (a loop's body, a branch), at any depth."""
    out, frontier = [], {index}
    for e in sorted(self.equations.values(), key=lambda e: e.index):
      if e.parent in frontier:
        out.append(e)
        frontier.add(e.index)
    return out

  def loops(self) -> list[EqFacts]:
    return [e for e in self.equations.values() if e.is_loop]

  def hot(self, n: int = 5) -> list[EqFacts]:
    return sorted(self.equations.values(), key=lambda e: -e.weight)[:n]

  @property
  def roof_efficiency(self) -> float | None:
    return self.rates.efficiency_pct if self.rates is not None else None


def _shape_of(avals) -> tuple[tuple[int, ...] | None, str | None]:
  """The block shape and dtype of an equation's first result (None where it has none)."""
  if not avals:
    return None, None
  return (avals[0].shape or None), avals[0].dtype


def _stalls(shares) -> tuple[Stall, ...]:
  return tuple(Stall(s.reason, s.words, float(s.share), float(s.samples)) for s in shares or ())


def kernel_facts(kp, gk=None, device=None, ceilings=None) -> KernelFacts:
  """The facts of one profiled kernel (see the module docstring)."""
  st = kp.static
  cc = device.compute_capability if device is not None else _target_cc(st)
  lim = limits(cc)
  res = (st.resources if st is not None else {}) or {}
  # the lowering's settings; without its GeneratedKernel, Triton's defaults
  warps, stages, group, tma, grid = ((gk.num_warps, gk.num_stages, gk.launch_group, gk.tma,
                                      gk.grid) if gk is not None else (4, 3, 0, False, ()))
  num_warps = int(st.num_warps if st is not None else warps)
  registers = res.get("registers")
  spills = None if res.get("spill_stores") is None else \
      int(res.get("spill_stores") or 0) + int(res.get("spill_loads") or 0)
  shared = res.get("shared_bytes")
  occ = occupancy(num_warps, registers, shared, lim) if registers is not None else None
  att = kp.attribution
  measured = att is not None and att.basis != "static"
  weights = {e.index: e for e in (att.equations if att is not None else ())}
  records = {e.index: e for e in (gk.eqns if gk is not None else ())}
  equations = {}
  for e in (st.equations if st is not None else ()):
    w = weights.get(e.index)
    rec = records.get(e.index)
    # the lowering's record where the kernel is at hand, else the saved profile's
    shape, dtype = _shape_of(rec.out_avals if rec is not None and rec.out_avals
                             else e.out_avals)
    facts = dict(index=e.index, path=e.path, primitive=e.primitive, parent=e.parent,
                 text=e.text, user_file=e.user_file, user_line=e.user_line,
                 weight=float(w.weight) if w is not None else (0.0 if measured else e.weight),
                 inclusive_weight=float(w.inclusive_weight) if w is not None else
                 (0.0 if measured else e.inclusive_weight),
                 share_at=float(w.share_at) if w is not None else 0.0,
                 samples=float(w.samples) if w is not None and measured else None,
                 stalls=_stalls(w.stalls) if w is not None and measured else (),
                 block_shape=shape, dtype=dtype, loop_instructions=e.loop_instructions,
                 sass_instructions=e.sass_instructions or e.ptx_instructions)
    if rec is not None:
      facts.update(bytes_read=rec.bytes_read, bytes_written=rec.bytes_written,
                   operand=rec.operand, contiguous_bytes=rec.contiguous_bytes,
                   trips=rec.trips, unrolled=rec.unrolled, invariant=rec.invariant,
                   stageable=rec.stageable,
                   transcendentals=rec.transcendentals, dot=rec.dot)
    elif e.primitive in LOOPS:
      facts.update(trips="unknown")
    equations[e.index] = EqFacts(**facts)
  if not measured:
    equations = _executed_shares(equations)
  source_info = (gk.source_info if gk is not None else "") or ""
  kfile, kline = _location(source_info)
  sms = device.sm_count if device is not None else lim.sms
  return KernelFacts(
      label=kp.label, name=kp.name, cc=cc, limits=lim, sms=sms, sms_assumed=device is None,
      grid=tuple(st.grid if st is not None else grid),
      programs=int(kp.work.programs if kp.work is not None else
                   math.prod(st.grid) if st is not None and st.grid else 1),
      num_warps=num_warps, num_stages=int(st.num_stages if st is not None else stages),
      launch_group=int(group or 0), tma=bool(tma),
      registers=registers, spills=spills, shared_bytes=shared, occupancy=occ, work=kp.work,
      median_s=kp.runtime.median_s if kp.runtime is not None else None, rates=kp.rates,
      ceilings=ceilings, measured=measured, weight_basis=kp.weight_basis,
      equations=equations, stalls=_stalls(att.stalls) if att is not None and measured else (),
      sampling=att.sampling if att is not None else None,
      lines=tuple(att.lines) if att is not None else (), kernel_file=kfile, kernel_line=kline,
      generated=gk, persistent=int(gk.persistent or 0) if gk is not None else 0,
      loop_stages=int(gk.loop_stages or 0) if gk is not None else 0)


def _executed_shares(equations: dict[int, EqFacts]) -> dict[int, EqFacts]:
  """Static weights as shares of the instructions *executed*: each equation's share of the
  instructions times the trips of the loops around it where it still runs in a machine
  loop (a loop of unknown trips counts once), normalised. Without a GPU this is the
  nearest the facts come to a time share."""
  def trips(e):
    m, node = 1, e
    if not e.in_machine_loop:
      return 1        # hoisted or unrolled: its instruction count is what runs
    while node.parent is not None and node.parent in equations:
      node = equations[node.parent]
      if node.is_loop and isinstance(node.trips, int):
        m *= max(node.trips, 1)
    return m
  scaled = {i: e.weight * trips(e) for i, e in equations.items()}
  total = sum(scaled.values()) or 1.0
  out = {i: dataclasses.replace(e, weight=scaled[i] / total) for i, e in equations.items()}
  for i, e in out.items():
    nested = [x for x in out.values() if x.index != i and _inside(x, i, out)]
    out[i] = dataclasses.replace(e, inclusive_weight=e.weight + sum(x.weight for x in nested))
  return out


def _inside(e: EqFacts, index: int, equations) -> bool:
  node = e
  while node.parent is not None:
    if node.parent == index:
      return True
    node = equations.get(node.parent)
    if node is None:
      return False
  return False


def _target_cc(st) -> int:
  target = (st.target if st is not None else "") or ""
  digits = target.rsplit(":", 1)[-1]
  return int(digits) if digits.isdigit() else 90


def _location(text: str) -> tuple[str | None, int | None]:
  m = re.search(r" at (.+):(\d+)$", text or "")
  return (m.group(1), int(m.group(2))) if m else (None, None)
