"""pallas_prof.advise() and the hooks the command line calls.

    advise(kernels=None, budget_s=60, ...)   profile this process's kernels (or use a given
                                             ProfileReport), diagnose each, and on a GPU try
                                             the actions of kinds a-c: [KernelAdvice]
    for_report(records, report, trials=...)  the same from a profile already taken
    tuning_entries(advice, records, report)  the kept kind-a actions as a tuning file's
                                             entries (PALLAS_PROF_TUNED applies them)
"""
from __future__ import annotations

import contextlib
import sys
import time
import warnings
from typing import Callable

from . import autotuned, recipes
from .engine import diagnose, order_diagnoses, untested_opt_ins_as_notes
from .schema import KernelAdvice
from .trials import lowering_checked, settings_of, try_actions
from ..backend import hooks, kernel_registry
from ..backend.artifacts import DEFAULT_TARGET
from ..tune.tuned_file import TuningEntry, TuningFile


def _progress(text: str) -> None:
  print(f"pallas-prof advise: {text}", file=sys.stderr, flush=True)


def advise(kernels=None, *, report=None, device: int = 0, trials: bool = True,
           budget_s: float = 60.0, progress: Callable[[str], None] | None = _progress,
           try_tma: bool = False, sample: bool = True, static: bool = True) -> list[KernelAdvice]:
  """Advice for the kernels this process lowered (or `kernels`: registry records or a
  name). On a GPU each kernel's actions of kinds a-c are tried within `budget_s`
  seconds (per kernel), with progress on stderr; without one the advice says
  "not measured: no GPU" and, with `static`, shows each variant compiled for sm_90."""
  if kernels is None:
    records = kernel_registry.kernels()
  elif isinstance(kernels, str):
    records = kernel_registry.find(kernels)
  else:
    records = list(kernels)
  if report is None:
    # lazy: the profiler package's __getattr__ would load all of the profiler and NumPy
    from ..profiler import profile
    report = profile(records, device=device, sample=sample)
  return for_report(records, report, trials=trials, device=device, budget_s=budget_s,
                    progress=progress, try_tma=try_tma, static=static)


def for_report(records, report, *, trials: bool = False, device: int = 0,
               budget_s: float = 60.0, progress=None, try_tma: bool = False,
               static: bool = False) -> list[KernelAdvice]:
  # lazy: at the top it would load numpy whenever this module is imported
  from ..tune.blocks import tuned_calls
  found, calls = recipes.recipes(), tuned_calls()
  out = []
  for rec in records:
    try:
      kp = report.kernel(rec.label)
    except KeyError:
      continue
    start_ns = time.time_ns()
    recipe = recipes.find(rec, found)
    try:
      advice = diagnose(kp, rec.generated, report.device, report.ceilings, recipe,
                        gpu=report.gpu_present, tuned=autotuned.find(rec, calls))
    except Exception as e:  # noqa: BLE001 - one kernel's failed advice costs no other's
      out.append(KernelAdvice(label=rec.label, name=kp.name, notes=[
          f"advice failed: {type(e).__name__}: {str(e)[:300]}"]))
      continue
    advice = untested_opt_ins_as_notes(advice, trying=try_tma)
    tried = trials and not advice.at_roof and (report.gpu_present or static)
    with _variants_quiet():
      if not tried and recipe is not None:
        try:
          advice = lowering_checked(advice, recipe)   # rank only the variants that lower
          advice.diagnoses = order_diagnoses(advice.diagnoses, advice.actions)
        except Exception as e:  # noqa: BLE001 - the diagnosis stands unchecked
          advice.notes.append(f"the variants' lowering was not checked: {type(e).__name__}: "
                              f"{str(e)[:300]}")
      if tried:
        try:
          advice = try_actions(advice, rec, recipe, device=device, gpu=report.gpu_present,
                               budget_s=budget_s, progress=progress, try_tma=try_tma,
                               static=static, tuned=autotuned.find(rec, calls))
          advice.diagnoses = order_diagnoses(advice.diagnoses, advice.actions)
        except Exception as e:  # noqa: BLE001 - the diagnosis stands without its trials
          advice.notes.append(f"trials failed: {type(e).__name__}: {str(e)[:300]}")
    obs = hooks.observer()
    if obs.enabled:
      obs.advised(advice, start_ns, time.time_ns())
    out.append(advice)
  return out


@contextlib.contextmanager
def _variants_quiet():
  """The variants' lowerings without the warnings about their outputs' coverage: the
  kernel's own were shown at the user's line when the script ran, and a variant's call is
  made by advise, so its warning would name advise's frame, not a line of the user's (a
  variant that leaves outputs unwritten gives outputs unequal to the kernel's, and its
  trial says so)."""
  # lazy: at the top it would load jax whenever this module is imported
  from ..backend.lowering.coverage import RevisitedOutputWarning, UncoveredOutputWarning
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", UncoveredOutputWarning)
    warnings.simplefilter("ignore", RevisitedOutputWarning)
    yield


def tuning_entries(advice: list[KernelAdvice], records, report) -> list:
  """Each kernel whose best measured action is of kind a, as `pallas-prof tune`'s tuning
  file names it (cli/tune.py: PALLAS_PROF_TUNED=file applies it)."""
  # lazy: at the top it would load numpy whenever this module is imported
  from ..tune.params import default_config
  by_label = {r.label: r for r in records}
  gpu = report.device.name if report.device is not None else None
  out = []
  for a in advice:
    rec = by_label.get(a.label)
    top = next((x for x in a.actions if x.trial is not None and x.trial.held), None)
    if rec is None or top is None or top.kind != "a" or gpu is None:
      continue
    target = tuple(rec.compiled.target if rec.compiled is not None else DEFAULT_TARGET)
    out.append(TuningEntry(rec.name, rec.generated.key, target, gpu,
                           settings_of(top.change, rec.generated),
                           default_config(rec.generated), code=rec.generated.code_key))
  return out


def write_tuning_file(path: str, entries: list) -> None:
  """The tuning file of these entries (tune/tuned_file.py's TuningEntry), whole or not at
  all."""
  TuningFile.of(entries).write(path)
