"""GPU benchmarks and probes; bench/results/README.md gives each one's command and commit."""
import json


def save_record(path, record) -> None:
  """Writes a benchmark's record as JSON to its --out path, when one was given."""
  if path:
    with open(path, "w") as f:
      json.dump(record, f, indent=2)
