"""What a tuning tells its observers (pallas_prof/events.py's `tuned`): one record per
tuning, one entry per candidate, with the intervals that become spans
(instrument/observer.py: `tune <kernel>` with a `tune <kernel> <config>` child
per candidate). Plain data, defined with the other event payloads in
pallas_prof/event_payloads.py: the tuners fill it in, the observer only reads it.
"""
from __future__ import annotations

from ..backend import hooks
from ..event_payloads import CandidateRecord, TuningRecord  # noqa: F401 - the tuners' names


def notify(record: TuningRecord) -> None:
  """Hands the record to whoever watches (nothing when nobody does)."""
  obs = hooks.observer()
  if obs.enabled:
    obs.tuned(record)
