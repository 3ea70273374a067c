"""Which equations and user lines cost a kernel's time: samples per SASS
instruction (CUPTI PC sampling, or Nsight Compute's source counters) mapped
through the cubin's line info (correlate.py, backend/compiling/lineinfo.py) to generated
lines, equations and the user's lines; or, with no measurement, each
equation's share of the SASS instructions, labelled static.

Memory waits are charged to the load that causes them (sassdeps.py has the
rule and its limits): the samples stay visible where the warp stood
(`samples`, `stalls`), and the equation's weight moves them to the load
(`charged_out` / `charged_in`, `waits` names the consumer). Waits for an issue
slot or a full pipe queue are charged to the instructions that were issuing
(contention.py has that rule and its limits: `contended_out` / `contended_in`).
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Mapping

from ...backend.compiling.lineinfo import parse_sass
from . import contention, sassdeps, stalls
from ..static.correlate import Correlation, user_location
from ..attribution_schema import (Attribution, EquationWeight, LineWeight, SamplingRun,
                                  StallShare, WaitCharge)
from ..schema import StaticProfile

TOP_STALLS = 4


def _stall_list(counts: Mapping[str, float], limit: int = TOP_STALLS) -> list[StallShare]:
  total = sum(counts.values())
  if total <= 0:
    return []
  ranked = sorted(((r, n) for r, n in counts.items() if n > 0), key=lambda x: -x[1])
  return [StallShare(r, stalls.words(r), float(n), n / total) for r, n in ranked[:limit]]


def _children(gk) -> dict[int, list[int]]:
  out = defaultdict(list)
  for e in gk.eqns:
    if e.parent is not None:
      out[e.parent].append(e.index)
  return out


def _inclusive(gk, values: Mapping[int, float]) -> dict[int, float]:
  children = _children(gk)
  memo: dict[int, float] = {}

  def total(i: int, seen: frozenset) -> float:
    if i in memo:
      return memo[i]
    if i in seen:
      return 0.0
    v = values.get(i, 0.0) + sum(total(c, seen | {i}) for c in children.get(i, ()))
    memo[i] = v
    return v

  return {e.index: total(e.index, frozenset()) for e in gk.eqns}


def _loop_spans(corr: Correlation) -> list[tuple[int, int]]:
  if not corr.sass_listing:
    return []
  _, labels, branches = parse_sass(corr.sass_listing)
  return sassdeps.loops(labels, branches)


def measured(gk, corr: Correlation, samples: Mapping[int, Mapping[str, float]], *,
             basis: str, description: str, replay_median_s: float | None,
             sampling: SamplingRun | None = None, notes=()) -> Attribution:
  """samples: SASS address (byte offset in the function) -> stall reason -> samples,
  the not-issued duplicates already left out (stalls.canonical)."""
  sass = corr.sass
  by_addr = {ins.address: k for k, ins in enumerate(sass)}
  deps = sassdeps.Dependencies([ins.text for ins in sass], [ins.opcode for ins in sass],
                                _loop_spans(corr))
  at_eqn: Counter = Counter()
  kernel_stalls: Counter = Counter()
  moved_in: Counter = Counter()
  moved_out: Counter = Counter()
  effective: dict = defaultdict(Counter)     # stalls after charging, per equation
  waits: dict = defaultdict(Counter)         # load eqn -> (consumer eqn, reason) -> samples
  per_instruction = []
  at_instruction: dict = {}                  # SASS index -> reasons, for contention
  unmatched = 0.0
  for addr, reasons in samples.items():
    n = float(sum(reasons.values()))
    kernel_stalls.update(reasons)
    k = by_addr.get(int(addr))
    if k is None:
      unmatched += n
      continue
    e = sass[k].eqn
    at_instruction[k] = reasons
    at_eqn[e] += n
    effective[e].update(reasons)
    top = max(reasons, key=reasons.get) if reasons else None
    per_instruction.append([int(addr), n, top])
    for reason in stalls.MEMORY_WAITS:
      w = float(reasons.get(reason, 0))
      if not w:
        continue
      found = deps.producers(k, reason)
      loads = [sass[j].eqn for j in found if sass[j].eqn != e]
      if not found or not loads:
        continue
      share = w / len(found)
      for load in loads:
        moved_out[e] += share
        moved_in[load] += share
        effective[e][reason] -= share
        effective[load][reason] += share
        waits[load][(e, reason)] += share
  contended_in: Counter = Counter()
  contended_out: Counter = Counter()
  for source, target, reason, v in contention.charges(
      at_instruction, [ins.opcode for ins in sass], [ins.eqn for ins in sass]):
    contended_out[source] += v
    contended_in[target] += v
    effective[source][reason] -= v
    effective[target][stalls.CHARGED.get(reason, reason)] += v
  total = float(sum(kernel_stalls.values()))
  per_instruction.sort(key=lambda x: x[0])
  charged = {i: at_eqn.get(i, 0.0) - moved_out.get(i, 0.0) + moved_in.get(i, 0.0)
             - contended_out.get(i, 0.0) + contended_in.get(i, 0.0)
             for i in range(len(gk.eqns))}
  own = {i: at_eqn.get(i, 0.0) for i in range(len(gk.eqns))}
  equations = _equation_weights(gk, total, own, charged, replay_median_s)
  for ew in equations:
    ew.charged_in = moved_in.get(ew.index, 0.0)
    ew.charged_out = moved_out.get(ew.index, 0.0)
    ew.contended_in = contended_in.get(ew.index, 0.0)
    ew.contended_out = contended_out.get(ew.index, 0.0)
    ew.stalls = _stall_list({r: n for r, n in effective.get(ew.index, {}).items() if n > 0})
    ew.waits = [WaitCharge(c, gk.eqns[c].primitive if c is not None else None,
                           user_location(gk, c)[1] if c is not None else None, r,
                           stalls.words(r), v)
                for (c, r), v in sorted(waits.get(ew.index, {}).items(), key=lambda x: -x[1])]
  lines = _line_weights(gk, equations, effective, replay_median_s)
  unattributed = (at_eqn.get(None, 0.0) - contended_out.get(None, 0.0)
                  + contended_in.get(None, 0.0) + unmatched)
  notes = list(notes)
  if unmatched:
    notes.append(f"{unmatched:.0f} samples at addresses outside the disassembly")
  return Attribution(basis=basis, description=description, unit="samples", total=total,
                     unattributed=unattributed, equations=equations, lines=lines,
                     stalls=_stall_list(kernel_stalls, limit=len(kernel_stalls)),
                     instructions=per_instruction, sampling=sampling,
                     replay_median_s=replay_median_s, notes=notes)


def _equation_weights(gk, total, own, charged, replay_median_s) -> list[EquationWeight]:
  inc_own = _inclusive(gk, own)
  inc_charged = _inclusive(gk, charged)
  out = []
  denominator = total or 1.0
  for e in gk.eqns:
    if not inc_own.get(e.index) and not inc_charged.get(e.index):
      continue
    file, line, _ = user_location(gk, e.index)
    w = charged.get(e.index, 0.0) / denominator
    wi = inc_charged.get(e.index, 0.0) / denominator
    out.append(EquationWeight(
        index=e.index, primitive=e.primitive, path=e.path, parent=e.parent, user_file=file,
        user_line=line, samples=own.get(e.index, 0.0), inclusive_samples=inc_own[e.index],
        weight=w, inclusive_weight=wi, share_at=own.get(e.index, 0.0) / denominator,
        time_s=w * replay_median_s if replay_median_s else None,
        inclusive_time_s=wi * replay_median_s if replay_median_s else None))
  out.sort(key=lambda x: (-x.weight, -x.inclusive_weight, x.index))
  return out


def _line_weights(gk, equations, effective, replay_median_s) -> list[LineWeight]:
  groups: dict = {}
  for ew in equations:
    if ew.user_file is None or (ew.weight <= 0 and ew.samples <= 0):
      continue
    key = (ew.user_file, ew.user_line)
    g = groups.setdefault(key, {"weight": 0.0, "samples": 0.0, "eqns": [], "stalls": Counter()})
    g["weight"] += ew.weight
    g["samples"] += ew.samples
    g["eqns"].append(ew.index)
    g["stalls"].update(effective.get(ew.index, {}))
  out = []
  for (file, line), g in groups.items():
    positive = {r: n for r, n in g["stalls"].items() if n > 0}
    top = max(positive, key=positive.get) if positive else None
    out.append(LineWeight(file, line, g["weight"], g["samples"], sorted(g["eqns"]),
                          stalls.words(top) if top else None,
                          g["weight"] * replay_median_s if replay_median_s else None))
  out.sort(key=lambda x: -x.weight)
  return out


def static(gk, profile: StaticProfile, reason: str) -> Attribution:
  """Each equation's share of the SASS (else PTX) instructions one program executes as far
  as the code says: an equation's instructions times the trips of the loops it is in (its
  own too, for a loop's control). Branches weigh as if each ran, and a loop whose trips are
  known only at run time counts once; the description says so where it applies."""
  # lazy: at the top it would load numpy whenever this module is imported
  from ..static.cost import runs_per_program
  stage = profile.weight_basis          # "sass" or "ptx"
  count = "sass_instructions" if stage == "sass" else "ptx_instructions"
  runs, dynamic = runs_per_program(gk)
  own = {e.index: float(getattr(e, count)) * runs.get(e.index, 1) for e in profile.equations}
  unattributed = float(profile.unattributed_instructions)
  total = sum(own.values()) + unattributed
  equations = _equation_weights(gk, total, own, own, None)
  lines = _line_weights(gk, equations, {}, None)
  what = f"static {stage.upper()} instructions times loop trips: {reason}"
  if dynamic:
    what += (f"; loop(s) {', '.join(f'[{i}]' for i in dynamic)} run a number of times "
             "known only at run time, counted once")
  if any(e.region.startswith("branch") for e in gk.eqns):
    what += "; every cond branch weighs as if it ran"
  return Attribution(
      basis="static", description=what,
      unit="instructions", total=total, unattributed=unattributed,
      equations=equations, lines=lines)


def short_location(ew: EquationWeight) -> str:
  return f"{os.path.basename(ew.user_file)}:{ew.user_line}" if ew.user_file else "?"


def wait_text(gk, ew: EquationWeight) -> str | None:
  """"60% of samples, waiting for global memory (first used by reduce_max at :20)"."""
  if not ew.waits:
    return None
  first = ew.waits[0]
  who = f"{first.consumer_primitive} at :{first.consumer_line}" if first.consumer_primitive \
      else "an unattributed instruction"
  total = sum(w.samples for w in ew.waits)
  return f"{total:.0f} samples {first.words} charged here (first used by {who})"
