"""Draws the sampled CTAs of a probed kernel on their SMs as a standalone SVG (the
drawing of report.html's probes section): one row per SM, one box per CTA from its
entry to its end, coloured by its place on its SM, so the waves of a grid show as
columns.

    python tools/probe_timeline.py RESULTS KERNEL OUT.svg

RESULTS: a report.json (`pallas-prof run --probes`) or the probes.json that
tests/profiler/probes_gpu.py writes (.gz too); KERNEL: a label or its prefix.
report.json keeps the first 512 sampled CTAs; the run's trace.perfetto.json has all.
"""
from __future__ import annotations

import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pallas_prof.cli.html.probes import sm_timeline  # noqa: E402
from pallas_prof.profiler.probe_schema import ProbeResult  # noqa: E402
from pallas_prof.serial import decode  # noqa: E402


def load_kernel(path: str, kernel: str) -> dict:
  with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
    data = json.load(f)
  reports = data if isinstance(data, list) else [data.get("profile") or data]
  for report in reports:
    for k in report.get("kernels", []):
      if k.get("probes") and k["label"].startswith(kernel):
        return k
  raise SystemExit(f"no probed kernel {kernel!r} in {path}")


def main(argv) -> int:
  if len(argv) != 3:
    print(__doc__)
    return 2
  k = load_kernel(argv[0], argv[1])
  pr = k["probes"]
  caption = (f"{k['label']} {' '.join(k.get('in_avals') or [])}: {len(pr['ctas'])} of "
             f"{pr['sampled_programs']:,} sampled CTAs ({pr['programs']:,} programs); colour: "
             "first, second, ... CTA on its SM")
  svg = sm_timeline(decode(ProbeResult, pr), width=1200, row=5, caption=caption)
  with open(argv[2], "w") as f:
    f.write(str(svg).replace("<svg ", '<svg width="1200" ', 1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
