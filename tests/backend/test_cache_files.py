"""cache_files: the cache folder's files written whole in owner-only folders, checked when
read, moved aside when damaged, and a stand-in for a folder that cannot be written. Also the
cache's other users (tuning choices, the GPU's ceilings, the last run's note) through it."""
from __future__ import annotations

import glob
import json
import os
import stat
import threading
import warnings

import pytest

from pallas_prof.backend import cache_files


@pytest.fixture
def cache(tmp_path, monkeypatch):
  """A fresh cache folder, and this process's one-warning memory emptied."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.setattr(cache_files, "_warned", set())
  monkeypatch.setattr(cache_files, "_stand_ins", {})
  return str(tmp_path / "cache")


def test_files_and_folders_are_owner_only(cache):
  path = cache_files.write(os.path.join(cache, "tools", "memo.json"), "{}")
  assert path == os.path.join(cache, "tools", "memo.json")
  for p in (cache, os.path.dirname(path)):
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o700, p
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_folder_that_cannot_be_written_has_one_stand_in_and_one_warning(cache, tmp_path):
  with open(cache, "w") as f:
    f.write("a file in the way")
  with pytest.warns(cache_files.CacheWarning) as caught:
    first = cache_files.write(os.path.join(cache, "kernels", "a.py"), "a = 1\n")
    second = cache_files.write(os.path.join(cache, "tune", "b.json"), "{}")
    folder = cache_files.folder("libdevice")
  assert len(caught) == 1
  message = str(caught[0].message)
  stand_in = cache_files.root()
  assert stand_in != cache and cache in message and stand_in in message
  assert "a file is in the way of a folder" in message and "PALLAS_PROF_CACHE_DIR" in message
  assert first == os.path.join(stand_in, "kernels", "a.py") and open(first).read() == "a = 1\n"
  assert second.startswith(stand_in + os.sep) and folder == os.path.join(stand_in, "libdevice")
  assert stat.S_IMODE(os.stat(stand_in).st_mode) == 0o700
  assert open(cache).read() == "a file in the way"      # the user's file, untouched


def test_a_sealed_record_reads_back_only_whole(cache):
  path = os.path.join(cache, "tools", "ptxas.json")
  cache_files.write_sealed(path, "Cuda compilation tools, release 12.8, V12.8.93")
  assert cache_files.read_sealed(path) == "Cuda compilation tools, release 12.8, V12.8.93"
  record = json.load(open(path))
  record["value"] = record["value"].replace("12.8", "12.9")   # well-formed, another value
  with open(path, "w") as f:
    json.dump(record, f)
  with pytest.warns(cache_files.CacheWarning, match="does not match the digest"):
    assert cache_files.read_sealed(path) is None
  assert not os.path.exists(path) and len(glob.glob(path + ".bad-*")) == 1
  assert cache_files.read_sealed(path) is None                 # absent: no second warning


def test_read_moves_aside_what_is_not_a_regular_file(cache):
  folder = cache_files.folder("kernels")
  fifo = os.path.join(folder, "k.py")
  os.mkfifo(fifo)
  with pytest.warns(cache_files.CacheWarning, match="not a regular file"):
    assert cache_files.read(fifo, 100) is None                 # (a FIFO never blocks it)
  assert not os.path.exists(fifo) and glob.glob(fifo + ".bad-*")


def test_two_damaged_copies_in_one_second_are_both_kept(cache):
  path = os.path.join(cache_files.folder("kernels"), "k.py")
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", cache_files.CacheWarning)
    for content in ("first", "second"):
      with open(path, "w") as f:
        f.write(content)
      cache_files.move_aside(path, "damaged")
  assert sorted(open(p).read() for p in glob.glob(path + ".bad-*")) == ["first", "second"]


def _fill(files):
  def fill(folder):
    for name, data in files.items():
      with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
  return fill


def test_an_entry_is_stored_whole_and_another_process_s_stays(cache):
  entry = os.path.join(cache, "compiled", "ab", "abcd")
  assert cache_files.store_entry(entry, _fill({"a.ptx": b"ptx", "b.cubin": b"\x7fELF"})) == entry
  assert cache_files.entry_damage(entry) is None
  assert cache_files.entry_files(entry) == {"a.ptx", "b.cubin"}
  # a second store of the same key (another process, a moment later) keeps the first
  assert cache_files.store_entry(entry, _fill({"a.ptx": b"other"})) == entry
  assert open(os.path.join(entry, "a.ptx"), "rb").read() == b"ptx"
  assert sorted(os.listdir(os.path.dirname(entry))) == ["abcd"]   # no temporary folder left
  assert cache_files.load_entry(entry, lambda d: sorted(os.listdir(d))) == [
      "a.ptx", "b.cubin", cache_files.MANIFEST]


def test_a_store_that_fails_midway_leaves_nothing_and_raises_nothing(cache):
  entry = os.path.join(cache, "compiled", "ab", "abcd")

  def fill(folder):
    _fill({"a.ptx": b"ptx"})(folder)
    raise OSError(28, "No space left on device")
  with pytest.warns(cache_files.CacheWarning, match="No space left"):
    where = cache_files.store_entry(entry, fill)
  assert where is None                                  # the stand-in fails the same way
  assert os.listdir(os.path.dirname(entry)) == []


def test_an_entry_that_load_refuses_is_moved_aside(cache):
  entry = os.path.join(cache, "compiled", "ab", "abcd")
  cache_files.store_entry(entry, _fill({"compiled.json": b"{}"}))

  def load(folder):
    raise KeyError("stages")
  with pytest.warns(cache_files.CacheWarning, match="could not be read back"):
    assert cache_files.load_entry(entry, load) is None
  assert not os.path.exists(entry) and glob.glob(entry + ".bad-*")


def test_entries_stored_from_threads_at_once_are_whole(cache):
  entry = os.path.join(cache, "compiled", "ab", "abcd")
  data = {f"f{i}": os.urandom(4096) for i in range(8)}
  threads = [threading.Thread(target=cache_files.store_entry, args=(entry, _fill(data)))
             for _ in range(8)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert cache_files.entry_damage(entry) is None
  assert {n: open(os.path.join(entry, n), "rb").read() for n in data} == data
  assert os.listdir(os.path.dirname(entry)) == ["abcd"]


# --- the cache's other users -------------------------------------------------------------

def test_tuning_choices_go_through_the_cache(cache):
  from pallas_prof.tune import choice
  path = choice.cache_path("params-abc")
  assert path == os.path.join(cache, "tune", "params-abc.json")
  assert choice.store(path, {"version": 1}) == path
  assert json.load(open(path)) == {"version": 1}
  assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700


def test_a_tuning_choice_that_nowhere_can_take_is_not_an_error(cache, monkeypatch):
  from pallas_prof.tune import choice

  def refuse(path, data, **kw):
    raise OSError(28, "No space left on device", path)
  monkeypatch.setattr(cache_files, "write_atomic", refuse)
  with pytest.warns(cache_files.CacheWarning):
    assert choice.store(choice.cache_path("params-abc"), {"version": 1}) is None


def _ceilings(uuid, copy=1.0e12):
  from pallas_prof.profiler.schema import Ceilings
  return Ceilings(device_name="NVIDIA H200", device_uuid=uuid, copy_bytes_per_s=copy,
                  copy_method="stand-in", matrix_flops_per_s={"bf16": 2.0e15},
                  matrix_method="stand-in", measured_at=0.0, details={}, notes=[])


@pytest.mark.parametrize("damage", ["garbage", "negative rate", "another GPU's", "a list"])
def test_ceilings_that_are_not_this_gpu_s_are_measured_again(cache, damage):
  from pallas_prof.profiler.timing import ceilings
  from tests.profiler.timing.test_insitu_ncu_ceilings import _device
  dev = _device()
  path = ceilings.store(dev, _ceilings(dev.uuid))
  data = json.load(open(path))
  if damage == "garbage":
    text = json.dumps(data)[:40] + "\x00\x17"
  elif damage == "negative rate":
    text = json.dumps({**data, "copy_bytes_per_s": -5.0})
  elif damage == "another GPU's":
    text = json.dumps({**data, "device_uuid": "GPU-other"})
  else:
    text = json.dumps([data])
  with open(path, "w") as f:
    f.write(text)
  measured = []
  with pytest.warns(cache_files.CacheWarning, match="ceilings"):
    got = ceilings.get(dev, measure=lambda d: measured.append(d) or _ceilings(d.uuid, 3.0e12))
  assert measured and got.copy_bytes_per_s == 3.0e12
  assert json.load(open(path))["copy_bytes_per_s"] == 3.0e12 and glob.glob(path + ".bad-*")


def test_the_last_runs_note_is_not_read_through_a_fifo(cache, tmp_path, monkeypatch):
  """A FIFO where last-runs.json should be would block `show` for ever."""
  from pallas_prof.cli import run_directory
  monkeypatch.chdir(tmp_path)
  os.makedirs(cache)
  os.mkfifo(os.path.join(cache, "last-runs.json"))
  with pytest.warns(cache_files.CacheWarning):
    assert run_directory.remembered_run() is None
  run_directory.remember_run("runs/a")
  assert json.load(open(os.path.join(cache, "last-runs.json"))) == {
      str(tmp_path): str(tmp_path / "runs" / "a")}
