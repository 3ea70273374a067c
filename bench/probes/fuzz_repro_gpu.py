"""Runs a fuzz reproducer many times on a device and says whether (and where)
pallas-prof's result moves: a wrong answer every time is a miscompile or a
lowering error, one that comes and goes is a race.

    python3 bench/probes/fuzz_repro_gpu.py REPRO.py [--runs 30] [--seeds 4] [--out FILE.json]

Each run uses the reproducer's own inputs (seed) first, then --seeds more
input draws; every result is compared with the reference (XLA on the CPU for
"values" programs, JAX's Pallas interpreter for "kernel" ones), element by
element (bit for bit), and with the fuzzer's own tolerance (testkit/fuzz/check.py's
compare: "fuzzer_verdict").
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def load_program(path):
  from testkit.fuzz.programs import InputSpec, Program
  text = open(path).read()
  spec = json.loads(re.search(r"PROGRAM = json.loads\(r'''(.*?)'''\)", text, re.S).group(1))
  spec["inputs"] = tuple(InputSpec(**dict(i, shape=tuple(i["shape"]))) for i in spec["inputs"])
  spec["features"] = tuple(spec["features"])
  return Program(**spec)


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("repro")
  ap.add_argument("--runs", type=int, default=30)
  ap.add_argument("--seeds", type=int, default=4)
  ap.add_argument("--device", default="gpu")
  ap.add_argument("--out", default=None)
  args = ap.parse_args(argv)
  import jax
  import numpy as np
  from testkit.fuzz import check as fuzz_check
  program = load_program(args.repro)
  device = jax.devices(args.device)[0]
  report = {"repro": os.path.basename(args.repro), "device": str(device), "inputs": []}
  for k in range(args.seeds + 1):
    p = program if k == 0 else dataclasses.replace(program, seed=program.seed * 1000 + k)
    inputs = fuzz_check.make_inputs(p)
    reference = fuzz_check.run_reference(p, inputs) if hasattr(fuzz_check, "run_reference") \
        else None
    results = []
    for _ in range(args.runs):
      outs = fuzz_check.run_pallas_prof(p, inputs, device)
      results.append(outs)
    first = results[0]
    moving = sorted({(o, tuple(int(i) for i in idx))
                     for r in results[1:] for o, (a, b) in enumerate(zip(first, r))
                     for idx in np.argwhere(~((a == b) | ((a != a) & (b != b))))})
    entry = {"seed": p.seed, "runs": args.runs, "elements_that_move_between_runs": len(moving),
             "first_moving": [list(m) for m in moving[:10]]}
    if reference is not None:
      wrong = []
      for r in results:
        n = 0
        for a, b in zip(r, reference):
          a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
          n += int(np.sum(~((a64 == b64) | (np.isnan(a64) & np.isnan(b64)))))
        wrong.append(n)
      entry["wrong_elements_per_run"] = wrong
      # bit-for-bit counts include float rounding; the fuzzer's own verdict (its
      # tolerance, its rules for fragile programs) says whether a run is a finding
      verdicts = [fuzz_check.compare(p, r, reference)[0] for r in results]
      entry["fuzzer_verdict"] = "agrees" if all(v is None for v in verdicts) else \
          next(v for v in verdicts if v is not None)[:300]
    report["inputs"].append(entry)
    print(json.dumps(entry))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(report, f, indent=1)


if __name__ == "__main__":
  main()
