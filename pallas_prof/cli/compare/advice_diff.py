"""`pallas-prof diff A B`: whether an action the advice of run A gave was applied in run B,
and whether its saving held.

An action counts as applied when B's kernel (same label, else the one kernel of the same
name) has what the action changes: its num_warps / num_stages (kind a), its grid (kind c,
a block shape). Held: B's median is below A's by at least the saving A measured (or
estimated), less the noise A measured and HOLD_POINTS."""
from __future__ import annotations

HOLD_POINTS = 10.0     # a saving within this many points of the promised one held


def _applied(action, kb) -> bool:
  change = action.change or {}
  if action.kind == "a":
    keys = [k for k in ("num_warps", "num_stages") if k in change]
    return bool(keys) and all(getattr(kb, k, None) == change[k] for k in keys)
  if action.kind in ("c", "d") and change.get("grid"):
    return list(kb.grid) == list(change["grid"])
  return False


def _median(report, label):
  kp = report.kernel_profile(label)
  try:
    return kp.runtime.median_s if kp is not None and kp.runtime is not None else None
  except ValueError:
    return None


def lines(run_a, run_b) -> list[str]:
  """One line per action of A's advice that B applied: promised, got, held or not."""
  out = []
  b_kernels = list(run_b.kernels)
  for advice in run_a.advice:
    kb = next((k for k in b_kernels if k.label == advice.label), None)
    if kb is None:
      same = [k for k in b_kernels if k.name == advice.name]
      kb = same[0] if len(same) == 1 else None
    if kb is None:
      continue
    for action in advice.actions:
      if not _applied(action, kb):
        continue
      before, after = _median(run_a, advice.label), _median(run_b, kb.label)
      promised = (action.trial.saving_pct if action.trial is not None and
                  action.trial.saving_pct is not None else action.estimate_pct)
      what = "measured" if action.trial is not None and action.trial.saving_pct is not None \
          else "estimated"
      head = f"advice applied to {kb.label}: [{action.kind}] {action.title}"
      if before is None or after is None:
        out.append(f"{head}: no runtimes in both runs to say whether it held")
        continue
      got = 100 * (before - after) / before
      if promised is None:
        out.append(f"{head}: {-got:+.1f} % ({before * 1e6:.1f} -> {after * 1e6:.1f} us); "
                   "no saving was promised")
        continue
      noise = action.trial.noise_pct if action.trial is not None and \
          action.trial.noise_pct is not None else 0.0
      held = got >= promised - max(noise, HOLD_POINTS)
      out.append(f"{head}: {what} {-promised:+.0f} %, got {-got:+.1f} % "
                 f"({before * 1e6:.1f} -> {after * 1e6:.1f} us): "
                 + ("held" if held else "DID NOT HOLD"))
  return out
