"""What a tuning tells its observers (pallas_prof/events.py's `tuned`): one record per
tuning, one entry per candidate, with the intervals that become spans
(instrument/observer.py: `tune <kernel>` with a `tune <kernel> <config>` child
per candidate). Plain data: the tuners fill it in, the observer only reads it.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CandidateRecord:
  label: str                    # the config, short: "8w 3s", "bm=64 bn=128"
  start_ns: int                 # its check and timing (a cached choice: none, 0)
  end_ns: int
  seconds: float | None         # median time; None when dropped or not timed
  error: str | None = None      # why it was dropped
  chosen: bool = False
  compile_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class TuningRecord:
  kind: str                     # "params" (num_warps, num_stages) or "blocks" (autotune)
  name: str                     # the kernel, or the tuned function
  start_ns: int
  end_ns: int
  default: str
  best: str
  from_cache: bool
  candidates: tuple[CandidateRecord, ...]
  source_key: str | None = None   # the kernel's GeneratedKernel.key (its lowering's span)
  clock: str | None = None        # what timed the candidates: "gpu", "wall", "replay"

  @property
  def speedup(self) -> float | None:
    times = {c.label: c.seconds for c in self.candidates}
    d, b = times.get(self.default), times.get(self.best)
    return d / b if d and b else None


def notify(record: TuningRecord) -> None:
  """Hands the record to whoever watches (nothing when nobody does)."""
  from ..backend import hooks
  obs = hooks.observer()
  if obs.enabled:
    obs.tuned(record)
