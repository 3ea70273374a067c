"""`pytest --pallas-prof`'s baseline files damaged, foreign or unwritable: each refused with
a message naming the file and what to do, nothing damaged written back, and a later
--pallas-prof-update writing good ones again."""
from __future__ import annotations

import json
import os

import pytest

from pallas_prof.gate import baseline

from ..gate.pytester_runs import run, user_test
from .inject import enospc_env, mutations

pytest_plugins = ["pytester"]

# (mutations' "truncate_1" cuts the closing newline only: still the whole JSON, rightly read)
CASES = ["truncate", "empty", "garble", "append", "wrong_value", "schema",
         "foreign"]


# the damaged baselines' tests run no kernel: the baseline is read before any profiling,
# so each case costs no compile (the good baseline they are made from is a real one)
NO_KERNEL_TESTS = f"""
import pytest

@pytest.mark.parametrize("case", {CASES!r})
def test_scale(case):
  pass
"""


def _path(pytester, case: str) -> str:
  return os.path.join(str(pytester.path), ".pallas-prof", "baseline", "test_user.py",
                      f"test_scale[{case}].json")


def _damaged(good: bytes, case: str, other: bytes) -> bytes:
  if case in ("wrong_value", "schema"):
    data = json.loads(good)
    if case == "schema":
      data["schema"] = "pallas-prof/baseline/99"
    else:
      kernel = next(iter(data["kernels"].values()))
      kernel["equations"][0]["instructions"] = "many"
    return json.dumps(data).encode()
  if case == "foreign":
    return other                     # another test's baseline, copied over this one
  return mutations(good)[case]


@pytest.mark.fault("truncate", "empty", "garble", "append", "wrong_value")
def test_damaged_or_foreign_baselines_are_refused_by_name_and_left_for_update(pytester):
  pytester.makepyfile(test_user=user_test())
  assert run(pytester, "--pallas-prof-update").ret == 0
  good = open(os.path.join(os.path.dirname(_path(pytester, "x")), "test_scale.json"), "rb").read()
  other = json.dumps({**json.loads(good), "test": "test_user.py::test_other"}).encode()
  pytester.makepyfile(test_user=NO_KERNEL_TESTS)
  damaged = {case: _damaged(good, case, other) for case in CASES}
  for case, data in damaged.items():
    with open(_path(pytester, case), "wb") as f:
      f.write(data)
  checked = run(pytester, "--pallas-prof")
  out = checked.stdout.str()
  assert checked.ret == 1 and f"{len(CASES)} failed" in out, out
  assert "Traceback" not in out and "INTERNALERROR" not in out, out
  assert "During handling" not in out, out
  said = {"truncate": "is not JSON", "empty": "is not JSON",
          "garble": "is not JSON", "append": "is not JSON",
          "wrong_value": "is damaged: baseline.kernels.scale_kernel(float32[8,128])"
                         ".equations[0].instructions is a string where a whole number belongs",
          "schema": "is not a pallas-prof baseline of schema pallas-prof/baseline/1 (its "
                    "schema: 'pallas-prof/baseline/99')",
          "foreign": "is the baseline of 'test_user.py::test_other', not of this test "
                     "'test_user.py::test_scale[foreign]'"}
  for case, words in said.items():
    line = next((l for l in out.splitlines()
                 if l.startswith(f"pallas-prof: baseline {_path(pytester, case)}")
                 or l.startswith(f"pallas-prof: {_path(pytester, case)}")), "")
    assert words in line and "--pallas-prof-update" in line, (case, out)
  # the check wrote nothing back: the damage is there for the user to see
  for case, data in damaged.items():
    assert open(_path(pytester, case), "rb").read() == data, case
  # an update takes away the baselines of tests that run no kernel now; the next check passes
  updated = run(pytester, "--pallas-prof-update")
  assert updated.ret == 0, updated.stdout.str()
  updated.stdout.fnmatch_lines([f"*removed {len(CASES)} baseline(s) of tests that ran no "
                                "kernel*"])
  assert not any(os.path.exists(_path(pytester, case)) for case in CASES)
  passed = run(pytester, "--pallas-prof")
  assert passed.ret == 0, passed.stdout.str()


@pytest.mark.fault("enospc")
def test_a_full_disk_while_writing_a_baseline_leaves_the_old_one_whole(pytester, monkeypatch):
  pytester.makepyfile(test_user=user_test())
  assert run(pytester, "--pallas-prof-update").ret == 0
  path = os.path.join(str(pytester.path), ".pallas-prof", "baseline", "test_user.py",
                      "test_scale.json")
  old = open(path, "rb").read()
  pytester.makepyfile(test_user=user_test(body="jnp.exp(x) * 2.0"))
  for name, value in enospc_env(os.path.dirname(path)).items():
    monkeypatch.setenv(name, value)
  full = run(pytester, "--pallas-prof-update")
  out = full.stdout.str()
  assert full.ret == 1 and "Traceback" not in out, out
  assert f"pallas-prof: could not write baseline {path}: No space left on device; the old " \
         "file, if any, is as it was" in out, out
  assert open(path, "rb").read() == old
  assert os.listdir(os.path.dirname(path)) == ["test_scale.json"]      # no temporary left
  # what a later run reads is the old baseline, whole
  assert baseline.read(path, "test_user.py::test_scale").kernels
