"""The fault-injection suite's table: run tests/faults and count, per kind of fault, the
cases injected and how each ended (issue 38's proof).

    python tools/fault_table.py [--json out.json] [pytest args...]

A case is one test (one parametrization) carrying @pytest.mark.fault(KIND, ...); a case
with several kinds counts under each. A failing case is counted by what it failed on
(tests/faults/inject.py): a wrong answer, a lost run, an aborted process, an unclear
error, or another failure. Exits as pytest did.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTCOMES = ("passed", "wrong_answer", "lost_run", "aborted_process", "unclear_error", "other_failure",
            "skipped")


class _Counter:
  """Counts each fault case's outcome from its reports (on pytest-xdist's controller too:
  tests/faults/conftest.py puts the kinds in the report's user_properties)."""

  def __init__(self):
    self.cases: dict[str, dict[str, int]] = {}
    self.distinct: dict[str, int] = dict.fromkeys(OUTCOMES, 0)   # each case once

  def pytest_runtest_logreport(self, report):
    kinds = dict(report.user_properties).get("fault_kinds")
    if not kinds:
      return
    if report.when == "call" or (report.when == "setup" and not report.passed):
      outcome = "passed" if report.passed else "skipped" if report.skipped else _outcome(report)
      self.distinct[outcome] += 1
      for kind in kinds:
        row = self.cases.setdefault(kind, dict.fromkeys(OUTCOMES, 0))
        row[outcome] += 1


def _outcome(report) -> str:
  text = report.longreprtext
  for cls, name in (("WrongAnswer", "wrong_answer"), ("LostRun", "lost_run"),
                    ("AbortedProcess", "aborted_process"), ("UnclearError", "unclear_error")):
    if f"{cls}:" in text or f"inject.{cls}" in text:
      return name
  return "other_failure"


def table(cases: dict[str, dict[str, int]], distinct: dict[str, int] | None = None) -> str:
  """One row per kind; the last, every case once (a case of two kinds is in two rows)."""
  from tests.faults.inject import KINDS
  head = ["kind", "cases", *OUTCOMES[:-1], "skipped"]
  rows = [[k, str(sum(v.values())), *(str(v[o]) for o in OUTCOMES)] for k, v in sorted(cases.items())]
  total = distinct or {o: sum(v[o] for v in cases.values()) for o in OUTCOMES}
  rows.append(["all cases", str(sum(total.values())), *(str(total[o]) for o in OUTCOMES)])
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  lines += ["| " + " | ".join(r) + " |" for r in rows]
  lines += ["", "kinds: " + "; ".join(f"{k}: {KINDS[k]}" for k in sorted(cases) if k in KINDS)]
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--json", help="also write the counts here")
  args, pytest_args = parser.parse_known_args(argv)
  sys.path.insert(0, ROOT)
  import pytest
  counter = _Counter()
  code = pytest.main(["-q", "-p", "no:cacheprovider", os.path.join(ROOT, "tests", "faults"),
                      *pytest_args], plugins=[counter])
  print(table(counter.cases, counter.distinct))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"cases": counter.cases, "all_cases": counter.distinct, "pytest_exit": int(code)},
                f, indent=1)
  return int(code)


if __name__ == "__main__":
  sys.exit(main())
