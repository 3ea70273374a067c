"""Memory rules: loops and their pipelining, how accesses coalesce, data read more than
once, the launch order's L2 reuse and TMA."""
from __future__ import annotations

import math

from .. import estimate
from .table import Finding, about, blocks, config, edit, fact, fmt_bytes, rule

SECTOR = 32            # bytes the memory system moves at least per access of a row
LINE = 128             # bytes of a cache line: rows this long coalesce fully
SHARED_PER_BLOCK = 232448   # the most shared memory an sm_90 CTA may ask for
REREAD = 1.5           # block traffic over unique bytes above this: data read again


def _loads(f, loop) -> list:
  return [e for e in f.children(loop.index) if e.is_load and e.bytes_read]


def _memory_waits(es) -> float:
  """The samples' share of waits for global memory at these equations (their own
  stalls, weighted by their samples)."""
  total = sum(e.samples or 0 for e in es)
  if not total:
    return 0.0
  return sum((e.samples or 0) * e.stall_share("long_scoreboard", "lg_throttle") for e in es) / total


def _lines(es) -> str:
  return ", ".join(sorted({e.location for e in es}))


@rule("unpipelined_loop")
def unpipelined_loop(f) -> list[Finding]:
  """A loop whose loads wait for the previous iteration: a dot's loop at num_stages=1, or
  an innermost loop without a dot at any num_stages (Triton's kernel-wide num_stages
  pipelines only the loads that feed a dot; CompilerParams.loop_stages pipelines the others)."""
  out = []
  for loop in f.loops():
    inside = f.children(loop.index)
    loads = [e for e in inside if e.is_load and e.primitive in ("get", "load", "masked_load")
             and e.in_machine_loop]
    if not loads:
      continue          # none, or the compiler took them out of the loop
    has_dot = any(e.primitive == "dot_general" for e in inside)
    if has_dot and f.num_stages > 1:
      continue
    if not has_dot:
      if f.loop_stages or not loop.stageable:
        # pipelined already, or one loop_stages leaves as written (the lowering records
        # which: not innermost, a branch, memory written; or a record without it)
        continue
      out.append(_loop_without_dot(f, loop, loads))
      continue
    evidence = _loop_evidence(f, loop, loads, fact(
        "num_stages", f"num_stages={f.num_stages}: each iteration's loads start only when the "
        "previous iteration is done"))
    d = about("unpipelined_loop", f"K loop not pipelined: num_stages={f.num_stages}", f, loop,
              evidence, share=loop.inclusive_weight)
    per_iteration = sum(e.bytes_read for e in loads) or 0
    est = estimate.to_roof(f)
    actions = [config("unpipelined_loop", {"num_stages": s}, f,
                      estimate=est if s == 3 else (None, ""))
               for s in (2, 3, 4) if not per_iteration or s * per_iteration <= SHARED_PER_BLOCK]
    out.append(Finding(d, actions))
  return out


def _loop_without_dot(f, loop, loads) -> Finding:
  """A loop without a dot, which Triton pipelines only where the loop asks (tl.range's
  num_stages): loop_stages 2 and 3, each within a CTA's shared memory. Its diagnosis is
  `unstaged_loop`, ordered after the grid's (engine.PRIORITY): where few programs each run
  a long loop, splitting it is the larger fix (the known-answer narrow reduction)."""
  per_iteration = sum(e.bytes_read for e in loads) or 0
  evidence = _loop_evidence(f, loop, loads, fact(
      "pipelining", f"num_stages={f.num_stages} pipelines only the loads that feed a dot; this "
      "loop has none, so each iteration's loads start only when the previous iteration is done"))
  d = about("unstaged_loop", "loop not pipelined: it has no dot, and Triton pipelines only "
            "a dot's loads", f, loop, evidence, share=loop.inclusive_weight)
  est = estimate.to_roof(f)
  warps = warps_for_async_copies(max((e.bytes_read for e in loads if e.bytes_read), default=0),
                                 f.num_warps)
  fewer = {"num_warps": warps} if warps < f.num_warps else {}
  why = "its loads issued ahead" + (f", {warps} warp{'s' if warps > 1 else ''} so that each "
                                    "thread copies 4 bytes or more" if fewer else "")
  return Finding(d, [config("unstaged_loop", {"loop_stages": s, **fewer}, f, why,
                            estimate=est if s == 3 else (None, ""))
                     for s in (2, 3) if not per_iteration or s * per_iteration <= SHARED_PER_BLOCK])


def _loop_evidence(f, loop, loads, why) -> list:
  """An unpipelined loop's evidence: why it waits, its loads, its time where measured, the
  kernel's roofline where timed."""
  per_iteration = sum(e.bytes_read for e in loads) or 0
  evidence = [why, fact("loads in the loop", f"{len(loads)} load(s) at {_lines(loads)}"
                        + (f", {fmt_bytes(per_iteration)} per iteration" if per_iteration else ""))]
  if f.measured:
    evidence.append(fact("time in the loop", f"{100 * loop.inclusive_weight:.0f} % of the "
                         f"samples; {100 * _memory_waits(loads):.0f} % of the loads' wait for "
                         "global memory", True, loop.inclusive_weight))
  if f.rates is not None and f.median_s is not None:
    evidence.append(fact("roofline", f.rates.verdict, True, f.rates.efficiency_pct))
  return evidence


ASYNC_COPY_BYTES = 4      # the least a cp.async copies: Triton copies ahead no smaller load


THREADS_PER_WARP = 32


def warps_for_async_copies(largest_load: int, warps: int) -> int:
  """The most warps (up to `warps`) at which each thread's share of a loop's largest load
  (bytes) is ASYNC_COPY_BYTES or more: with more threads than that, Triton leaves the loads
  as they are (JAX's norms' dw/db: a 16x16 bfloat16 block over 8 warps is 2 bytes a
  thread; over 4, 4 bytes). An unknown size (0) keeps the warps."""
  while warps > 1 and largest_load and largest_load < ASYNC_COPY_BYTES * THREADS_PER_WARP * warps:
    warps //= 2
  return warps


# a loop iteration that loads less than this per program mostly waits for its loads
SMALL_STEP_BYTES = 4096


@rule("small_loop_steps")
def small_loop_steps(f) -> list[Finding]:
  out = []
  for loop in f.loops():
    if not isinstance(loop.trips, int) or loop.trips < 16:
      continue
    loads = [e for e in f.children(loop.index) if e.is_load and e.bytes_read and
             e.in_machine_loop]
    step = sum(e.bytes_read for e in loads)
    if not loads or step >= SMALL_STEP_BYTES:
      continue
    evidence = [fact("loads per iteration", f"{len(loads)} load(s) at {_lines(loads)}: "
                     f"{fmt_bytes(step)} per program per iteration, {loop.trips} iterations",
                     value=step)]
    if f.measured:
      evidence.append(fact("time in the loop", f"{100 * loop.inclusive_weight:.0f} % of the "
                           f"samples; {100 * _memory_waits(loads):.0f} % of the loads' wait "
                           "for global memory", True, loop.inclusive_weight))
    d = about("small_loop_steps", f"each of the loop's {loop.trips} iterations loads "
              f"{fmt_bytes(step)} per program: it waits for its loads, one small step at a time",
              f, loop, evidence, share=loop.inclusive_weight)
    actions = [config("small_loop_steps", {"num_stages": f.num_stages + 1}, f,
                      "more loads in flight", (None, "no estimate: measured where tried"))] \
        if f.num_stages < 5 else []
    actions.append(edit("small_loop_steps", "load more per iteration",
                        f"the loop at {loop.location} moves {fmt_bytes(step)} per program per "
                        f"iteration ({_lines(loads)}): load blocks several times larger per "
                        "iteration (fewer iterations), or split the loop over more programs",
                        loop, f, estimate.to_roof(f)))
    out.append(Finding(d, actions))
  return out


def _array_shapes(f) -> dict:
  gk = f.generated
  return {p.label: tuple(p.shape) for p in gk.params} if gk is not None else {}


@rule("uncoalesced")
def uncoalesced(f) -> list[Finding]:
  shapes = _array_shapes(f)
  out = []
  for e in f.equations.values():
    run = e.contiguous_bytes
    if run is None or run >= SECTOR or not e.is_memory or not e.block_shape:
      continue
    if math.prod(e.block_shape) <= 1:
      continue          # one scalar: nothing to coalesce
    array = shapes.get(e.operand)
    if array is not None and array[-1] * _itemsize(e.dtype) <= run:
      continue          # the rows are as long as the array's: nothing more to read
    evidence = [fact("access", f"{e.operand} block {list(e.block_shape)} of array "
                     f"{list(array) if array else '?'}: runs of {run} B of consecutive "
                     f"addresses; each {SECTOR} B sector moves {run} B the kernel uses",
                     value=run)]
    if f.measured and e.stalls:
      evidence.append(fact("stall reasons", ", ".join(f"{100 * s.share:.0f} % {s.words}"
                                                      for s in e.stalls[:3]), True))
    verb = "reads" if e.is_load else "writes"
    d = about("uncoalesced", f"{e.operand} {verb} runs of {run} B: uncoalesced, "
              f"{SECTOR // max(run, 1)}x the memory traffic it needs", f, e, evidence)
    est = estimate.capped(estimate.by_share(e.weight, 1 - run / SECTOR, f"{e.operand}'s access",
                                            f.measured), f)
    wanted = -(-LINE // max(_itemsize(e.dtype), 1))
    actions = [blocks("uncoalesced", "wider", f, f"the last dimension of {e.operand}'s block "
                      f"to {wanted} or more", est, operand=e.operand, last=wanted)]
    # laid out the other way, the block's longest other dimension is its rows: an edit only
    # where those rows are longer than the runs it has
    swapped = max(e.block_shape[:-1], default=0) * _itemsize(e.dtype)
    if swapped > run:
      est = estimate.capped(estimate.by_share(e.weight, 1 - run / min(SECTOR, swapped),
                                              f"{e.operand}'s access", f.measured), f)
      actions.append(edit("uncoalesced", f"lay {e.operand} out so its block's rows are "
                          f"contiguous", f"{e.operand} is read {list(e.block_shape)} at a time "
                          f"from an array {list(array) if array else ''}: transpose it (or swap "
                          f"the block's dimensions) so the block's last dimension holds "
                          f"{min(wanted, swapped // _itemsize(e.dtype))}+ consecutive elements",
                          e, f, est))
    out.append(Finding(d, actions))
  return out


def _itemsize(dtype) -> int:
  # lazy: keeps numpy out of this module's import (start-up time)
  import numpy as np
  try:
    return np.dtype(dtype).itemsize
  except TypeError:
    return 2 if dtype == "bfloat16" else 1


@rule("rereads")
def rereads(f) -> list[Finding]:
  w = f.work
  if w is None or not w.bytes or not w.block_bytes or w.dot_flops or \
      w.block_bytes < REREAD * w.bytes:
    return []
  ratio = w.block_bytes / w.bytes
  by_operand: dict[str, list] = {}
  for e in f.equations.values():
    if e.is_load and e.operand:
      by_operand.setdefault(e.operand, []).append(e)
  again = {op: es for op, es in by_operand.items() if len({e.user_line for e in es}) > 1}
  if not again:
    return []      # a load repeated by a loop: the compiler may hoist it, nothing to name
  evidence = [fact("work model", f"the programs' loads and stores move {fmt_bytes(w.block_bytes)}"
                   f", {ratio:.1f}x the {fmt_bytes(w.bytes)} the kernel must", value=ratio)]
  for op, es in sorted(again.items()):
    evidence.append(fact("reads", f"{op} is read at {_lines(es)}"))
  where = min((e for es in again.values() for e in es), key=lambda e: e.index, default=None)
  times = max(len({e.user_line for e in es}) for es in again.values())
  text = f"reads {', '.join(sorted(again))} {times} times: {ratio:.1f}x the bytes it must move"
  d = about("rereads", text, f, where, evidence, share=1.0)
  est = estimate.capped((100.0 * (1 - 1 / ratio) if f.rates is not None and
                         f.rates.bound == "memory" else None,
                         "the extra traffic gone, if the L2 serves none of it now"), f)
  actions = [edit("rereads", f"read {op} once", f"{op} is loaded at {_lines(es)}: load it "
                  "once into a value and reuse that value (or fuse the passes)", es[0], f, est)
             for op, es in sorted(again.items())]
  return [Finding(d, actions)]


@rule("launch_order")
def launch_order(f) -> list[Finding]:
  """A dot's programs re-read its operands: the launch order (groups, and resident
  programs that loop over the grid in that order) decides how much of it the L2 serves."""
  w = f.work
  if w is None or not w.dot_flops or len([g for g in f.grid if g > 1]) < 2 \
      or not w.block_bytes or w.block_bytes < 4 * (w.bytes or 1):
    return []
  actions = []
  unmodelled = (None, "not in the work model: measured where tried")
  if not f.launch_group:
    actions.append(config("launch_order", {"launch_group": 8}, f, "L2 reuse", unmodelled))
  resident = resident_programs(f)
  if not f.persistent and f.programs > resident:
    # the programs in flight are the ones a grouped order makes share blocks; resident
    # ones keep that set steady, and leave no last wave of a few programs
    actions.append(config("launch_order", {"launch_group": f.launch_group or 8,
                                           "persistent": resident}, f,
                          f"{resident} resident programs loop over the {f.programs:,} "
                          "points in grouped order", unmodelled))
  # fewer, larger programs along the grid's axis re-read each block fewer times whatever
  # the order (a flash attention's block_q: every program reads all of K and V), where
  # half the programs still give every SM one
  if f.programs >= 2 * f.sms:
    actions.append(blocks("launch_order", "larger", f, "fewer programs re-reading the same "
                          "blocks", unmodelled, factor=2))
  evidence = [fact("work model", f"{fmt_bytes(w.block_bytes)} of block loads for "
                   f"{fmt_bytes(w.bytes)} of operands", value=w.block_bytes / w.bytes)]
  if f.waves is not None:
    evidence.append(fact("waves", f"{f.programs:,} programs in {f.waves:,.1f} waves of "
                         f"{resident} on {f.sms} SMs{' (assumed)' if f.sms_assumed else ''}",
                         value=f.waves))
  d = about("launch_order", f"programs re-read {w.block_bytes / w.bytes:.0f}x the operands' "
            "bytes; the launch order decides how much of it the L2 serves", f, share=1.0,
            evidence=evidence)
  return [Finding(d, actions)]


def resident_programs(f) -> int:
  """The programs the GPU holds at once: its SMs times the CTAs its occupancy allows
  (one each where the occupancy is not known)."""
  per_sm = f.occupancy.ctas_per_sm if f.occupancy is not None else 0
  return f.sms * max(per_sm or 1, 1)


@rule("tma_eligible")
def tma_eligible(f) -> list[Finding]:
  if f.cc < 90 or f.tma:
    return []
  loops = [(lp, [e for e in f.children(lp.index) if e.is_load and e.block_shape
                 and len(e.block_shape) >= 2 and (e.contiguous_bytes or 0) >= 16
                 and e.in_machine_loop])
           for lp in f.loops()]
  loops = [(lp, ls) for lp, ls in loops if ls]
  if not loops:
    return []
  loop, loads = max(loops, key=lambda x: x[0].inclusive_weight)
  waits = _memory_waits(loads)
  if f.measured and waits < 0.3:
    return []
  d = about("tma_eligible", f"the loop's block loads ({_lines(loads)}) can go through the TMA "
            "copy engine", f, loop, [fact("loads", f"{len(loads)} 2-D block load(s) in the loop"
                                          f"{f', {100 * waits:.0f} % of their samples wait for memory' if f.measured else ''}",
                                          f.measured)], share=loop.inclusive_weight)
  return [Finding(d, [config("tma_eligible", {"tma": 1}, f, "opt-in: TMA has not yet run on a GPU",
                             (None, "not in the work model: measured where tried"))])]
