"""What the advice says, as plain dataclasses (JSON through `to_dict()`, read back by
type like the profiler's report: pallas_prof/serial.py).

    KernelAdvice        one kernel
      at_roof   bool    >= AT_ROOF_PCT of its roofline bound: no advice
      summary   str     one line ("at its roof: ...", or the top diagnosis and action)
      diagnoses [Diagnosis]  what is wrong, each with its evidence, equation and line
      actions   [Action]     what to change, best first (rank.py)
      measured  str     "measured" | "not measured: no GPU" | "not measured: ..." (why)

    Action kinds (KINDS): "a" pallas-prof applies it without touching the code
    (num_warps, num_stages, launch_group, tma); "b" a parameter the user exposes to
    pallas_prof.autotune; "c" a block shape, tried by re-tracing the kernel; "d" an
    edit of the user's code at their line (its saving an estimate from the work model);
    "e" a structural edit pallas-prof builds from the kernel's jaxpr (a split reduction:
    advice/split/), checks and times itself, shown as a diff the user applies.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..serial import Record

AT_ROOF_PCT = 95.0
# A trial's saving is told from none only above its measured noise and never below this floor
# (in percent): a quiet GPU's noise can read near zero, and a change that small is not worth
# a line in anyone's CompilerParams.
SMALLEST_TOLD_PCT = 1.0
# each a clause that reads on from "[c] " in the terminal's and the page's legend
KINDS = {"a": "pallas-prof applies it for you, with no change to your code",
         "b": "your code exposes it as a parameter to pallas_prof.autotune",
         "c": "it changes a block shape, and pallas-prof tries it by re-tracing your kernel",
         "d": "it is an edit of your code, and its saving an estimate",
         "e": ("it restructures your kernel (a split reduction); pallas-prof builds, checks "
               "and times the variant itself, and you apply its diff")}


@dataclasses.dataclass
class Evidence(Record):
  """One fact a diagnosis rests on."""
  what: str                     # "registers", "stall reasons", "work per program", ...
  text: str                     # the fact in words, with its figures
  measured: bool = False        # from the GPU (samples, timings); False: static facts
  value: float | None = None    # the figure the rule compared, where there is one


@dataclasses.dataclass
class Diagnosis(Record):
  rule: str                     # the rule's name in the table ("unpipelined_loop")
  text: str                     # "K loop not pipelined: num_stages=1"
  evidence: list[Evidence] = dataclasses.field(default_factory=list)
  eqn: int | None = None        # the equation it concerns (None: the whole kernel)
  primitive: str | None = None
  user_file: str | None = None
  user_line: int | None = None
  share: float | None = None    # of the kernel's time (samples) or instructions, 0..1

  @property
  def location(self) -> str:
    if not self.user_file:
      return ""
    return f"{self.user_file.rsplit('/', 1)[-1]}:{self.user_line}"


@dataclasses.dataclass
class Trial(Record):
  """An action tried on the GPU: the original and the variant replayed on the same
  seeded inputs, cold (L2 flushed), the variant's outputs compared with the original's."""
  before_s: float | None        # the original's median (of two timings: before and after)
  after_s: float | None         # the variant's median
  saving_pct: float | None      # 100 * (before - after) / before; negative: slower
  noise_pct: float | None       # the timings' spread and the original's drift, in % of before
  outputs_equal: bool | None    # None: not compared (it failed first)
  error: str | None = None      # why it was not timed (failed to lower/compile/run, differs)
  launches: int = 0             # timed launches of the variant
  seconds: float = 0.0          # wall time the trial took (compile included)

  @property
  def held(self) -> bool:
    """Faster by more than the noise, with equal outputs."""
    return bool(self.outputs_equal and self.saving_pct is not None
                and self.saving_pct > self._bar())

  @property
  def slower(self) -> bool:
    """Slower by more than the noise (outputs equal)."""
    return bool(self.outputs_equal and self.saving_pct is not None
                and self.saving_pct < -self._bar())

  def _bar(self) -> float:
    return max(self.noise_pct or 0.0, SMALLEST_TOLD_PCT)


@dataclasses.dataclass
class Action(Record):
  kind: str                     # "a" | "b" | "c" | "d" | "e" (KINDS)
  title: str                    # "num_stages 1 -> 3"
  rule: str                     # the diagnosis it answers
  change: dict[str, Any] = dataclasses.field(default_factory=dict)   # {"num_stages": 3}, ...
  edit: str | None = None       # kind d (and c): the edit at the user's line, as text
  user_file: str | None = None
  user_line: int | None = None
  estimate_pct: float | None = None   # the saving the work model expects (an estimate)
  estimate_basis: str = ""      # how the estimate was made, in words
  trial: Trial | None = None    # measured on the GPU (kinds a-c)
  status: str = ""              # "measured", "not measured: no GPU", "not tried: ..."
  apply: str | None = None      # how to keep it: a CompilerParams line, a tuning file, the edit
  compiled: str = ""            # the variant compiled (for sm_90 on a CPU): registers, spills
  diff: str | None = None       # kind e: the unified diff against the user's file (never applied)
  accuracy: str | None = None   # a precision edit (advice/dots): the error it gives, or why not measured

  @property
  def gain(self) -> float:
    """What ranking weighs: the measured saving when there is one (0 if it did not hold),
    else the estimate."""
    if self.trial is not None:
      return self.trial.saving_pct if self.trial.held else 0.0
    return self.estimate_pct or 0.0


@dataclasses.dataclass
class KernelAdvice(Record):
  label: str
  name: str
  at_roof: bool = False
  summary: str = ""
  diagnoses: list[Diagnosis] = dataclasses.field(default_factory=list)
  actions: list[Action] = dataclasses.field(default_factory=list)
  measured: str = ""            # "measured" or "not measured: <why>"
  notes: list[str] = dataclasses.field(default_factory=list)
  kept: str | None = None       # what `advise` kept: the CompilerParams line or tuning file

  def action(self, title_start: str) -> Action | None:
    return next((a for a in self.actions if a.title.startswith(title_start)), None)
