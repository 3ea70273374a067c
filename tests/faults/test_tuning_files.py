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
from pallas_prof.tune import tuned_file, validate

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


class _Said(str):
  """A TuningFileWarning's text, and the file it points at (the user's line, where known)."""
  filename: str


def _tuning_warnings(call):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = call()
  said = []
  for w in caught:
    if issubclass(w.category, validate.TuningFileWarning):
      said.append(_Said(str(w.message)))
      said[-1].filename = w.filename
  return out, said


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
  assert said[0].filename == __file__            # it points at the user's call
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


# --- the compiler-parameter cache (tune/params.py) ------------------------------------------
# tuning there replays candidates on a GPU: the stand-in driver of tests/tune/test_params.py
# runs them under Triton's interpreter with scripted times (8 warps the fastest)
from pallas_prof.backend.compiling.compile import compile_kernel  # noqa: E402
from pallas_prof.backend.running.launch import run_interpreted  # noqa: E402
from pallas_prof.tune import params  # noqa: E402
from testkit.examples import load_example, lowered_record, sds  # noqa: E402
from tests.tune.test_params import UNHURRIED, _install, _lowered_as, _tune  # noqa: E402

SETTINGS = params.Autotune(configs=[{"num_warps": 8}], min_launches=5, min_seconds=0.0,
                           budget_s=UNHURRIED)
# what tuning SETTINGS chooses on the stand-in driver, and the kernel's own, as files hold them
TUNED = {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": False, "persistent": 0, "loop_stages": 0}
DEFAULT = {"num_warps": 4, "num_stages": 3, "launch_group": 0, "tma": False, "persistent": 0, "loop_stages": 0}


def _named(**changes):
  return {**TUNED, **changes}
TARGET, GPU = ("cuda", 90), "Stand-in GPU"


@pytest.fixture(scope="module")
def softmax_gk(tmp_path_factory):
  """The softmax example's kernel, and one cache folder for the module's tests: its
  compiled kernels are reused, its tune/ emptied before each test."""
  folder = tmp_path_factory.mktemp("params-cache")
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("PALLAS_PROF_CACHE_DIR", str(folder))
    pallas_prof.install()
    try:
      gk = lowered_record(load_example("softmax").softmax, sds((4, 128), "float32")).generated
    finally:
      pallas_prof.uninstall()
  return gk, folder


@pytest.fixture
def kernel(softmax_gk, monkeypatch):
  gk, folder = softmax_gk
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(folder))
  monkeypatch.delenv(params.ENV, raising=False)
  monkeypatch.delenv(params.TUNED_ENV, raising=False)
  for name in os.listdir(folder / "tune") if (folder / "tune").is_dir() else ():
    os.unlink(folder / "tune" / name)
  params.clear_results()
  _new_process()
  return gk


def _new_process():
  """What a new process starts without: tuning files read, warnings given."""
  tuned_file.forget()
  validate._warned.clear()


def _answer_is_softmax(ck, rng):
  """The kernel that would launch, run under Triton's interpreter: jax.nn.softmax's rows."""
  x = rng.standard_normal((4, 128)).astype(np.float32) * 3
  [out] = run_interpreted(ck.generated, [x], [((4, 128), np.float32)])
  np.testing.assert_allclose(out, np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1)),
                             rtol=1e-6, atol=1e-7)


@pytest.fixture(scope="module")
def good_params_cache(softmax_gk):
  """(file name, bytes) of the cache a clean tuning of the softmax kernel writes."""
  gk, folder = softmax_gk
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("PALLAS_PROF_CACHE_DIR", str(folder))
    _install(mp, gk)
    _tune(gk, SETTINGS)
  [name] = [n for n in os.listdir(folder / "tune") if n.startswith("params-")]
  data = (folder / "tune" / name).read_bytes()
  os.unlink(folder / "tune" / name)
  assert json.loads(data)["best"] == TUNED
  return name, data


def _recovers_from_a_bad_params_cache(path, gk, monkeypatch, rng):
  fake = _install(monkeypatch, gk)
  (ck, _), said = _tuning_warnings(lambda: _tune(gk, SETTINGS))
  # the kernel that launches: tuned again, its choice checked against the default's outputs
  assert fake.block_of_launch, "not tuned again"
  t = params.results()[-1]
  assert not t.from_cache and t.best.fields() == TUNED
  assert ck.generated.options.settings.fields() == TUNED
  _answer_is_softmax(ck, rng)
  assert len(said) == 1, said
  assert str(path) in said[0] and gk.name in said[0], said[0]
  assert "tuned again" in said[0] and "delete the file" in said[0], said[0]
  # nothing wrong persists: rewritten whole, and a new process uses it without a word
  assert sorted(os.listdir(path.parent)) == [path.name]
  assert json.loads(path.read_text())["best"] == TUNED
  _new_process()
  fake = _install(monkeypatch, gk)
  (ck, _), said = _tuning_warnings(lambda: _tune(gk, SETTINGS))
  assert said == [] and fake.block_of_launch == [] and params.results()[-1].from_cache
  assert ck.generated.num_warps == TUNED["num_warps"]


@pytest.mark.parametrize("mutation", [
    pytest.param(m, marks=pytest.mark.fault(inject.kind_of(m)))
    for m in ("truncate", "truncate_1", "empty", "garble", "append")])
def test_a_damaged_params_cache_is_tuned_again(mutation, good_params_cache, softmax_gk, kernel,
                                               monkeypatch, rng):
  name, good = good_params_cache
  damaged = inject.mutations(good)[mutation]
  assert damaged != good
  path = _plant(softmax_gk[1], name, damaged)
  _recovers_from_a_bad_params_cache(path, kernel, monkeypatch, rng)


def _best_params(value):
  def change(d):
    d["best"] = value
  return change


def _untried_candidate(d):
  d["candidates"].append(dict(d["candidates"][0], settings=_named(num_warps=16), median_s=1e-9))
  d["best"] = _named(num_warps=16)


def _as_version_3(d):
  """The layout before settings were saved by name: version 3, (w, s, g, t) lists (a cache
  is keyed by the pallas-prof that wrote it, so a release never meets one; refused)."""
  def key(settings):
    return [settings[k] for k in ("num_warps", "num_stages", "launch_group")] + [int(settings["tma"])]
  d["version"], d["best"] = 3, key(d["best"])
  for c in d["candidates"]:
    c.update(c.pop("settings"))


PARAMS_WRONG = {
    "num_warps_-8": _best_params(_named(num_warps=-8)),
    "num_warps_0": _best_params(_named(num_warps=0)),
    "num_warps_3": _best_params(_named(num_warps=3)),
    "num_warps_1e9": _best_params(_named(num_warps=1e9)),
    "num_warps_string": _best_params(_named(num_warps="8")),
    "num_warps_null": _best_params(_named(num_warps=None)),
    "num_stages_-1": _best_params(_named(num_stages=-1)),
    "tma_an_int": _best_params(_named(tma=0)),
    "tma_true_on_the_default": _best_params(_named(num_warps=4, tma=True)),
    "best_a_settings_field_missing": _best_params({"num_warps": 8, "num_stages": 3}),
    "best_an_unknown_settings_field": _best_params(_named(block=64)),
    "best_a_tuple": _best_params([8, 3, 0, 0]),
    "best_not_a_candidate": _best_params(_named(num_warps=16)),
    "best_null": _best_params(None),
    "a_candidate_a_tuple": lambda d: d["candidates"][1].update(settings=[8, 3, 0, 0]),
    "a_candidate_twice": lambda d: d["candidates"].append(dict(d["candidates"][1])),
    "a_candidate_bad_settings": lambda d: d["candidates"][1]["settings"].update(num_stages=0),
    "format_version_3": _as_version_3,
    "format_version_5": lambda d: d.update(version=5),
    "a_candidate_never_tried": _untried_candidate,
    "another_kernel": lambda d: d["identity"].update(kernel="another_kernel", source="0" * 64),
    "format_version": lambda d: d.update(version=2),
    "no_candidates": lambda d: d.pop("candidates"),
    "a_candidate_unknown_field": lambda d: d["candidates"][0].update(surprise=1),
}


@pytest.mark.fault("wrong_value")
@pytest.mark.parametrize("case", sorted(PARAMS_WRONG))
def test_a_params_cache_with_a_wrong_value_is_tuned_again(case, good_params_cache, softmax_gk,
                                                          kernel, monkeypatch, rng):
  name, good = good_params_cache
  data = json.loads(good)
  PARAMS_WRONG[case](data)
  path = _plant(softmax_gk[1], name, json.dumps(data).encode())
  _recovers_from_a_bad_params_cache(path, kernel, monkeypatch, rng)


@pytest.mark.fault("wrong_value")
def test_a_cached_choice_that_does_not_build_is_tuned_again(good_params_cache, softmax_gk, kernel,
                                                            monkeypatch, rng):
  """A valid cached choice this Triton refuses to build (another version, shared memory
  that does not fit): tuned again, not an exception at the launch."""
  name, good = good_params_cache
  path = _plant(softmax_gk[1], name, good)
  fake = _install(monkeypatch, kernel)

  def failing_compile(g):
    raise RuntimeError("out of shared memory")
  relower = lambda options: _lowered_as(kernel, options)     # noqa: E731
  ck, said = _tuning_warnings(lambda: params.tune_kernel(
      kernel, compile_kernel(kernel, TARGET), relower, TARGET, SETTINGS,
      compile_fn=failing_compile, compile_all=lambda gs: params._compile_all(gs, TARGET)))
  assert fake.block_of_launch and not params.results()[-1].from_cache
  assert ck.generated.num_warps == TUNED["num_warps"]
  _answer_is_softmax(ck, rng)
  [text] = said
  assert str(path) in text and "did not build" in text and "out of shared memory" in text, text
  assert "tuned again" in text and "delete the file" in text, text
  assert json.loads(path.read_text())["best"] == TUNED and os.listdir(path.parent) == [path.name]


# --- tuning files: PALLAS_PROF_TUNED (tune/tuned_file.py) -----------------------------------

def _entry(gk, **changes):
  return {"kernel": gk.name, "source": gk.key, "target": list(TARGET), "gpu": GPU,
          "best": TUNED, "default": DEFAULT, **changes}


def _write_tuning_file(folder, data) -> str:
  path = folder / "tuning.json"
  path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
  return path


def _select(gk, path, monkeypatch, target=TARGET):
  """What the GPU path launches with PALLAS_PROF_TUNED=path: (the CompiledKernel, the
  default's, the configs compiled for it, the warnings)."""
  monkeypatch.setenv(params.TUNED_ENV, str(path))
  compiled = []

  def compile_fn(g):
    compiled.append(g.options.settings.fields())
    return compile_kernel(g, target)
  default_ck = compile_kernel(gk, target)
  relower = lambda options: _lowered_as(gk, options)     # noqa: E731
  ck, said = _tuning_warnings(lambda: params.select(default_ck, gk, None, relower, target,
                                                    compile_fn=compile_fn, device_name=GPU))
  return ck, default_ck, compiled, said


def test_a_good_tuning_file_is_applied(kernel, tmp_path, monkeypatch, rng):
  """The control: the entries the fault cases below damage are applied when whole."""
  path = _write_tuning_file(tmp_path, {"version": tuned_file.FORMAT_VERSION,
                                       "kernels": [_entry(kernel)]})
  ck, default_ck, compiled, said = _select(kernel, path, monkeypatch)
  assert said == [] and compiled == [TUNED] and ck is not default_ck
  _answer_is_softmax(ck, rng)


def _ignored_with_one_warning(gk, path, monkeypatch, rng, words=(), target=TARGET):
  before = path.read_bytes()
  for reader in ("this process", "the next one"):
    ck, default_ck, compiled, said = _select(gk, path, monkeypatch, target)
    # nothing of the file applied: the kernel's default compile, which runs softmax right
    assert ck is default_ck and compiled == [], reader
    _answer_is_softmax(ck, rng)
    assert len(said) == 1, (reader, said)
    assert said[0].startswith(f"{params.TUNED_ENV}={path}: "), said[0]
    assert "pallas-prof tune" in said[0], said[0]
    assert all(w in said[0] for w in words), (words, said[0])
    # the user's file is theirs: left as it was; and no cache took its value
    assert path.read_bytes() == before
    tune = os.path.join(os.environ["PALLAS_PROF_CACHE_DIR"], "tune")
    assert not os.path.isdir(tune) or not [n for n in os.listdir(tune) if n.startswith("params-")]
    _new_process()


@pytest.mark.parametrize("mutation", [
    pytest.param(m, marks=pytest.mark.fault(inject.kind_of(m)))
    for m in ("truncate", "truncate_1", "empty", "garble", "append")])
def test_a_damaged_tuning_file_is_ignored_with_one_warning(mutation, kernel, tmp_path,
                                                           monkeypatch, rng):
  good = json.dumps({"version": tuned_file.FORMAT_VERSION, "kernels": [_entry(kernel)]},
                    indent=1).encode()
  path = _write_tuning_file(tmp_path, inject.mutations(good)[mutation])
  _ignored_with_one_warning(kernel, path, monkeypatch, rng, words=["not a tuning file"])


def _best_entry(*best):
  """A version 3 file (settings as lists; read as version 4's) whose entry's best is `best`."""
  return lambda gk: {"version": 3, "kernels": [_entry(gk, best=list(best), default=[4, 3, 0, 0])]}


def _named_entry(best=None, version=None, **changes):
  """A file of this version whose entry's best has these fields changed (or is `best`)."""
  return lambda gk: {"version": version or tuned_file.FORMAT_VERSION, "kernels": [
      _entry(gk, best=_named(**changes) if best is None else best)]}


def _without_tma(gk):
  entry = _entry(gk)
  entry["best"] = {k: v for k, v in TUNED.items() if k != "tma"}
  return {"version": tuned_file.FORMAT_VERSION, "kernels": [entry]}


TUNED_WRONG = {
    # version 4: settings by name
    "num_warps_-8": _named_entry(num_warps=-8),
    "num_warps_0": _named_entry(num_warps=0),
    "num_warps_3": _named_entry(num_warps=3),
    "num_warps_1e9": _named_entry(num_warps=1e9),
    "num_warps_string": _named_entry(num_warps="8"),
    "num_warps_null": _named_entry(num_warps=None),
    "num_warps_true": _named_entry(num_warps=True),
    "num_stages_-1": _named_entry(num_stages=-1),
    "num_stages_huge": _named_entry(num_stages=10**6),
    "launch_group_-1": _named_entry(launch_group=-1),
    "tma_2": _named_entry(tma=2),
    # persistent is optional (files before it read as 0), checked where it is written
    "persistent_-1": _named_entry(persistent=-1),
    "persistent_2**31": _named_entry(persistent=2**31),
    "persistent_a_float": _named_entry(persistent=132.0),
    "persistent_string": _named_entry(persistent="132"),
    "persistent_true": _named_entry(persistent=True),
    "persistent_null": _named_entry(persistent=None),
    # loop_stages likewise optional (files before it read as 0)
    "loop_stages_-1": _named_entry(loop_stages=-1),
    "loop_stages_17": _named_entry(loop_stages=17),
    "loop_stages_a_float": _named_entry(loop_stages=3.0),
    "loop_stages_true": _named_entry(loop_stages=True),
    "tma_an_int": _named_entry(tma=1),
    "a_settings_field_missing": _without_tma,
    "an_unknown_settings_field": _named_entry(block=64),
    "best_a_list_in_version_4": _named_entry(best=[8, 3, 0, 0]),
    "best_a_string": _named_entry(best="8w 3s"),
    "default_wrong": lambda gk: {"version": tuned_file.FORMAT_VERSION, "kernels": [
        _entry(gk, default=dict(DEFAULT, num_warps=3))]},
    "no_best": lambda gk: {"version": tuned_file.FORMAT_VERSION,
                           "kernels": [{k: v for k, v in _entry(gk).items() if k != "best"}]},
    "an_unknown_field": lambda gk: {"version": tuned_file.FORMAT_VERSION,
                                    "kernels": [_entry(gk, num_warps=8)]},
    # code: the source's sha256 without comments (optional: older files lack it)
    "code_not_a_sha256": lambda gk: {"version": tuned_file.FORMAT_VERSION,
                                     "kernels": [_entry(gk, code="../../etc/passwd")]},
    "code_a_number": lambda gk: {"version": tuned_file.FORMAT_VERSION,
                                 "kernels": [_entry(gk, code=7)]},
    # version 3: (num_warps, num_stages, launch_group, tma) lists, read as version 4's
    "v3_num_warps_-8": _best_entry(-8, 3, 0, 0),
    "v3_num_warps_3": _best_entry(3, 3, 0, 0),
    "v3_num_warps_1e9": _best_entry(1e9, 3, 0, 0),
    "v3_num_warps_string": _best_entry("8", 3, 0, 0),
    "v3_num_warps_null": _best_entry(None, 3, 0, 0),
    "v3_num_stages_huge": _best_entry(8, 10**6, 0, 0),
    "v3_launch_group_-1": _best_entry(8, 3, -1, 0),
    "v3_tma_2": _best_entry(8, 3, 0, 2),
    "v3_tma_a_float": _best_entry(8, 3, 0, 1.0),
    "v3_three_values": _best_entry(8, 3, 0),
    "v3_five_values": _best_entry(8, 3, 0, 0, 0),
    "v3_best_named": lambda gk: {"version": 3, "kernels": [_entry(gk, default=[4, 3, 0, 0],
                                                                  best=dict(TUNED, tma=0))]},
    # not a tuning file of a version this reads
    "format_version": lambda gk: {"version": 2, "kernels": [_entry(gk)]},
    "format_version_5": lambda gk: {"version": 5, "kernels": [_entry(gk)]},
    "format_version_a_string": lambda gk: {"version": "4", "kernels": [_entry(gk)]},
    "kernels_not_a_list": lambda gk: {"version": tuned_file.FORMAT_VERSION, "kernels": _entry(gk)},
    "not_an_object": lambda gk: [_entry(gk)],
}
FILE_CASES = ("format_version", "format_version_5", "format_version_a_string",
              "kernels_not_a_list", "not_an_object")


@pytest.mark.fault("wrong_value")
@pytest.mark.parametrize("case", sorted(TUNED_WRONG))
def test_a_tuning_file_with_a_wrong_value_is_ignored_with_one_warning(case, kernel, tmp_path,
                                                                      monkeypatch, rng):
  path = _write_tuning_file(tmp_path, TUNED_WRONG[case](kernel))
  entry_case = case not in FILE_CASES
  words = ([f"entry 0 ({kernel.name!r})", "Delete those entries"] if entry_case
           else ["not a tuning file"])
  _ignored_with_one_warning(kernel, path, monkeypatch, rng, words=words)


@pytest.mark.fault("wrong_value")
def test_tma_in_a_tuning_file_for_a_target_below_sm90_is_ignored(kernel, tmp_path, monkeypatch,
                                                                  rng):
  target = ("cuda", 80)
  path = _write_tuning_file(tmp_path, {"version": tuned_file.FORMAT_VERSION, "kernels": [
      _entry(kernel, target=list(target), best=_named(num_warps=4, tma=True))]})
  _ignored_with_one_warning(kernel, path, monkeypatch, rng, words=["tma needs sm_90"],
                            target=target)
  path = _write_tuning_file(tmp_path, {"version": 3, "kernels": [
      _entry(kernel, target=list(target), best=[4, 3, 0, 1], default=[4, 3, 0, 0])]})
  _ignored_with_one_warning(kernel, path, monkeypatch, rng, words=["tma needs sm_90"],
                            target=target)


def test_a_good_tuning_file_of_version_3_is_applied(kernel, tmp_path, monkeypatch, rng):
  """Users commit tuning files: one written before settings were saved by name applies as
  it did, and is left as it was."""
  data = {"version": 3, "kernels": [_entry(kernel, best=[8, 3, 0, 0], default=[4, 3, 0, 0])]}
  path = _write_tuning_file(tmp_path, data)
  before = path.read_bytes()
  ck, default_ck, compiled, said = _select(kernel, path, monkeypatch)
  assert said == [] and compiled == [TUNED] and ck is not default_ck
  _answer_is_softmax(ck, rng)
  assert path.read_bytes() == before


@pytest.mark.fault("wrong_value")
def test_one_bad_entry_leaves_the_others_applied(kernel, tmp_path, monkeypatch, rng):
  other = _entry(kernel, kernel="other_kernel", source="f" * 64, best=_named(num_warps=-8))
  path = _write_tuning_file(tmp_path, {"version": tuned_file.FORMAT_VERSION,
                                       "kernels": [other, _entry(kernel)]})
  ck, default_ck, compiled, said = _select(kernel, path, monkeypatch)
  assert compiled == [TUNED] and ck is not default_ck
  _answer_is_softmax(ck, rng)
  [text] = said
  assert "entry 0 ('other_kernel'): best: num_warps must be a power of two" in text, text
  assert "Delete those entries" in text and "pallas-prof tune" in text, text


@pytest.mark.fault("wrong_value")
def test_a_filed_choice_that_does_not_build_leaves_the_default(kernel, tmp_path, monkeypatch,
                                                               rng):
  """Valid by every check, and still refused by this Triton (a kernel whose stages do not
  fit, another version): the call gets the default compile, and one warning."""
  path = _write_tuning_file(tmp_path, {"version": tuned_file.FORMAT_VERSION,
                                       "kernels": [_entry(kernel)]})

  def failing_compile(g):
    raise RuntimeError("out of shared memory")
  monkeypatch.setenv(params.TUNED_ENV, str(path))
  default_ck = compile_kernel(kernel, TARGET)
  relower = lambda options: _lowered_as(kernel, options)     # noqa: E731
  ck, said = _tuning_warnings(lambda: params.select(default_ck, kernel, None, relower, TARGET,
                                                    compile_fn=failing_compile, device_name=GPU))
  assert ck is default_ck
  _answer_is_softmax(ck, rng)
  [text] = said
  assert f"{params.TUNED_ENV}={path}" in text and "did not build" in text, text
  assert "out of shared memory" in text and "Delete the entry" in text, text


# --- across processes: a full disk, and a run going on -----------------------------------------
_SCRIPT = """
import json
import jax, jax.numpy as jnp, numpy as np, pallas_prof
from jax.experimental import pallas as pl
pallas_prof.install()

def double_plus_one(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + 1.0

@pallas_prof.autotune(configs=[dict(block=128), dict(block=256)], key=["x"], repeats=1, warm_up=1)
def floor_grid(x, block=128):
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(double_plus_one, grid=(x.shape[0] // block,), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

x = jnp.asarray(np.random.default_rng(0).standard_normal(1024), jnp.float32)
out = floor_grid(x)
print("RESULT " + json.dumps({"right": bool(np.array_equal(np.asarray(out), np.asarray(x * 2.0 + 1.0))),
                              "cached": floor_grid.last_tuning.from_cache}))
"""


def _run(args, env):
  done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                        timeout=600, cwd=ROOT)
  text = done.stdout + done.stderr
  [line] = [x for x in text.splitlines() if x.startswith("RESULT ")]
  said = [x for x in text.splitlines() if "TuningFileWarning" in x]
  return done.returncode, json.loads(line[len("RESULT "):]), said, text


@pytest.mark.fault("garble", "enospc")
def test_a_run_with_a_damaged_cache_on_a_full_disk_keeps_its_answer_and_report(tmp_path):
  """A garbled autotune cache, first on a full disk (ENOSPC injected into the cache's
  writes: the bad file cannot be replaced, and stays refused by the next process), then
  under `pallas-prof run`, whose report is written; then a process that uses the
  rewritten cache without a word."""
  script = tmp_path / "script.py"
  script.write_text(_SCRIPT)
  cache = tmp_path / "cache"
  env = dict(os.environ, PYTHONPATH=ROOT, PALLAS_PROF_CACHE_DIR=str(cache), JAX_PLATFORMS="cpu")
  env.pop("PALLAS_PROF_TRACE", None)
  code, got, said, text = _run([str(script)], env)
  assert code == 0 and got == {"right": True, "cached": False} and said == [], text
  [path] = list((cache / "tune").iterdir())
  assert os.stat(cache / "tune").st_mode & 0o777 == 0o700       # made for its owner alone
  path.write_bytes(inject.mutations(path.read_bytes())["garble"])
  garbled = path.read_bytes()
  # the disk full: the answer stands, two warnings (the bad file; the cache's stand-in for
  # the process, where the new choice went: backend/cache_files.py)
  full = inject.enospc_env(str(cache / "tune"), env=env)
  for attempt in ("first", "next"):          # refused again by the next process
    code, got, said, text = _run([str(script)], full)
    assert code == 0 and got == {"right": True, "cached": False}, text
    assert len(said) == 1, (attempt, text)
    assert str(path) in said[0] and "is not used" in said[0] and "delete the file" in said[0]
    stand_in = [x for x in text.splitlines() if "CacheWarning" in x]
    assert len(stand_in) == 1 and "PALLAS_PROF_CACHE_DIR" in text, (attempt, text)
    assert path.read_bytes() == garbled and os.listdir(cache / "tune") == [path.name]
  # a run going on: its report exists, its answer is right, one warning
  out = tmp_path / "run"
  code, got, said, text = _run(["-m", "pallas_prof", "run", "--out", str(out), str(script)], env)
  assert code == 0 and got == {"right": True, "cached": False}, text
  assert len(said) == 1 and str(path) in said[0], text
  report = json.loads((out / "report.json").read_text())
  assert report["kernels"], report
  # rewritten: the next process uses it without a word
  code, got, said, text = _run([str(script)], env)
  assert code == 0 and got == {"right": True, "cached": True} and said == [], text


_WRITERS = """
import json, sys
from pallas_prof.advice import api
from pallas_prof.cli import tune as cli
from pallas_prof.backend.options import TunedSettings
from pallas_prof.tune.params import KernelTuning
from pallas_prof.tune.tuned_file import TuningEntry
path, entry = sys.argv[1], json.loads(sys.argv[2])
tuning = KernelTuning(entry["kernel"], best=TunedSettings(**entry["best"]),
                      default=TunedSettings(**entry["default"]),
                      candidates=(), tuning_s=0.0,
                      identity={k: entry[k] for k in ("source", "target", "gpu")})
done = []
for write in (lambda: cli.write_tuning_file(path, [tuning]), lambda: api.write_tuning_file(path, [TuningEntry.from_dict(entry)])):
  try:
    write()
    done.append("written")
  except OSError as e:
    done.append(f"OSError {e.errno}")
print("RESULT " + json.dumps(done))
"""


@pytest.mark.fault("enospc")
def test_tuning_files_are_written_whole_or_not_at_all(kernel, tmp_path, monkeypatch, rng):
  """`pallas-prof tune` and `pallas-prof advise` write tuning files through one writer: on a
  full disk the file the user had is left whole (no half file, no temporary file), and the
  error reaches the command; with room, the file is whole and applies."""
  import errno
  folder = tmp_path / "out"
  folder.mkdir()
  entry = _entry(kernel)
  old = {"version": tuned_file.FORMAT_VERSION,
         "kernels": [_entry(kernel, best=_named(num_warps=4, num_stages=4))]}
  path = _write_tuning_file(folder, old)
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  args = ["-c", _WRITERS, str(path), json.dumps(entry)]
  code, done, _, text = _run(args, inject.enospc_env(str(folder), env=env))
  assert code == 0 and done == [f"OSError {errno.ENOSPC}"] * 2, text
  assert json.loads(path.read_text()) == old and os.listdir(folder) == [path.name]
  code, done, _, text = _run(args, env)
  assert code == 0 and done == ["written"] * 2, text
  assert os.stat(path).st_mode & 0o777 == 0o644 and os.listdir(folder) == [path.name]
  assert json.loads(path.read_text()) == {"version": tuned_file.FORMAT_VERSION, "kernels": [entry]}
  ck, default_ck, compiled, said = _select(kernel, path, monkeypatch)
  assert said == [] and compiled == [TUNED]
  _answer_is_softmax(ck, rng)
