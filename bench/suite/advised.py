"""The suite's "advised" column (issue 49, item 3): `pallas-prof advise` run on the case as a
user runs it, and what it kept applied as a user applies it, then timed beside the others.

For a case (suite_cases.Built with its `module` and `from_module`):
  1. the op's module is copied into a folder of the run's (a user copies JAX's ops out of
     site-packages to edit them: advise writes no diff against an installed package) and
     imported from there; the case's Pallas function is made of the copy's functions;
  2. it runs once under pallas-prof with its pallas_calls recorded (as `pallas-prof advise`
     records them: advice/recipes.capture), its kernels are profiled
     (`pallas_prof.profile`) and advised (`pallas_prof.advise`, the case's budget shared
     among its kernels);
  3. what each kernel kept (its best action that held: faster by more than the noise, with
     equal outputs) is applied as a user applies it:
       - kind a (compiler parameters): the tuning file advise writes (advice.api's
         tuning_entries, as `pallas-prof advise --tuning-file` writes it), applied by
         PALLAS_PROF_TUNED=file while the column runs, as `PALLAS_PROF_TUNED=file python
         script.py` applies it;
       - kind e (a split reduction) and kind c with a diff (a loop's step, a keyword of
         the kernel, rebound at the call: advice/loop_steps.py): the unified diff, applied
         by a strict applier
         (unified_diff.py: no fuzz, a hunk that does not match fails the column with where
         and why) to a fresh copy of the module, under the same file name, which is
         imported and whose function is timed;
       - kind c, a dot's tile with its warps and stages (advice/dots/joint.py), where the
         case says how its op takes them (suite_cases.Built.with_tile: examples/matmul.py's
         bm, bn, num_warps, num_stages, the parameters advise's edit names): the op called
         with them, as its user would change the call;
       - kind c, a block change that rebinds a kernel keyword (advice/blockshape.py:
         attention's block_q), where the case takes it as the op's parameter of that name
         (suite_cases.Built.with_params): the op called with it;
       - kinds b and other c (a parameter of an autotuned function, a block shape without a
         parameter of the op's for it): recorded as kept, not applied (they are edits of the
         user's code, not a file pallas-prof writes).
The record keeps, per kernel, what was kept (kind, what, the saving advise measured) or
"nothing kept" with advise's reason, and how many of the tuning file's entries the timed
kernels matched (an entry names a kernel by its generated source, which a diff may move).

On a CPU advise times nothing and so keeps nothing: the column then times the copy as
given, says that nothing was measured, and the dry run checks the diff path on a kernel of
the split reduction's pattern instead (probe_diff_path).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import inspect
import itertools
import os
import sys
from typing import Any, Callable

from bench.suite import unified_diff

_names = itertools.count()


@dataclasses.dataclass(frozen=True)
class Options:
  budget_s: float             # advise's trials for the whole case, shared among its kernels
  sample: bool                # PC sampling in advise's profile (`pallas-prof advise`'s default)
  folder: str                 # where the copies and tuning files go


# --- copies of a module, patched or not --------------------------------------------------------

def import_file(path: str, tag: str):
  """The module of the file at `path`, imported under a fresh name (registered in
  sys.modules: dataclasses read their module's globals through it)."""
  stem = os.path.splitext(os.path.basename(path))[0]
  name = f"_suite_{tag}_{stem}_{next(_names)}"
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[name]
    raise
  return module


def copy_module(module, folder: str, tag: str):
  """A copy of `module`'s source file in `folder` (same file name), imported."""
  path = inspect.getsourcefile(module)
  os.makedirs(folder, exist_ok=True)
  dest = os.path.join(folder, os.path.basename(path))
  with open(path, encoding="utf-8") as f:
    text = f.read()
  with open(dest, "w", encoding="utf-8") as f:
    f.write(text)
  return import_file(dest, tag)


def _names_file(patch: unified_diff.FilePatch, path: str) -> bool:
  """Whether the diff's header names `path` (advise writes it relative to the directory it
  ran from, or absolute without its leading slash: advice/split/source.py)."""
  named = patch.path(1)
  want = os.path.realpath(path)
  return want in (os.path.realpath(named), os.path.realpath(os.sep + named))


def patched_copy(source_path: str, diffs: list[str], folder: str, tag: str = "patched"):
  """A copy of the file at `source_path` in `folder`, under the same file name, with each
  diff applied in turn, imported. unified_diff.DiffDoesNotApply when a diff does not parse,
  names another file, or has a hunk that does not match."""
  with open(source_path, encoding="utf-8") as f:
    text = f.read()
  parsed = []
  for k, diff in enumerate(diffs, 1):
    for patch in unified_diff.parse(diff):
      if not _names_file(patch, source_path):
        raise unified_diff.DiffDoesNotApply(
            f"diff {k} edits {patch.old_path}, not {source_path}: the suite patches the "
            "op's module alone")
      parsed.append((k, patch))
  # Each diff was made against the file as given (one kernel's each), so each hunk names
  # lines of that file. Applied one hunk at a time from the lowest in the file up, each
  # finds its lines where its header says (only lines below it have changed); two hunks
  # that edit the same lines cannot both hold.
  hunks = sorted(((_span(h), k, h) for k, p in parsed for h in p.hunks),
                 key=lambda x: x[0])
  for (a, k, _), (b, l, _) in itertools.pairwise(hunks):
    if b[0] < a[1] or b[0] == a[0]:
      raise unified_diff.DiffDoesNotApply(
          f"diffs {k} and {l} edit overlapping lines (from line {a[0] + 1} and line "
          f"{b[0] + 1} of {os.path.basename(source_path)})")
  for _, _, h in reversed(hunks):
    alone = dataclasses.replace(h, new_start=h.old_start + (h.old_len == 0) - (h.new_len == 0))
    text = unified_diff.FilePatch(parsed[0][1].old_path, parsed[0][1].new_path,
                                  (alone,)).apply(text)
  os.makedirs(folder, exist_ok=True)
  dest = os.path.join(folder, os.path.basename(source_path))
  with open(dest, "w", encoding="utf-8") as f:
    f.write(text)
  return import_file(dest, tag)


def _span(h: unified_diff.Hunk) -> tuple[int, int]:
  """The hunk's lines of the file as given, 0-based, end excluded (an insertion: empty)."""
  start = h.old_start if h.old_len == 0 else h.old_start - 1
  return start, start + h.old_len


# --- advise on the case, and what it kept ------------------------------------------------------

@dataclasses.dataclass
class Advised:
  fn: Callable                # the function to time: what advise kept, applied
  entry: dict                 # the column's record so far
  tuning_file: str | None     # PALLAS_PROF_TUNED while the column runs (kind a kept)
  tuning_sources: tuple = ()  # the generated sources (sha256) the file's entries name

  @contextlib.contextmanager
  def applied(self):
    """The tuning file in force (PALLAS_PROF_TUNED), as a user's run sets it."""
    from pallas_prof.tune.tuned_file import TUNED_ENV
    before = os.environ.get(TUNED_ENV)
    if self.tuning_file:
      os.environ[TUNED_ENV] = self.tuning_file
    else:
      os.environ.pop(TUNED_ENV, None)
    try:
      yield
    finally:
      if before is None:
        os.environ.pop(TUNED_ENV, None)
      else:
        os.environ[TUNED_ENV] = before

  def matched(self, records) -> dict:
    """How many of the tuning file's entries the kernels that ran match (by generated
    source, as PALLAS_PROF_TUNED looks them up)."""
    ran = {r.generated.key for r in records if r.generated is not None}
    hit = [s for s in self.tuning_sources if s in ran]
    return {"entries": len(self.tuning_sources), "matched": len(hit)}


def _reason(advice) -> str:
  """Why a kernel kept nothing, in advise's words (first whether it measured anything)."""
  from pallas_prof.advice.rank import saving_text
  measured = advice.measured or "not measured"
  if advice.at_roof:
    return f"{measured}; at its roof: {advice.summary}"
  if not advice.actions:
    return f"{measured}; no action offered" + (f": {advice.summary}" if advice.summary else "") + (
        f" ({'; '.join(advice.notes[:2])})" if advice.notes else "")
  tried = "; ".join(f"[{a.kind}] {a.title}: {saving_text(a)}" for a in advice.actions[:4])
  more = f" (and {len(advice.actions) - 4} more)" if len(advice.actions) > 4 else ""
  return f"{measured}; no action held: {tried}{more}"


def budgets(records, report, budget_s: float) -> dict:
  """advise's budget per kernel (its `budget_s` is per kernel): half the case's budget
  shared equally, half by each kernel's share of the profiled time (a fwd+bwd's slow dw/db
  kernel gets the time its split needs); equal shares where nothing was timed (no GPU)."""
  times = {}
  for r in records:
    try:
      runtime = report.kernel(r.label).runtime
    except KeyError:
      runtime = None
    times[r.label] = runtime.median_s if runtime is not None else None
  n = len(records)
  if any(t is None for t in times.values()) or not sum(times.values()):
    return {label: budget_s / n for label in times}
  total = sum(times.values())
  return {label: budget_s * (0.5 / n + 0.5 * t / total) for label, t in times.items()}


def _tile_of(top, built) -> dict | None:
  """A kept action's dot tile, where the case can set it (Built.with_tile): a kind c tile,
  or the tile a kind e K-major B was kept at (advice/dots/layout.py)."""
  if top.kind in "ce" and "tile" in top.change and built.with_tile is not None:
    return top.change
  return None


def _params_of(top, built) -> dict | None:
  """A kept block change's rebound kernel keywords (attention's block_q; kind c, or the
  block a kind e K-major B was kept at), where the case takes them as the op's parameters
  (Built.with_params)."""
  if top.kind in "ce" and top.change.get("rebind") and built.with_params is not None:
    return dict(top.change["rebind"])
  return None


def _kept(top, diff_applied: bool, tile_applied: bool = False,
          params_applied: dict | None = None) -> dict:
  t = top.trial
  out = {"kind": top.kind, "what": top.title, "saving_pct": t.saving_pct,
         "before_s": t.before_s, "after_s": t.after_s, "noise_pct": t.noise_pct,
         "apply": top.apply}
  if top.change.get("variants"):     # a split's twins (deferred, loop staged), each's time
    out["variants"] = top.change["variants"]
  if top.kind == "a":
    out["applied"] = "tuning file (PALLAS_PROF_TUNED)"
  elif top.kind == "e" or diff_applied:
    out["applied"] = ("its diff, to a copy of the module" if diff_applied else
                      f"not applied: advise wrote no diff ({top.edit})")
    if tile_applied:
      out["applied"] += "; its tile, through the op's parameters (Built.with_tile)"
    elif params_applied:
      out["applied"] += ("; its blocks, through the op's parameters: " + ", ".join(
          f"{k}={v}" for k, v in params_applied.items()) + " (Built.with_params)")
  elif tile_applied:
    out["applied"] = ("the op's own parameters: bm, bn = the tile, num_warps, num_stages "
                      "(Built.with_tile)")
  elif params_applied:
    out["applied"] = ("the op's own parameters: " + ", ".join(
        f"{k}={v}" for k, v in params_applied.items()) + " (Built.with_params)")
  else:
    out["applied"] = (f"not applied: a kind {top.kind} action is an edit of the code the suite "
                      "does not make here (it applies tuning files, diffs, and a dot's tile "
                      "where the op takes it as parameters)")
  return out


def advise_case(built, options: Options, on_gpu: bool, say=None) -> Advised:
  """Steps 1-3 of the module docstring: the function to time, with what advise kept."""
  import jax
  import pallas_prof
  from pallas_prof.advice import recipes
  from pallas_prof.advice.api import tuning_entries, write_tuning_file
  from pallas_prof.backend import kernel_registry
  say = say or (lambda text: print(text, file=sys.stderr, flush=True))
  if built.module is None or built.from_module is None:
    raise ValueError("the case names no module its Pallas function is made of "
                     "(suite_cases.Built.module / from_module)")
  given = copy_module(built.module, os.path.join(options.folder, "as_given"), "advised")
  path = inspect.getsourcefile(given)
  jax.clear_caches()
  kernel_registry.clear()
  recipes.clear()
  with recipes.capture():              # as `pallas-prof advise` records the script's calls
    jax.block_until_ready(jax.jit(built.from_module(given))(*built.args))
  records = kernel_registry.kernels()
  if not records:
    raise RuntimeError("the copy's function lowered no kernel through pallas-prof")
  report = pallas_prof.profile(records, sample=options.sample)
  shares = budgets(records, report, options.budget_s)
  advice = []
  for r in records:                    # advise's budget is per kernel: each its share
    advice += pallas_prof.advise(
        [r], report=report, budget_s=shares[r.label],
        static=on_gpu,                 # a dry run skips the sm_90 compiles: it keeps nothing
        progress=lambda text: say(f"    advise: {text}"))
  entry: dict[str, Any] = {
      "advised": {"module": os.path.basename(path), "kernels": [r.label for r in records],
                  "budget_s_per_kernel": shares, "sampling": options.sample,
                  "measured": sorted({a.measured or "not measured" for a in advice})},
      "kept": [], "nothing_kept": []}
  diffs, tiles, params = [], [], {}
  for a in advice:
    top = next((x for x in a.actions if x.trial is not None and x.trial.held), None)
    if top is None:
      entry["nothing_kept"].append({"kernel": a.label, "why": _reason(a)})
      continue
    if top.kind in "ce" and top.diff:     # a split, or a loop step rebound at the call
      diffs.append(top.diff)
    tile = _tile_of(top, built)
    # the op takes one tile: a second kernel's (none of the suite's ops has two dots'
    # kernels) is recorded, not applied
    applied_tile = tile is not None and not tiles
    if applied_tile:
      tiles.append(tile)
    # one kernel's parameters: a second kernel's of the same names would fight over them
    kept_params = _params_of(top, built) if not params else None
    if kept_params:
      params.update(kept_params)
    entry["kept"].append({"kernel": a.label, **_kept(top, bool(top.kind in "ce" and top.diff),
                                                     applied_tile, kept_params)})
  entries = tuning_entries(list(advice), records, report)
  tuning = None
  if entries:
    tuning = os.path.join(options.folder, "pallas-prof-advice-tuning.json")
    write_tuning_file(tuning, entries)
  if diffs:
    module = patched_copy(path, diffs, os.path.join(options.folder, "patched"))
    entry["advised"]["diffs_applied"] = len(diffs)
  else:
    module = given
  if not on_gpu:
    entry["nothing_measured"] = ("no GPU: advise timed nothing, so it kept nothing; this "
                                 "column is the op's copy as given, checked, not advised")
  fn = built.with_tile(module, tiles[0]) if tiles else built.with_params(module, params) \
      if params else built.from_module(module)
  if tiles:
    entry["advised"]["tile_applied"] = {k: tiles[0][k] for k in ("tile", "num_warps", "num_stages")}
  elif params:
    entry["advised"]["params_applied"] = dict(params)
  return Advised(fn, entry, tuning, tuple(e.source for e in entries))


# --- the dry run's check of the diff path -----------------------------------------------------

def probe_diff_path(folder: str) -> dict:
  """On a CPU, where advise keeps nothing: the diff advise writes for a kernel of the split
  reduction's pattern (testkit/column_sums.py) applied to a copy of its file by the column's
  own applier, the copy imported, its outputs compared with the original's and its grid
  checked for the split's new axis. Raises where any step fails."""
  import jax
  import pallas_prof
  from pallas_prof.advice import recipes
  from pallas_prof.backend import kernel_registry
  from pallas_prof.tune.choice import leaves, same_outputs
  from testkit import column_sums as probe
  x = jax.random.normal(jax.random.key(7), (203, 40), jax.numpy.float32)
  jax.clear_caches()
  kernel_registry.clear()
  recipes.clear()
  with recipes.capture():
    want = jax.block_until_ready(probe.column_sums(x))
  records = [r for r in kernel_registry.kernels() if r.name == "column_sums"]
  (advice,) = pallas_prof.advise(records, sample=False, static=False, progress=None)
  splits = [a for a in advice.actions if a.kind == "e" and a.diff]
  if not splits:
    raise RuntimeError(f"advise offered no split reduction with a diff for the probe kernel "
                       f"(notes: {advice.notes})")
  action = splits[0]
  module = patched_copy(inspect.getsourcefile(probe), [action.diff],
                        os.path.join(folder, "probe"), "probe")
  kernel_registry.clear()
  got = jax.block_until_ready(module.column_sums(x))
  differs = same_outputs(leaves(got), leaves(want))
  if differs:
    raise RuntimeError(f"the patched probe's outputs differ from the original's: {differs}")
  # the patched copy is the variant: its kernel runs on the grid with the split's axis
  grids = [tuple(int(g) for g in r.generated.grid) for r in kernel_registry.kernels()
           if r.name == "column_sums"]
  want_grid = (3, int(action.change["split"]))
  if grids != [want_grid]:
    raise RuntimeError(f"the patched probe ran on grids {grids}, not {want_grid}")
  return {"kernel": "column_sums (testkit/column_sums.py)",
          "action": action.title, "kept_by_advise": advice.kept,
          "diff_lines": action.diff.count("\n"), "patched_grid": list(want_grid),
          "outputs_equal": True,
          "note": "nothing measured (no GPU): advise kept nothing; its diff was applied to "
                  "a copy of the probe's file, imported, and checked against the original"}
