"""`pallas-prof diff A B` says whether an action A's advice gave was applied in B, and
whether its saving held. The runs are SYNTHETIC (made here, their times invented): the
test checks the comparison's logic."""
from __future__ import annotations

import argparse
import time

from pallas_prof.advice.schema import Action, KernelAdvice, Trial
from pallas_prof.cli.compare.diff import diff
from pallas_prof.cli.report import KernelEntry, RunReport
from pallas_prof.profiler.schema import KernelProfile, ProfileReport, RuntimeStats, TimingStats


def _run(path, warps, median_s, advice=()):
  timing = TimingStats("cold", 100, 5, median_s, median_s, median_s, median_s, median_s, 0.1)
  kp = KernelProfile("row_kernel#aaaaaa", "row_kernel", [], [], None, None,
                     runtime=RuntimeStats(0, 2, 1, 1, True, [0], "cold", cold=timing))
  prof = ProfileReport(True, "synthetic", None, None, [kp], [], time.time())
  report = RunReport(script="s.py", exit_code=0, kernels=(KernelEntry(
      "row_kernel#aaaaaa", "row_kernel", grid=(8192,), num_warps=warps, num_stages=3),),
      profiles=(prof,), advice=tuple(advice))
  path.mkdir()
  report.save(str(path))
  return str(path)


def _advice(saving):
  act = Action("a", "num_warps 1 -> 4", "too_few_warps", {"num_warps": 4},
               trial=Trial(300e-6, 300e-6 * (1 - saving / 100), saving, 1.5, True))
  return [KernelAdvice("row_kernel#aaaaaa", "row_kernel", actions=[act])]


def _diff(capsys, a, b):
  # wide enough that the verdict stays on one line (a pipe gets 100 columns)
  import os
  from unittest import mock
  with mock.patch.dict(os.environ, {"COLUMNS": "200"}):
    code = diff(argparse.Namespace(a=a, b=b, fail_on_regression=None))
  return code, capsys.readouterr().out


def test_an_applied_action_that_held(tmp_path, capsys):
  a = _run(tmp_path / "a", 1, 300e-6, _advice(73.0))
  b = _run(tmp_path / "b", 4, 82e-6)
  code, out = _diff(capsys, a, b)
  assert code == 0
  assert ("advice applied to row_kernel#aaaaaa: [a] num_warps 1 -> 4: measured -73 %, got "
          "-72.7 % (300.0 -> 82.0 us): held") in out


def test_an_applied_action_that_did_not_hold(tmp_path, capsys):
  a = _run(tmp_path / "a", 1, 300e-6, _advice(73.0))
  b = _run(tmp_path / "b", 4, 250e-6)
  _, out = _diff(capsys, a, b)
  assert "got -16.7 % (300.0 -> 250.0 us): DID NOT HOLD" in out


def test_an_action_not_applied_is_not_mentioned(tmp_path, capsys):
  a = _run(tmp_path / "a", 1, 300e-6, _advice(73.0))
  b = _run(tmp_path / "b", 8, 90e-6)
  _, out = _diff(capsys, a, b)
  assert "advice applied" not in out
