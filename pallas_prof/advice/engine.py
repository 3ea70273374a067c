"""diagnose(): a kernel's facts through every rule, the actions made concrete and ranked.

No advice when nothing is wrong: a kernel at AT_ROOF_PCT of its roofline bound gets the
one diagnosis "at its roof" and no actions.
"""
from __future__ import annotations

import dataclasses

from ..backend.options import TunedSettings
from . import autotuned, blockshape, loop_steps
from .dots import joint
from .facts import kernel_facts
from .rank import rank, summary
from .rules import RULES
from .schema import Action, KernelAdvice

NO_GPU = "not measured: no GPU"
NOT_TRIED = "not measured: `pallas-prof advise` tries it on the GPU"
NOT_CHECKED = "not measured: no GPU; `pallas-prof advise` checks it under the interpreter"
EDIT = "not measured: it changes your code (the saving is an estimate)"


def diagnose(kp, gk=None, device=None, ceilings=None, recipe=None, gpu: bool | None = None,
             rules=None, tuned=None) -> KernelAdvice:
  """The advice for one kernel. kp: profiler.schema.KernelProfile; gk: its GeneratedKernel
  (None: a profile read back from a report); recipe: its recorded pallas_call
  (recipes.py), for block-shape variants; tuned: the @pallas_prof.autotune call that
  lowered it (tune.blocks.TunedCall), for actions of kind b; gpu: whether a GPU could try
  the actions."""
  f = kernel_facts(kp, gk, device, ceilings)
  gpu = bool(device is not None) if gpu is None else gpu
  findings, notes = [], []
  for name, rule in (rules or RULES).items():
    try:
      findings += rule(f)
    except Exception as e:  # noqa: BLE001 - one broken rule must not cost the others
      notes.append(f"rule {name} failed: {type(e).__name__}: {e}")
  roof = [x for x in findings if x.diagnosis.rule == "at_roof"]
  if not roof and recipe is not None:
    from .split.actions import findings as split_findings   # loads JAX (a recipe means it ran)
    from .dots import layout   # lazy: loads JAX, as the split's does
    for name, finder in (("split reduction", split_findings), ("loop steps", loop_steps.findings),
                         ("K-major B", layout.findings)):
      findings += _contained(notes, name, lambda: finder(f, recipe, notes), [])
  if roof:
    findings = roof + [x for x in findings if x.diagnosis.rule == "sampling_gaps"]
  actions: list[Action] = []
  for finding in findings:
    for action in finding.actions if not roof else ():
      if action.kind == "c" and action.change.get("joint"):
        actions += _contained(notes, action.title, lambda: joint.resolve(
            action, f, recipe, _hot_dot(f), notes), [])
      elif action.kind == "c" and "grid" not in action.change and \
          "keyword" not in action.change:
        actions += autotuned.actions(action, tuned) if tuned is not None else []
        actions += _contained(notes, action.title, lambda: blockshape.resolve(
            action, f, recipe, _operand_index(gk, action), notes), [])
      else:
        actions.append(action)
  actions = rank([_with_status(a, gpu, f) for a in _unique(actions)])
  actions, notes = _worth_an_edit(actions, notes)
  advice = KernelAdvice(label=kp.label, name=kp.name, at_roof=bool(roof),
                        diagnoses=order_diagnoses([x.diagnosis for x in findings], actions),
                        actions=actions,
                        measured=NO_GPU if not gpu else NOT_TRIED,
                        notes=list(dict.fromkeys(notes)))
  advice.summary = summary(advice)
  return advice


def _contained(notes: list[str], what: str, make, default):
  """make(), or `default` with a note where it raised: a recipe the advice does not read
  right (a pytree it did not expect) costs that part of the advice, not the rest."""
  try:
    return make()
  except Exception as e:  # noqa: BLE001 - said in the notes, the rest of the advice stands
    notes.append(f"{what}: not offered, its advice failed: {type(e).__name__}: "
                 f"{str(e)[:200]}")
    return default


# An edit of the user's code (kind d, never tried) the work model expects to save less than
# this is not worth their time: it is said in the notes, not offered.
MIN_EDIT_ESTIMATE_PCT = 1.0


def _worth_an_edit(actions: list[Action], notes: list[str]) -> tuple[list[Action], list[str]]:
  small = lambda a: (a.kind == "d" and a.trial is None and a.estimate_pct is not None  # noqa: E731
                     and a.estimate_pct < MIN_EDIT_ESTIMATE_PCT)
  notes = notes + [f"not offered as an action: {a.title}: its estimated saving is under "
                   f"{MIN_EDIT_ESTIMATE_PCT:.0f} % ({a.estimate_basis})"
                   for a in actions if small(a)]
  return [a for a in actions if not small(a)], notes


# opt-ins that have not yet run on a GPU: advice says how to try them, it does not offer them
UNTESTED_OPT_INS = {"tma": "TMA is opt-in and has not yet run on a GPU; "
                           "`pallas-prof advise --try-tma` tries it"}


def untested_opt_ins_as_notes(advice: KernelAdvice, trying: bool) -> KernelAdvice:
  """The advice with each action that switches on an untested opt-in (TMA) made a note,
  unless the caller tries them (`advise --try-tma`): an action is a change to make, and
  nothing has shown that this one works."""
  if trying:
    return advice
  untested = lambda a: [why for key, why in UNTESTED_OPT_INS.items() if a.change.get(key)]
  actions = [a for a in advice.actions if not untested(a)]
  if len(actions) == len(advice.actions):
    return advice
  notes = list(advice.notes) + [
      f"not offered as an action: {a.title.split(' (', 1)[0]}: {'; '.join(untested(a))}"
      for a in advice.actions if untested(a)]
  out = dataclasses.replace(advice, actions=actions, notes=notes,
                            diagnoses=order_diagnoses(advice.diagnoses, actions))
  out.summary = summary(out)
  return out


# Among diagnoses with as much to gain, the more specific cause first: a setting or a line
# before what follows from it (one warp per row leaves CTA slots empty, too). A dot far from
# its rate follows from too few warps, an unpipelined loop, spills or small programs, so
# dot_rate (a joint search over them) comes after those; dot_precision names the user's line.
PRIORITY = ("at_roof", "dot_precision", "too_few_warps", "unpipelined_loop", "spills",
            "small_programs", "dot_rate", "uncoalesced", "loop_invariant", "small_loop_steps", "transcendental_bound",
            "rereads", "few_programs", "underfilled", "occupancy_limited", "launch_order",
            "tma_eligible", "below_roof", "sampling_gaps")


# Diagnoses under names of their own, not a rule of the table (the engine's need the
# recorded call), each placed just before a rule's: the split reduction's before
# few_programs (its cause), a loop's step (a fact, not a fault: advise measures its
# neighbours) before below_roof, a TF32 dot's B layout (a cause of its rate) before
# dot_rate, and unpipelined_loop's loop without a dot (loop_stages) after the grid's: where
# few programs each run a long loop, splitting the loop is the larger fix
BUILT_BEFORE = {"long_reduction": "few_programs", "loop_step": "below_roof",
                "dot_layout": "dot_rate", "unstaged_loop": "underfilled"}
ORDER = tuple(x for r in PRIORITY
              for x in [k for k, before in BUILT_BEFORE.items() if before == r] + [r])


def order_diagnoses(diagnoses, actions) -> list:
  """Diagnoses with the most to gain first (their best action's gain), then by ORDER."""
  def key(d):
    gains = [a.gain for a in actions if d.rule in a.rule.split(" and ")]
    rank = ORDER.index(d.rule) if d.rule in ORDER else len(ORDER)
    return (-max(gains, default=0.0), rank, -(d.share or 0.0))
  return sorted(diagnoses, key=key)


def _hot_dot(f):
  """The DotFacts of the kernel's largest dot (None: it has none)."""
  dots = [e.dot for e in f.equations.values() if e.dot is not None]
  return max(dots, key=lambda d: d.flops, default=None)


def _operand_index(gk, action: Action) -> int | None:
  """The position among the pallas_call's BlockSpecs (inputs, then outputs) of the operand
  an action names."""
  name = action.change.get("operand")
  if gk is None or name is None:
    return None
  ins, outs = gk.inputs, gk.outputs
  for i, p in enumerate(ins + outs):
    if p.label == name:
      return i
  return None


def _unique(actions: list[Action]) -> list[Action]:
  """One action per change (two rules may ask for the same num_warps): the one with the
  larger estimate, its rules named together."""
  out: dict = {}
  for a in actions:
    key = (a.kind, repr(sorted(a.change.items())), a.edit if a.kind == "d" else None)
    old = out.get(key)
    if old is None:
      out[key] = a
    else:
      best = a if (a.estimate_pct or -1) > (old.estimate_pct or -1) else old
      rules = " and ".join(dict.fromkeys([old.rule, a.rule]))
      out[key] = dataclasses.replace(best, rule=rules)
  return list(out.values())


def _with_status(a: Action, gpu: bool, f) -> Action:
  if a.kind == "d":
    return dataclasses.replace(a, status=EDIT, apply=a.edit)
  status = NOT_TRIED if gpu else (NOT_CHECKED if a.kind == "e" else NO_GPU)
  apply = compiler_params_line(a.change, f) if a.kind == "a" else a.edit
  return dataclasses.replace(a, status=status, apply=apply)


def compiler_params_line(change: dict, f) -> str:
  """The exact line to paste: the kernel's settings with the change."""
  now = TunedSettings(f.num_warps, f.num_stages, f.launch_group, f.tma,
                      f.persistent, f.loop_stages).changed(change)
  parts = [f"num_warps={now.num_warps}", f"num_stages={now.num_stages}"]
  if now.launch_group:
    parts.append(f"launch_group={now.launch_group}")
  if now.tma:
    parts.append("tma=True")
  if now.persistent:
    parts.append(f"persistent={now.persistent}")
  if now.loop_stages:
    parts.append(f"loop_stages={now.loop_stages}")
  return f"compiler_params=pallas_prof.CompilerParams({', '.join(parts)})"
