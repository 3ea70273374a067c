"""GPU benchmarks (probes/: one-off probes); bench/results/README.md gives the current figures with their commands and commits."""
import json


def save_record(path, record) -> None:
  """Writes a benchmark's record as JSON to its --out path, when one was given."""
  if path:
    with open(path, "w") as f:
      json.dump(record, f, indent=2)
