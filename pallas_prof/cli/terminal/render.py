"""The run report in a terminal (rich): tables sized to the console, text as written.

Width: COLUMNS when set, else the terminal's width, else (output piped to a
file or another program) PIPE_WIDTH, a common terminal's width (the file is
read in one later); always between MIN_WIDTH and MAX_WIDTH. Colour and styles only on a
terminal, and off a terminal no line ends in the spaces rich pads it with.
Nothing the report prints is read as rich markup (a kernel line
`b_ref[pl.ds(k, n), :]` or `pip install 'pallas-prof[gpu]'` prints as
written): every cell is a Text and the console has markup off. A table wider
than the console is split in two (compile and resources; runtimes); cells that
still do not fit end in an ellipsis. No text reaches the terminal with its control
characters: the console shows them as visible stand-ins (safe_text.py), whoever wrote
the run.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from typing import Iterable

from rich.console import Console, ConsoleOptions, RenderHook
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ... import units
from ...run_layout import DIFFS, HTML, KERNELS, REPORT
from ...profiler.schema import InsituStats
from ..saved_runs.files import user_line as user_code_line
from ..summary import CompileFailure, KernelSummary, summaries
from . import layout
from .layout import BREAK, Col
from .advice_render import advice_lines, kinds_legend
from .probe_table import probe_lines
from .safe_text import printable

MIN_WIDTH, MAX_WIDTH, PIPE_WIDTH = 80, 200, 100
# a compile that waited this long for the compile worker says so in the kernels table
_WAIT_WORTH_SHOWING_MS = 10
_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")


def console_width(is_terminal: bool) -> int:
  columns = os.environ.get("COLUMNS", "").strip()
  if columns.isdigit():
    width = int(columns)
  elif is_terminal:
    width = shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
  else:
    width = PIPE_WIDTH
  return max(MIN_WIDTH, min(MAX_WIDTH, width))


def console(file=None) -> Console:
  stream = file if file is not None else sys.stdout
  tty = bool(getattr(stream, "isatty", lambda: False)())
  # force_jupyter=False: inside Jupyter rich would otherwise send what it prints to the
  # notebook as a display of its own and leave the stream empty (str(report) came back "")
  con = Console(file=file if tty else _NoTrailingSpaces(stream), width=console_width(tty),
                force_terminal=tty, no_color=not tty, highlight=False, markup=False,
                emoji=False, soft_wrap=False, force_jupyter=False)
  con.push_render_hook(_Printable())
  return con


class _Printable(RenderHook):
  """Every renderable the console prints, its text passed through safe_text.printable
  once laid out (a table's cells, a Text, a plain string alike)."""

  def process_renderables(self, renderables):
    return [_PrintableRenderable(r) for r in renderables]


class _PrintableRenderable:
  def __init__(self, inner):
    self.inner = inner

  def __rich_console__(self, con: Console, options: ConsoleOptions):
    for segment in con.render(self.inner, options):
      # control segments are rich's own cursor moves, not text
      yield segment if segment.control else Segment(printable(segment.text), segment.style)

  def __rich_measure__(self, con: Console, options: ConsoleOptions) -> Measurement:
    return Measurement.get(con, options, self.inner)


_TRAILING_SPACES = re.compile(r"[ \t]+(?=\n)")


class _NoTrailingSpaces:
  """A stream that is not a terminal, written without the spaces rich pads a line with to
  its table's width (a table's title, a wrapped cell): a file, a diff or a grep of the
  output gets the text alone."""

  def __init__(self, stream):
    self._stream = stream

  def write(self, text: str) -> int:
    return self._stream.write(_TRAILING_SPACES.sub("", text))

  def __getattr__(self, name):
    return getattr(self._stream, name)


# --- figures -----------------------------------------------------------------------------

def _us(seconds) -> str:
  return "-" if seconds is None else f"{seconds * 1e6:.1f}"


_bytes = units.size


_rate = units.rate


def _timing_cells(rt) -> tuple[str, str]:
  """The headline (cold) median [p10-p90], and the sustained (back-to-back) median.
  A report from before the two modes (no "mode") timed back-to-back: marked so."""
  if rt is None or rt.median_s is None:
    return "-", "-"
  timing = f"{_us(rt.median_s)}{BREAK}[{_us(rt.p10_s)}-{_us(rt.p90_s)}]"
  if (rt.mode or "sustained") != "cold":
    timing += f"{BREAK}(sustained)"
  return timing, _us(rt.sustained.median_s if rt.sustained is not None else None)


def _compile_cell(s: KernelSummary) -> str:
  comp = s.compile
  if comp is None or comp.total_ms is None:
    return "-"
  if comp.cache in ("memory", "disk"):
    return f"cached ({comp.cache})"
  stages = comp.stages_ms or {}
  text = f"{comp.total_ms:.0f}{BREAK}({'/'.join(f'{stages[s]:.0f}' for s in _STAGES if s in stages)})"
  if _waited(s):
    # waited for the compile worker (its start-up, the background warm-up)
    text += f"{BREAK}+{comp.worker_wait_ms:.0f} wait"
  return text


def _waited(s: KernelSummary) -> bool:
  """Whether the kernels table says the compile waited for the worker: on a GPU, where it
  is part of the program's first call. On a CPU the program never compiles: pallas-prof
  compiles for sm_90 after the script, for the static figures, and the wait for the
  worker it starts then is its own (report.json keeps it)."""
  comp = s.compile
  return (comp is not None and s.platform != "cpu"
          and (comp.worker_wait_ms or 0) >= _WAIT_WORTH_SHOWING_MS)


def _achieved(rates) -> str:
  if rates is None:
    return "-"
  parts = [_rate(rates.bytes_per_s, "B/s") if rates.bytes_per_s else "",
           _rate(rates.flops_per_s, "FLOP/s") if rates.flops_per_s else ""]
  return f",{BREAK}".join(p for p in parts if p) or "-"


def _insitu_cell(ins: InsituStats | None) -> str:
  if ins is None:
    return "-"
  if not ins.launches:
    return "not launched on this GPU"
  return f"{ins.launches} x {_us(ins.mean_s)} µs on gpu {','.join(map(str, ins.device_ids))}"


# --- tables ------------------------------------------------------------------------------



def _gpu(rows) -> bool:
  return any(s.gpu for s in rows)


_COMPILE_LONG = "compile ms\n(" + "/".join(_STAGES) + ")"
_COMPILE_SHORT = "compile\nms"
_COMPILE_CAPTION = "compile ms: total (" + "/".join(_STAGES) + ")"
_WAIT_CAPTION = ("+N wait: ms the compile waited for pallas-prof's compile worker (its start-up "
                 "with Triton's import, or compiles ahead of it), on top of the compile itself")


def kernel_tables(report, width: int, rows: tuple[KernelSummary, ...] | None = None
                  ) -> list[Table]:
  """The kernels: compile and resources, and on a GPU their runtimes; one table when it
  fits in `width`, else two (then the compile header is short, its stages in a caption).
  `rows`: the report's summaries, where the caller has them."""
  rows = summaries(report) if rows is None else rows
  several = any(not s.first for s in rows)
  gpu = _gpu(rows)
  insitu = gpu and any(s.insitu is not None for s in rows)
  lead = [Col("kernel", give=2, least=12)] + ([Col("device", give=2)] if several else [])

  # a profile's report (profile_view.py) has neither compile times nor launch counts
  compiled = any(s.compile is not None for s in rows)
  launched = not gpu and any(s.cpu_launches is not None for s in rows)

  def static_cols(compile_header):
    cols = [Col("grid"), Col("warps/\nstages", right=True)]
    if compiled:
      cols.append(Col(compile_header, right=True, give=1, breaks=True))
    cols += [Col("smem", right=True), Col("regs", right=True), Col("spills", right=True)]
    if launched:
      cols.append(Col("launches\n(CPU)", right=True))
    return cols

  timed_cols = [Col("cold median µs\n[p10-p90]", right=True, give=1, breaks=True),
                Col("sustained\nµs", right=True), Col("achieved", right=True, give=1, breaks=True),
                Col("%\nceiling", right=True), Col("bound")]
  insitu_col = [Col("in the program\n(CUPTI)", right=True, give=1, wrap=True)] if insitu else []

  def lead_cells(s: KernelSummary):
    # the device's name is in the GPU lines under the table
    where = [str(s.device.index) if s.device is not None else "?"] if several else []
    return [s.label, *where]

  def static_cells(s: KernelSummary):
    res = s.resources
    cells = [s.grid_text, f"{s.num_warps}/{s.num_stages}"]
    if compiled:
      cells.append(_compile_cell(s))
    cells += [res.shared_text, res.registers_text, res.spills_text]
    if launched:
      cells.append("-" if s.cpu_launches is None else str(s.cpu_launches))
    return cells

  def timed_cells(s: KernelSummary):
    rates = s.rates
    timing, loop = _timing_cells(s.runtime)
    pct = rates.efficiency_pct if rates is not None else None
    return [timing, loop, _achieved(rates), "-" if pct is None else f"{pct:.0f}%",
            (rates.bound if rates is not None else None) or "-"]

  def insitu_cells(s: KernelSummary):
    return [_insitu_cell(s.insitu)] if insitu else []

  waited = any(_waited(s) for s in rows)
  static_rows = [lead_cells(s) + static_cells(s) for s in rows]
  both_rows = [lead_cells(s) + static_cells(s)
               + (timed_cells(s) + insitu_cells(s) if gpu else []) for s in rows]
  for header in (_COMPILE_LONG, _COMPILE_SHORT):
    cols = lead + static_cols(header) + (timed_cols + insitu_col if gpu else [])
    if layout.natural_width(cols, both_rows) <= width:
      caption = [] if header == _COMPILE_LONG or not compiled else [_COMPILE_CAPTION]
      return [layout.table("kernels", cols, both_rows, width,
                           "\n".join(caption + ([_WAIT_CAPTION] if waited else [])) or None)]
  caption = "\n".join(([_COMPILE_CAPTION] if compiled else [])
                       + ([_WAIT_CAPTION] if waited else [])) or None
  if not gpu:
    return [layout.table("kernels", lead + static_cols(_COMPILE_SHORT), static_rows, width,
                         caption)]
  timed_rows = [lead_cells(s) + timed_cells(s) for s in rows]
  return [layout.table("kernels", lead + static_cols(_COMPILE_SHORT), static_rows, width, caption),
          layout.table("runtimes (replayed)", lead + timed_cols, timed_rows, width)]


def kernel_table(report, width: int = MAX_WIDTH) -> Table:
  """The first kernels table of a RunReport (all of it when it fits in `width`)."""
  return kernel_tables(report, width)[0]


def gpu_context_lines(report, width: int = MAX_WIDTH,
                      rows: tuple[KernelSummary, ...] | None = None) -> list[Text]:
  """The GPU's state during each kernel's timing, a line each (NVML's summary; wrapped
  rather than cut, since the throttling verdict comes last), and where the kernels tables
  had no room for it, what CUPTI saw of each kernel in the program."""
  lines = []
  rows = summaries(report) if rows is None else rows
  tables = kernel_tables(report, width, rows) if _gpu(rows) else []
  insitu_in_table = any("in the program" in str(c.header) for t in tables for c in t.columns)
  for s in rows:
    if not s.profiled:
      continue
    gpu = f"GPU {s.device.index} ({s.device.name})" if s.device is not None else "GPU"
    if s.nvml is not None and s.nvml.summary:
      lines.append(Text(f"{gpu} while timing {s.label}: {s.nvml.summary}"))
    if s.insitu is not None and not insitu_in_table:
      lines.append(Text(f"{s.label} in the program (CUPTI): {_insitu_cell(s.insitu)}"))
  return lines


def _instruction_mix(static, index: int) -> str:
  """The equation's SASS instructions by kind (its PTX's where it has no SASS), worded as
  report.html words them (units.instruction_mix)."""
  e = static.equations[index] if static is not None and index < len(static.equations) else None
  if e is None:
    return ""
  counts, total = ((e.sass_counts, e.sass_instructions) if e.sass_counts or e.sass_instructions
                   else (e.ptx_counts, e.ptx_instructions))
  return units.instruction_mix(counts, total)


def _user_line(user_file, user_line) -> tuple[str, str]:
  if not user_file:
    return "?", ""
  return (f"{os.path.basename(user_file)}:{user_line}",
          user_code_line(user_file, user_file, user_line).strip())


def hot_equations(s: KernelSummary, width: int = MAX_WIDTH, top: int = 5) -> Table | None:
  """The kernel's heaviest equations with the user's lines: the profiler's attribution
  (measured: PC samples or ncu, with each equation's top stall reason) where it has one,
  else the static share of instructions; None when there is neither."""
  if not s.profiled:
    return None
  static = s.static
  att = s.attribution
  # narrow: the instruction mix or stall gives way first, then the source, then the labels
  cols = [Col("weight", right=True), Col("eqn", give=3), Col("your line", give=3),
          Col("source", give=2, least=16)]
  rows = []
  if att is not None and att.equations:
    measured = att.basis != "static"
    timed = measured and any(e.time_s is not None for e in att.equations)
    if timed:
      cols.append(Col("µs", right=True))
    cols.append(Col("top stall" if measured else "instructions", give=1, least=12))
    for e in att.equations[:top]:
      loc, src = _user_line(e.user_file, e.user_line)
      row = [f"{100 * e.weight:.1f}%", f"[{e.index}] {e.primitive}", loc, src]
      if timed:
        row.append(_us(e.time_s))
      row.append(_why(e) if measured else _instruction_mix(static, e.index))
      rows.append(row)
    title = f"hot equations of {s.label} ({att.description})"
  elif static is not None and static.equations:
    eqs = static.equations
    order = list(static.top_equations or sorted(range(len(eqs)), key=lambda i: -eqs[i].weight))
    cols.append(Col("instructions", give=1, least=12))
    for i in order[:top]:
      e = eqs[i]
      loc, src = _user_line(e.user_file, e.user_line)
      rows.append([f"{100 * e.weight:.1f}%", f"[{e.index}] {e.primitive}", loc, src,
                   _instruction_mix(static, i)])
    title = f"hot equations of {s.label} (share of {static.weight_basis or 'ptx'} instructions)"
  else:
    return None
  return layout.table(title, cols, rows, width)


def _verdict_beside(s: KernelSummary, hot_table_shown: bool) -> str:
  """The kernel's verdict under its tables, less what the hot-equations table already
  says (its heaviest equations; a static verdict says nothing else)."""
  if not s.profiled:
    return ""
  return s.verdict.beside_table if hot_table_shown else str(s.verdict)


def _why(e) -> str:
  """A load's memory waits, charged to it, name their first consumer; else the top stall."""
  wait = next((w for w in e.waits if w.reason == "long_scoreboard"), None)
  if wait is not None and wait.consumer_primitive:
    return f"{wait.words} (first used by {wait.consumer_primitive} at :{wait.consumer_line})"
  return e.stalls[0].words if e.stalls else ""


def _ceilings_line(prof) -> Text | None:
  ceil = prof.ceilings if prof is not None else None
  if ceil is None:
    return None
  mat = ", ".join(f"{k} {_rate(v, 'FLOP/s')}" for k, v in (ceil.matrix_flops_per_s or {}).items())
  return Text(f"ceilings ({ceil.device_name}): copy {_rate(ceil.copy_bytes_per_s, 'B/s')}; {mat}")


def render_report(report, con: Console, options: ConsoleOptions) -> Iterable:
  """What RunReport.__rich_console__ yields."""
  prof = report.profile
  head = Text()
  head.append("pallas-prof ", style="bold")
  title = getattr(report, "title", None)      # a profile's own (profile_view.py), or the run's
  head.append(title or f"{os.path.basename(report.script or '?')}  exit {report.exit_code}  "
              f"{report.platform.describe()}")
  yield head
  checked = report.bounds_checked_line() if hasattr(report, "bounds_checked_line") else None
  if checked:             # before any figure: they are the checked build's
    yield Text(checked, style="bold")
  if prof is not None and prof.message:
    yield Text(prof.message)
  ceilings = _ceilings_line(prof)
  if ceilings is not None:
    yield ceilings
  rows = summaries(report)
  if not rows:
    filtered = any(n.startswith("--kernel ") for n in report.notes)
    yield Text("no kernel matched --kernel (the note below names those the script lowered)"
               if filtered else "no pallas_call kernels were lowered by this script")
  else:
    yield from kernel_tables(report, options.max_width, rows)
    yield from gpu_context_lines(report, options.max_width, rows)
    first = [s for s in rows if s.first]          # each kernel on the first device
    for s in first:
      table = hot_equations(s, options.max_width)
      if table is not None:
        yield table
      yield from probe_lines(s, options.max_width)
      verdict = _verdict_beside(s, table is not None)
      if verdict:
        yield Text(f"{s.label}: {verdict}")
      for note in s.workarounds:
        yield Text(f"{s.label}: Triton workaround: {note}")
      yield from advice_lines(s, options.max_width)     # cli/terminal/advice_render.py
    yield from kinds_legend(first)                      # once, under the last advice
  for note in (*report.notes, *(prof.notes if prof is not None else ())):
    yield Text(f"note: {note}")
  for err in report.errors:
    when = {"run": "at run time", None: "to lower", "lowering": "to lower"}.get(
        err.stage, f"to compile ({err.stage})")
    where = f" at {err.location}" if err.location else ""
    first = (err.reason or "").splitlines()[0] if err.reason else ""
    yield Text(f"error: kernel `{err.kernel}` failed {when}{where}: {first}")
    yield from compile_failure_lines(CompileFailure.of(err.compile_failure))


def compile_failure_lines(failure: CompileFailure | None):
  """A compile failure's equations, fault, reproducer and workaround, a line each."""
  if failure is None:
    return
  lines: dict[tuple, list[int]] = {}      # an unrolled loop's equations of one line, together
  for e in failure.equations:
    lines.setdefault((e.primitive, e.location), []).append(e.index)
  eqns = ", ".join(f"[{', '.join(map(str, indices))}] {primitive} at {location}"
                   for (primitive, location), indices in lines.items())
  if eqns:
    yield Text(f"  from {eqns}")
  yield Text(f"  fault: {failure.fault_words}")
  if failure.reproducer_script:
    yield Text(f"  reproducer: python {failure.reproducer_script}")
  if failure.workaround:
    first, *rest = failure.workaround.splitlines()
    yield Text(f"  workaround: {first}" + (f" (+{len(rest)} more lines in {REPORT})"
                                            if rest else ""))


def render_run(report, out_dir: str | None = None, con: Console | None = None,
               wrote: bool = True) -> None:
  """Prints the report (a RunReport: it renders itself) and where the run is: `wrote`
  after `pallas-prof run`, which wrote it and printed its errors in full as they happened;
  a saved run printed again only names it, and prints them (report.json keeps them)."""
  con = con or console()
  con.print(report)
  if not wrote:       # a saved run's failures as the live run printed them, not a line each
    for err in report.errors:
      if err.report:
        con.print(Text(err.report.rstrip("\n")), soft_wrap=not con.is_terminal)
  if out_dir:
    out_dir = out_dir.rstrip("/")
    present = [f for f in (REPORT, HTML, *report.traces.files())
               if os.path.exists(os.path.join(out_dir, f))]
    if os.path.isdir(os.path.join(out_dir, KERNELS)):
      present.append(f"{KERNELS}/")
    diffs = _diff_files(out_dir)
    if diffs:
      present.append(f"{DIFFS}/")
    head = "wrote" if wrote else "the run is in"
    con.print(Text(f"{head} {out_dir}/ ({', '.join(present)})"))
    if diffs:
      shown = ", ".join(f"{out_dir}/{d}" for d in diffs[:3]) + (
          f" and {len(diffs) - 3} more" if len(diffs) > 3 else "")
      con.print(Text(f"the advice's diffs, to review and apply yourself: {shown} "
                     f"(`patch -p1 --dry-run < FILE`, then `patch -p1 < FILE`, from the "
                     "folder the script ran in)"))


def _diff_files(out_dir: str) -> list[str]:
  """The diffs a run directory holds (cli/run_writes.save_diffs), relative to it."""
  try:
    names = sorted(os.listdir(os.path.join(out_dir, DIFFS)))
  except OSError:
    return []
  return [os.path.join(DIFFS, n) for n in names if n.endswith(".diff")]


def say(text: str, stream=None) -> None:
  """A message of the CLI's own (advise's progress, a run's closing line) on `stream`
  (stderr): on a terminal wrapped to its width as the report is, and its control
  characters shown; elsewhere each line whole, as a log's reader greps it."""
  stream = stream if stream is not None else sys.stderr
  if getattr(stream, "isatty", lambda: False)():
    width = console_width(True)
    text = "\n".join(textwrap.fill(line, width, break_on_hyphens=False) if line else line
                     for line in printable(text).split("\n"))
  print(text, file=stream, flush=True)


__all__ = ["console", "render_run", "render_report", "kernel_table", "kernel_tables",
           "hot_equations", "gpu_context_lines", "say"]
