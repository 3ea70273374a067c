"""Two sets of one kernel's figures compared: what `pallas-prof diff` (cli/compare/diff.py) and the
pytest gate (gate/compare.py) both decide, so that a kernel is worse by the same rules in
both. Plain figures in, sentences and percentages out; nothing here reads a run.

Registers, shared memory and instructions are per program: where the programs' work
changed (another grid or block shape), B's figures are scaled by the work (Basis) before
they are compared; cli/compare/diff.py's docstring says how a user reads it.
"""
from __future__ import annotations

import dataclasses
import math

from . import units


@dataclasses.dataclass(frozen=True)
class Figures:
  """What diff compares of one kernel in one run."""
  name: str
  median_s: float | None
  registers: int | None
  shared_bytes: int | None
  spills: int | None
  instructions: int | None      # SASS (else PTX) instructions of the kernel
  instruction_basis: str | None
  grid: tuple[int, ...] = ()
  program_bytes: float | None = None    # the bytes one program moves (the work model's)
  work_bytes: float | None = None       # the bytes the kernel must move


@dataclasses.dataclass(frozen=True)
class Basis:
  """B's work over A's: per program (shared memory is compared per byte a program moves),
  in programs and in all (instructions per byte of the kernel's work, as executed: per
  program times programs; the runtime per byte); 1.0 where the work did not change."""
  per_program: float = 1.0
  programs: float = 1.0
  in_all: float = 1.0
  words: str = ""               # how they were compared, where not as they are
  holds: bool = True            # False: the raw figures do not compare, nothing is counted


def grid_text(g) -> str:
  return "x".join(map(str, g)) or "?"


def _programs(grid) -> int:
  return math.prod(grid) if grid else 1


def basis(ka: Figures, kb: Figures) -> Basis:
  """Whether the programs' work changed from A to B, and by how much (see the module's
  docstring)."""
  same_grid = ka.grid == kb.grid
  if not (ka.program_bytes and kb.program_bytes and ka.work_bytes and kb.work_bytes):
    if same_grid:
      return Basis()
    lacks = "A" if not (ka.program_bytes and ka.work_bytes) else "B"
    return Basis(words=f"grid {grid_text(ka.grid)} -> {grid_text(kb.grid)}: the programs' figures do "
                 f"not compare as they are, and run {lacks} has no work model to scale them by "
                 "(run it without --no-analysis); not counted as regressions", holds=False)
  per_program = kb.program_bytes / ka.program_bytes
  if same_grid and per_program == 1.0:
    return Basis()
  in_all = kb.work_bytes / ka.work_bytes
  words = (f"grid {grid_text(ka.grid)} -> {grid_text(kb.grid)}, each program moves "
           f"{units.size(ka.program_bytes)} -> {units.size(kb.program_bytes)}: compared per "
           "byte of work (instructions and runtime of the whole grid over the bytes it moves, "
           "shared memory per byte a program moves; registers are per thread and not "
           "compared; spills are)")
  return Basis(per_program, _programs(kb.grid) / _programs(ka.grid), in_all, words)


def change_pct(old, new) -> float | None:
  if old is None or new is None or old == 0:
    return None
  return 100.0 * (new - old) / old


def _scaled(value, by: float):
  return None if value is None else value / by


def changes(ka: Figures, kb: Figures, b: Basis) -> dict[str, float]:
  """Each figure's change from A to B in percent, B's scaled by the work (Basis)."""
  scaled = bool(b.words)
  pairs = [("runtime", ka.median_s, _scaled(kb.median_s, b.in_all)),
           ("registers", ka.registers, None if scaled else kb.registers),
           ("shared", ka.shared_bytes, _scaled(kb.shared_bytes, b.per_program))]
  if ka.instruction_basis == kb.instruction_basis:
    pairs.append(("instructions", ka.instructions,
                  _scaled(kb.instructions, b.in_all / b.programs)))
  out = {what: change_pct(old, new) for what, old, new in pairs}
  return {what: c for what, c in out.items() if c is not None}


# What each figure is of: one program's (one thread's, for registers and spills) or the
# whole grid's (the launch). A table of per-program figures beside a verdict over the whole
# grid read as a contradiction (fewer instructions in the table, "worse" for instructions
# in the verdict): the same labels head diff's columns and mark every change diff and the
# gate say.
OF = {"runtime": "per launch", "registers": "per thread", "spills": "per thread",
      "shared": "per program", "instructions": "per program"}
# where the programs' work changed, a figure compared per byte of work, and whose work
OF_PER_BYTE = {"runtime": "per byte, whole grid", "shared": "per byte, per program",
               "instructions": "per byte, whole grid"}
LABELS_CAPTION = ("per thread, per program: one program's figures; per launch, whole grid: "
                  "all the grid's programs together")


def labelled(what: str, scaled: bool) -> str:
  """'instructions (per program)', or where compared per byte 'instructions (per byte,
  whole grid)'."""
  return f"{what} ({(OF_PER_BYTE if scaled else OF)[what]})"


def _said(what: str, change: float, scaled: bool) -> str:
  if what == "runtime":
    return (f"SLOWER ({(OF_PER_BYTE if scaled else OF)[what]}) by {change:.1f}%" if change > 0
            else f"faster ({(OF_PER_BYTE if scaled else OF)[what]}) by {-change:.1f}%")
  return f"{labelled(what, scaled)} {change:+.1f}%"


# how far a figure moves before the verdict calls it worse or better: a replayed runtime
# varies from one run to the next, so a small move is noise; the static figures of a
# compile do not vary (the same kernel compiles to the same code), so any move counts
NOISE_PCT = {"runtime": 5.0, "registers": 0.0, "shared": 0.0, "instructions": 0.0}
VERDICT_CAPTION = ("verdict: worse or better where a figure moved beyond its noise (the "
                   "runtime by more than {runtime:g}%, registers, shared memory, instructions "
                   "and spills by any amount), same where none did")


def moved(ka: Figures, kb: Figures, b: Basis, pct: float | None = None
          ) -> tuple[list[str], list[str]]:
  """(what got worse, what got better) from A to B beyond each figure's noise (NOISE_PCT,
  or `pct`, the gate, where it is smaller), per byte where the work changed."""
  worse, better = [], []
  if (kb.spills or 0) > (ka.spills or 0):
    worse.append("new spills")
  elif (kb.spills or 0) < (ka.spills or 0):
    better.append("fewer spills")
  if not b.holds:
    return worse, better
  for what, change in changes(ka, kb, b).items():
    noise = NOISE_PCT[what] if pct is None else min(NOISE_PCT[what], pct)
    if change > noise:
      worse.append(_said(what, change, bool(b.words)))
    elif change < -noise:
      better.append(_said(what, change, bool(b.words)))
  return worse, better


def verdict(worse: list[str], better: list[str], b: Basis) -> str:
  if worse:
    return "worse"
  if not b.holds:
    return "n/a"
  return "better" if better else "same"


def regressions(ka: Figures, kb: Figures, pct: float | None, b: Basis | None = None
                ) -> list[str]:
  """What got worse from A to B: more spills always; the rest beyond `pct` percent, per
  byte where the work changed (none where the raw figures do not compare)."""
  b = b if b is not None else basis(ka, kb)
  found = []
  if (kb.spills or 0) > (ka.spills or 0):
    found.append("new spills")
  if pct is None or not b.holds:
    return found
  for what, grew in changes(ka, kb, b).items():
    if grew > pct:
      found.append(_said(what, grew, bool(b.words)))
  return found
