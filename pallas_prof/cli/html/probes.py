"""report.html's probes section (`pallas-prof run --probes`): the table of regions, the
distortion and disagreements in words, and the sampled CTAs on their SMs as an SVG.

From report.json's dict (kernels[i].probes); every text passes through markupsafe."""
from __future__ import annotations

import dataclasses
from typing import Any

from markupsafe import Markup, escape

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


def probes_view(pr: dict | None) -> ProbesView | None:
  if not pr:
    return None
  rec = pr.get("reconciliation") or {}
  by_label = {r["label"]: r for r in rec.get("regions") or []}
  basis = rec.get("basis") if rec.get("basis") not in (None, "static") else None
  alone = pr.get("alone")
  header = ("share", "region", "cycles p50", "p10–p90", "ns p50") + \
      (("alone: share", "alone: cycles p50", "beside/alone") if alone else ()) + \
      ((f"{basis}: where warps stood", "charged") if basis else ())
  rows = []
  for r in pr.get("regions") or []:
    row = (f"{100 * r['share']:.1f}%", r["label"], f"{r['cycles_median']:,.0f}",
           f"{r['cycles_p10']:,.0f}–{r['cycles_p90']:,.0f}", f"{r['ns_median']:,.0f}")
    if alone:
      ratio = r.get("beside_over_alone")
      row += (f"{100 * (r.get('alone_share') or 0):.1f}%",
              f"{r.get('alone_cycles_median') or 0:,.0f}",
              "" if ratio is None else f"{ratio:.2f}x")
    if basis:
      s = by_label.get(r["label"]) or {}
      row += tuple("" if s.get(k) is None else f"{100 * s[k]:.1f}%"
                   for k in ("stood_share", "sampling_share"))
    rows.append(row)
  lines = [f"{pr['sampled_programs']:,} of {pr['programs']:,} CTAs sampled (every "
           f"{pr['program_stride']}), {pr['sampled_warps']} of {pr['num_warps']} warps each; "
           f"{pr['sms']} SMs, up to {pr['max_concurrent_ctas']} sampled CTAs at once"]
  if alone:
    lines.append(f"alone: the same probes with one CTA per SM ({alone['ctas_per_sm_beside']} "
                 "at once as it runs): each region's own work; beside/alone above 1 is time "
                 "spent waiting for what it shares with other CTAs; alone the L1 cache is "
                 "what shared memory leaves of it, so a region that hits L1 can take longer "
                 "alone (below 1)")
  d = pr.get("distortion") or {}
  if d.get("runtime_pct") is not None:
    lines.append(f"distortion: runtime {1e6 * d['runtime_plain_s']:.1f} → "
                 f"{1e6 * d['runtime_probed_s']:.1f} µs ({d['runtime_pct']:+.1f}%), registers "
                 f"{d.get('registers_plain')} → {d.get('registers_probed')}, SASS "
                 f"{d.get('sass_plain')} → {d.get('sass_probed')}")
  lines += [f"distrust: {w}" for w in d.get("distrust") or []]
  lines += [f"disagrees: {w}" for w in rec.get("disagreements") or []]
  lines += [f"note: {n}" for n in pr.get("notes") or []]
  return ProbesView(title=f"time inside the kernel: probes ({len(rows)} regions)",
                    header=header, rows=tuple(rows), lines=tuple(lines),
                    timeline=sm_timeline(pr) if pr.get("ctas") else None)


def sm_timeline(pr: dict, width: int = 900, row: int = 4, caption: str = "") -> Markup:
  """One row per SM, one box per sampled CTA from entry to end (ns of the GPU's global
  timer), coloured by its place on its SM; report.json holds the first sampled CTAs."""
  ctas = pr["ctas"]
  sms = sorted({c["sm"] for c in ctas})
  y_of = {sm: i for i, sm in enumerate(sms)}
  end = max(c["end_ns"] for c in ctas) or 1.0
  left, top = 48, 22
  scale = (width - left - 12) / end
  height = top + len(sms) * row + 24
  body = [f'<text x="4" y="{top + 8}" font-size="10">SMs</text>',
          f'<text x="{left}" y="14" font-size="11">{escape(caption or _caption(pr, len(sms)))}'
          "</text>"]
  for i in range(6):
    x = left + end * i / 5 * scale
    body.append(f'<line x1="{x:.1f}" y1="{top - 2}" x2="{x:.1f}" y2="{height - 20}" '
                f'stroke="#ccc"/><text x="{x:.1f}" y="{height - 6}" font-size="10" '
                f'text-anchor="middle">{end * i / 5 / 1e3:.0f} µs</text>')
  place: dict[int, int] = {}
  for c in sorted(ctas, key=lambda c: c["start_ns"]):
    k = place.get(c["sm"], 0)
    place[c["sm"]] = k + 1
    body.append(f'<rect class="cta" x="{left + c["start_ns"] * scale:.1f}" '
                f'y="{top + y_of[c["sm"]] * row}" '
                f'width="{max((c["end_ns"] - c["start_ns"]) * scale, 0.5):.1f}" '
                f'height="{row - 1}" fill="{SHADES[k % len(SHADES)]}"><title>CTA '
                f'{int(c["program"])} on SM {int(c["sm"])}</title></rect>')
  return Markup(f'<svg class="chart sm-timeline" viewBox="0 0 {width} {height}" '
                f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" role="img" '
                f'aria-label="sampled CTAs on their SMs">' + "".join(body) + "</svg>")


def _caption(pr: dict, sms: int) -> str:
  return (f"{len(pr['ctas'])} of {pr['sampled_programs']:,} sampled CTAs ({pr['programs']:,} "
          f"programs) on {sms} SMs; colour: first, second, ... CTA on its SM")
