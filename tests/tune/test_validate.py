"""The one checker of tuning choices read back from disk (pallas_prof/tune/validate.py):
its rules agree with Triton's and CUDA's, and what Autotune accepts is what a cache may
hold. The files themselves are damaged in tests/faults/test_tuning_files.py."""
from __future__ import annotations

import pytest

import pallas_prof
from pallas_prof.tune import validate


def test_num_warps_is_what_triton_accepts_up_to_cuda_s_limit():
  """Triton's CUDAOptions asserts a power of two; CUDA launches at most 1024 threads a
  program (32 warps): the checker accepts exactly the values both allow."""
  from triton.backends.nvidia.compiler import CUDAOptions
  for n in range(-2, 70):
    try:
      CUDAOptions(num_warps=n)
      triton_accepts = True
    except AssertionError:
      triton_accepts = False
    assert (validate.field_problem("num_warps", n) is None) == (triton_accepts and n <= 32), n
  for value in (8.0, "8", None, True, 1e9):
    assert "num_warps must be a power of two" in validate.field_problem("num_warps", value)


@pytest.mark.parametrize("name, good, bad", [
    ("num_stages", (1, 3, validate.MAX_NUM_STAGES), (0, -1, validate.MAX_NUM_STAGES + 1, 3.0, "3")),
    ("launch_group", (0, 4, 8), (-1, 10**9, 8.0, None)),
    ("tma", (0, 1), (2, -1, True, "1")),
])
def test_each_field_has_its_range_and_type(name, good, bad):
  assert all(validate.field_problem(name, v) is None for v in good)
  for v in bad:
    problem = validate.field_problem(name, v)
    assert problem and problem.startswith(f"{name} must be") and repr(v) in problem, (v, problem)
  assert "unknown field 'block'" in validate.field_problem("block", 64)


def test_saved_settings_are_four_valid_values_by_name_and_tma_needs_sm90():
  good = {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": False}
  assert validate.settings_problem(good, ("cuda", 90)) is None
  assert validate.settings_problem(dict(good, launch_group=4, tma=True), ("cuda", 90)) is None
  fields = "is not an object of num_warps, num_stages, launch_group, tma"
  assert fields in validate.settings_problem([8, 3, 0, 0])          # the tuple it replaced
  assert fields in validate.settings_problem({"num_warps": 8})
  assert fields in validate.settings_problem(dict(good, block=64))
  assert "num_stages must be" in validate.settings_problem(dict(good, num_stages=-1))
  assert "tma must be true or false, not 1" in validate.settings_problem(dict(good, tma=1))
  assert "tma needs sm_90" in validate.settings_problem(dict(good, tma=True), ("cuda", 80))


def test_autotune_refuses_a_config_no_cache_could_hold():
  """A config Autotune tuned is one the cache's checker accepts: otherwise every later
  process would refuse its own cache and tune again."""
  for config in ({"num_stages": validate.MAX_NUM_STAGES + 1}, {"num_warps": True},
                 {"launch_group": validate.MAX_LAUNCH_GROUP + 1}, {"num_warps": 64}):
    with pytest.raises(ValueError, match="Autotune config"):
      pallas_prof.Autotune(configs=[config])
  assert pallas_prof.Autotune(configs=[{"tma": True}]).config_dicts() == [{"tma": 1}]


def test_shape_problem_names_what_is_missing_unknown_or_mistyped():
  fields = {"best": validate.an_int, "name": validate.is_text}
  assert validate.shape_problem({"best": 1, "name": "k"}, fields) is None
  assert validate.shape_problem([], fields) == "list, not an object"
  assert validate.shape_problem({"best": 1}, fields) == "no 'name'"
  assert validate.shape_problem({"best": 1, "name": "k", "x": 0}, fields) == "unknown field(s) 'x'"
  assert validate.shape_problem({"best": "1", "name": "k"}, fields) == "best '1' is not an int"


def test_a_warning_is_given_once(recwarn):
  text = "pallas-prof: test_a_warning_is_given_once"
  validate._warned.discard(text)
  validate.warn_once(text)
  validate.warn_once(text)
  assert [str(w.message) for w in recwarn if w.category is validate.TuningFileWarning] == [text]
