"""`pallas-prof diff A B`: two saved runs compared kernel by kernel.

Kernels are matched by label (name + content hash), then by name. Compared:
the replayed median runtime (GPU runs), registers, shared memory, spills and
the kernel's instruction count (SASS, else PTX: the static weight the CPU run
has too). With `--fail-on-regression PCT` the command exits 1 when a kernel
got slower, or its registers, shared memory or instructions grew, by more
than PCT percent, or it spills more. Runs without runtimes (CPU runs) compare
what they have and say that nothing timed was compared.
"""
from __future__ import annotations

import dataclasses

from rich.text import Text

from . import units
from .terminal import layout
from .terminal.layout import Col
from .terminal.render import console
from .report import RunReport


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


def figures(report: RunReport) -> dict[str, Figures]:
  out = {}
  for k in report.kernels:
    kp = report.kernel_profile(k.label)
    rt = kp.runtime if kp is not None else None
    try:
      median = rt.median_s if rt is not None else None
    except ValueError:          # runtime stats without their headline timing
      median = None
    static = kp.static if kp is not None else None
    count, basis = None, None
    if static is not None:
      if static.sass_instructions:
        count, basis = static.sass_instructions, "sass"
      elif static.ptx_instructions:
        count, basis = static.ptx_instructions, "ptx"
    res = k.resources or {}
    out[k.label] = Figures(k.name, median, res.get("registers"), res.get("shared_bytes"),
                           k.spills, count, basis)
  return out


def _pairs(a: dict, b: dict):
  matched, used = [], set()
  for label, ka in a.items():
    if label in b:
      matched.append((label, ka, b[label]))
      used.add(label)
  for label, ka in a.items():
    if label in b:
      continue
    same = [lb for lb, kb in b.items() if kb.name == ka.name and lb not in used]
    if len(same) == 1:
      matched.append((f"{label} -> {same[0]}", ka, b[same[0]]))
      used.add(same[0])
    else:
      matched.append((label, ka, None))
  for label, kb in b.items():
    if label not in used and label not in a:
      matched.append((label, None, kb))
  return matched


def _change(old, new) -> float | None:
  if old is None or new is None or old == 0:
    return None
  return 100.0 * (new - old) / old


def _fmt(old, new) -> str:
  return f"{old} -> {new}" if old != new else f"{new}"


def regressions(ka: Figures, kb: Figures, pct: float | None) -> list[str]:
  """What got worse from A to B: more spills always; the rest beyond `pct` percent."""
  found = []
  if (kb.spills or 0) > (ka.spills or 0):
    found.append("new spills")
  if pct is None:
    return found
  slower = _change(ka.median_s, kb.median_s)
  if slower is not None and slower > pct:
    found.append(f"SLOWER by {slower:.1f}%")
  for what, old, new in (("registers", ka.registers, kb.registers),
                         ("shared", ka.shared_bytes, kb.shared_bytes)):
    grew = _change(old, new)
    if grew is not None and grew > pct:
      found.append(f"{what} +{grew:.1f}%")
  if ka.instruction_basis == kb.instruction_basis:
    grew = _change(ka.instructions, kb.instructions)
    if grew is not None and grew > pct:
      found.append(f"instructions +{grew:.1f}%")
  return found


def diff(args) -> int:
  run_a, run_b = RunReport.load(args.a), RunReport.load(args.b)
  rows = _pairs(figures(run_a), figures(run_b))
  both = [(ka, kb) for _, ka, kb in rows if ka is not None and kb is not None]
  # runtime columns only where there is a runtime to compare (a CPU run has none)
  timed = any(ka.median_s is not None or kb.median_s is not None for ka, kb in both)
  cols = ([Col("kernel", give=2, least=12)]
          + ([Col("median µs", right=True), Col("change", right=True)] if timed else [])
          + [Col("registers", right=True), Col("shared", right=True), Col("spills", right=True),
             Col("instructions", right=True), Col("verdict")])
  cells, failed, compared = [], [], 0
  us = lambda s: "-" if s is None else f"{s * 1e6:.1f}"
  for label, ka, kb in rows:
    if ka is None or kb is None:
      cells.append([label] + ["-"] * (len(cols) - 2) + ["only in A" if kb is None else "only in B"])
      continue
    change = _change(ka.median_s, kb.median_s)
    compared += change is not None
    worse = regressions(ka, kb, args.fail_on_regression)
    if worse:
      failed.append((label, worse))
    runtime = [f"{us(ka.median_s)} -> {us(kb.median_s)}",
               "-" if change is None else f"{change:+.1f}%"] if timed else []
    cells.append([label, *runtime, _fmt(ka.registers, kb.registers),
                  _fmt(units.size(ka.shared_bytes), units.size(kb.shared_bytes)),
                  _fmt(ka.spills, kb.spills), _fmt(ka.instructions, kb.instructions),
                  "worse" if worse else "ok"])
  con = console()
  con.print(Text(f"{args.a}  ->  {args.b}", style="bold"))
  con.print(layout.table("kernels", cols, cells, con.width))
  if not compared and both:
    con.print(Text("no runtimes compared: the kernels were not timed in both runs (a run "
                   "without a GPU has none); compared registers, shared memory, spills and "
                   "instruction counts"))
  # what got worse, a line per kernel under the table (in a cell it would wrap word by word)
  for label, worse in failed:
    con.print(Text(f"worse: {label}: {', '.join(worse)}"))
  from .advice_diff import lines as advice_lines      # did run A's advice hold in B?
  for line in advice_lines(run_a, run_b):
    con.print(Text(line))
  if args.fail_on_regression is not None and failed:
    con.print(Text(f"regressions: {', '.join(label for label, _ in failed)}"))
    return 1
  return 0
