"""Kernel-wide rules: the roof, work per program, the grid against the GPU, warps,
spills and occupancy."""
from __future__ import annotations

import math

from .. import estimate
from ..floors import SMALL_PROGRAM_BYTES, program_work
from ..schema import AT_ROOF_PCT
from .table import Finding, about, blocks, config, fact, fmt_bytes, rule

# Larger blocks are proposed up to this much per program
TARGET_PROGRAM_BYTES = 64 * 1024
# a program slot shorter than this: starting and ending programs is a large part of it
SHORT_PROGRAM_S = 10e-6
# more values per thread than this in a block, with one or two warps: too few warps
MANY_PER_THREAD = 64
# about as many values of a block as a thread's 255 registers hold beside its addresses and
# temporaries: smaller blocks are proposed down to this
FITS_PER_THREAD = 128


@rule("at_roof")
def at_roof(f) -> list[Finding]:
  eff = f.roof_efficiency
  if eff is None or eff < AT_ROOF_PCT:
    return []
  return [Finding(about("at_roof", f"at its roof: {f.rates.verdict}", f, evidence=[
      fact("roofline", f.rates.verdict, measured=True, value=eff)]))]


def _block_words(f) -> tuple[str, int, str]:
  """('4096 float32', elements, dtype) of the kernel's largest block."""
  e = f.largest_block()
  if e is None:
    return "?", 0, "?"
  n = math.prod(e.block_shape)
  return f"{'x'.join(map(str, e.block_shape))} {e.dtype}", n, e.dtype or "?"


def _time_evidence(f) -> list:
  if f.rates is None or f.median_s is None:
    return []
  return [fact("roofline", f.rates.verdict, measured=True, value=f.rates.efficiency_pct)]


@rule("small_programs")
def small_programs(f) -> list[Finding]:
  bpp = f.bytes_per_program
  if bpp is None or bpp >= SMALL_PROGRAM_BYTES or f.programs < 4 * f.sms:
    return []
  if f.work is not None and (f.work.dot_flops or f.work.transcendentals):
    return []        # a dot's tile is sized by its FLOPs; transcendentals take their own time
  if (program_work(f).in_floors or 0) >= 1:
    return []        # some work of its own keeps it worth its start: what a split leaves
  per = (f.median_s * f.sms * f.occupancy.ctas_per_sm / f.programs
         if f.median_s is not None and f.occupancy is not None else None)
  if per is not None and per > SHORT_PROGRAM_S:
    return []        # programs long enough that starting them is not what costs
  words, n, _ = _block_words(f)
  evidence = [fact("work per program",
                   f"{f.programs:,} programs, each moving {fmt_bytes(bpp)} (blocks of {words})",
                   value=bpp)]
  if f.waves is not None:
    evidence.append(fact("waves", f"{f.waves:,.{0 if f.waves >= 10 else 1}f} waves of {f.occupancy.ctas_per_sm} CTAs "
                         f"on each of {f.sms} SMs{' (assumed)' if f.sms_assumed else ''}"))
  if per is not None:
    evidence.append(fact("time per program", f"{per * 1e9:,.0f} ns of an SM slot per program",
                         measured=True, value=per))
  evidence += _time_evidence(f)
  factor = 2 ** math.ceil(math.log2(TARGET_PROGRAM_BYTES / max(bpp, 1)))
  d = about("small_programs",
            f"each program moves {fmt_bytes(bpp)}: launch and tail overhead dominate", f,
            evidence=evidence, share=1.0)
  return [Finding(d, [blocks("small_programs", "larger", f,
                             f"x{factor}, about {fmt_bytes(bpp * factor)} per program",
                             estimate.to_roof(f), factor=factor)])]


def _split_cap(f, factor: int) -> tuple[int, list]:
  """(the split factor, evidence) for rules that want more programs: at most `factor`, and
  no finer than leaves each program some kind of work at its floor (floors.py: bytes
  moved, dot FLOPs, transcendental functions, arithmetic) and a block element for each of
  its threads. Finer, starting programs costs more than the idle SMs they fill: a 128-row
  block split into single rows, a sin's 256-element block into blocks of 2, were proposed
  for kernels of a few microseconds. 1 (no split) with the fact that says so where even 2
  is too fine."""
  work = program_work(f)
  cap = work.cap(factor)
  if cap >= factor:
    return factor, []
  by_threads = work.by_threads is not None and work.by_threads == cap and (
      work.by_floors is None or work.by_floors > cap)
  if by_threads:
    keep = f"an element of the block for each of its {f.threads} threads"
    words = (f"each program's largest block holds {work.elements:,} elements: "
             + (f"split at most {cap}x, to keep {keep}" if cap > 1 else
                f"too little to split (it has {keep} at most); a problem this small does "
                "not fill the GPU"))
  else:
    words = (f"each program {work.doing()}: "
             + (f"split at most {cap}x, to keep {work.least()} or more each" if cap > 1 else
                f"too little to split (programs with less than {work.least()} spend most "
                "of their time starting); a problem this small does not fill the GPU"))
  return cap, [fact("work per program", words, value=work.in_floors)]


@rule("few_programs")
def few_programs(f) -> list[Finding]:
  if f.programs >= f.sms or f.median_s is not None and f.median_s < 5e-6:
    return []
  idle = f.sms - f.programs
  programs = estimate.programs_words(f.programs)
  # as many programs as twice the SMs; blockshape.py states the factor the blocks allow
  factor, why = _split_cap(f, 2 ** math.ceil(math.log2(2 * f.sms / max(f.programs, 1))))
  d = about("few_programs", f"{programs} on {f.sms} SMs: {idle} SM{'s have' if idle != 1 else ' has'}"
            " nothing to do", f, share=1.0, evidence=[
                # a call without a grid: "()", as the kernels table writes it
                fact("grid", f"grid {'x'.join(map(str, f.grid)) or '()'} = {programs}, "
                     f"{f.sms} SMs{' (assumed)' if f.sms_assumed else ''}",
                     value=f.programs)] + _time_evidence(f) + why)
  if factor < 2:
    return [Finding(d)]
  est = estimate.spread(f.programs, f.sms, factor, program_work(f).in_floors)
  return [Finding(d, [blocks("few_programs", "smaller", f, f"/{factor}, {f.programs * factor} "
                             "programs", estimate.capped(est, f), factor=factor)])]


@rule("underfilled")
def underfilled(f) -> list[Finding]:
  """More programs than SMs, fewer than the GPU holds at once: part of every SM's warp
  slots stay empty for the whole kernel (a latency-bound kernel wants them)."""
  waves = f.waves
  if waves is None or waves >= 1 or f.programs < f.sms:
    return []
  if f.measured and sum(s.share for s in f.stalls if s.reason in ("long_scoreboard",
                                                                    "barrier")) < 0.3:
    return []        # it does not wait on memory: more warps would not help it
  occ = f.occupancy
  slots = f.sms * occ.ctas_per_sm
  factor, why = _split_cap(f, 2 ** math.ceil(math.log2(slots / f.programs)))
  d = about("underfilled", f"{f.programs} programs fill {100 * waves:.0f} % of the GPU's CTA "
            f"slots ({f.sms} SMs x {occ.ctas_per_sm})", f, share=1.0, evidence=[
                fact("grid", f"grid {'x'.join(map(str, f.grid))} = {f.programs} programs; "
                     f"{occ.text()}", value=waves)] + _time_evidence(f) + why)
  if factor < 2:
    return [Finding(d)]
  return [Finding(d, [blocks("underfilled", "smaller", f, f"/{factor}, {f.programs * factor} "
                             "programs", (None, "no estimate: measured where tried"),
                             factor=factor)])]


@rule("too_few_warps")
def too_few_warps(f) -> list[Finding]:
  words, n, dtype = _block_words(f)
  per_thread = n / f.threads if n else 0
  if f.num_warps > 2 or per_thread < MANY_PER_THREAD:
    return []
  e = f.largest_block()
  shape = e.block_shape
  rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
  unit = "warp" if f.num_warps == 1 else f"{f.num_warps} warps"
  text = (f"one {unit} per row of {shape[-1]} {_plural(dtype)}" if rows == 1 else
          f"{unit} per program for blocks of {words}")
  evidence = [fact("warps", f"num_warps={f.num_warps}: {f.threads} threads for {n:,} values, "
                   f"{per_thread:,.0f} per thread", value=per_thread)]
  if f.occupancy is not None:
    evidence.append(fact("occupancy", f.occupancy.text()))
  evidence += _time_evidence(f)
  d = about("too_few_warps", text, f, evidence=evidence, share=1.0)
  est = estimate.to_roof(f)
  actions = [config("too_few_warps", {"num_warps": w}, f, estimate=est if w == 4 else (None, ""))
             for w in (4, 8) if n >= 32 * w]
  return [Finding(d, actions)]


def _plural(dtype: str) -> str:
  return {"float32": "floats", "float16": "halves", "bfloat16": "bfloat16s"}.get(
      dtype, f"{dtype} values")


@rule("spills")
def spills(f) -> list[Finding]:
  if not f.spills:
    return []
  words, n, _ = _block_words(f)
  evidence = [fact("registers", f"{f.registers} registers per thread (a thread may have "
                   f"{f.limits.max_registers_per_thread}); ptxas spills {f.spills:,} bytes to "
                   "local memory (stores and loads)", value=f.spills)]
  if n:
    evidence.append(fact("values per thread", f"blocks of {words} over {f.threads} threads: "
                         f"{n / f.threads:,.0f} values each", value=n / f.threads))
  if f.occupancy is not None:
    evidence.append(fact("occupancy", f.occupancy.text()))
  evidence += _time_evidence(f)
  d = about("spills", f"registers spill: {f.spills:,} bytes of spill stores and loads at "
            f"{f.registers} registers per thread", f, evidence=evidence, share=1.0)
  none = (None, "no estimate: the work model has no cost for a spill; measured where tried")
  actions = [config("spills", {"num_warps": f.num_warps * 2}, f, "fewer values per thread",
                    none)] if f.num_warps < 16 else []
  # halved, and (where that is not enough) as small as fits a thread's registers
  fits = 2 ** math.ceil(math.log2(n / f.threads / FITS_PER_THREAD)) if n else 2
  for factor in dict.fromkeys((2, max(2, fits))):
    why = "half the values per thread" if factor == 2 else \
        f"{n / f.threads / factor:,.0f} values per thread"
    actions.append(blocks("spills", "smaller", f, f"/{factor}, {why}", none, factor=factor))
  return [Finding(d, actions)]


@rule("occupancy_limited")
def occupancy_limited(f) -> list[Finding]:
  occ = f.occupancy
  if occ is None or occ.pct >= 25 or occ.limiter not in ("registers", "shared memory"):
    return []
  if f.work is not None and f.work.dot_flops:
    return []        # tensor-core kernels run few, large CTAs by design
  waits = sum(s.share for s in f.stalls if s.reason in ("long_scoreboard", "barrier"))
  if f.measured and waits < 0.4:
    return []        # few memory waits: the warps it has are busy enough
  evidence = [fact("occupancy", occ.text(), value=occ.pct)]
  if f.measured:
    evidence.append(fact("stall reasons", f"{100 * waits:.0f} % of the samples wait for "
                         "memory or at a barrier: too few warps to hide it", True, waits))
  d = about("occupancy_limited", f"{occ.ctas_per_sm} CTA{'s' if occ.ctas_per_sm != 1 else ''} "
            f"per SM ({occ.pct:.0f} % of its warps), limited by {occ.limiter}", f,
            evidence=evidence, share=1.0)
  actions = []
  if occ.limiter == "shared memory" and f.num_stages > 2:
    actions.append(config("occupancy_limited", {"num_stages": f.num_stages - 1}, f,
                          "less shared memory per CTA"))
  return [Finding(d, actions)]
