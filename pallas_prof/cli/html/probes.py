"""report.html's probes section (`pallas-prof run --probes`): the table of regions, the
distortion and disagreements in words, and the sampled CTAs on their SMs as an SVG.

From the typed ProbeResult (a KernelProfile's probes); every text passes through markupsafe."""
from __future__ import annotations

import dataclasses
from typing import Any

from markupsafe import Markup, escape

from ...profiler.probe_schema import MAX_JSON_CTAS, ProbeResult

# colour of a CTA by its place on its SM (first, second, ...): the waves of a grid
SHADES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


@dataclasses.dataclass(frozen=True)
class ProbesView:
  title: str
  header: tuple[str, ...]
  rows: tuple[tuple[str, ...], ...]
  lines: tuple[str, ...]            # grid, distortion, what to distrust, disagreements, notes
  timeline: Any                     # Markup (SVG), or None without CTAs


def probes_view(pr: ProbeResult | None) -> ProbesView | None:
  if pr is None:
    return None
  rec = pr.reconciliation
  by_label = {r.label: r for r in rec.regions} if rec is not None else {}
  basis = rec.basis if rec is not None and rec.basis not in (None, "static") else None
  alone = pr.alone
  header = ("share", "region", "cycles p50", "p10–p90", "ns p50") + \
      (("alone: share", "alone: cycles p50", "beside/alone") if alone else ()) + \
      ((f"{basis}: where warps stood", "charged") if basis else ())
  rows = []
  for r in pr.regions:
    row = (f"{100 * r.share:.1f}%", r.label, f"{r.cycles_median:,.0f}",
           f"{r.cycles_p10:,.0f}–{r.cycles_p90:,.0f}", f"{r.ns_median:,.0f}")
    if alone:
      ratio = r.beside_over_alone
      row += (f"{100 * (r.alone_share or 0):.1f}%",
              f"{r.alone_cycles_median or 0:,.0f}",
              "" if ratio is None else f"{ratio:.2f}x")
    if basis:
      s = by_label.get(r.label)
      row += tuple("" if s is None or getattr(s, k) is None else f"{100 * getattr(s, k):.1f}%"
                   for k in ("stood_share", "sampling_share"))
    rows.append(row)
  lines = [f"{pr.sampled_programs:,} of {pr.programs:,} CTAs sampled (every "
           f"{pr.program_stride}), {pr.sampled_warps} of {pr.num_warps} warps each; "
           f"{pr.sms} SMs, up to {pr.max_concurrent_ctas} sampled CTAs at once"]
  if alone:
    lines.append(f"alone: the same probes with one CTA per SM ({alone.ctas_per_sm_beside} "
                 "at once as it runs): each region's own work; beside/alone above 1 is time "
                 "spent waiting for what it shares with other CTAs; alone the L1 cache is "
                 "what shared memory leaves of it, so a region that hits L1 can take longer "
                 "alone (below 1)")
  d = pr.distortion
  if d is not None and d.runtime_pct is not None:
    lines.append(f"distortion: runtime {1e6 * d.runtime_plain_s:.1f} → "
                 f"{1e6 * d.runtime_probed_s:.1f} µs ({d.runtime_pct:+.1f}%), registers "
                 f"{d.registers_plain} → {d.registers_probed}, SASS "
                 f"{d.sass_plain} → {d.sass_probed}")
  lines += [f"distrust: {w}" for w in (d.distrust if d is not None else ())]
  lines += [f"disagrees: {w}" for w in (rec.disagreements if rec is not None else ())]
  lines += [f"note: {n}" for n in pr.notes]
  return ProbesView(title=f"time inside the kernel: probes ({len(rows)} regions)",
                    header=header, rows=tuple(rows), lines=tuple(lines),
                    timeline=sm_timeline(pr) if pr.ctas else None)


def sm_timeline(pr: ProbeResult, width: int = 900, row: int = 4, caption: str = "") -> Markup:
  """One row per SM, one box per sampled CTA from entry to end (ns of the GPU's global
  timer), coloured by its place on its SM; the first MAX_JSON_CTAS sampled CTAs, as
  report.json holds them."""
  ctas = pr.ctas[:MAX_JSON_CTAS]
  sms = sorted({c.sm for c in ctas})
  y_of = {sm: i for i, sm in enumerate(sms)}
  end = max(c.end_ns for c in ctas) or 1.0
  left, top = 48, 22
  scale = (width - left - 12) / end
  height = top + len(sms) * row + 24
  body = [f'<text x="4" y="{top + 8}" font-size="10">SMs</text>',
          f'<text x="{left}" y="14" font-size="11">'
          f'{escape(caption or _caption(pr, len(ctas), len(sms)))}</text>']
  for i in range(6):
    x = left + end * i / 5 * scale
    body.append(f'<line x1="{x:.1f}" y1="{top - 2}" x2="{x:.1f}" y2="{height - 20}" '
                f'stroke="#ccc"/><text x="{x:.1f}" y="{height - 6}" font-size="10" '
                f'text-anchor="middle">{end * i / 5 / 1e3:.0f} µs</text>')
  place: dict[int, int] = {}
  for c in sorted(ctas, key=lambda c: c.start_ns):
    k = place.get(c.sm, 0)
    place[c.sm] = k + 1
    body.append(f'<rect class="cta" x="{left + c.start_ns * scale:.1f}" '
                f'y="{top + y_of[c.sm] * row}" '
                f'width="{max((c.end_ns - c.start_ns) * scale, 0.5):.1f}" '
                f'height="{row - 1}" fill="{SHADES[k % len(SHADES)]}"><title>CTA '
                f'{int(c.program)} on SM {int(c.sm)}</title></rect>')
  return Markup(f'<svg class="chart sm-timeline" viewBox="0 0 {width} {height}" '
                f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" role="img" '
                f'aria-label="sampled CTAs on their SMs">' + "".join(body) + "</svg>")


def _caption(pr: ProbeResult, ctas: int, sms: int) -> str:
  return (f"{ctas} of {pr.sampled_programs:,} sampled CTAs ({pr.programs:,} "
          f"programs) on {sms} SMs; colour: first, second, ... CTA on its SM")
