"""GPU benchmarks, one folder per purpose (suite/, first_call/, cost/, fuzz/, sanitize/, advice/,
profiler/; probes/: one-off probes); gpu_session.sh runs them on a GPU in time-boxed steps, and
bench/results/README.md gives the current figures with their commands and commits."""
import json


def save_record(path, record) -> None:
  """Writes a benchmark's record as JSON to its --out path, when one was given."""
  if path:
    with open(path, "w") as f:
      json.dump(record, f, indent=2)
