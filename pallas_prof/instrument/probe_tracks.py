"""Perfetto tracks of a probed replay: one per SM, CTA slices with their regions nested.

Chrome trace events ("ph": "X") in a process of their own per kernel: the
times are the GPU's %globaltimer, from the probed launch's first sampled CTA
entry, not the host clock of the other tracks. CTAs resident on one SM at
the same time overlap, and slices on one track must nest, so each SM gets as
many tracks as it had CTAs at once ("SM 12", "SM 12 #2"), each CTA on the
first that is free when it starts.
"""
from __future__ import annotations

import json
import os
from typing import Any

from ..safe_files import write_atomic

PID_BASE = 1000          # apart from the span tracks' process (perfetto_trace.PID)


def perfetto_events(label: str, result, pid: int = PID_BASE) -> list[dict[str, Any]]:
  """Trace events for one kernel's ProbeResult (or its report.json dict)."""
  get = (lambda o, k: o[k]) if isinstance(result, dict) else getattr
  ctas = sorted(get(result, "ctas"), key=lambda c: (get(c, "sm"), get(c, "start_ns")))
  regions = get(result, "regions")
  events: list[dict[str, Any]] = [
      {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
       "args": {"name": f"probes {label}: sampled CTAs on their SMs (GPU globaltimer)"}},
      {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
       "args": {"sort_index": pid}}]
  lanes: dict[int, list[float]] = {}       # sm -> end time of each of its tracks
  tids: dict[tuple[int, int], int] = {}
  for c in ctas:
    sm, start, end = get(c, "sm"), get(c, "start_ns"), get(c, "end_ns")
    ends = lanes.setdefault(sm, [])
    lane = next((i for i, e in enumerate(ends) if e <= start), None)
    if lane is None:
      lane = len(ends)
      ends.append(end)
    else:
      ends[lane] = end
    key = (sm, lane)
    if key not in tids:
      tids[key] = tid = 1 + sm * 64 + lane
      name = f"SM {sm}" + (f" #{lane + 1}" if lane else "")
      events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": name}})
      events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}})
    tid = tids[key]
    program = get(c, "program")
    events.append({"name": f"CTA {program}", "cat": "cta", "ph": "X", "pid": pid, "tid": tid,
                   "ts": start / 1e3, "dur": max(end - start, 0) / 1e3,
                   "args": {"program": program, "sm": sm}})
    bounds = get(c, "boundaries_ns")
    for k, region in enumerate(regions):
      lo, hi = bounds[k], bounds[k + 1]
      # inside the CTA's slice (the warp's clock and the globaltimer differ by rounding)
      lo, hi = max(lo, start), min(hi, end)
      if hi <= lo:
        continue
      events.append({"name": get(region, "label"), "cat": "probe", "ph": "X", "pid": pid,
                     "tid": tid, "ts": lo / 1e3, "dur": (hi - lo) / 1e3,
                     "args": {"eqns": list(get(region, "eqns")), "kind": get(region, "kind")}})
  return events


def add_to_trace(path: str, reports) -> None:
  """Appends the SM tracks of every probed kernel of `reports` (ProfileReports) to the
  trace-event file at `path` (the run's trace.perfetto.json, written when tracing ended)."""
  document = {"traceEvents": []}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      document = json.load(f)
  pid = PID_BASE
  for report in reports:
    for k in report.kernels:
      if k.probes is not None:
        document["traceEvents"] += perfetto_events(k.label, k.probes, pid)
        pid += 1
  write_atomic(path, json.dumps(document, separators=(",", ":")), mode=0o644)   # whole or none
