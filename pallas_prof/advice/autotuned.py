"""Actions of kind b: a parameter the user's code exposes to `pallas_prof.autotune`.

When a kernel came from a function decorated with @pallas_prof.autotune (the call kept by
tune/blocks.py while the advice records a script: TunedCall), a block-shape intent
(table.blocks) becomes configs of that function with its integer parameters doubled
(larger, wider) or halved (smaller), each one the autotuner has not tried. On a GPU each
is tried as the autotuner tries its own: whole calls of the function on the call's
arguments, outputs compared with the chosen config's, timed in turns (tune/blocks.py
tune); the noise is the autotuner's own threshold (choice.MIN_GAIN), since it keeps
medians only.
"""
from __future__ import annotations

import dataclasses

from .schema import Action, Trial

MAX_PER_INTENT = 2


def find(rec, calls):
  """The autotuned call whose chosen config lowered this kernel, if any."""
  return next((c for c in reversed(calls) if rec.label in c.kernels), None)


def actions(intent: Action, call) -> list[Action]:
  goal = intent.change.get("block")
  tried = [dict(c) for c in call.configs]
  out = []
  for key, value in call.best.items():
    if not isinstance(value, int) or isinstance(value, bool) or key in ("num_warps",
                                                                           "num_stages"):
      continue
    new = value * 2 if goal in ("larger", "wider") else value // 2
    config = dict(call.best, **{key: new})
    if new < 1 or config in tried:
      continue
    out.append(dataclasses.replace(
        intent, kind="b", title=f"autotune {call.name}: {key} {value} -> {new} ({goal} blocks)",
        change={"autotune": call.name, "config": config},
        edit=f"add {config} to the configs of @pallas_prof.autotune on {call.name}"))
    if len(out) == MAX_PER_INTENT:
      break
  return out


def trial(action: Action, call, budget_s: float) -> Trial:
  # lazy: at the top it would load numpy whenever this module is imported
  from ..tune.blocks import tune
  from ..tune.choice import MIN_GAIN
  config = action.change["config"]
  tuning = tune(call.fn, [call.best, config], call.args, call.kwargs, budget_s=budget_s,
                name=call.name)
  chosen, variant = tuning.candidates[0], tuning.candidates[1]
  if variant.error or chosen.seconds is None or variant.seconds is None:
    differs = bool(variant.error and "differ" in variant.error)
    return Trial(chosen.seconds, None, None, None, False if differs else None,
                 variant.error or "not timed", seconds=tuning.tuning_seconds)
  saving = 100 * (chosen.seconds - variant.seconds) / chosen.seconds
  return Trial(chosen.seconds, variant.seconds, saving, 100 * MIN_GAIN, True,
               seconds=tuning.tuning_seconds)
