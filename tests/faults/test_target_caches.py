"""Faults in the compile cache's entries for another GPU target (issue 40): an AMD compile
(gfx942: amdgcn and hsaco, no PTX or cubin) that an earlier process left damaged, or whose
compiled.json names no target pallas-prof knows, is compiled again, not trusted.

Every case asserts the suite's three properties (inject.py): the answer is right (the
compile gives the cold compile's hsaco and resources); nothing wrong was persisted (the
entry is moved aside whole as found, a whole one takes its place and the next compile
reads it from disk without a word); no run was going on, so there is no report to check.
"""
from __future__ import annotations

import glob
import json
import os
import shutil

import pytest

from tests.faults import inject
from tests.faults.test_caches import MUTATIONS, _damage, _fault

ENTRY_FILES = ("compiled.json", "kernel.amdgcn", "kernel.hsaco", "manifest.json")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  """vector add lowered here, its cold compile for gfx942 and the entry that compile stored."""
  from tests.backend.compiling.test_targets import _vector_add
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend.compiling import compile_cache
  cache = str(tmp_path_factory.mktemp("target-cache"))
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("PALLAS_PROF_CACHE_DIR", cache)
    gk = _vector_add()
    pcompile.clear_memory_cache()
    ck = pcompile.compile_kernel(gk, "gfx942")
    assert ck.cache == "miss" and ck.asm["hsaco"][:4] == b"\x7fELF"
    entry = compile_cache._disk_dir(ck.key)
  assert sorted(os.listdir(entry)) == sorted(ENTRY_FILES + ("kernel.ll", "kernel.ttgir",
                                                            "kernel.ttir"))
  return {"gk": gk, "ck": ck, "cache": cache, "entry": entry}


@pytest.fixture
def private_cache(compiled, tmp_path, monkeypatch):
  """A copy of the cache with the entry, this process's warnings forgotten; the entry's path."""
  from pallas_prof.backend import cache_files
  monkeypatch.setattr(cache_files, "_warned", set())
  monkeypatch.setattr(cache_files, "_stand_ins", {})
  cache = str(tmp_path / "cache")
  shutil.copytree(compiled["cache"], cache)
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", cache)
  return compiled["entry"].replace(compiled["cache"], cache)


def _compiled_again_and_kept(compiled, entry: str, found: bytes, name: str, words: str):
  from pallas_prof.backend import cache_files
  from pallas_prof.backend.compiling import compile as pcompile
  pcompile.clear_memory_cache()
  with pytest.warns(cache_files.CacheWarning) as caught:
    again = pcompile.compile_kernel(compiled["gk"], "gfx942")
  cold = compiled["ck"]
  assert again.cache == "miss" and again.asm["hsaco"] == cold.asm["hsaco"]
  assert dict(again.target_resources) == dict(cold.target_resources)
  # this entry's warning, once: warnings of other origin in the same worker (a leg B run
  # once caught 3 here, not reproduced alone) are not this test's subject, and are shown
  mine = [w for w in caught if issubclass(w.category, cache_files.CacheWarning)
          and entry in str(w.message)]
  assert len(mine) == 1 and words in str(mine[0].message), \
      [(w.category.__name__, str(w.message)[:300]) for w in caught]
  (aside,) = glob.glob(entry + ".bad-*")
  assert open(os.path.join(aside, name), "rb").read() == found
  assert cache_files.entry_damage(entry) is None
  pcompile.clear_memory_cache()
  later = pcompile.compile_kernel(compiled["gk"], "gfx942")
  assert later.cache == "disk" and later.asm["hsaco"] == cold.asm["hsaco"]
  assert later.target == ("hip", "gfx942") and later.registers == cold.registers


@pytest.mark.parametrize("name", ENTRY_FILES)
@pytest.mark.parametrize("mutation", [_fault(m) for m in MUTATIONS])
def test_a_damaged_amd_entry_is_compiled_again_and_moved_aside(compiled, private_cache,
                                                                name, mutation):
  path = os.path.join(private_cache, name)
  _damage(path, mutation)
  found = open(path, "rb").read()
  _compiled_again_and_kept(compiled, private_cache, found, name, "did not use it")


@pytest.mark.fault("wrong_value")
@pytest.mark.parametrize("target", [["hip", 942], ["rocm", "gfx942"], ["hip"], ["cuda", "9O"], "cuda:90",
                                    ["cuda", True]])
def test_an_entry_naming_no_known_target_is_compiled_again(compiled, private_cache, target):
  """A well-formed compiled.json, sealed as pallas-prof seals it, whose target is no GPU's."""
  from pallas_prof.backend import cache_files
  path = os.path.join(private_cache, "compiled.json")
  meta = json.load(open(path))
  meta["target"] = target
  with open(path, "w") as f:
    json.dump(meta, f)
  os.remove(os.path.join(private_cache, cache_files.MANIFEST))
  cache_files._seal(private_cache)       # the manifest matches: only the value is wrong
  assert cache_files.entry_damage(private_cache) is None
  found = open(path, "rb").read()
  _compiled_again_and_kept(compiled, private_cache, found, "compiled.json",
                           "could not be read back")
