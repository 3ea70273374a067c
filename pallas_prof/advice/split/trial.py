"""Kind e tried: the split variant built, checked against the original, and timed.

On a GPU: whole calls, as the autotuner times its configs (tune/blocks.py tune): the
original pallas_call and the variant (its second pass, XLA's sum, included) jitted, run on
the same seeded inputs, outputs compared (tune/choice.same_outputs), then timed in turns;
the noise is the autotuner's threshold (choice.MIN_GAIN). On a CPU: the variant traced
and lowered to Triton (a variant that does not lower is said so), and run beside the
original under Triton's interpreter where the loop's iterations are few enough for it
(INTERPRETED_MOST), outputs compared: "not measured: no GPU".
"""
from __future__ import annotations

import dataclasses
import math

import jax

from ...backend.compiling.compile import DEFAULT_TARGET, compile_kernels
from ...tune.blocks import tune
from ...tune.choice import MIN_GAIN
from ..schema import Action, Trial
from ..variants import INTERPRETED_STEP_BYTES, checked_on_cpu, not_interpreted, resources, \
    trace_variant
from ..variants import PATCH
from . import defer_source
from .defer import deferrals
from .source import jaxpr_change, split_files
from .source_file import SourceRefused, diff_of
from .staged import Staging, settings_edit, staged_recipe, staging
from .variant import Widening, build, inputs, original, pattern_of, widened

CPU_EQUAL = ("not measured: no GPU; outputs equal under the interpreter (to the tuner's "
             "tolerance: the adds reassociated)")


def _failed(a: Action, why: str, equal: bool | None = None) -> Action:
  return dataclasses.replace(a, trial=Trial(None, None, None, None, equal, why))


def tried(a: Action, recipe, *, gpu: bool, budget_s: float, say=lambda text: None) -> Action:
  """The action with its variant checked (and, on a GPU, timed)."""
  s = int(a.change["split"])
  try:
    shaped = recipe
    for w in widens(a.change):
      shaped = widened(shaped, w)
    k, p = pattern_of(shaped)
    fn = build(shaped, k, p, s)
    gk = trace_variant(fn, recipe)
  except Exception as e:  # noqa: BLE001 - a variant that does not build or lower is said so
    return _failed(a, f"does not lower: {type(e).__name__}: {str(e)[:200]}")
  if not gpu:                         # compiled for sm_90, as kinds a and c are on a CPU
    (ck,) = compile_kernels([gk], tuple(DEFAULT_TARGET), need_cubin=True)
    if isinstance(ck, Exception):
      return _failed(a, f"does not compile: {str(ck)[:200]}")
    a = dataclasses.replace(a, compiled=resources(ck))
  if gpu:
    say(f"{recipe.name}: trying {a.title} (whole calls, as autotune times them)")
    out = fastest(a, recipe, _twins(fn, gk, recipe, shaped, k, p, s), budget_s,
                  "split reduction")
    return with_kept_diff(out, recipe, shaped, k, p) \
        if out.change.get("deferred") or out.change.get("staged") else out
  iterations = math.prod(k.grid) * p.trip * (1 + _loop_loads(gk) // INTERPRETED_STEP_BYTES)
  if not_interpreted(iterations, recipe) is None:
    say(f"{recipe.name}: checking {a.title} under the interpreter")
  return checked_on_cpu(a, recipe, lambda: fn, iterations, equal=CPU_EQUAL)


DEFERRED = "the row sums deferred to after the loop (each iteration adds its tile unreduced)"


def _twins(fn, gk, recipe, shaped, k, p, s: int) -> list:
  """The variants a GPU trial times, each `(fn, change, words)`: the split as written; with
  its rows' sums deferred (defer.py), where they can be; and each of those with its loop's
  loads copied ahead (staged.py), where a loop of the kernel takes it."""
  out = [(fn, {}, "")]
  try:
    later = build(shaped, k, p, s, deferred=True)
  except Exception:  # noqa: BLE001 - the split as written is tried without it
    later = None
  if later is not None and later.deferred:
    out.append((later, {"deferred": True}, DEFERRED))
  settings = staging(gk)
  if settings is None:
    return out
  for _, change, words in list(out):
    try:
      twin = build(staged_recipe(shaped, settings), k, p, s,
                   deferred=change.get("deferred", False))
      if not trace_variant(twin, recipe).loop_stages:
        continue                        # no loop took it: the same kernel again
    except Exception:  # noqa: BLE001 - the twins without it are tried alone
      continue
    out.append((twin, {**change, "staged": settings.change},
                "; ".join(w for w in (words, settings.words) if w)))
  return out


def with_kept_diff(a: Action, recipe, shaped, k, p) -> Action:
  """The action kept with its rows' sums deferred (defer.py) and/or its loop's loads copied
  ahead (staged.py): its diff (against the user's `recipe`; `shaped`, k and p: the variant's
  recipe, kernel and pattern) and edit say so."""
  found = deferrals(k.jaxpr, p) if a.change.get("deferred") else ()
  settings = Staging(**a.change["staged"]) if a.change.get("staged") else None
  s, axis, ws = int(a.change["split"]), int(a.change["axis"]), widens(a.change)
  said = "; ".join(w for w in (DEFERRED if found else "",
                               settings.words if settings else "") if w)
  try:
    files, kfile = split_files(recipe, p, s, axis, ws or None)
    if found:
      defer_source.edit_kernel(kfile, recipe, found, ws or None)
    if settings is not None:
      (call_file,) = [f for f in files if f.path == recipe.call_file]
      settings_edit(call_file, recipe, settings)
    diff = diff_of(files)
    edit = (f"at {p.line}: apply the diff ({PATCH}): the split, {said}" +
            (f"; at the call, compiler_params={settings.params_source('pallas_prof')}"
             if settings else "") +
            "".join(f"; it also rebinds {w.name} at the call ({w.words})" for w in ws))
  except SourceRefused as e:
    diff = None
    edit = (f"at {p.line}: no diff ({e}); the variant's change: {jaxpr_change(shaped, k, p, s)}"
            + ("; and each sum carry a zero tile of its rows, the rows summed after"
               if found else "")
            + (f"; and compiler_params={settings.params_source('pallas_prof')} at the call"
               if settings else ""))
  return dataclasses.replace(a, diff=diff, edit=edit)


def widens(change: dict) -> list[Widening]:
  """The Widenings an action's change applies in turn (one, several, or none)."""
  w = change.get("widen")
  return [Widening(**x) for x in (w if isinstance(w, list) else [w] if w else [])]


def _loop_loads(gk) -> int:
  """Bytes one iteration of the variant's loops loads (the equations inside a loop, once
  each): the interpreter's loads make a dot's iterations dearer than a column sum's."""
  parents = {e.parent for e in gk.eqns}      # a loop's record sums its body's: left out
  return sum(e.bytes_read for e in gk.eqns if e.parent is not None and e.index not in parents)


def fastest(a: Action, recipe, variants: list, budget_s: float, what: str) -> Action:
  """Several variants of one edit, each `(fn, change, words)`, timed in whole calls in the
  same turns as the original, as the autotuner times configs (tune/blocks.tune: outputs
  compared first, to its tolerance): the action keeps the fastest that ran with equal outputs,
  its change merged into the action's and its words added to the title."""
  calls = [jax.jit(original(recipe))] + [jax.jit(fn) for fn, _, _ in variants]
  try:
    tuning = tune(lambda *args, v: calls[v](*args), [{"v": v} for v in range(len(calls))],
                  tuple(inputs(recipe)), {}, budget_s=max(budget_s, 1.0),
                  name=f"{recipe.name} {what}")
  except Exception as e:  # noqa: BLE001 - the original itself failed: said, not raised
    return _failed(a, f"failed to run: {type(e).__name__}: {str(e)[:200]}")
  before, ran = tuning.candidates[0], tuning.candidates[1:]
  timed = [(c.seconds, i) for i, c in enumerate(ran) if c.seconds is not None and not c.error]
  if before.seconds is None or not timed:
    after = ran[0]
    differs = bool(after.error and "differ" in after.error)
    return dataclasses.replace(a, trial=Trial(before.seconds, None, None, None,
                                              False if differs else None,
                                              after.error or "not timed",
                                              seconds=tuning.tuning_seconds))
  seconds, best = min(timed)
  _, change, words = variants[best]
  if len(variants) > 1:             # what each variant gave, for the report
    change = {**change, "variants": [
        {"variant": w or "as given", "after_s": c.seconds, "error": c.error}
        for (_, _, w), c in zip(variants, ran, strict=True)]}
  if change:
    a = dataclasses.replace(a, change={**a.change, **change},
                            title=f"{a.title}; {words}" if words else a.title)
  saving = 100 * (before.seconds - seconds) / before.seconds
  return dataclasses.replace(a, status="measured", trial=Trial(
      before.seconds, seconds, saving, 100 * MIN_GAIN, True,
      seconds=tuning.tuning_seconds))
