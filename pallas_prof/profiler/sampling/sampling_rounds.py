"""Enough PC samples to rank the lines: sample again, at a longer period, while CUPTI
drops samples; then say which lines the samples kept cannot rank.

CUPTI drops samples when its hardware buffer fills faster than it is drained: a short
kernel of many CTAs gets a short sampling period (pcsampling.period_log2 keeps it under
a CTA's life), and at the shortest periods most samples of a launch can be lost. Each
round here is one sampling child (pcsampling.sample); while the dropped share is
DROPPED_MAX or more, the next round takes a period long enough for the rate the buffer
kept up with (the kept share of the samples), one step longer for margin, and as many
more launches as keep the count near pcsampling.SAMPLES_WANTED. At most MAX_ROUNDS
rounds; the last is the one the weights come from, and every round is listed.

Ranking (annotate): lines are ordered by their charged weight in samples. Two lines
next in that order are told apart only when their difference is more than twice the
sampling noise of the difference (sqrt of their sum: counts of a Poisson process) plus
the samples CUPTI dropped (each could have belonged to either). A line not told apart
from its neighbour, or with fewer than MIN_SAMPLES, gets a rank_note saying why.
"""
from __future__ import annotations

import math
from typing import Callable

DROPPED_MAX = 0.01
MAX_ROUNDS = 3
MIN_SAMPLES = 20


def dropped_share(data: dict) -> float:
  total = int(data.get("total_samples", 0) or 0)
  return int(data.get("dropped_samples", 0) or 0) / total if total else 0.0


def next_period(data: dict) -> int | None:
  """The period (log2) for the next round, or None: no longer period to try."""
  n = int(data.get("period_log2", 0))
  kept = 1.0 - dropped_share(data)
  step = math.ceil(math.log2(1.0 / max(kept, 1e-6))) + 1
  return n + step if n + step <= 24 else None


def sample_until_kept(sample: Callable[..., dict], **kwargs) -> tuple[dict, list[dict]]:
  """(the last round's data, every round as {period_log2, launches, total, dropped}).
  `sample` is pcsampling.sample (its keyword arguments in kwargs)."""
  data = sample(**kwargs)
  rounds = [_round(data)]
  while dropped_share(data) >= DROPPED_MAX and len(rounds) < MAX_ROUNDS:
    period = next_period(data)
    if period is None:
      break
    data = sample(**kwargs, period=period)
    rounds.append(_round(data))
  return data, rounds


def _round(data: dict) -> dict:
  return {"period_log2": int(data.get("period_log2", 0)), "launches": int(data.get("launches", 0)),
          "total_samples": int(data.get("total_samples", 0) or 0),
          "dropped_samples": int(data.get("dropped_samples", 0) or 0)}


def rounds_text(rounds: list[dict]) -> str:
  """'sampled 2 times: 2^5 cycles dropped 72.6 %, 2^8 cycles dropped 0.4 %'."""
  parts = [f"2^{r['period_log2']} cycles, {r['launches']} launches: dropped "
           f"{100 * r['dropped_samples'] / max(r['total_samples'], 1):.1f} %" for r in rounds]
  return f"sampled {len(rounds)} times ({'; '.join(parts)})"


def annotate(attribution, dropped: int = 0) -> None:
  """Sets each LineWeight's rank_note where the samples cannot place it (see above)."""
  lines = sorted(attribution.lines, key=lambda ln: -ln.weight)
  total = attribution.total or 0.0
  counts = [ln.weight * total for ln in lines]
  for i, ln in enumerate(lines):
    ln.rank_note = None
    if counts[i] < MIN_SAMPLES:
      ln.rank_note = (f"too few samples to rank ({counts[i]:,.0f} charged, fewer than "
                      f"{MIN_SAMPLES})")
      continue
    ties = []
    for j in (i - 1, i + 1):
      if 0 <= j < len(lines):
        gap = abs(counts[i] - counts[j])
        margin = 2 * math.sqrt(counts[i] + counts[j]) + dropped
        if gap <= margin:
          ties.append((lines[j], gap, margin))
    if ties:
      other, gap, margin = ties[0]
      why = (f"{dropped:,} samples dropped by CUPTI could belong to either"
             if dropped and dropped >= gap / 2 else "within the sampling noise")
      ln.rank_note = (f"not told apart from {other.user_file.rsplit('/', 1)[-1]}:"
                      f"{other.user_line}: {gap:,.0f} samples apart, {margin:,.0f} needed "
                      f"({why})")
