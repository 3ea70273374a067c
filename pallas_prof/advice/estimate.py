"""Savings the work model expects: estimates, each with the words that say how it was made.

Two kinds, both bounded by what the work model allows:
  to the roof     the kernel at REACH of its roofline bound (the larger of its bytes over
                  the copy bandwidth and its dot FLOPs over the matrix rate): needs the
                  measured time, so there is none on a CPU
  by a share      an equation's share of the time (PC samples on a GPU, instructions
                  without one) times the part of its work a change removes (a hoisted
                  loop-invariant function keeps 1 of `trips` evaluations)
  spread out      the same work over more, shorter programs: the waves of programs the
                  GPU's SMs run before and after (smaller blocks), each program's start kept
An estimate is never a measurement: the report says "estimate" beside it.
"""
from __future__ import annotations

import math

REACH = 0.9      # a fixed kernel is expected at this fraction of its roofline bound, not at it


def roof_seconds(f) -> float | None:
  """The time the kernel's work takes at its roofline bound (None without ceilings or time)."""
  r = f.rates
  if r is None or f.median_s is None or r.efficiency_pct is None:
    return None
  return f.median_s * r.efficiency_pct / 100.0


def to_roof(f) -> tuple[float | None, str]:
  """(saving %, basis) if the kernel reached REACH of its roofline bound."""
  t_roof = roof_seconds(f)
  if f.rates is not None and f.rates.bound not in ("memory", "compute"):
    return None, f"no estimate: no roofline bound for it ({f.rates.bound})"
  if t_roof is None:
    return None, ("no estimate without a measured time and ceilings" if f.median_s is None
                  else "no estimate: no roofline bound (no ceilings measured)")
  target = t_roof / REACH
  saving = max(0.0, 100.0 * (1.0 - target / f.median_s))
  return saving, (f"to {100 * REACH:.0f} % of its {f.rates.bound}-bound roofline: "
                  f"{f.median_s * 1e6:.1f} -> {target * 1e6:.1f} us")


def by_share(share: float | None, removed: float, what: str, measured: bool
             ) -> tuple[float | None, str]:
  """(saving %, basis): `share` of the time times the `removed` fraction of its work."""
  if share is None:
    return None, "no estimate: no weight for it"
  basis = "of the samples" if measured else "of the instructions executed (static: no GPU)"
  return 100.0 * share * removed, f"{100 * share:.0f} % {basis} at {what}, {100 * removed:.0f} % of it removed"


def capped(estimate: tuple[float | None, str], f) -> tuple[float | None, str]:
  """An estimate no larger than what reaching the roofline would save."""
  value, basis = estimate
  roof, _ = to_roof(f)
  if value is None or roof is None or value <= roof:
    return value, basis
  return roof, basis + f"; capped at {roof:.0f} % (the roofline's bound)"


def programs_words(n: int) -> str:
  return f"{n:,} program{'' if n == 1 else 's'}"


def spread(programs: int, sms: int, factor: int, in_floors: float | None = None
           ) -> tuple[float, str]:
  """(saving %, basis) of splitting each of `programs` programs into `factor` programs
  with 1/factor of the work: the SMs run them in waves of `sms`. Each program's start
  stays: `in_floors` is a program's work in floors (floors.py), and a program at its floor
  spends as long starting as working, so a program takes 1 + in_floors of those times
  before and 1 + in_floors / factor after. Without it (no work model) the start is taken
  as free: an upper bound."""
  before = math.ceil(programs / sms)
  after = math.ceil(programs * factor / sms)
  start = 0.0 if in_floors is None else 1.0
  work = 1.0 if in_floors is None else in_floors
  saving = max(0.0, 100.0 * (1 - after * (start + work / factor) / (before * (start + work))))
  waves = lambda n: f"{n} wave{'' if n == 1 else 's'}"
  how = ("(an upper bound: starting a program taken as free)" if in_floors is None else
         "with each program's start, about the time of the work at its floor, kept")
  return saving, (f"the work of {programs_words(programs)} split {factor}x over {sms} SMs: "
                  f"{waves(after)} of programs with 1/{factor} of the work instead of "
                  f"{waves(before)}, "
                  + how)
