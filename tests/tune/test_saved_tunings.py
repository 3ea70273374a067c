"""The tuning caches and `pallas-prof tune`'s results as main wrote them before they went
through serial.py (tests/backend/saved_by_main: make.py there wrote them): the blocks cache
is read by today's reader and written again the same; the params cache and the results,
which held settings as (w, s, g, t) tuples, are refused by their version or field (both are
this version's own: a cache is keyed by the pallas-prof that wrote it, the results pass
between `pallas-prof tune` and its child), and today's are read back as written."""
from __future__ import annotations

import json
import os

import pytest

from pallas_prof.backend.options import TunedSettings as S
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


def test_the_params_cache_main_wrote_with_settings_as_tuples_is_refused_by_its_version():
  """Version 3 kept (w, s, g, t) tuples; a cache is keyed by the pallas-prof that wrote it,
  so a release never meets an older one: one of another version is tuned again."""
  saved = _json(os.path.join(SAVED, "params-cache.json"))
  tried = [S(4, 3), S(8, 3), S(8, 4)]
  with pytest.raises(validate.Refused, match="format version 3, this pallas-prof reads version 4"):
    params._cached(saved, saved["identity"], tried, S(4, 3), ("cuda", 90))


def test_the_params_cache_names_its_settings_and_reads_back_what_it_wrote(written):
  saved = _json(os.path.join(SAVED, "params-cache.json"))
  candidates = (params._candidate(S(4, 3), 2e-5, None, 0.5, 1, 2),
                params._candidate(S(8, 3), 1e-5, None, 0.5, 3, 4),
                params._candidate(S(8, 4), None, "outputs differ", None, 5, 6))
  tuning = params.KernelTuning("matmul_kernel", S(4, 3), S(8, 3), candidates, 1.5)
  params._save("unused", saved["identity"], tuning)
  data = written()
  assert data["version"] == params.CACHE_VERSION == 4
  assert data["best"] == {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": False,
                        "persistent": 0, "loop_stages": 0}
  assert data["candidates"][2]["settings"] == {"num_warps": 8, "num_stages": 4,
                                               "launch_group": 0, "tma": False,
                                               "persistent": 0, "loop_stages": 0}
  tried = [S(4, 3), S(8, 3), S(8, 4)]
  assert params._cached(data, saved["identity"], tried, S(4, 3), ("cuda", 90)) == \
      (S(8, 3), candidates)


def test_the_blocks_cache_main_wrote_is_used_and_written_again_the_same(written):
  saved = _json(os.path.join(SAVED, "blocks-cache.json"))
  tuning = blocks._cached_tuning(saved, saved["identity"], [{"bm": 32}, {"bm": 64}])
  assert tuning.best == {"bm": 64} and tuning.from_cache and tuning.clock == "wall"
  blocks._save("unused", tuning, saved["identity"])
  assert written() == saved


def test_the_results_main_wrote_with_settings_as_tuples_are_refused_naming_the_field():
  """`pallas-prof tune` reads the results its own child wrote: of this version alone."""
  path = os.path.join(SAVED, "tune-results.json")
  with pytest.raises(validate.Refused, match=r"\[0\]\.default is a list where an "
                     "object belongs"):
    params.read_results(path)


def _results(tmp_path):
  tuning = params.KernelTuning(
      "matmul_kernel", S(4, 3), S(8, 3),
      (params._candidate(S(4, 3), 2e-5), params._candidate(S(8, 3), None, "outputs differ")),
      1.5, identity={"gpu": "NVIDIA H200"})
  params._results[:] = [tuning]
  try:
    params.write_results(str(tmp_path / "results.json"))
  finally:
    params.clear_results()
  return tuning, _json(tmp_path / "results.json")


def test_the_results_for_pallas_prof_tune_read_back_typed(tmp_path):
  tuning, data = _results(tmp_path)
  assert data[0]["best"] == {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": False,
                             "persistent": 0, "loop_stages": 0}
  (again,) = params.read_results(str(tmp_path / "results.json"))
  assert again == tuning and again.identity["gpu"] == "NVIDIA H200"


@pytest.mark.parametrize("edit,named", [
    (lambda r: r[0].update(best=[8, 3, 0, 0]), r"\[0\]\.best is a list where an object belongs"),
    (lambda r: r[0]["best"].update(tma=1), r"\[0\]\.best\.tma is a number where true/false"),
    (lambda r: r[0]["candidates"][0].update(median_s="fast"), r"candidates\[0\]\.median_s"),
    (lambda r: r[0].update(colour="red"), r"\[0\]\.colour.*KernelTuning does not have"),
    (lambda r: r.append({}), r"\[1\] lacks the fields kernel, default, best"),
])
def test_damaged_results_are_refused_naming_the_file_and_field(tmp_path, edit, named):
  _, results = _results(tmp_path)
  edit(results)
  path = tmp_path / "damaged.json"
  path.write_text(json.dumps(results))
  with pytest.raises(validate.Refused, match=str(path) + ".*" + named):
    params.read_results(str(path))
