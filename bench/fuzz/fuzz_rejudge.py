"""Re-judges saved fuzz reproducers with the op-by-op reference (testkit/fuzz/op_by_op.py):
for each program, on the CPU, pallas-prof's answer (Triton's interpreter), XLA's jitted
reference (the fuzzer's main one) and the op-by-op reference (every equation rounded to its
dtype), compared as the fuzzer compares (testkit/fuzz/check.py), and the check's outcome now.

    python3 bench/fuzz/fuzz_rejudge.py bench/corpus/*/repro_*.py --out OUT.json
    python3 bench/fuzz/fuzz_rejudge.py --log RUN.jsonl.gz --out OUT.json   # the programs
        a fuzz log kept whole (counted apart or tolerated; logs before 2026-12-05 kept
        only their source, which cannot be run again)

A difference from XLA's jit is the reference's where pallas-prof equals the op-by-op
reference; pallas-prof's own where it differs from that reference as well.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


# the check's outcomes for a sum taken in another order than XLA's: the op-by-op reference
# runs a cumsum as XLA does, so it cannot settle these; their own references do
ORDERS = ("interpreter_scan_order", "gpu_scan_order", "xla_low_precision_accumulates")


def logged_programs(path: str) -> list[tuple[str, object]]:
  """(where, Program) for each record of a fuzz log that keeps its program whole."""
  import gzip
  import json
  from bench.fuzz.fuzz_replay import to_program
  opener = gzip.open if path.endswith(".gz") else open
  found = []
  with opener(path, "rt") as f:
    for line_number, line in enumerate(f, 1):
      record = json.loads(line)
      if "program" in record:
        where = f"{os.path.relpath(path, ROOT)}:{line_number} ({record.get('status')})"
        found.append((where, to_program(record["program"])))
  return found


def judge(path: str) -> dict:
  from testkit.fuzz import check
  return judge_program(os.path.relpath(path, ROOT), check.load_reproducer(path))


def judge_program(where: str, program) -> dict:
  from testkit.fuzz import check, op_by_op
  inputs = check.make_inputs(program)
  xla = check.run_reference(program, inputs)
  reference = op_by_op.run_program(program, inputs)
  ours = check.run_pallas_prof(program, inputs)
  against_xla = check.compare(program, ours, xla)
  against_op = check.compare(program, ours, reference, check.FLIPS)[0]
  if against_xla[0] is None and not against_xla[1]:
    verdict = "no difference from XLA's jit"
  elif against_op is None:
    verdict = "the reference's (pallas-prof equals the op-by-op reference)"
  try:
    outcome = check.check(program).status
  except check.Difference as e:
    outcome = f"Difference: {str(e)[:300]}"
  if against_op is not None and outcome in ORDERS:
    verdict = f"an order, not a rounding ({outcome}: the op-by-op reference sums in XLA's order)"
  elif against_op is not None:
    verdict = "pallas-prof's (it differs from the op-by-op reference too)"
  return {"reproducer": where, "describe": program.describe(),
          "fragile": program.fragile, "verdict": verdict, "check_now": outcome,
          "ours_vs_xla_jit": against_xla[0] or against_xla[1] or None,
          "ours_vs_op_by_op": against_op,
          "elements_ours_not_equal_op_by_op": [int((~_same(g, r)).sum())
                                               for g, r in zip(ours, reference)],
          "elements_xla_jit_not_equal_op_by_op": [int((~_same(x, r)).sum())
                                                  for x, r in zip(xla, reference)]}


def _same(a, b):
  import numpy as np
  a, b = np.asarray(a), np.asarray(b)
  if a.dtype.kind == "f" or str(a.dtype) == "bfloat16":
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a == b) | (np.isnan(a) & np.isnan(b))
  return a == b


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("reproducers", nargs="*")
  parser.add_argument("--log", action="append", default=[],
                      help="a fuzz log (.jsonl or .jsonl.gz) whose kept programs to judge")
  parser.add_argument("--out", required=True)
  args = parser.parse_args()
  from bench.fuzz.fuzz_summary import commit, versions, write_json
  started = time.time()
  cases = [judge(path) for path in args.reproducers]
  cases += [judge_program(where, program) for log in args.log
            for where, program in logged_programs(log)]
  stamp, stamp_from = commit(ROOT)
  write_json(args.out, {
      "command": "python3 bench/fuzz/fuzz_rejudge.py " + " ".join(
          os.path.relpath(a, ROOT) if os.path.exists(a) else a for a in sys.argv[1:]),
      "commit": stamp, "commit_from": stamp_from, "device": "cpu", "versions": versions(),
      "seconds": round(time.time() - started, 1),
      "verdicts": {v: sum(c["verdict"] == v for c in cases)
                   for v in sorted({c["verdict"] for c in cases})},
      "cases": cases})
  for case in cases:
    print(f"{case['reproducer']}: {case['verdict']}; check now: {case['check_now']}")


if __name__ == "__main__":
  main()
