"""The generated source of every kernel the suite times, to tell whether a change to the
code generator changed what an H200 run measured.

    PYTHONPATH=<checkout> python bench/probes/suite_sources.py OUT_DIR [--against DIR]

Lowers (no run) each of bench/suite/suite_cases.py's cases at its full shape, its default and
each tuning config, through the pallas_prof on PYTHONPATH, and writes each kernel's
source without comments to OUT_DIR/<case>.<config>.<k>.py. With --against (the same
written by another checkout) it says which differ once lane vectors' names and
assignments nothing reads are set aside (what two forms of the same code differ by).
A config its case's shape does not allow is reported and skipped.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_sources(out: str) -> list[str]:
  import jax
  import pallas_prof
  from pallas_prof.backend import kernel_registry
  from bench.suite.suite_cases import CASES
  pallas_prof.install()
  os.makedirs(out, exist_ok=True)
  skipped = []
  for case in CASES:
    built = case.make(jax.random.PRNGKey(0))
    args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in built.args]
    configs = [("default", built.pallas)] + [(str(i), built.variant(dict(c)))
                                             for i, c in enumerate(case.tune)]
    for tag, fn in configs:
      kernel_registry.clear()
      jax.clear_caches()
      try:
        jax.jit(fn).lower(*args)
      except Exception as e:  # noqa: BLE001 - a config the shape does not allow
        skipped.append(f"{case.name} config {tag}: {type(e).__name__}: {str(e)[:120]}")
        continue
      for k, record in enumerate(kernel_registry.kernels()):
        lines = [line.split("  #")[0].rstrip() for line in record.generated.source.splitlines()
                 if not line.startswith("#")]
        with open(os.path.join(out, f"{case.name.replace(' ', '_')}.{tag}.{k}.py"), "w") as f:
          f.write("\n".join(lines) + "\n")
  return skipped


def normalized(path: str) -> str:
  """The source without assignments nothing reads, lane vectors' names made one."""
  with open(path) as f:
    text = f.read()
  kept = []
  for line in text.splitlines():
    m = re.match(r"\s+(\w+) = ", line)
    if m and len(re.findall(rf"\b{re.escape(m.group(1))}\b", text)) == 1:
      continue
    kept.append(line)
  out = "\n".join(kept)
  out = re.sub(r"\b\w*_lanes\d(_\d+)?\b", "LANES", out)
  return re.sub(r"\blanes\d+(x\d+)?(_i64)?(_\d+)?\b", "LANES", out)


def compare(a: str, b: str) -> list[str]:
  names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
  return [n for n in names if not (os.path.exists(os.path.join(a, n)) and
                                   os.path.exists(os.path.join(b, n)) and
                                   normalized(os.path.join(a, n)) == normalized(os.path.join(b, n)))]


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("out")
  ap.add_argument("--against", help="a folder this script wrote from another checkout")
  args = ap.parse_args(argv)
  sys.path.append(ROOT)     # after PYTHONPATH: the pallas_prof under test is the one there
  for line in write_sources(args.out):
    print("skipped:", line)
  print(len(os.listdir(args.out)), "kernel sources in", args.out)
  if args.against:
    differ = compare(args.against, args.out)
    print(f"{len(differ)} differ from {args.against} beyond lane names and unread assignments"
          + (": " + ", ".join(differ) if differ else ""))
    return 1 if differ else 0
  return 0


if __name__ == "__main__":
  sys.exit(main())
