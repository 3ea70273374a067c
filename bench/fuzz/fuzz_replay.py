"""Runs the strong hazard leads of fuzz summaries again, on a device, each on
several inputs: the GPU half of what bench/fuzz/fuzz.py --compile-sm90 found on the CPU.

    python3 bench/fuzz/fuzz_replay.py bench/results/fuzz_cpu_..._sm90.json --device gpu \\
        --inputs 8 --out $OUT/replay.json

A lead is a program whose sm_90 SASS has the ptxas hazard's signature
(testkit/fuzz/sass_hazards.py); on a GPU it is right or it is issue 32's bug again.
Each program runs through testkit/fuzz/check.py with `--inputs` seeds for its
random inputs (the program's own first); the output JSON lists every run's outcome,
and the console the differences.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def programs_of(summary: dict) -> list[tuple[str, dict]]:
  """(where in the summary, the program as a dict) for each program it kept whole."""
  found = []
  for lead in summary.get("sm90", {}).get("strong_hazard_leads", []):
    if "program" in lead:
      found.append(("strong_hazard_lead", lead["program"]))
  return found


def to_program(data: dict):
  from testkit.fuzz.programs import InputSpec, Program
  return Program(**dict(data, features=tuple(data.get("features", ())),
                        inputs=tuple(InputSpec(**dict(i, shape=tuple(i["shape"])))
                                     for i in data["inputs"])))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("summaries", nargs="+", help="bench/fuzz/fuzz.py summary JSON files")
  parser.add_argument("--device", default="gpu")
  parser.add_argument("--inputs", type=int, default=8, help="input seeds per program")
  parser.add_argument("--out", required=True)
  args = parser.parse_args()
  import jax
  from bench.fuzz.fuzz_summary import commit, write_json
  from testkit.fuzz.check import Difference, check
  device = jax.devices(args.device)[0]
  runs, differences, started = [], [], time.time()
  for path in args.summaries:
    with open(path) as f:
      summary = json.load(f)
    for index, (where, data) in enumerate(programs_of(summary)):
      program = to_program(data)
      for k in range(args.inputs):
        variant = dataclasses.replace(program, seed=program.seed + 7919 * k)
        try:
          status = check(variant, device).status
        except Difference as e:
          status = "difference"
          differences.append({"source": program.source, "input_seed": variant.seed,
                              "message": str(e)[:2000], "from": os.path.basename(path)})
          print(f"DIFFERENCE ({where}, input seed {variant.seed}):\n{program.source}\n{e}\n")
        except AssertionError as e:     # the reference refused these inputs
          status = f"reference failed: {str(e)[:200]}"
        runs.append({"from": os.path.basename(path), "where": where, "index": index,
                     "seed": program.seed, "input_seed": variant.seed, "status": status})
  stamp, stamp_from = commit(ROOT)
  result = {"command": "python3 bench/fuzz/fuzz_replay.py " + " ".join(sys.argv[1:]),
            "commit": stamp, "commit_from": stamp_from, "device": str(device),
            "programs": len({(r["from"], r["index"]) for r in runs}),
            "runs": len(runs), "differences": differences,
            "outcomes": {s: sum(r["status"] == s for r in runs)
                         for s in sorted({r["status"] for r in runs})},
            "seconds": round(time.time() - started, 1), "each": runs}
  write_json(args.out, result)
  print(json.dumps({k: result[k] for k in ("commit", "device", "programs", "runs", "outcomes")},
                   indent=1))


if __name__ == "__main__":
  main()
