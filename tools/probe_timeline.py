"""Draws the sampled CTAs of a probed kernel on their SMs as an SVG: one row per SM,
one box per CTA from its entry to its end (GPU globaltimer), shaded by its place on
its SM (first, second, ... CTA there), so the waves of a grid show as columns.

    python tools/probe_timeline.py RESULTS KERNEL OUT.svg

RESULTS: a report.json (`pallas-prof run --probes`) or the probes.json that
tests/profiler/probes_gpu.py writes (.gz too); KERNEL: a label or name (prefix).
report.json keeps the first 512 sampled CTAs (probe_schema.MAX_JSON_CTAS); the
run's trace.perfetto.json has them all.
"""
from __future__ import annotations

import gzip
import json
import sys

SHADES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


def load_kernel(path: str, kernel: str) -> dict:
  with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
    data = json.load(f)
  reports = data if isinstance(data, list) else [data.get("profile") or data]
  for report in reports:
    for k in report.get("kernels", []):
      if k.get("probes") and (k["label"] == kernel or k["label"].startswith(kernel)):
        return k
  raise SystemExit(f"no probed kernel {kernel!r} in {path}")


def svg(k: dict, width: int = 1200, row: int = 5) -> str:
  ctas = k["probes"]["ctas"]
  sms = sorted({c["sm"] for c in ctas})
  y_of = {sm: i for i, sm in enumerate(sms)}
  end = max(c["end_ns"] for c in ctas) or 1.0
  left, top = 60, 40
  scale = (width - left - 20) / end
  order: dict[int, int] = {}
  boxes = []
  for c in sorted(ctas, key=lambda c: c["start_ns"]):
    place = order.get(c["sm"], 0)
    order[c["sm"]] = place + 1
    x = left + c["start_ns"] * scale
    w = max((c["end_ns"] - c["start_ns"]) * scale, 0.5)
    boxes.append(f'<rect x="{x:.1f}" y="{top + y_of[c["sm"]] * row}" width="{w:.1f}" '
                 f'height="{row - 1}" fill="{SHADES[place % len(SHADES)]}">'
                 f'<title>CTA {c["program"]} on SM {c["sm"]}</title></rect>')
  height = top + len(sms) * row + 40
  ticks = []
  for i in range(6):
    t = end * i / 5
    x = left + t * scale
    ticks.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 36}" '
                 f'stroke="#ccc"/><text x="{x:.1f}" y="{height - 22}" font-size="11" '
                 f'text-anchor="middle">{t / 1e3:.0f} µs</text>')
  pr = k["probes"]
  title = (f"{k['label']} {' '.join(k.get('in_avals') or [])}: {len(ctas)} of "
           f"{pr['sampled_programs']} sampled CTAs ({pr['programs']} programs) on "
           f"{len(sms)} SMs; colour: first, second, ... CTA on its SM")
  return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
          f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
          f'<text x="{left}" y="20" font-size="13">{title}</text>'
          f'<text x="8" y="{top + 10}" font-size="11">SMs</text>'
          + "".join(ticks) + "".join(boxes) + "</svg>\n")


def main(argv) -> int:
  if len(argv) != 3:
    print(__doc__)
    return 2
  with open(argv[2], "w") as f:
    f.write(svg(load_kernel(argv[0], argv[1])))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
