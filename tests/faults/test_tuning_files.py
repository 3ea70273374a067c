"""Fault injection: tuning choices read back from disk (issue 38, item 3c).

Three kinds of file hold a tuning choice: the autotune cache (tune/blocks.py, one file
per function and key), the compiler-parameter cache (tune/params.py, one per kernel) and
the tuning file PALLAS_PROF_TUNED names (tune/tuned_file.py). Each is damaged
(inject.mutations) or given wrong values, and every case asserts:
  - the answer is right: the autotuned function's output equals jax.numpy's (CPU
    interpreter); a kernel's compiler parameters change no value under the interpreter,
    so there the kernel that would launch is checked: built with a valid config (the
    default, or one tuned again and checked against the default), its interpreted output
    equal to jax.nn.softmax, and never the file's value;
  - one clear warning names the file, what is wrong and what to do;
  - nothing wrong persists: a cache is tuned again and rewritten, and a new reader (a new
    process) uses the new file without a warning; a user's tuning file is left as it was
    and is refused again by the next reader.
A run going on while this happens keeps its report: test_a_run_with_a_damaged_cache_*.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.tune import choice, tuned_file, validate

from . import inject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = [dict(block=128), dict(block=256)]
N = 1024          # both configs divide it, as the kernel below needs


def _double_plus_one(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + 1.0


def _floor_grid(x, block):
  """A user's kernel that trusts its block size to divide the length, as all its configs
  do: a block that does not leaves the tail unwritten (a wrong answer, not an error)."""
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(_double_plus_one, grid=(x.shape[0] // block,), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _autotuned():
  """The same function each time: a new one is what a new process would make of it."""
  @pallas_prof.autotune(configs=CONFIGS, key=["x"], repeats=1, warm_up=1,
                        name="faults.floor_grid")
  def floor_grid(x, block=128):
    return _floor_grid(x, block)
  return floor_grid


def _tuning_warnings(call):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = call()
  return out, [str(w.message) for w in caught if issubclass(w.category, validate.TuningFileWarning)]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  pallas_prof.install()
  yield tmp_path / "cache"
  pallas_prof.uninstall()


@pytest.fixture(scope="module")
def good_blocks_cache(tmp_path_factory):
  """(file name, bytes) of the autotune cache a clean tuning of `_autotuned` writes."""
  folder = tmp_path_factory.mktemp("blocks-cache")
  saved = os.environ.get("PALLAS_PROF_CACHE_DIR")
  os.environ["PALLAS_PROF_CACHE_DIR"] = str(folder)
  pallas_prof.install()
  try:
    _autotuned()(jnp.arange(N, dtype=jnp.float32))
  finally:
    pallas_prof.uninstall()
    if saved is None:
      os.environ.pop("PALLAS_PROF_CACHE_DIR")
    else:
      os.environ["PALLAS_PROF_CACHE_DIR"] = saved
  [name] = os.listdir(folder / "tune")
  return name, (folder / "tune" / name).read_bytes()


def _plant(cache_dir, name: str, data: bytes):
  path = cache_dir / "tune" / name
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data)
  return path


def _recovers_from_a_bad_autotune_cache(path, rng):
  x = jnp.asarray(rng.standard_normal(N), jnp.float32)
  want = np.asarray(x * 2.0 + 1.0)
  fn = _autotuned()
  out, said = _tuning_warnings(lambda: fn(x))
  # the answer: right, from a config tuned now
  np.testing.assert_array_equal(np.asarray(out), want)
  assert not fn.last_tuning.from_cache and fn.last_tuning.best in CONFIGS
  # one warning: the file, why, what happens and what to do
  assert len(said) == 1, said
  assert str(path) in said[0] and "faults.floor_grid" in said[0], said[0]
  assert "tuned again" in said[0] and "delete the file" in said[0], said[0]
  # nothing wrong persists: the file was rewritten whole, and a new process uses it quietly
  assert sorted(os.listdir(path.parent)) == [path.name]           # no temporary file left
  assert json.loads(path.read_text())["tuning"]["best"] in CONFIGS
  again = _autotuned()
  out, said = _tuning_warnings(lambda: again(x + 1.0))
  np.testing.assert_array_equal(np.asarray(out), np.asarray((x + 1.0) * 2.0 + 1.0))
  assert said == [] and again.last_tuning.from_cache
  assert again.last_tuning.best == fn.last_tuning.best


@pytest.mark.parametrize("mutation", [
    pytest.param(m, marks=pytest.mark.fault(inject.kind_of(m)))
    for m in ("truncate", "truncate_1", "empty", "garble", "append")])
def test_a_damaged_autotune_cache_is_tuned_again(mutation, good_blocks_cache, cache_dir, rng):
  name, good = good_blocks_cache
  damaged = inject.mutations(good)[mutation]
  assert damaged != good
  path = _plant(cache_dir, name, damaged)
  _recovers_from_a_bad_autotune_cache(path, rng)


def _best(value):
  def change(d):
    d["tuning"]["best"] = value
  return change


def _set(*where_value):
  *where, value = where_value

  def change(d):
    for key in where[:-1]:
      d = d[key]
    if value is _DELETE:
      del d[where[-1]]
    else:
      d[where[-1]] = value
  return change


_DELETE = object()


def _another_function(d):
  d["identity"]["function"] = d["tuning"]["function"] = "tests.another_function"


def _another_key(d):
  d["identity"]["key"] = d["tuning"]["key"] = "x=float32[7]"


def _best_that_failed(d):
  failed = d["tuning"]["candidates"][1]
  failed["seconds"], failed["error"] = None, "ValueError: block too large"
  d["tuning"]["best"] = failed["config"]


BLOCKS_WRONG = {
    "best_not_a_config": _best({"block": 96}),      # max error hundreds, before: tail unwritten
    "best_negative": _best({"block": -8}),
    "best_zero": _best({"block": 0}),
    "best_huge": _best({"block": 1 << 40}),
    "best_a_string": _best({"block": "256"}),
    "best_a_float": _best({"block": 256.0}),
    "best_null": _best(None),
    "best_another_parameter": _best({"blok": 256}),
    "best_that_failed": _best_that_failed,
    "another_function": _another_function,
    "another_key": _another_key,
    "format_version": _set("version", 1),
    "no_candidates": _set("tuning", "candidates", _DELETE),
    "an_unknown_field": _set("tuning", "surprise", 1),
    "a_candidate_unknown_field": lambda d: d["tuning"]["candidates"][0].update(surprise=True),
    "seconds_nan": _set("tuning", "best_seconds", float("nan")),
}


@pytest.mark.fault("wrong_value")
@pytest.mark.parametrize("case", sorted(BLOCKS_WRONG))
def test_an_autotune_cache_with_a_wrong_value_is_tuned_again(case, good_blocks_cache, cache_dir,
                                                             rng):
  name, good = good_blocks_cache
  data = json.loads(good)
  BLOCKS_WRONG[case](data)
  path = _plant(cache_dir, name, json.dumps(data).encode())
  _recovers_from_a_bad_autotune_cache(path, rng)


@pytest.mark.fault("wrong_value")
def test_an_autotune_cache_that_is_not_an_object_is_tuned_again(good_blocks_cache, cache_dir, rng):
  name, _ = good_blocks_cache
  _recovers_from_a_bad_autotune_cache(_plant(cache_dir, name, b"[]"), rng)
