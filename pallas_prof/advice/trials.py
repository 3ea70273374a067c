"""Measured what-ifs: each action of kinds a-c lowered, compiled and replayed on the GPU;
kind e (a split reduction) built, checked and timed by advice/split/trial.py.

Kind a: the kernel lowered again with the action's compiler parameters (the registry
record's `relower`, as the tuner does); kind c: the recorded pallas_call traced again at
the action's block shape (blockshape.build). All variants are compiled at once by the
compile worker's children (backend.compile.compile_kernels) and replayed through the
tuner's replay_candidate (tune/params.py): the same seeded inputs as the original,
outputs compared (bit for bit for integers, within the dtype's rounding for floats),
then cold-timed. The original is timed before and after the variants: its drift and
the timings' spread are the noise a saving must beat to hold.

Without a GPU nothing is timed; `static=True` still compiles the variants for sm_90,
so an action shows its registers and spills.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Callable

from ..backend.options import TunedSettings
from . import autotuned, blockshape, loop_steps
from .rank import rank, summary
from .schema import Action, KernelAdvice, Trial
from .variants import checked_on_cpu, interpreted_steps, loaded_steps, resources, \
    trace_variant

TRIED = ("a", "c")


def _spread(times: list[float]) -> float:
  if len(times) < 3:
    return 0.0
  qs = statistics.quantiles(times, n=10)
  return (qs[-1] - qs[0]) / 2 / statistics.median(times)


def settings_of(change: dict, gk) -> TunedSettings:
  """The tuned settings an action of kind a asks for: the kernel's own with the change."""
  return gk.options.settings.changed(change)


def lower_variant(action: Action, rec, recipe):
  """The GeneratedKernel of an action's variant (kind a or c)."""
  if action.kind == "a":
    if rec.relower is None:
      raise ValueError("this kernel cannot be lowered again (no relower)")
    return rec.relower(**settings_of(action.change, rec.generated).fields())
  return _trace_block_variant(action, recipe)


def _trace_block_variant(action: Action, recipe, platform: str | None = None):
  """The variant's GeneratedKernel, traced and lowered for the default backend, or for
  `platform` ("cpu": the lowering to Triton alone, which compiles nothing)."""
  build = loop_steps.build if "keyword" in action.change else blockshape.build
  return trace_variant(build(recipe, action.change), recipe, platform)


def lowering_checked(advice: KernelAdvice, recipe) -> KernelAdvice:
  """The advice of a run that tries nothing (`pallas-prof run`) with each block-shape
  action (kind c) traced and lowered as `advise` does first, for the CPU (the lowering
  alone: no compile on any machine). One that does not lower is left out, with a note
  saying why: what the advice ranks is what can be applied."""
  kept, notes = [], list(advice.notes)
  for a in advice.actions:
    if a.kind == "c" and recipe is not None:
      try:
        _trace_block_variant(a, recipe, platform="cpu")
      except Exception as e:  # noqa: BLE001 - a variant that does not lower is left out
        first = (str(e).strip().splitlines() or [""])[0][:200]
        notes.append(f"left out [c] {a.title}: it does not lower ({type(e).__name__}: "
                     f"{first}); `pallas-prof advise` shows the variants it tries")
        continue
    kept.append(a)
  if len(kept) == len(advice.actions):
    return advice
  out = dataclasses.replace(advice, actions=kept, notes=notes)
  out.summary = summary(out)
  return out


def try_actions(advice: KernelAdvice, rec, recipe, *, device: int = 0, gpu: bool = True,
                budget_s: float = 60.0, progress: Callable[[str], None] | None = None,
                try_tma: bool = False, min_launches: int = 20, min_seconds: float = 0.05,
                static: bool = True, tuned=None) -> KernelAdvice:
  """The advice with its actions of kinds a-c tried (see the module docstring)."""
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ..backend.compiling.compile import DEFAULT_TARGET, compile_kernels
  say = progress or (lambda text: None)
  started = time.perf_counter()
  target = rec.compiled.target if rec.compiled is not None else DEFAULT_TARGET
  todo = [a for a in advice.actions if a.kind in TRIED]
  actions = {id(a): a for a in advice.actions}
  if not gpu and not static:
    return advice
  lowered = []
  for a in todo:
    if a.change.get("tma") and not try_tma and gpu:
      actions[id(a)] = dataclasses.replace(a, status="not tried: TMA is opt-in "
                                           "(`pallas-prof advise --try-tma`)")
      continue
    try:
      lowered.append((a, lower_variant(a, rec, recipe)))
    except Exception as e:  # noqa: BLE001 - a variant that does not lower is not tried
      actions[id(a)] = dataclasses.replace(a, trial=Trial(None, None, None, None, None,
                                           f"does not lower: {type(e).__name__}: {str(e)[:200]}"))
  if lowered:
    say(f"{advice.label}: compiling {len(lowered)} variant(s)")
  compiled = compile_kernels([gk for _, gk in lowered], tuple(target), need_cubin=True)
  ready = []
  for (a, _), ck in zip(lowered, compiled, strict=True):
    if isinstance(ck, Exception):
      actions[id(a)] = dataclasses.replace(a, trial=Trial(None, None, None, None, None,
                                           f"does not compile: {str(ck)[:200]}"))
    else:
      actions[id(a)] = dataclasses.replace(a, compiled=resources(ck))
      ready.append((id(a), ck))
  if not gpu and recipe is not None:      # a loop step, a block shape: checked under the
    for key, _ in ready:                  # interpreter where small enough
      a = actions[key]
      if "keyword" in a.change:
        actions[key] = loop_steps.checked_on_cpu(a, recipe, loaded_steps(rec.generated))
      elif "blocks" in a.change:
        actions[key] = checked_on_cpu(a, recipe, lambda a=a: blockshape.build(recipe, a.change),
                                      math.prod(a.change["grid"]) * program_trips(rec))
  if gpu and ready:
    ready = _spill_free_first(rec, ready)
    # keyed by the advice's own action (id(a) above): `actions` holds its latest copy
    measured = _measure(rec, [(actions[key], ck) for key, ck in ready], device,
                        budget_s - (time.perf_counter() - started), say, min_launches,
                        min_seconds)
    for (key, _), (a, trial) in zip(ready, measured, strict=True):
      actions[key] = dataclasses.replace(a, trial=trial, status="measured" if trial.error is None
                                         else a.status)
  for a in (x for x in advice.actions if x.kind == "b" and tuned is not None and gpu):
    left = budget_s - (time.perf_counter() - started)
    if left <= 1:
      actions[id(a)] = dataclasses.replace(a, status="not tried: the budget was spent")
      continue
    say(f"{advice.label}: trying {a.title} (whole calls, as autotune times them)")
    trial = autotuned.trial(a, tuned, left)
    actions[id(a)] = dataclasses.replace(a, trial=trial, status="measured" if trial.error is
                                         None else a.status)
  for a in (x for x in advice.actions if x.kind == "e" and recipe is not None):
    # loads JAX, which a recipe's run has loaded: a precision edit (advice/dots) or a split
    if "precision" in a.change:
      from .dots import precision as edit_trial  # lazy: loads jax and the compiler; only this edit's
    elif "layout" in a.change:
      from .dots import layout as edit_trial  # lazy: as above, the K-major B's trial
    else:
      from .split import trial as edit_trial  # lazy: as above, the split's trial
    more = {"tiles": _tiles(actions[id(x)] for x in advice.actions)} if "layout" in a.change \
        else {}
    actions[id(a)] = edit_trial.tried(a, recipe, gpu=gpu,
                                      budget_s=budget_s - (time.perf_counter() - started),
                                      say=say, **more)
  out = dataclasses.replace(advice, actions=rank([_finalise(actions.get(id(a), a))
                                                  for a in advice.actions]))
  if gpu:
    out.measured = "measured"
    held = [a for a in out.actions if a.trial is not None and a.trial.held]
    out.kept = held[0].apply if held else None
  out.summary = summary(out)
  return out


def _tiles(actions) -> list[Action]:
  """The block changes of kind c (a dot's tile, advice/dots/joint.py; a grid axis's block,
  blockshape.py, attention's block_q rebound with it; a loop's step, loop_steps.py) that
  built and ran, the fastest first, then those not timed: a K-major B's trial tries
  itself at each of them."""
  tiles = [a for a in actions if a.kind == "c" and ("blocks" in a.change or "keyword" in
                                                    a.change) and not (
      a.trial is not None and a.trial.error and a.trial.error.startswith("does not"))]
  timed = lambda a: a.trial is not None and a.trial.after_s is not None
  return sorted(tiles, key=lambda a: (not timed(a), a.trial.after_s if timed(a) else 0.0))


def program_trips(rec) -> int:
  """What one program of the recorded kernel costs the interpreter, in loop iterations
  (variants.interpreted_steps: its loops' trips and the bytes it loads): what a block
  variant, whose loops stay as they are, is charged per program of its grid."""
  return interpreted_steps(rec.generated)


def _spill_free_first(rec, ready: list) -> list:
  """Where the original spills, the variants whose compile spills nothing are timed first
  (in their ranked order): the compile has already told which fix removes the spills, and
  a budget spent compiling spilled variants leaves time for the first few trials only."""
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ..backend.compiling.compile import assemble_cubin
  if not assemble_cubin(rec.compiled).spills:     # the GPU path may have deferred the cubin
    return ready
  return sorted(ready, key=lambda item: bool(item[1].spills))     # stable: the ranking stays


def _finalise(a: Action) -> Action:
  if a.trial is not None and a.trial.error and not a.status.startswith("not tried"):
    return dataclasses.replace(a, status=f"tried: {a.trial.error}")
  return a


def _measure(rec, ready, device, budget_s, say, min_launches, min_seconds):
  # lazy: at the top it would load numpy whenever this module is imported
  from ..tune.params import replay_candidate
  aliases = tuple(tuple(x) for x in rec.input_output_aliases)
  started = time.perf_counter()
  say(f"{rec.label}: timing the original")
  reference, first, _ = replay_candidate(rec.compiled, None, aliases, (), device, min_launches,
                                         min_seconds)
  results = []
  for i, (a, ck) in enumerate(ready, 1):
    # the first (the best ranked) is tried whatever is left: compiling the variants may
    # have spent the share, and advice with nothing measured is the estimate again
    if i > 1 and time.perf_counter() - started > budget_s:
      results.append((a, Trial(None, None, None, None, None,
                               f"not tried: the advice's {budget_s:.0f} s budget was spent")))
      continue
    say(f"{rec.label}: trying {a.title} ({i}/{len(ready)})")
    began = time.perf_counter()
    try:
      _, times, differs = replay_candidate(ck, reference, aliases, (), device, min_launches,
                                           min_seconds)
    except Exception as e:  # noqa: BLE001 - a variant that fails to run is reported
      results.append((a, Trial(None, None, None, None, None,
                               f"failed to run: {type(e).__name__}: {str(e)[:200]}")))
      continue
    if differs:
      results.append((a, Trial(None, None, None, None, False, f"outputs differ: {differs}",
                               seconds=time.perf_counter() - began)))
      continue
    results.append((a, times, time.perf_counter() - began))
  say(f"{rec.label}: timing the original again")
  _, last, _ = replay_candidate(rec.compiled, None, aliases, (), device, min_launches, min_seconds)
  before = statistics.median(first + last)
  drift = abs(statistics.median(first) - statistics.median(last)) / before
  out = []
  for item in results:
    if isinstance(item[1], Trial):
      out.append(item)
      continue
    a, times, seconds = item
    after = statistics.median(times)
    noise = 100 * max(drift, _spread(first), _spread(last), _spread(times))
    out.append((a, Trial(before, after, 100 * (before - after) / before, noise, True,
                         launches=len(times), seconds=seconds)))
  return out
