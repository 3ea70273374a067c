"""The advice in the terminal: a compact section per kernel under its hot equations.

    advice for add_kernel#1a2b3c (measured on the GPU):
      each program moves 512 B: launch and tail overhead dominate (add.py:12)
        262,144 programs, each moving 512 B (blocks of 64 float32); ...
      1. [c] block 64 -> 4096 along grid axis 0, grid 4096: "-69 % (162.2 -> 49.6 us, noise 1.1 %)", outputs equal
         keep: at add.py:30: grid=(262144,) -> grid=(4096,); BlockSpec((64,), ...) -> ...

Kinds: a pallas-prof applies it, b an autotune parameter, c a block shape it tries by
re-tracing the kernel, d an edit of your code (its saving an estimate), e a restructured
kernel pallas-prof builds and checks (its diff printed under it). `kinds_legend` says so once, under the
last kernel's advice, for the kinds shown.
"""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ...advice.rank import saving_text
from ...advice.schema import KINDS
from ...run_layout import HTML, REPORT
from ..kernel_failures import no_advice_line

DIAGNOSES, EVIDENCE, ACTIONS = 3, 2, 3


def _hang(prefix: str, body: str, style: str = ""):
  """`prefix` then `body`, a wrapped body's later lines under its first (a plain Text
  wrapped them to the left margin, among the next kernel's lines)."""
  grid = Table.grid()
  grid.add_column(no_wrap=True)
  grid.add_column()
  grid.add_row(Text(prefix, style=style), Text(body, style=style))
  return grid


def advice_lines(s, width: int) -> list:
  """The advice of the kernel of the row `s` (a summary.KernelSummary), or why it has none."""
  if s.failed:            # advice on a kernel that does not work would be tuning it
    return [_hang("", no_advice_line(s.label, s.failed), "bold")]
  advice = s.advice
  if advice is None:
    return []
  head = Text(f"advice for {s.label} ", style="bold")
  head.append(f"({advice.measured})" if advice.measured else "")
  out: list = [head]
  if advice.at_roof:
    out.append(_hang("  ", f"{advice.summary}: no advice"))
    return out
  for d in advice.diagnoses[:DIAGNOSES]:
    where = f" ({d.location})" if d.location else ""
    out.append(_hang("  ", f"{d.text}{where}"))
    facts = "; ".join(e.text for e in d.evidence[:EVIDENCE])
    if facts:
      out.append(_hang("    ", facts, "dim"))
  for i, a in enumerate(advice.actions[:ACTIONS], 1):
    out.append(_hang(f"  {i}. ", f"[{a.kind}] {a.title}: {saving_text(a)}"))
    if a.compiled:
      out.append(_hang("     ", f"compiled: {a.compiled}", "dim"))
    if a.apply:
      out.append(_hang("     ", f"{'keep' if a.trial is not None and a.trial.held else 'apply'}: "
                       f"{a.apply}", "dim"))
    if getattr(a, "diff", None):          # kind e: the diff to review (never applied)
      out.append(_hang("     ", a.diff.rstrip("\n"), "dim"))
  hidden = len(advice.actions) - ACTIONS
  if hidden > 0 or len(advice.diagnoses) > DIAGNOSES:
    out.append(_hang("  ", f"({REPORT} and {HTML} hold all {len(advice.diagnoses)} "
                     f"diagnoses and {len(advice.actions)} actions)", "dim"))
  for note in advice.notes:
    out.append(_hang("  ", f"note: {note}", "dim"))
  return out


def shown_kinds(rows) -> list[str]:
  """The kinds of the actions advice_lines shows for these kernels' rows, in KINDS' order."""
  shown = set()
  for s in rows:
    if s.advice is not None and not s.advice.at_roof and not s.failed:
      shown.update(a.kind for a in s.advice.actions[:ACTIONS])
  return [kind for kind in KINDS if kind in shown]


def kinds_legend(rows) -> list:
  """One line naming what the kinds of the actions shown mean (none without actions)."""
  kinds = shown_kinds(rows)
  if not kinds:
    return []
  return [_hang("  ", "kinds: " + "; ".join(f"[{k}] {KINDS[k]}" for k in kinds), "dim")]
