"""`pytest --pallas-prof` on a user's test file (pytester: pytest's own plugin-testing
fixture), on whatever machine runs it: the gate's static figures need no GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

from .pytester_runs import HEAVY, baseline_path, run, user_test

pytest_plugins = ["pytester"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_update_then_an_unchanged_kernel_passes_and_a_planted_spill_and_growth_fail(pytester):
  pytester.makepyfile(test_user=user_test())
  written = run(pytester, "--pallas-prof-update")
  assert written.ret == 0, written.stdout.str()
  written.stdout.fnmatch_lines(["*wrote 1 baseline(s) under .pallas-prof/baseline/*"])
  with open(baseline_path(pytester)) as f:
    text = f.read()
  data = json.loads(text)
  assert text == json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
  [(key, kernel)] = data["kernels"].items()
  assert key == "scale_kernel(float32[8,128])" and data["test"] == "test_user.py::test_scale"
  # the user's line, relative to the project, with the instructions it compiled to
  mul = [e for e in kernel["equations"] if e["primitive"] == "mul"]
  assert mul and mul[0]["where"] == "test_user.py:11" and mul[0]["instructions"] > 0
  assert mul[0]["source"] == "o_ref[...] = x * 2.0"
  checked = run(pytester, "--pallas-prof")
  assert checked.ret == 0, checked.stdout.str()
  checked.stdout.fnmatch_lines(["*1 test(s) gated against their baselines*", "*1 passed*"])
  # the planted regression: a heavier line at one warp, under budgets; it spills
  mark = "@pytest.mark.pallas_prof(no_spills=True, max_registers=64, max_time_us=1000)"
  pytester.makepyfile(test_user=user_test(body=HEAVY, warps=1, mark=mark))
  grown = run(pytester, "--pallas-prof")
  out = grown.stdout.str()
  assert grown.ret == 1, out
  grown.stdout.fnmatch_lines([
      "*kernel scale_kernel (test_user.py:9): spills 0 -> *; *instructions (per program) +*"
      "(*spills (per thread) 0 -> *, instructions (per program) * -> *)",
      # which equations grew most is the compiler's doing (it differs between Triton
      # releases): each named with the user's line, before and after
      "*grew: * at test_user.py:11 `o_ref?...? = jnp.exp(x) * jnp.sin(x) + "
      "jnp.cos(x)`: * instructions",
      "*baseline: .pallas-prof/baseline/test_user.py/test_scale.json*--pallas-prof-update*",
      # the budgets' fix is the marker, not an update
      "*kernel scale_kernel (test_user.py:9) spills * register(s); the budget is "
      "no_spills=True*",
      "*has * registers; the budget is max_registers=64*",
      "*(the budgets are the marker's: @pytest.mark.pallas_prof(no_spills=True, "
      "max_registers=64, max_time_us=1000) on test_user.py::test_scale; change the kernel to "
      "fit, or raise max_registers and drop no_spills=True in that marker*"])
  # the store on the edited line is the same store: matched, not new
  assert "swap at" not in out
  if kernel["runtime"] is None:        # no GPU: the time budget is said, not passed
    grown.stdout.fnmatch_lines(["*not checked: test_user.py::test_scale: max_time_us on "
                                "scale_kernel(float32?8,128?): no GPU*"])
  with open(baseline_path(pytester)) as f:
    assert f.read() == text           # checking never rewrites the baseline


def test_a_budget_failure_says_the_fix_is_the_marker_and_names_no_missing_baseline(pytester):
  """Issue 47, item 4: a test with no baseline over its marker's register budget was told
  to "run with --pallas-prof-update" (which writes baselines, not budgets) and was named a
  baseline file that did not exist."""
  mark = "@pytest.mark.pallas_prof(max_registers=4)"
  pytester.makepyfile(test_user=user_test(mark=mark))
  over = run(pytester, "--pallas-prof")
  out = over.stdout.str()
  assert over.ret == 1, out
  over.stdout.fnmatch_lines([
      "*the kernels of this test exceed their marker's budgets:*",
      "*kernel scale_kernel (test_user.py:9) has * registers; the budget is max_registers=4*",
      "*(the budget is the marker's: @pytest.mark.pallas_prof(max_registers=4) on "
      "test_user.py::test_scale; change the kernel to fit, or raise max_registers in that "
      "marker if the kernel is meant to need more; --pallas-prof-update writes baselines, "
      "not budgets)*"])
  assert not os.path.exists(baseline_path(pytester))
  assert "baseline:" not in out and "run with --pallas-prof-update and commit" not in out


def test_a_bad_marker_fails_its_test_saying_what_to_give(pytester):
  pytester.makepyfile(test_user="import pytest\n"
                      "@pytest.mark.pallas_prof(max_regs=64, no_spills='yes')\n"
                      "def test_scale():\n  pass\n")
  bad = run(pytester, "--pallas-prof")
  assert bad.ret == 1
  bad.stdout.fnmatch_lines(["*the pallas_prof marker of test_user.py::test_scale: unknown "
                            "budget 'max_regs' (known: max_time_us, no_spills, max_registers,*"
                            "no_spills='yes': give True or False*"])


_STARTUP = """
import sys
def test_nothing_heavy_was_imported():
  heavy = [m for m in ("jax", "triton", "numpy", "pallas_prof.gate.session") if m in sys.modules]
  assert not heavy, heavy
"""


def test_the_plugin_costs_nothing_without_the_option(pytester):
  """Loaded in every pytest session where pallas-prof is installed: its options and
  marker, no JAX, no Triton, no gate."""
  pytester.makepyfile(test_startup=_STARTUP)
  result = run(pytester)
  assert result.ret == 0, result.stdout.str()
  result.stdout.fnmatch_lines(["*1 passed*"])
  assert "pallas-prof" not in result.stdout.str()       # and says nothing


def test_the_entry_point_names_the_plugin_module():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    project = tomllib.load(f)["project"]
  assert project["entry-points"]["pytest11"] == {
      "pallas_prof.pytest_plugin": "pallas_prof.pytest_plugin"}
  done = subprocess.run([sys.executable, "-c", "import pallas_prof.pytest_plugin as p; "
                         "print(p.pytest_addoption.__module__)"],
                        capture_output=True, text=True, timeout=60)
  assert done.stdout.strip() == "pallas_prof.pytest_plugin", done.stderr
