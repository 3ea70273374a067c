"""Recorded H200 profiles the advice's CPU tests diagnose (nothing here is made up).

Where each comes from (all in bench/results/probes_h200/, bench/results/probes_h200.md
says how they were made):
  softmax_report_0c71565.json.gz   `pallas-prof run --probes examples/softmax.py --large`,
                                   one H200, commit 0c71565, 2026-12-02: a whole report.json,
                                   with the ceilings measured on that GPU (copy 4.18 TB/s,
                                   bf16 797 TFLOP/s)
  ka_probes_0c71565.json.gz        tests/profiler/probes_gpu.py --large ka waves, same call:
                                   ProfileReports of known_answer.py's kernels (ka_copy 8192^2
                                   spilling at 255 registers, ka_loop, ka_two, ka_matmul
                                   4096^3, ka_copy 16384 x 2048 with 72.6 % of its PC samples
                                   dropped by CUPTI)
  examples_probes_0c71565.json.gz  probes_gpu.py --large examples: matmul 8192^3 bf16, flash
                                   attention 4x4096x16x64 f16
Those two ProfileReports were taken without ceilings (the probes script does not measure
them): their rates are computed here from the softmax run's ceilings (same machine, same
call), with the profiler's own ceilings.rates, from their recorded work model and median.
"""
from __future__ import annotations

import functools
import gzip
import json
import os

from pallas_prof.cli.report import from_fields
from pallas_prof.profiler.timing import ceilings as ceilings_mod
from pallas_prof.profiler.schema import Ceilings, ProfileReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBES = os.path.join(ROOT, "bench", "results", "probes_h200")


def _load(name):
  with gzip.open(os.path.join(PROBES, name)) as f:
    return json.load(f)


@functools.lru_cache(maxsize=None)
def softmax_run() -> dict:
  return _load("softmax_report_0c71565.json.gz")


def ceilings() -> Ceilings:
  return from_fields(Ceilings, softmax_run()["profile"]["ceilings"])


def reports() -> list[ProfileReport]:
  """Every recorded ProfileReport, rates filled in from the measured ceilings."""
  out = [from_fields(ProfileReport, softmax_run()["profile"])]
  for name in ("ka_probes_0c71565.json.gz", "examples_probes_0c71565.json.gz"):
    for d in _load(name):
      rep = from_fields(ProfileReport, d)
      rep.ceilings = ceilings()
      for kp in rep.kernels:
        if kp.rates is None or kp.rates.bound == "unknown":
          kp.rates = ceilings_mod.rates(kp.work, kp.runtime.median_s, rep.ceilings)
      out.append(rep)
  return out


def kernel(name: str, in_aval: str | None = None):
  """(KernelProfile, its ProfileReport) of the recorded kernel named `name`."""
  for rep in reports():
    for kp in rep.kernels:
      if kp.name == name and (in_aval is None or str(kp.in_avals[0]) == in_aval):
        return kp, rep
  raise KeyError(name)
