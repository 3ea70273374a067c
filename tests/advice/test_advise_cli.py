"""`pallas-prof advise` and `run` on this CPU: the advice from static facts, said to be
unmeasured, in the terminal, report.json and report.html."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pallas_prof.cli.report import RunReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_script.py")

pytestmark = pytest.mark.no_gpu     # asserts what a machine without a GPU says


def _cli(*args, timeout=900):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             COLUMNS="160")
  return subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                        text=True, env=env, cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def advised(tmp_path_factory):
  out = tmp_path_factory.mktemp("advise") / "run"
  tuning = tmp_path_factory.mktemp("tuning") / "t.json"
  result = _cli("advise", "--out", str(out), "--tuning-file", str(tuning), SCRIPT)
  assert result.returncode == 0, result.stdout + result.stderr
  return result, out, tuning


def _by_label(report):
  return {a.name: a for a in report.advice}


def test_no_gpu_is_said_before_the_script_runs(advised):
  result, _, tuning = advised
  lines = result.stderr.splitlines()
  first = next(i for i, ln in enumerate(lines) if ln.startswith("pallas-prof advise: no NVIDIA GPU"))
  assert first < lines.index("the script runs")
  assert 'each action marked "not measured: no GPU"' in lines[first]
  assert "no NVIDIA GPU: " in lines[first] and "))" not in lines[first]   # one clause, no nesting
  assert "compiling 0 variant" not in result.stderr      # nothing to compile: no line saying so
  assert not tuning.exists()                # nothing measured: nothing to keep


def test_the_advice_in_report_json(advised):
  _, out, _ = advised
  with open(out / "report.json") as f:
    data = json.load(f)
  assert {a["name"] for a in data["advice"]} == {"add_kernel", "row_kernel", "loop_kernel",
                                                 "exp_kernel"}
  report = RunReport.load(str(out))          # and it reads back typed
  advice = _by_label(report)
  add = advice["add_kernel"]
  assert add.measured == "not measured: no GPU"
  assert add.diagnoses[0].text == "each program moves 768 B: launch and tail overhead dominate"
  first = add.actions[0]
  # re-traced at a larger block (the largest that leaves each of 132 SMs a program: 65,536
  # elements in blocks of 256), compiled for sm_90, not timed; run beside the original under
  # the interpreter, outputs compared
  assert first.kind == "c" and first.change["from_block"] == 64
  assert first.change["to_block"] == 256
  assert first.status == "not measured: no GPU; outputs equal under the interpreter"
  assert "registers" in first.compiled and first.trial is None
  assert first.apply.startswith("at cpu_script.py:") and "grid=(1024,)" in first.apply
  row = advice["row_kernel"]
  assert row.diagnoses[0].text == "one warp per row of 4096 floats"
  warps = [a for a in row.actions if a.kind == "a"]
  assert [a.change for a in warps] == [{"num_warps": 4}, {"num_warps": 8}]
  assert all("registers" in a.compiled for a in warps)
  # the loop recomputes exp(x) and sin(x) of the same x in the jaxpr, but LLVM hoisted them
  # (their instructions are outside any machine loop): the advice claims no hoist
  loop = advice["loop_kernel"]
  kp = next(k for k in report.profile.kernels if k.name == "loop_kernel")
  exp = next(e for e in kp.static.equations if e.primitive == "exp")
  assert exp.sass_instructions and exp.loop_instructions == 0
  assert "loop_invariant" not in [d.rule for d in loop.diagnoses]
  assert not any(a.title.startswith("hoist") for a in loop.actions)


def test_the_advice_in_the_terminal_and_the_page(advised):
  result, out, _ = advised
  assert "advice for add_kernel#" in result.stdout
  assert "1. [c] block 64 -> " in result.stdout and "not measured: no GPU" in result.stdout
  assert "one warp per row of 4096 floats" in result.stdout
  page = (out / "report.html").read_text()
  assert page.count('<aside class="advice"') == 4


def test_run_diagnoses_without_trials(tmp_path):
  out = tmp_path / "run"
  result = _cli("run", "--out", str(out), SCRIPT)
  assert result.returncode == 0, result.stderr
  report = RunReport.load(str(out))
  add = _by_label(report)["add_kernel"]
  assert add.actions[0].kind == "c" and not add.actions[0].compiled   # not compiled by `run`
  assert "advice for row_kernel#" in result.stdout


def test_the_advices_diffs_are_files_the_user_applies(tmp_path):
  """Each action's diff is written to the run's diffs/ folder, named by its kernel, rank
  and rule, and the closing lines say where; applied with `patch -p1` where the script ran,
  the split script prints the sums the original printed."""
  script = tmp_path / "in_place_script.py"
  script.write_text(open(os.path.join(os.path.dirname(SCRIPT), "in_place_script.py")).read())
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             COLUMNS="160")
  result = subprocess.run([sys.executable, "-m", "pallas_prof", "advise", "--out", "run",
                           script.name], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=900)
  assert result.returncode == 0, result.stdout + result.stderr
  report = RunReport.load(str(tmp_path / "run"))
  (advice,) = report.advice
  split = next(i for i, a in enumerate(advice.actions, 1) if a.rule == "long_reduction")
  name = f"diffs/{advice.label.replace('#', '-')}-{split}-long_reduction.diff"
  saved = (tmp_path / "run" / name).read_text()
  assert saved == advice.actions[split - 1].diff
  assert f"run/{name}" in result.stdout and "diffs/" in result.stdout
  assert len(os.listdir(tmp_path / "run" / "diffs")) == sum(1 for a in advice.actions if a.diff)
  want = next(ln for ln in result.stdout.splitlines() if ln.startswith("sums"))
  done = subprocess.run(["patch", "-p1"], input=saved, text=True, capture_output=True,
                        cwd=tmp_path)
  assert done.returncode == 0, done.stdout + done.stderr
  assert "_pallas_prof_split_sum" in script.read_text()
  patched = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", "patched",
                            script.name], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=600)
  assert patched.returncode == 0, patched.stderr
  got = next(ln for ln in patched.stdout.splitlines() if ln.startswith("sums"))
  assert np.allclose(eval(got[5:]), eval(want[5:]), atol=2e-3)   # noqa: S307 - our own output


def test_a_diff_with_a_secret_masked_says_so_and_no_redact_gives_it_whole(tmp_path):
  """A line of the split's diff holds what looks like a secret: the diff written is masked
  and says so at its top (before the `---`, where patch reads no lines), so the user knows
  why it does not apply; with --no-redact it is whole and applies."""
  source = open(os.path.join(os.path.dirname(SCRIPT), "in_place_script.py")).read()
  marked = source.replace("  jax.lax.fori_loop(0,", "  # db password=s3cr3tvalue\n"
                          "  jax.lax.fori_loop(0,")
  assert marked.count("s3cr3tvalue") == 1
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             COLUMNS="160")
  diffs = {}
  for flags in ((), ("--no-redact",)):
    script = tmp_path / "in_place_script.py"
    script.write_text(marked)
    out = "whole" if flags else "masked"
    result = subprocess.run([sys.executable, "-m", "pallas_prof", "advise", *flags, "--out",
                             out, script.name], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    (advice,) = RunReport.load(str(tmp_path / out)).advice
    split = next(i for i, a in enumerate(advice.actions, 1) if a.rule == "long_reduction")
    name = f"diffs/{advice.label.replace('#', '-')}-{split}-long_reduction.diff"
    diffs[out] = (tmp_path / out / name).read_text()
    done = subprocess.run(["patch", "-p1", "--dry-run"], input=diffs[out], text=True,
                          capture_output=True, cwd=tmp_path)
    assert (done.returncode == 0) == bool(flags), done.stdout + done.stderr
  masked, whole = diffs["masked"], diffs["whole"]
  assert "s3cr3tvalue" not in masked and "password=***" in masked
  assert masked.startswith("# pallas-prof masked what looked like a secret in this diff")
  assert "--no-redact" in masked.splitlines()[0]
  assert "s3cr3tvalue" in whole and not whole.startswith("#")
  assert masked.splitlines()[1:] == whole.replace("s3cr3tvalue", "***").splitlines()
  # the first line alone keeps no diff from applying: patch skips it
  script.write_text(marked)
  done = subprocess.run(["patch", "-p1", "--dry-run"], input=masked.splitlines(True)[0] + whole,
                        text=True, capture_output=True, cwd=tmp_path)
  assert done.returncode == 0, done.stdout + done.stderr


UNCOVERED = '''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, w_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


x = jnp.ones((200, 96), jnp.float32)
w = jnp.ones((96, 128), jnp.float32)
out = pl.pallas_call(matmul_kernel, grid=(200 // 64, 2),
                     in_specs=[pl.BlockSpec((64, 96), lambda i, j: (i, 0)),
                               pl.BlockSpec((96, 64), lambda i, j: (0, j))],
                     out_specs=pl.BlockSpec((64, 64), lambda i, j: (i, j)),
                     out_shape=jax.ShapeDtypeStruct((200, 128), jnp.float32))(x, w)
print(float(out[:192].sum()))
'''


def test_a_kernels_coverage_warning_is_said_once_at_the_users_line(tmp_path):
  """The kernel's rows past 192 are in no block: the warning comes once, when the script
  runs, at its pallas_call; advise's block variants (6 programs on 132 SMs: smaller
  blocks), traced again from advise's own frames, do not repeat it (they named
  `<frozen runpy>` as the call's line)."""
  script = tmp_path / "uncovered_rows.py"
  script.write_text(UNCOVERED)
  result = _cli("advise", "--out", str(tmp_path / "run"), str(script))
  assert result.returncode == 0, result.stdout + result.stderr
  said = [ln for ln in result.stderr.splitlines() if "UncoveredOutputWarning" in ln]
  assert len(said) == 1 and said[0].startswith(f"{script}:12: UncoveredOutputWarning"), said
  assert "runpy" not in result.stderr
  assert "[c] block" in result.stdout        # the variants were made
