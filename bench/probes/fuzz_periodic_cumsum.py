"""The TMA CPU fuzz run's one difference (2026-12-02, seed 4244), over fresh inputs:
sin(dot(c, c.T)) with c a float16 cumsum over 19 rows, checked as the fuzzer checks
it (testkit/fuzz/check.py) with the program marked fragile, as the generator now marks a
periodic function of an inexact value past 64 (testkit/fuzz/programs.py).

    python3 bench/probes/fuzz_periodic_cumsum.py [--seeds 40]

Prints how many input seeds were ok, tolerated (a few elements apart) or a Difference.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from testkit.fuzz import check  # noqa: E402
from testkit.fuzz.programs import InputSpec, Program  # noqa: E402

SOURCE = ("def fn(x0, x1):\n  v2 = jnp.cumsum(x1, axis=0)\n"
          "  v3 = jnp.dot(v2, v2.T, precision=HIGHEST, preferred_element_type=jnp.float32)\n"
          "  v4 = jnp.sin(v3)\n  return (v4,)\n")


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--seeds", type=int, default=40)
  args = parser.parse_args(argv)
  counts = collections.Counter()
  for seed in range(args.seeds):
    program = Program("values", SOURCE, (InputSpec((19, 1), "int32", -9, 9),
                                         InputSpec((19, 1), "float16", -4, 4)),
                      seed, 0.06, 5000.0, ("cumsum", "dot", "unary"), fragile=True)
    try:
      counts[check.check(program).status] += 1
    except check.Difference:
      counts["difference"] += 1
  print(dict(counts))


if __name__ == "__main__":
  main(sys.argv[1:])
