"""The page's per-equation table and the kernel's work model, from the typed KernelProfile.

The table is the terminal's hot-equations table at full length: each equation's weight
(measured where the profile has samples, else its share of the SASS or PTX instructions),
the user's line, and what its instructions are (or, measured, where its warps waited).
The work model is what the kernel moves and computes, which a CPU run knows as well as
a GPU run: the roofline's x axis without its measured point.
"""
from __future__ import annotations

import dataclasses
import os

from ...profiler.attribution_schema import StallShare
from ...profiler.schema import EquationProfile
from ... import units
from ..saved_runs.files import user_line

MAX_ROWS = 16                      # the heaviest equations; the rest are summed in a last row


@dataclasses.dataclass(frozen=True)
class WeightedEquation:
  """One equation with the weight the page shows (model.equation_weights): measured where
  the profile has samples, else its share of the instructions."""
  index: int
  primitive: str | None
  user_file: str | None
  user_line: int | None
  weight: float | None
  static: EquationProfile | None = None    # its instructions (None: known from samples only)
  stalls: tuple[StallShare, ...] = ()      # measured: its stall reasons
  time_s: float | None = None              # measured: weight x the replayed median

  def instructions(self, basis: str) -> int | None:
    return getattr(self.static, f"{basis}_instructions") if self.static is not None else None

  def counts(self, basis: str) -> dict[str, int]:
    return (getattr(self.static, f"{basis}_counts") if self.static is not None else None) or {}

  @property
  def stall(self) -> str:
    """Its top stall reason in words, when the profile measured stalls."""
    top = max(self.stalls, key=lambda x: x.samples or 0, default=None)
    return str(top.words or top.reason or "") if top is not None and top.samples else ""


@dataclasses.dataclass(frozen=True)
class EquationRow:
  weight: float
  eqn: str                          # "[4] exp"
  index: int
  where: str                        # "softmax.py:21"
  source: str                       # the user's line, as written
  detail: str                       # the instruction mix, or the top stall when measured
  instructions: int | None          # of the kernel's SASS (else PTX), at this equation
  time_us: float | None = None      # measured: weight x the replayed median


@dataclasses.dataclass(frozen=True)
class EquationTable:
  title: str
  detail_header: str
  rows: tuple[EquationRow, ...]
  rest: str = ""                    # "9 more equations: 1.2% together"
  unattributed: str = ""            # the kernel's own set-up, on no equation


def equation_table(p, eqs: list[WeightedEquation], find_file) -> EquationTable | None:
  """`p`: the kernel's row (summary.KernelSummary) or its profile (KernelProfile), or None;
  `eqs`: model.equation_weights(p); `find_file`: the user's file as this machine has it."""
  if not eqs:
    return None
  static = p.static if p is not None else None
  att = p.attribution if p is not None else None
  measured = att is not None and att.basis not in (None, "static")
  basis = "sass" if static is not None and static.weight_basis == "sass" else "ptx"
  ordered = sorted(eqs, key=lambda e: -(e.weight or 0.0))
  shown = [e for e in ordered if (e.weight or 0.0) > 0][:MAX_ROWS]
  rows = []
  for e in shown:
    path = find_file(e.user_file)
    line = e.user_line or 0
    rows.append(EquationRow(
        weight=e.weight or 0.0,
        eqn=f"[{e.index}] {e.primitive if e.primitive is not None else '?'}", index=e.index,
        where=f"{os.path.basename(e.user_file)}:{line}" if e.user_file else "?",
        source=user_line(path, e.user_file, line).strip(),
        detail=(e.stall if measured else
                units.instruction_mix(e.counts(basis), e.instructions(basis))),
        instructions=e.instructions(basis),
        time_us=e.time_s * 1e6 if e.time_s is not None else None))
  rest = ordered[len(shown):]
  rest_weight = sum(e.weight or 0.0 for e in rest)
  total = getattr(static, f"{basis}_instructions") if static is not None else None
  unattributed = static.unattributed_instructions if static is not None else None
  title = ("where the time goes: each equation's share of the samples" if measured else
           f"what the kernel is made of: each equation's share of its {basis.upper()} "
           f"instructions{f' ({total} in all)' if total else ''}")
  return EquationTable(
      title=title, detail_header="top stall" if measured else "its instructions",
      rows=tuple(rows),
      rest=(f"{len(rest)} more equation(s): {100 * rest_weight:.1f}% together"
            if rest_weight >= 0.0005 else
            f"{len(rest)} more equation(s) with no instructions of their own" if rest else ""),
      unattributed=(f"{unattributed} instruction(s) on no equation: the kernel's set-up "
                    "(program ids, block offsets)" if unattributed and not measured else ""))


def work_facts(p) -> tuple[tuple[str, str], ...]:
  """What one launch moves and computes, from the work model (the jaxpr's, or the
  pallas_call's cost_estimate) of `p`, the kernel's row or profile."""
  w = p.work if p is not None else None
  if w is None:
    return ()
  facts = [("memory traffic", f"{units.size(w.bytes)} (inputs read once, outputs "
                              "written once)")]
  if w.block_bytes and w.block_bytes != w.bytes:
    facts.append(("as the blocks load and store", units.size(w.block_bytes)))
  flops = w.flops
  if flops is not None:
    split = []
    if w.dot_flops:
      split.append(f"{_count(w.dot_flops)} in dots"
                   + (f" ({w.dot_dtype})" if w.dot_dtype else ""))
    if w.elementwise_flops:
      split.append(f"{_count(w.elementwise_flops)} elementwise")
    facts.append(("FLOPs", _count(flops) + (f" ({', '.join(split)})" if split else "")))
  if w.transcendentals:
    facts.append(("transcendentals", _count(w.transcendentals)))
  if flops is not None and w.bytes:
    facts.append(("intensity", f"{flops / w.bytes:.3g} FLOP per byte"))
  if w.programs:
    facts.append(("programs", f"{w.programs:,}"))
  source = "the pallas_call's cost_estimate" if w.source == "cost_estimate" else \
      "the kernel's equations"
  facts.append(("from", source + ("" if w.exact is not False else
                                  " (a loop's trip count is known only at run time)")))
  return tuple(facts)


def _count(n) -> str:
  for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if n >= scale:
      return f"{n / scale:.3g} {prefix}"
  return f"{n:,}"
