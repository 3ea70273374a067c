"""Compute rules: time in transcendental functions (and those a loop recomputes), and
whether the samples were enough to rank the lines."""
from __future__ import annotations

from .. import estimate
from ..facts import transcendental_primitives
from .table import Finding, about, config, edit, fact, rule

# transcendental equations with at least this share of the time make the kernel theirs
TRANSCENDENTAL_SHARE = 0.3
# dropped samples above this share of CUPTI's count: the ranking may not hold
DROPPED_SHARE = 0.01


def _stall_words(es) -> str:
  reasons: dict[str, float] = {}
  for e in es:
    for s in e.stalls:
      reasons[s.words] = reasons.get(s.words, 0.0) + s.share * (e.samples or 0)
  total = sum(reasons.values())
  top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
  return ", ".join(f"{100 * n / total:.0f} % {w}" for w, n in top) if total else ""


@rule("transcendental_bound")
def transcendental_bound(f) -> list[Finding]:
  transcendental = transcendental_primitives()
  trans = [e for e in f.equations.values() if e.primitive in transcendental]
  share = sum(e.weight for e in trans)
  if not trans or share < TRANSCENDENTAL_SHARE:
    return []
  names = sorted({e.primitive for e in trans})
  at = sorted(trans, key=lambda e: -e.weight)[:4]
  evidence = [fact("weights", f"{100 * share:.0f} % of the "
                   f"{'samples' if f.measured else 'instructions'} at "
                   + (f"{at[0].primitive} ({at[0].location})" if len(trans) == 1 else
                      ", ".join(f"{e.primitive} ({e.location}) {100 * e.weight:.0f} %"
                                for e in at)),
                   f.measured, share)]
  words = _stall_words(trans) if f.measured else ""
  if words:
    evidence.append(fact("stall reasons", words, True))
  if f.work is not None and f.work.transcendentals:
    per = f.work.transcendentals / max(f.programs, 1)
    evidence.append(fact("work model", f"{f.work.transcendentals:,} transcendental evaluations, "
                         f"{per:,.0f} per program", value=f.work.transcendentals))
  if f.rates is not None and f.median_s is not None:
    evidence.append(fact("roofline", f.rates.verdict, True, f.rates.efficiency_pct))
  hot = max(trans, key=lambda e: e.weight)
  time = "time" if f.measured else "instructions executed (static: no GPU)"
  d = about("transcendental_bound", f"{'/'.join(names)} take{'s' if len(names) == 1 else ''} "
            f"{100 * share:.0f} % of the {time}",
            f, hot, evidence, share=share)
  return [Finding(d)]       # what to do about them: loop_invariant, where one is


def _work(e) -> bool:
  return e.primitive in transcendental_primitives() or \
      e.primitive in ("div", "mul", "add", "sub", "dot_general", "reduce_sum", "reduce_max",
                      "integer_pow")


def _in_machine_loop(f, e, loop) -> bool:
  """Whether the compiled code still evaluates `e` in every iteration: the loop is still a
  loop of the machine code (its other equations have instructions in one) and `e` runs in
  it (EqFacts.in_machine_loop). Without instruction counts (nothing compiled): no claim."""
  if not e.sass_instructions:
    return False
  varying = [x for x in f.children(loop.index) if not x.invariant and x.sass_instructions]
  return any(x.loop_instructions for x in varying) and e.in_machine_loop


@rule("loop_invariant")
def loop_invariant(f) -> list[Finding]:
  """A loop recomputes values that do not change in it: hoist them (kind d), one finding
  per loop, named after its heaviest such equation."""
  by_loop: dict[int, list] = {}
  for e in f.equations.values():
    loop = f.equations.get(e.parent) if e.parent is not None else None
    if e.invariant and _work(e) and loop is not None and isinstance(loop.trips, int) \
        and loop.trips >= 2 and e.weight > 0 and _in_machine_loop(f, e, loop):
      by_loop.setdefault(loop.index, []).append(e)
  out = []
  basis = "samples" if f.measured else "instructions executed (static: no GPU)"
  for index, es in by_loop.items():
    loop = f.equations[index]
    es.sort(key=lambda e: -e.weight)
    e, share = es[0], sum(x.weight for x in es)
    also = f" (with {', '.join(x.primitive for x in es[1:])})" if es[1:] else ""
    d = about("loop_invariant", f"{e.primitive} ({e.location}){also} computes the same value "
              f"in all {loop.trips} iterations of the loop ({loop.location})", f, e, [
                  fact("operands", "; ".join(f"`{x.text}`" for x in es[:3]) +
                       " read nothing the loop changes"),
                  fact("machine code", f"{sum(x.loop_instructions for x in es)} of their "
                       "instructions are inside a loop of the compiled code"),
                  fact("weight", f"{100 * share:.0f} % of the {basis}", f.measured, share)],
              share=share)
    est = estimate.capped(estimate.by_share(share, 1 - 1 / loop.trips,
                                            f"{e.primitive} ({e.location}){also}", f.measured), f)
    out.append(Finding(d, [edit("loop_invariant", f"hoist {e.primitive} ({e.location}) out of "
                                f"the loop ({loop.location})",
                                f"`{e.text.split(' = ', 1)[-1]}`{also} reads nothing the loop "
                                f"changes: compute it once before the loop ({loop.location}) "
                                f"instead of in each of its {loop.trips} iterations", e, f, est)]))
  return out


# a measured kernel below this share of its roofline bound is said to be, with where its
# time goes, even when no rule names a cause
BELOW_ROOF_PCT = 80.0


@rule("below_roof")
def below_roof(f) -> list[Finding]:
  eff = f.roof_efficiency
  if eff is None or eff >= BELOW_ROOF_PCT or not f.measured or f.rates.bound not in (
      "memory", "compute", "not memory"):
    return []
  hot = f.hot(3)
  where = ", ".join(f"[{e.index}] {e.primitive} ({e.location}) {100 * e.weight:.0f} %"
                    + (f" {e.stalls[0].words}" if e.stalls else "") for e in hot if e.weight > 0)
  stalls = ", ".join(f"{100 * s.share:.0f} % {s.words}" for s in f.stalls[:3])
  evidence = [fact("roofline", f.rates.verdict, True, eff),
              fact("where the time goes", where, True)]
  if stalls:
    evidence.append(fact("stall reasons", f"the kernel's samples: {stalls}", True))
  what = {"memory": "of the copy bandwidth", "compute": "of the matrix rate"}.get(
      f.rates.bound, "of the copy bandwidth (no dots)")
  return [Finding(about("below_roof", f"at {eff:.0f} % {what}: the time goes to {hot[0].primitive}"
                        f" ({hot[0].location})" if hot else f"at {eff:.0f} % {what}", f,
                        hot[0] if hot else None, evidence), _neighbours(f))]


def _neighbours(f) -> list:
  """The settings next to the kernel's, as what-ifs `advise` measures: with no cause
  named, no model says which way is faster, but trying costs a replay each."""
  none = (None, "no estimate: no rule names a cause; measured where tried")
  warps = [w for w in (f.num_warps // 2, f.num_warps * 2) if 1 <= w <= 16 and w != f.num_warps]
  out = [config("below_roof", {"num_warps": w}, f, "a neighbouring setting", none)
         for w in warps]
  if any(e.is_loop for e in f.equations.values()):       # stages pipeline a loop's loads
    out += [config("below_roof", {"num_stages": s}, f, "a neighbouring setting", none)
            for s in (f.num_stages - 1, f.num_stages + 1) if 1 <= s <= 5]
  return out


@rule("sampling_gaps")
def sampling_gaps(f) -> list[Finding]:
  run = f.sampling
  if run is None or not run.total_samples:
    return []
  dropped = run.dropped_samples / run.total_samples
  unranked = [ln for ln in f.lines if ln.rank_note]
  if dropped < DROPPED_SHARE and not unranked:
    return []
  evidence = [fact("sampling", f"CUPTI dropped {run.dropped_samples:,} of {run.total_samples:,} "
                   f"samples ({100 * dropped:.1f} %) at a period of {run.period_cycles} cycles, "
                   f"{run.launches} launch(es)", True, dropped)]
  for ln in unranked[:4]:
    evidence.append(fact("line", f"{ln.user_file.rsplit('/', 1)[-1]}:{ln.user_line} "
                         f"({ln.samples:,.0f} samples): {ln.rank_note}", True, ln.samples))
  text = (f"CUPTI dropped {100 * dropped:.1f} % of the samples: "
          + (f"{len(unranked)} line(s) cannot be ranked" if unranked else
             "the ranking rests on the samples kept"))
  return [Finding(about("sampling_gaps", text, f, evidence=evidence))]
