"""The probe buffer read back: per region cycles and ns, each CTA on its SM.

`parse(words, layout)` reads the buffer the probed variant wrote (its layout:
backend/lowering/features/probes.py) into per-row arrays; `summarize` makes the figures the
report shows. numpy only: no JAX, no GPU (the CPU tests feed it a buffer
built by hand).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...backend.lowering.features.probes import HEADER_WORDS, ProbeLayout
from ..probe_schema import AloneReading, CtaSpan, ProbeResult, RegionFigures


class ProbeBufferError(ValueError):
  """The buffer does not hold what the layout says (a wrong layout or a broken kernel)."""


@dataclasses.dataclass(frozen=True)
class ProbeRows:
  """The rows the kernel wrote, one per sampled (program, warp)."""
  program: np.ndarray      # int64 [rows]
  warp: np.ndarray         # int64 [rows]: the warp's index in its CTA
  sm: np.ndarray           # int64 [rows]: %smid
  start_ns: np.ndarray     # uint64 [rows]: %globaltimer at entry
  end_ns: np.ndarray       # uint64 [rows]: %globaltimer at the end
  clocks: np.ndarray       # int64 [rows, regions + 1]: %clock64 at each boundary
  unwritten: int           # rows whose header stayed 0 (their program never ran the probes)


def parse(words: np.ndarray, layout: ProbeLayout) -> ProbeRows:
  words = np.asarray(words, dtype=np.uint64).reshape(-1)
  if words.size != layout.words:
    raise ProbeBufferError(f"probe buffer has {words.size} words; its layout says "
                           f"{layout.words} ({layout.rows} rows of {layout.row_words})")
  table = words.reshape(layout.rows, layout.row_words)
  header = table[:, 0]
  written = header != 0
  rows = table[written]
  index = np.nonzero(written)[0]
  program = (rows[:, 0] & np.uint64(0xFFFFFFFF)).astype(np.int64) - 1
  expected = (index // layout.sampled_warps) * layout.program_stride
  if np.any(program != expected):
    bad = int(np.argmax(program != expected))
    raise ProbeBufferError(f"row {index[bad]} holds program {program[bad]}, the layout puts "
                           f"program {expected[bad]} there (stride {layout.program_stride})")
  n = len(layout.regions)
  clocks = rows[:, HEADER_WORDS:HEADER_WORDS + n + 1].astype(np.int64)
  return ProbeRows(program=program,
                   warp=(index % layout.sampled_warps) * layout.warp_stride,
                   sm=(rows[:, 0] >> np.uint64(32)).astype(np.int64),
                   start_ns=rows[:, 1], end_ns=rows[:, 2], clocks=clocks,
                   unwritten=int((~written).sum()))


def _pct(values: np.ndarray, q: float) -> float:
  return float(np.percentile(values, q)) if values.size else 0.0


def summarize(rows: ProbeRows, layout: ProbeLayout) -> ProbeResult:
  if rows.program.size == 0:
    raise ProbeBufferError("no sampled warp wrote its row: the probed kernel did not run "
                           "its probes")
  cycles = np.diff(rows.clocks, axis=1)
  notes = []
  if np.any(cycles < 0):
    notes.append(f"{int((cycles < 0).any(axis=1).sum())} rows have clocks that go back; "
                 "their negative spans count as 0")
    cycles = np.maximum(cycles, 0)
  total = cycles.sum(axis=1)
  wall = (rows.end_ns.astype(np.int64) - rows.start_ns.astype(np.int64)).astype(np.float64)
  ns_per_cycle = float(wall.sum() / total.sum()) if total.sum() > 0 and wall.sum() > 0 else None
  scale = ns_per_cycle or 0.0
  regions = []
  for k, region in enumerate(layout.regions):
    c = cycles[:, k].astype(np.float64)
    regions.append(RegionFigures(
        slot=region.slot, label=region.label, kind=region.kind, eqns=list(region.eqns),
        user_file=region.file, user_line=region.line, cycles_median=_pct(c, 50),
        cycles_p10=_pct(c, 10), cycles_p90=_pct(c, 90), ns_median=_pct(c, 50) * scale,
        share=float(c.sum() / total.sum()) if total.sum() else 0.0, loads=list(region.loads),
        waits=region.waits))
  ctas = _ctas(rows, scale)
  if rows.unwritten:
    notes.append(f"{rows.unwritten} sampled rows were never written")
  return ProbeResult(
      regions=regions, programs=layout.programs, sampled_programs=layout.sampled_programs,
      program_stride=layout.program_stride, num_warps=layout.num_warps,
      sampled_warps=layout.sampled_warps, rows=int(rows.program.size),
      ns_per_cycle=ns_per_cycle, cta_ns_median=_pct(np.array([c.end_ns - c.start_ns
                                                              for c in ctas]), 50),
      sms=len({c.sm for c in ctas}), max_concurrent_ctas=_max_overlap(ctas),
      span_ns=max(c.end_ns for c in ctas) - min(c.start_ns for c in ctas), ctas=ctas,
      ctas_total=len(ctas), notes=notes)


def add_alone(result: ProbeResult, rows: ProbeRows, layout: ProbeLayout, ctas_per_sm: int,
              shared_bytes: int, ctas_per_sm_plain: int | None = None) -> None:
  """Sets the regions' alone figures and `result.alone` from the rows of the launch with
  one CTA per SM (probing._alone)."""
  alone = summarize(rows, layout)
  for mine, solo in zip(result.regions, alone.regions, strict=True):
    mine.alone_cycles_median, mine.alone_share = solo.cycles_median, solo.share
  result.alone = AloneReading(ctas_per_sm_beside=ctas_per_sm, ctas_per_sm_alone=1,
                              shared_bytes=shared_bytes, cta_ns_median=alone.cta_ns_median,
                              span_ns=alone.span_ns, ctas_per_sm_plain=ctas_per_sm_plain)
  result.notes += [f"alone: {n}" for n in alone.notes]
  if ctas_per_sm_plain is not None and ctas_per_sm_plain != ctas_per_sm:
    result.notes.append(f"occupancy: the probed kernel runs {ctas_per_sm} CTAs per SM, the "
                        f"kernel without probes {ctas_per_sm_plain}: the reading beside the "
                        "others is of the probed kernel's occupancy")


def _ctas(rows: ProbeRows, ns_per_cycle: float) -> list[CtaSpan]:
  """Per sampled program: its SM, entry (earliest warp) and end (latest warp), and the
  region boundaries of its first sampled warp on the same ns clock."""
  origin = int(rows.start_ns.min())
  out = []
  for program in np.unique(rows.program):
    mine = np.nonzero(rows.program == program)[0]
    first = mine[0]
    start = float(int(rows.start_ns[mine].min()) - origin)
    end = float(int(rows.end_ns[mine].max()) - origin)
    entry = float(int(rows.start_ns[first]) - origin)
    clk = rows.clocks[first]
    bounds = [entry + (int(c) - int(clk[0])) * ns_per_cycle for c in clk]
    out.append(CtaSpan(program=int(program), sm=int(rows.sm[first]), start_ns=start,
                       end_ns=end, boundaries_ns=bounds))
  return out


def _max_overlap(ctas: list[CtaSpan]) -> int:
  events = sorted([(c.start_ns, 1) for c in ctas] + [(c.end_ns, -1) for c in ctas],
                  key=lambda e: (e[0], e[1]))
  best = now = 0
  for _, step in events:
    now += step
    best = max(best, now)
  return best


def table_rows(result: ProbeResult) -> tuple[list[str], list[list[str]], str | None]:
  """The report's probe table, as strings: (column names, one row per region, the
  sampling basis the last two columns compare with, or None). The terminal report
  (cli/terminal/probe_table.py) and text_table lay out these same rows."""
  rec = result.reconciliation
  basis = rec.basis if rec is not None and rec.basis != "static" else None
  sampled = {r.label: (r.stood_share, r.sampling_share) for r in rec.regions} if basis else {}
  names = ["share", "region", "cycles p50", "p10–p90", "ns p50"]
  names += ["alone", "alone p50", "beside/alone"] if result.alone is not None else []
  names += ["samples at", "charged"] if basis else []
  rows = []
  for r in result.regions:
    row = [f"{100 * r.share:.1f}%", r.label, f"{r.cycles_median:,.0f}",
           f"{r.cycles_p10:,.0f}–{r.cycles_p90:,.0f}", f"{r.ns_median:,.0f}"]
    if result.alone is not None:
      ratio = r.beside_over_alone
      row += [f"{100 * (r.alone_share or 0.0):.1f}%", f"{r.alone_cycles_median or 0:,.0f}",
              "" if ratio is None else f"{ratio:.2f}x"]
    if basis:
      at, weight = sampled.get(r.label, (None, None))
      row += ["" if at is None else f"{100 * at:.1f}%",
              "" if weight is None else f"{100 * weight:.1f}%"]
    rows.append(row)
  return names, rows, basis


def footer_lines(result: ProbeResult) -> list[tuple[str, bool]]:
  """The lines under the table, each with whether it is a warning to stress: the grid,
  the distortion, the figures to distrust, the disagreements, the notes."""
  lines = [(f"{result.sms} SMs, up to {result.max_concurrent_ctas} sampled CTAs at once "
            f"(~{result.waves:.1f} waves), CTA median {result.cta_ns_median / 1e3:.2f} µs, "
            f"sampled CTAs span {result.span_ns / 1e3:.1f} µs", False)]
  a = result.alone
  if a is not None:
    lines.append((f"alone: the same probes with one CTA per SM ({a.ctas_per_sm_beside} at once "
                  f"as it runs): each region's own work; beside/alone above 1 is time spent "
                  f"waiting for what it shares with other CTAs (pipes, issue slots, memory); "
                  f"alone the L1 cache is what shared memory leaves of it, so a region that "
                  f"hits L1 can take longer alone (below 1)",
                  False))
  d = result.distortion
  if d is not None:
    parts = []
    if d.runtime_pct is not None:
      parts.append(f"runtime {d.runtime_plain_s * 1e6:.1f} → {d.runtime_probed_s * 1e6:.1f} µs "
                   f"({d.runtime_pct:+.1f}%)")
    parts.append(f"registers {d.registers_plain} → {d.registers_probed}")
    if d.sass_pct is not None:
      parts.append(f"SASS {d.sass_plain} → {d.sass_probed} ({d.sass_pct:+.1f}%; "
                   f"{d.sass_probe_instructions} of them the probes')")
    lines.append(("distortion: " + ", ".join(parts), False))
    lines += [(f"distrust: {why}", True) for why in d.distrust]
  if result.reconciliation is not None:
    lines += [(f"disagrees: {why}", False) for why in result.reconciliation.disagreements]
  lines += [(f"note: {n}", False) for n in result.notes]
  return lines


def text_table(result: ProbeResult) -> str:
  """Plain text of the report's probe table and the lines under it (no terminal needed)."""
  names, rows, _ = table_rows(result)
  widths = [max(len(str(x)) for x in column) for column in zip(names, *rows, strict=True)]
  fmt = lambda cells: "  " + "  ".join(  # noqa: E731 - the region column left, numbers right
      c.ljust(w) if i == 1 else c.rjust(w)
      for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
  return "\n".join([fmt(names)] + [fmt(r) for r in rows]
                   + [f"  {text}" for text, _ in footer_lines(result)])
