"""The tuning file PALLAS_PROF_TUNED applies, as one record (tune/tuned_file.py's TuningFile
of TuningEntry): one writer for `pallas-prof tune` and `pallas-prof advise`, one reader that
checks each entry (validate.py). Damaged files: tests/faults/test_tuning_files.py."""
from __future__ import annotations

import json
import types

import pytest

from pallas_prof.tune import tuned_file, validate
from pallas_prof.tune.tuned_file import TuningEntry, TuningFile

SOURCE = "ab" * 32


def _entry(**changes) -> TuningEntry:
  fields = dict(kernel="softmax_kernel", source=SOURCE, target=("cuda", 90), gpu="NVIDIA H200",
                best=(8, 3, 0, 0), default=(4, 3, 0, 0))
  return TuningEntry(**{**fields, **changes})


def test_what_is_written_reads_back_the_same(tmp_path):
  path = str(tmp_path / "tuning.json")
  written = TuningFile.of([_entry(), _entry(kernel="other", source="cd" * 32, best=(4, 4, 1, 1))])
  written.write(path)
  assert TuningFile.read(path) == (written, [])


def test_a_file_of_the_layout_written_before_the_record_still_loads(tmp_path):
  """Version 3, as tune/cli.py and advice/api.py each wrote it with their own dicts."""
  path = tmp_path / "tuning.json"
  path.write_text(json.dumps({"version": 3, "kernels": [
      {"kernel": "softmax_kernel", "source": SOURCE, "target": ["cuda", 90],
       "gpu": "NVIDIA H200", "best": [8, 3, 0, 0], "default": [4, 3, 0, 0]}]}, indent=1))
  assert TuningFile.read(str(path)) == (TuningFile((_entry(),)), [])


def test_the_reader_keeps_the_good_entries_and_names_the_bad(tmp_path):
  path = tmp_path / "tuning.json"
  bad = {**_entry(kernel="k2").to_dict(), "best": [3, 3, 0, 0]}
  path.write_text(json.dumps({"version": 3, "kernels": [_entry().to_dict(), bad]}))
  tuning, problems = TuningFile.read(str(path))
  assert tuning.entries == (_entry(),)
  assert len(problems) == 1 and problems[0].startswith("entry 1 ('k2'): ") and "num_warps" in \
      problems[0], problems
  path.write_text(json.dumps({"version": 2, "kernels": []}))
  with pytest.raises(validate.Refused, match="format version 2"):
    TuningFile.read(str(path))


def test_both_commands_write_the_same_file_for_the_same_choice(tmp_path):
  """`pallas-prof tune` (from its tunings) and `pallas-prof advise` (from its entries)."""
  from pallas_prof.advice import api
  from pallas_prof.cli import tune as cli
  from pallas_prof.tune.params import KernelTuning
  tuning = KernelTuning("softmax_kernel", best=(8, 3, 0, 0), default=(4, 3, 0, 0),
                        candidates=(), tuning_s=1.0,
                        identity={"source": SOURCE, "target": ["cuda", 90], "gpu": "NVIDIA H200"})
  cli.write_tuning_file(str(tmp_path / "tune.json"), [tuning, tuning])
  api.write_tuning_file(str(tmp_path / "advise.json"), [_entry()])
  assert (tmp_path / "tune.json").read_bytes() == (tmp_path / "advise.json").read_bytes()
  assert TuningFile.read(str(tmp_path / "tune.json"))[0].entries == (_entry(),)
  tuned_file.forget()
  gk = types.SimpleNamespace(key=SOURCE)
  assert tuned_file.choice(str(tmp_path / "tune.json"), gk, ("cuda", 90), "NVIDIA H200") == \
      (8, 3, 0, 0)
