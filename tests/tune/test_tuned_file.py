"""The tuning file PALLAS_PROF_TUNED applies, as one record (tune/tuned_file.py's TuningFile
of TuningEntry): one writer for `pallas-prof tune` and `pallas-prof advise`, one reader that
checks each entry (validate.py). Damaged files: tests/faults/test_tuning_files.py."""
from __future__ import annotations

import json
import types

import pytest

from pallas_prof.backend.options import TunedSettings as S
from pallas_prof.tune import tuned_file, validate
from pallas_prof.tune.tuned_file import TuningEntry, TuningFile

SOURCE = "ab" * 32


def _entry(**changes) -> TuningEntry:
  fields = dict(kernel="softmax_kernel", source=SOURCE, target=("cuda", 90), gpu="NVIDIA H200",
                best=S(8, 3), default=S(4, 3))
  return TuningEntry(**{**fields, **changes})


def test_what_is_written_reads_back_the_same(tmp_path):
  path = str(tmp_path / "tuning.json")
  written = TuningFile.of([_entry(), _entry(kernel="other", source="cd" * 32, best=S(4, 4, 1, True))])
  written.write(path)
  assert TuningFile.read(path) == (written, [])


def test_the_file_names_each_setting():
  entry = _entry(best=S(8, 3, 4, True)).to_dict()
  assert entry["best"] == {"num_warps": 8, "num_stages": 3, "launch_group": 4, "tma": True,
                           "persistent": 0, "loop_stages": 0}
  assert entry["default"] == {"num_warps": 4, "num_stages": 3, "launch_group": 0, "tma": False,
                              "persistent": 0, "loop_stages": 0}
  assert TuningFile().version == tuned_file.FORMAT_VERSION == 4


def test_a_version_4_file_written_before_persistent_and_loop_stages_reads_them_as_0(tmp_path):
  path = tmp_path / "tuning.json"
  entry = _entry(best=S(8, 3)).to_dict()
  for key in ("best", "default"):
    entry[key] = {k: v for k, v in entry[key].items() if k not in ("persistent", "loop_stages")}
  path.write_text(json.dumps({"version": 4, "kernels": [entry]}))
  read, problems = TuningFile.read(str(path))
  assert problems == [] and read == TuningFile((_entry(best=S(8, 3)),))
  assert read.entries[0].best.loop_stages == 0 and read.entries[0].best.persistent == 0


def _version_3(*entries):
  """A file as pallas-prof wrote it before settings were saved by name (version 3: tuples)."""
  return {"version": 3, "kernels": [
      {"kernel": "softmax_kernel", "source": SOURCE, "target": ["cuda", 90],
       "gpu": "NVIDIA H200", "best": [8, 3, 0, 0], "default": [4, 3, 0, 0], **e}
      for e in entries]}


def test_a_file_of_version_3_still_loads_as_its_entries_by_name(tmp_path):
  """Users commit tuning files: one written before the named layout is read as it meant."""
  path = tmp_path / "tuning.json"
  path.write_text(json.dumps(_version_3({}, {"kernel": "k2", "source": "cd" * 32,
                                             "best": [4, 4, 8, 1]}), indent=1))
  assert TuningFile.read(str(path)) == (TuningFile((
      _entry(), _entry(kernel="k2", source="cd" * 32, best=S(4, 4, 8, True)))), [])


@pytest.mark.parametrize("best, named", [
    ([8, 3, 0], "best [8, 3, 0] is not an object of num_warps"),
    ([8, 3, 0, 2], "best: tma must be true or false, not 2"),
    ([8, 3, 0, 1.0], "best: tma must be true or false, not 1.0"),
    ([3, 3, 0, 0], "best: num_warps must be a power of two"),
    ("8w 3s", "best '8w 3s' is not an object of num_warps"),
])
def test_a_version_3_entry_is_checked_as_any_other(tmp_path, best, named):
  path = tmp_path / "tuning.json"
  path.write_text(json.dumps(_version_3({"best": best}, {"kernel": "k2", "source": "cd" * 32})))
  tuning, problems = TuningFile.read(str(path))
  assert tuning.entries == (_entry(kernel="k2", source="cd" * 32),)
  assert len(problems) == 1 and problems[0].startswith("entry 0 ('softmax_kernel'): " + named), \
      problems


def test_the_reader_keeps_the_good_entries_and_names_the_bad(tmp_path):
  path = tmp_path / "tuning.json"
  bad = _entry(kernel="k2").to_dict()
  bad["best"]["num_warps"] = 3
  path.write_text(json.dumps({"version": 4, "kernels": [_entry().to_dict(), bad]}))
  tuning, problems = TuningFile.read(str(path))
  assert tuning.entries == (_entry(),)
  assert len(problems) == 1 and problems[0].startswith("entry 1 ('k2'): best: num_warps") \
      , problems
  path.write_text(json.dumps({"version": 2, "kernels": []}))
  with pytest.raises(validate.Refused, match="format version 2"):
    TuningFile.read(str(path))


def test_both_commands_write_the_same_file_for_the_same_choice(tmp_path):
  """`pallas-prof tune` (from its tunings) and `pallas-prof advise` (from its entries)."""
  from pallas_prof.advice import api
  from pallas_prof.cli import tune as cli
  from pallas_prof.tune.params import KernelTuning
  tuning = KernelTuning("softmax_kernel", best=S(8, 3), default=S(4, 3),
                        candidates=(), tuning_s=1.0,
                        identity={"source": SOURCE, "target": ["cuda", 90], "gpu": "NVIDIA H200"})
  cli.write_tuning_file(str(tmp_path / "tune.json"), [tuning, tuning])
  api.write_tuning_file(str(tmp_path / "advise.json"), [_entry()])
  assert (tmp_path / "tune.json").read_bytes() == (tmp_path / "advise.json").read_bytes()
  assert TuningFile.read(str(tmp_path / "tune.json"))[0].entries == (_entry(),)
  tuned_file.forget()
  gk = types.SimpleNamespace(key=SOURCE, code_key="ef" * 32, name="softmax_kernel")
  assert tuned_file.choice(str(tmp_path / "tune.json"), gk, ("cuda", 90), "NVIDIA H200") == \
      S(8, 3)
