"""The tuning caches and `pallas-prof tune`'s results as main wrote them before they went
through serial.py (tests/backend/saved_by_main: make.py there wrote them) are read by
today's readers, and today's writers write the same JSON again."""
from __future__ import annotations

import json
import os

import pytest

from pallas_prof.tune import blocks, choice, params, validate

SAVED = os.path.join(os.path.dirname(__file__), "..", "backend", "saved_by_main")


def _json(path):
  with open(path) as f:
    return json.load(f)


@pytest.fixture
def written(tmp_path, monkeypatch):
  """Where choice.store writes: a file of tmp_path, read back as JSON."""
  monkeypatch.setattr(choice.cache_files, "write",
                      lambda path, text: (tmp_path / "out.json").write_text(text) and path)
  return lambda: _json(tmp_path / "out.json")


def test_the_params_cache_main_wrote_is_used_and_written_again_the_same(written):
  path = os.path.join(SAVED, "params-cache.json")
  saved = _json(path)
  tried = {(4, 3, 0, 0), (8, 3, 0, 0), (8, 4, 0, 0)}
  best, candidates = params._cached(saved, saved["identity"], tried, (4, 3, 0, 0),
                                    ("cuda", 90))
  assert best == (8, 3, 0, 0) and [c.median_s for c in candidates] == [2e-5, 1e-5, None]
  tuning = params.KernelTuning("matmul_kernel", (4, 3, 0, 0), best, candidates,
                               saved["tuning_s"])
  params._save("unused", saved["identity"], tuning)
  assert written() == saved


def test_the_blocks_cache_main_wrote_is_used_and_written_again_the_same(written):
  saved = _json(os.path.join(SAVED, "blocks-cache.json"))
  tuning = blocks._cached_tuning(saved, saved["identity"], [{"bm": 32}, {"bm": 64}])
  assert tuning.best == {"bm": 64} and tuning.from_cache and tuning.clock == "wall"
  blocks._save("unused", tuning, saved["identity"])
  assert written() == saved


def test_the_results_main_wrote_for_pallas_prof_tune_are_read_typed(tmp_path):
  path = os.path.join(SAVED, "tune-results.json")
  (tuning,) = params.read_results(path)
  assert tuning.best == (8, 3, 0, 0) and tuning.candidates[2].error == "outputs differ"
  assert tuning.identity["gpu"] == "NVIDIA H200"
  params._results[:] = [tuning]
  try:
    params.write_results(str(tmp_path / "again.json"))
  finally:
    params.clear_results()
  assert _json(tmp_path / "again.json") == _json(path)


@pytest.mark.parametrize("edit,named", [
    (lambda r: r[0].update(best=[8, 3]), r"\[0\]\.best is a list of 2 items"),
    (lambda r: r[0]["candidates"][0].update(median_s="fast"), r"candidates\[0\]\.median_s"),
    (lambda r: r[0].update(colour="red"), r"\[0\]\.colour.*KernelTuning does not have"),
    (lambda r: r.append({}), r"\[1\] lacks the fields kernel, default, best"),
])
def test_damaged_results_are_refused_naming_the_file_and_field(tmp_path, edit, named):
  results = _json(os.path.join(SAVED, "tune-results.json"))
  edit(results)
  path = tmp_path / "results.json"
  path.write_text(json.dumps(results))
  with pytest.raises(validate.Refused, match=str(path) + ".*" + named):
    params.read_results(str(path))
