"""The split reduction as advice: a diagnosis and actions of kind e (schema.KINDS).

Offered where the kernel's recorded pallas_call fits the pattern (pattern.py) and its grid
leaves the GPU short of programs (variant.splits gives an S): one action per S, each with
the diff against the user's file (source.py) or, where none can be written, the jaxpr-level
change and why. trials.py checks them: on a GPU whole calls, original against variant, on
the same seeded inputs, outputs compared and timed; on a CPU the variant is lowered and,
where the interpreter can run it in a few seconds, its outputs compared ("not measured:
no GPU").
"""
from __future__ import annotations

import math

from .. import estimate
from ..floors import program_work
from ..loop_steps import larger, loads_per_iteration, steps
from ..rules.table import Finding, about, fact
from ..schema import Action
from ..variants import PATCH
from .defer import deferrals
from .pattern import NotSplittable
from .source import jaxpr_change, unified_diff
from .source_file import SourceRefused
from .variant import Widening, chunk, pattern_of, splits, widened, widenings

RULE = "long_reduction"
# what a GPU trial adds to every split (staged.py, trial.py's _twins)
STAGED_WORDS = ("; on a GPU it is also timed with the loop's loads copied ahead "
                "(pallas-prof's CompilerParams(loop_stages=3)), kept with its own diff where "
                "faster")


def findings(f, recipe, notes: list[str]) -> list[Finding]:
  """The diagnosis and its kind e actions, or none (with a note where the kernel has a
  loop that was refused, saying why)."""
  if recipe is None:
    return []
  try:
    k, p = pattern_of(recipe)
  except NotSplittable as e:
    if "no loop" not in str(e):
      notes.append(f"no split reduction: {e}")
    return []
  except Exception as e:  # noqa: BLE001 - the rest of the advice stands without it
    notes.append(f"no split reduction: the kernel could not be traced again "
                 f"({type(e).__name__}: {str(e)[:200]})")
    return []
  sizes = splits(f.programs, p.trip, f.sms)
  if not sizes:
    return []
  grid = "x".join(map(str, k.grid)) or "()"
  d = about(RULE, f"{estimate.programs_words(f.programs)} each sum all {p.trip} iterations of "
            f"the loop at {p.line}, one program per output block", f, share=1.0, evidence=[
                fact("grid", f"grid {grid} = {f.programs:,} programs on {f.sms} SMs"
                     f"{' (assumed)' if f.sms_assumed else ''}; each runs the loop's "
                     f"{p.trip} iterations alone", value=f.programs),
                fact("pattern", ("the outputs are zeroed, then added to in the loop and "
                                 "touched by nothing else" if p.in_place else
                                 "the loop's carries are sums from zero, stored once after it")
                     + ": the loop can be cut into chunks run by more programs, their "
                     "partial sums added by a second pass")])
  work = program_work(f).in_floors
  actions = []
  for s in sizes:
    value, basis = estimate.capped(estimate.spread(f.programs, f.sms, s, work), f)
    axis = len(k.grid)
    try:
      diff, why = unified_diff(recipe, p, s, axis), None
    except SourceRefused as e:
      diff, why = None, str(e)
    title = (f"split the loop at {p.line} over {s} programs per block: grid {grid} -> "
             f"{'x'.join(map(str, (*k.grid, s)))}, {chunk(p.trip, s)} iterations each, "
             "partials summed after the call")
    edit = (f"at {p.line}: apply the diff ({PATCH})" if diff else
            f"at {p.line}: no diff ({why}); the variant's change: {jaxpr_change(recipe, k, p, s)}")
    edit += _deferral_words(k, p) + STAGED_WORDS
    actions.append(Action("e", title, RULE, {"split": s, "axis": axis}, edit=edit,
                          user_file=p.file, user_line=p.lineno, estimate_pct=value,
                          estimate_basis=basis, diff=diff))
  actions += _with_wider_blocks(f, recipe, p, notes)
  actions += _with_a_larger_step(f, recipe, p, notes)
  actions += _with_wider_blocks_and_a_larger_step(f, recipe, p, notes)
  return [Finding(d, actions)]


def _deferral_words(k, p) -> str:
  """What a GPU trial adds to the split where its row sums can be deferred (defer.py)."""
  if not deferrals(k.jaxpr, p):
    return ""
  return ("; on a GPU it is also timed with the loop's row sums deferred to after the loop, "
          "kept with its own diff where faster")


def _with_a_larger_step(f, recipe, p, notes: list[str]) -> list[Action]:
  """The split again, with the loop's step (a keyword of the kernel, loop_steps.py) at the
  largest value loop_steps tries: each program's chunk in fewer, larger loads. The norms'
  dw/db loops load 1 KiB an iteration: split alone, each program still waits on small loads."""
  w = _larger_step(f, recipe)
  if w is None:
    return []
  return _split_actions(f, recipe, p, w, notes, "a larger step changes how the memory is "
                        "read, which the work model does not price; measured where tried",
                        last=True)


def _larger_step(f, recipe) -> Widening | None:
  """The loop's step (a keyword of the kernel) at the largest value loop_steps tries."""
  up = [s for s in steps(recipe, larger(loads_per_iteration(f))) if s.new > s.value]
  if not up:
    return None
  top = max(up, key=lambda s: s.new)
  return Widening(top.name, top.value, top.new, None, 0)


def _with_wider_blocks_and_a_larger_step(f, recipe, p, notes: list[str]) -> list[Action]:
  """The split with both: each wider block (fewer, wider programs) and the loop's larger
  step (each program's chunk in fewer, larger loads), which neither alone gives."""
  step = _larger_step(f, recipe)
  if step is None:
    return []
  out = []
  for w in widenings(recipe):
    out += _split_actions(f, recipe, p, [w, step], notes, "wider blocks and a larger step "
                          "change how the memory is read, which the work model does not "
                          "price; measured where tried", last=True)
  return out


def _with_wider_blocks(f, recipe, p, notes: list[str]) -> list[Action]:
  """The split again, with the block parameter the grid is computed from made larger
  (variant.widenings): fewer, wider programs, each split over more of the loop."""
  out = []
  for w in widenings(recipe):
    out += _split_actions(f, recipe, p, w, notes, "wider blocks change how the memory is "
                          "read, which the work model does not price; measured where tried")
  return out


def _split_actions(f, recipe, p, w, notes: list[str], basis: str,
                   last: bool = False) -> list[Action]:
  """The split of the recipe with `w` applied (a Widening, or several in turn: wider blocks
  then a larger step); one action: its first S, or its last."""
  ws = list(w) if isinstance(w, (list, tuple)) else [w]
  words = " and ".join(x.words for x in ws)
  try:
    shaped = recipe
    for x in ws:
      shaped = widened(shaped, x)
    k, pw = pattern_of(shaped)
  except Exception as e:  # noqa: BLE001 - the plain split stands without it
    notes.append(f"no split with {words}: {type(e).__name__}: {str(e)[:160]}")
    return []
  sizes = splits(math.prod(k.grid), pw.trip, f.sms)
  if not sizes:
    return []
  s, axis = sizes[-1 if last else 0], len(k.grid)
  grid = "x".join(map(str, (*k.grid, s)))
  try:
    diff, why = unified_diff(recipe, pw, s, axis, ws), None
  except SourceRefused as e:
    diff, why = None, str(e)
  where = f"at {pw.line}: "
  regrid = "".join(f", grid axis {x.axis} {x.extent} / {x.new}" for x in ws
                   if x.axis is not None)
  names = " and ".join(x.name for x in ws)
  edit = (where + f"apply the diff ({PATCH}): it also rebinds "
          f"{names} at the call ({words})" if diff else where + f"no diff ({why}); the "
          f"variant's change: {words}{regrid}; " + jaxpr_change(shaped, k, pw, s))
  edit += _deferral_words(k, pw) + STAGED_WORDS
  title = (f"split the loop at {p.line} over {s} programs per block, with {words}: grid "
           f"{'x'.join(map(str, k.grid))}x{s} ({grid}), {chunk(pw.trip, s)} iterations "
           "each, partials summed after the call")
  widen = [{"name": x.name, "value": x.value, "new": x.new, "axis": x.axis,
            "extent": x.extent} for x in ws]
  return [Action("e", title, RULE, {"split": s, "axis": axis,
                                    "widen": widen[0] if len(widen) == 1 else widen},
                 edit=edit, user_file=p.file, user_line=p.lineno, estimate_pct=None,
                 estimate_basis="no estimate: " + basis, diff=diff)]
