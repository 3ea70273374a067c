"""Ranking actions by expected gain, and the advice's one-line summary.

An action's gain is its measured saving when a trial timed it with equal outputs and
faster by more than the noise (0 when it did not hold), else the work model's
estimate. Ties (and actions with neither) keep the order: measured before estimated,
then kinds a, b, c, e, d (what pallas-prof can apply itself first, what it checked before
what it could not).
"""
from __future__ import annotations

from .schema import Action, KernelAdvice

_KIND_ORDER = {"a": 0, "b": 1, "c": 2, "e": 3, "d": 4}


def rank(actions: list[Action]) -> list[Action]:
  def key(a: Action):
    failed = a.trial is not None and not a.trial.held
    return (failed, -a.gain, a.trial is None, _KIND_ORDER.get(a.kind, 9))
  return sorted(actions, key=key)


def saving_text(a: Action) -> str:
  """'-44 % (335.9 -> 188.3 us, noise 1.2 %), outputs equal', or the estimate, or why not."""
  t = a.trial
  if t is not None:
    if t.error:
      return f"not kept: {t.error}"
    if t.saving_pct is None:
      return "not timed"
    if a.accuracy is not None:        # a precision edit: its outputs differ by design
      return (f"{-t.saving_pct:+.0f} % ({t.before_s * 1e6:.1f} -> {t.after_s * 1e6:.1f} us, "
              f"noise {t.noise_pct:.1f} %); {a.accuracy}; never kept for you: edit your line")
    text = (f"{-t.saving_pct:+.0f} % ({t.before_s * 1e6:.1f} -> {t.after_s * 1e6:.1f} us, "
            f"noise {t.noise_pct:.1f} %), outputs {'equal' if t.outputs_equal else 'DIFFER'}")
    if t.held:
      return text
    if t.slower:
      return text + ": slower, not kept"
    return text + ": within the noise, not kept"
  if a.estimate_pct is not None:
    text = f"estimate: -{a.estimate_pct:.0f} % ({a.estimate_basis})"
    if a.status and "under the interpreter" in a.status:     # a CPU's check of the variant
      text += "; " + a.status.split("; ", 1)[-1]
    return text
  return a.status + (f"; {a.accuracy}" if a.accuracy else "")


def summary(advice: KernelAdvice) -> str:
  if advice.at_roof:
    return advice.diagnoses[0].text if advice.diagnoses else "at its roof"
  if not advice.diagnoses:
    return "no diagnosis: no rule found a cause"
  d = advice.diagnoses[0]
  top = advice.actions[0] if advice.actions else None
  where = f" ({d.location})" if d.location else ""
  if top is None:
    return f"{d.text}{where}"
  return f"{d.text}{where}; try: {top.title} [{top.kind}] {saving_text(top)}"
