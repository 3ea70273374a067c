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

Registers, shared memory and instructions are per program (per thread): where the
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

import dataclasses
import math

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


def _grid(g) -> str:
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
    return Basis(words=f"grid {_grid(ka.grid)} -> {_grid(kb.grid)}: the programs' figures do "
                 f"not compare as they are, and run {lacks} has no work model to scale them by "
                 "(run it without --no-analysis); not counted as regressions", holds=False)
  per_program = kb.program_bytes / ka.program_bytes
  if same_grid and per_program == 1.0:
    return Basis()
  in_all = kb.work_bytes / ka.work_bytes
  words = (f"grid {_grid(ka.grid)} -> {_grid(kb.grid)}, each program moves "
           f"{units.size(ka.program_bytes)} -> {units.size(kb.program_bytes)}: compared per "
           "byte (registers are per thread and not compared; spills are)")
  return Basis(per_program, _programs(kb.grid) / _programs(ka.grid), in_all, words)


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
  old, new = ("-" if x is None else x for x in (old, new))
  return f"{old} -> {new}" if old != new else f"{new}"


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
  out = {what: _change(old, new) for what, old, new in pairs}
  return {what: c for what, c in out.items() if c is not None}


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
  per = " per byte" if b.words else ""
  for what, change in changes(ka, kb, b).items():
    noise = NOISE_PCT[what] if pct is None else min(NOISE_PCT[what], pct)
    if change > noise:
      worse.append(f"SLOWER{per} by {change:.1f}%" if what == "runtime" else
                   f"{what}{per} +{change:.1f}%")
    elif change < -noise:
      better.append(f"faster{per} by {-change:.1f}%" if what == "runtime" else
                    f"{what}{per} {change:.1f}%")
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
  per = " per byte" if b.words else ""
  for what, grew in changes(ka, kb, b).items():
    if grew > pct:
      found.append(f"SLOWER{per} by {grew:.1f}%" if what == "runtime" else
                   f"{what}{per} +{grew:.1f}%")
  return found


def failure_lines(runs) -> list[tuple[str, str]]:
  """(which, its line) for each run that failed (run_directory.run_failures): which run,
  where, and what failed."""
  from .run_directory import run_failures
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
  said = ", ".join(f"{what} {grew:+.1f}%" for what, grew in changes(ka, kb, b).items())
  return f"{label}: {b.words}: {said or 'nothing to compare'}"


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
  cols = ([Col("kernel", give=2, least=12), Col("grid", right=True)]
          + ([Col("median µs", right=True), Col("change", right=True)] if timed else [])
          + [Col("registers", right=True), Col("shared", right=True), Col("spills", right=True),
             Col("instructions", right=True), Col("verdict")])
  cells, failed, moves, scaled, compared = [], [], [], [], 0
  us = lambda s: "-" if s is None else f"{s * 1e6:.1f}"
  for label, ka, kb in rows:
    if ka is None or kb is None:
      only = ka or kb
      cells.append([label, _grid(only.grid)] + ["-"] * (len(cols) - 3)
                   + ["only in A" if kb is None else "only in B"])
      continue
    change = _change(ka.median_s, kb.median_s)
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
    cells.append([label, _fmt(_grid(ka.grid), _grid(kb.grid)), *runtime,
                  _fmt(ka.registers, kb.registers),
                  _fmt(units.size(ka.shared_bytes), units.size(kb.shared_bytes)),
                  _fmt(ka.spills, kb.spills), _fmt(ka.instructions, kb.instructions),
                  verdict(worse, better, b)])
  con.print(Text(f"{args.a}  ->  {args.b}", style="bold"))
  caption = VERDICT_CAPTION.format(**NOISE_PCT) if both else None
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
  from .advice_diff import lines as advice_lines      # did run A's advice hold in B?
  for line in advice_lines(run_a, run_b):
    con.print(Text(line))
  gate = [f"run {which} failed" for which, _ in failures] + failed
  if args.fail_on_regression is not None and gate:
    con.print(Text(f"regressions: {', '.join(gate)}"))
    return 1
  return 0
