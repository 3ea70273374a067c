"""`pallas-prof diff A B`: two saved runs compared kernel by kernel.

A run that failed (the script's exit code, a kernel that failed to lower, compile or
run, a failure the script caught: run_directory.run_failures) is the first thing said,
and it fails `--fail-on-regression`: the figures of a failed run are not a baseline.

Kernels are matched by label (name + content hash), then by name. Compared:
the grid, the replayed median runtime (GPU runs), registers, shared memory, spills and
the kernel's instruction count (SASS, else PTX: the static weight the CPU run
has too). With `--fail-on-regression PCT` the command exits 1 when a kernel
got slower, or its registers, shared memory or instructions grew, by more
than PCT percent, or it spills more. Runs without runtimes (CPU runs) compare
what they have and say that nothing timed was compared.

Registers, shared memory and instructions are per program (per thread), the runtime per
launch (the whole grid), and the table's headers and every change said name which: where the
programs' work changed (another grid or block shape: 8-row blocks become 16-row ones and
the figures grow for the same work) they do not compare as they are. Then, with the work
model of both runs, shared memory is compared per byte a program moves, instructions per
byte of the kernel's work as executed (per program times programs), the runtime per byte
of the kernel's work; registers (per thread, bounded by what a thread may have) are not
compared, spills are. Without a work model in both runs a changed grid leaves the figures
not comparable: said, and not counted as a regression.

A row's verdict says what changed, gate or not: `worse` where a figure grew beyond its
noise (NOISE_PCT, or the gate's PCT where that is smaller), `better` where one fell beyond
it and none grew, `same` where none moved beyond it; what moved is listed under the table.
The gate decides the exit code alone: a lenient PCT passes a kernel still called `worse`.
"""
from __future__ import annotations

from rich.text import Text

from ... import units
from ...comparison import (LABELS_CAPTION, NOISE_PCT, OF, VERDICT_CAPTION, Basis, Figures, basis,
                           change_pct, changes, grid_text, labelled, moved, regressions,
                           verdict)
from ..terminal import layout
from ..terminal.layout import Col
from ..terminal.render import console
from ..report import RunReport
from ..run_directory import run_failures
from .advice_diff import lines as advice_lines


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
    work = kp.work if kp is not None else None
    moved = (work.block_bytes or work.bytes) if work is not None else None
    per_program = moved / work.programs if moved and work.programs else None
    out[k.label] = Figures(k.name, median, res.get("registers"), res.get("shared_bytes"),
                           k.spills, count, basis, tuple(k.grid), per_program,
                           work.bytes if work is not None else None)
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


def _fmt(old, new) -> str:
  old, new = ("-" if x is None else x for x in (old, new))
  return f"{old} -> {new}" if old != new else f"{new}"


def failure_lines(runs) -> list[tuple[str, str]]:
  """(which, its line) for each run that failed (run_directory.run_failures): which run,
  where, and what failed."""
  out = []
  for which, path, report in runs:
    failures = run_failures(report)
    if failures:
      more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
      out.append((which, f"FAILED: run {which} ({path}): {'; '.join(failures[:3])}{more} "
                         f"(`pallas-prof report {path}` shows it in full)"))
  return out


def _scaled_line(label: str, ka: Figures, kb: Figures, b: Basis) -> str:
  """How the figures of a kernel whose work per program changed compare, scaled."""
  if not b.holds:
    return f"{label}: {b.words}"
  said = ", ".join(f"{labelled(what, True)} {grew:+.1f}%"
                   for what, grew in changes(ka, kb, b).items())
  return f"{label}: {b.words}: {said or 'nothing to compare'}"


def _header(name: str, figure: str) -> str:
  """'instructions\nper program': a column's name over whose figure it is."""
  return f"{name}\n{OF[figure]}"


def diff(args) -> int:
  run_a, run_b = RunReport.load(args.a), RunReport.load(args.b)
  con = console()
  failures = failure_lines([("A", args.a, run_a), ("B", args.b, run_b)])
  for _, line in failures:                    # before anything else: the figures of a
    con.print(Text(line))                     # failed run are not what they seem
  rows = _pairs(figures(run_a), figures(run_b))
  both = [(ka, kb) for _, ka, kb in rows if ka is not None and kb is not None]
  # runtime columns only where there is a runtime to compare (a CPU run has none)
  timed = any(ka.median_s is not None or kb.median_s is not None for ka, kb in both)
  # each figure's header says whose it is: one program's (a thread's) or the launch's
  cols = ([Col("kernel", give=2, least=12), Col("grid", right=True)]
          + ([Col(_header("median µs", "runtime"), right=True), Col("change", right=True)]
             if timed else [])
          + [Col(_header(what, of), right=True) for what, of in (
              ("registers", "registers"), ("shared", "shared"), ("spills", "spills"),
              ("instructions", "instructions"))]
          + [Col("verdict")])
  cells, failed, moves, scaled, compared = [], [], [], [], 0
  us = lambda s: "-" if s is None else f"{s * 1e6:.1f}"
  for label, ka, kb in rows:
    if ka is None or kb is None:
      only = ka or kb
      cells.append([label, grid_text(only.grid)] + ["-"] * (len(cols) - 3)
                   + ["only in A" if kb is None else "only in B"])
      continue
    change = change_pct(ka.median_s, kb.median_s)
    compared += change is not None
    b = basis(ka, kb)
    if b.words:
      scaled.append(_scaled_line(label, ka, kb, b))
    gated = regressions(ka, kb, args.fail_on_regression, b)
    if gated:
      failed.append(label)
    worse, better = moved(ka, kb, b, args.fail_on_regression)
    moves += [("worse", label, worse)] * bool(worse) + [("better", label, better)] * bool(better)
    runtime = [f"{us(ka.median_s)} -> {us(kb.median_s)}",
               "-" if change is None else f"{change:+.1f}%"] if timed else []
    cells.append([label, _fmt(grid_text(ka.grid), grid_text(kb.grid)), *runtime,
                  _fmt(ka.registers, kb.registers),
                  _fmt(units.size(ka.shared_bytes), units.size(kb.shared_bytes)),
                  _fmt(ka.spills, kb.spills), _fmt(ka.instructions, kb.instructions),
                  verdict(worse, better, b)])
  con.print(Text(f"{args.a}  ->  {args.b}", style="bold"))
  caption = f"{LABELS_CAPTION}; {VERDICT_CAPTION.format(**NOISE_PCT)}" if both else None
  con.print(layout.table("kernels", cols, cells, con.width, caption))
  if not compared and both:
    con.print(Text("no runtimes compared: the kernels were not timed in both runs (a run "
                   "without a GPU has none); compared registers, shared memory, spills and "
                   "instruction counts"))
  for line in scaled:                         # a changed grid: how the figures compare
    con.print(Text(line))
  # what moved, a line per kernel under the table (in a cell it would wrap word by word)
  for which, label, what in moves:
    con.print(Text(f"{which}: {label}: {', '.join(what)}"))
  # did run A's advice hold in B?
  for line in advice_lines(run_a, run_b):
    con.print(Text(line))
  gate = [f"run {which} failed" for which, _ in failures] + failed
  if args.fail_on_regression is not None and gate:
    con.print(Text(f"regressions: {', '.join(gate)}"))
    return 1
  return 0
