"""A newcomer's first hour (issue 30), each friction as the user met it: subprocesses on the CPU."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import warnings

import pytest

from pallas_prof.profiler import driver
from testkit.scripts import READS_PAST
from tests.cli.test_cli import EXAMPLES, pallas_prof, softmax_run  # noqa: F401 - a fixture

ARGV_SCRIPT = "import sys\nprint('ARGV', sys.argv[1:])\n"


# --- item 2: run's own options after the script ------------------------------------------

def test_runs_options_after_the_script_are_runs_own(tmp_path):
  script = tmp_path / "plain.py"
  script.write_text(ARGV_SCRIPT)
  out = tmp_path / "runs" / "a"
  result = pallas_prof("run", str(script), "--out", str(out), "--seed", "3", "--json",
                       cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert (out / "report.json").exists()                      # where the user asked
  assert not (tmp_path / "pallas-prof-out").exists()
  assert "ARGV ['--seed', '3']" in result.stderr             # --json: the script's output on stderr
  json.loads(result.stdout)                                  # --json was run's, too
  assert "taken as run's own" in result.stderr and "put `--` before it" in result.stderr


def test_an_option_the_script_names_stays_the_scripts(tmp_path):
  script = tmp_path / "takes_out.py"
  script.write_text("import sys\n# this script reads --out itself\nprint('ARGV', sys.argv[1:])\n")
  result = pallas_prof("run", "--out", str(tmp_path / "o"), str(script), "--out", "mine",
                       cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert "ARGV ['--out', 'mine']" in result.stdout and "taken as" not in result.stderr


def test_after_two_dashes_everything_is_the_scripts(tmp_path):
  script = tmp_path / "plain.py"
  script.write_text(ARGV_SCRIPT)
  result = pallas_prof("run", "--out", str(tmp_path / "o"), str(script), "--", "--out", "x",
                       "--json", cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert "ARGV ['--out', 'x', '--json']" in result.stdout
  assert not (tmp_path / "x").exists()


def test_run_without_a_script_says_which_is_missing(tmp_path):
  result = pallas_prof("run", "--out", str(tmp_path / "o"), cwd=tmp_path)
  assert result.returncode == 2
  assert "which script?" in result.stderr and "required" not in result.stderr
  assert "pallas-prof run [options] script.py [script args]" in result.stderr


# --- item 3: a kernel that fails at run time, through the CLI ----------------------------

# the default mode's case reads past its buffers: caught on a CPU, an illegal address on a GPU
@pytest.mark.parametrize("check", [pytest.param(False, marks=pytest.mark.no_gpu), True],
                         ids=["default", "bounds"])
def test_a_run_time_failure_is_one_short_report_in_every_output(tmp_path, monkeypatch, check):
  if check:
    monkeypatch.setenv("PALLAS_PROF_CHECK", "bounds")
  script = tmp_path / "reads_past.py"
  script.write_text(READS_PAST)
  out = tmp_path / "out"
  result = pallas_prof("run", "--out", str(out), str(script), cwd=tmp_path)
  assert result.returncode == 1
  err = result.stderr
  title = "pallas-prof: kernel `kernel` failed at run time, at `get`"
  assert err.count(title) == 1, err                                  # once
  assert "cannot lower" not in err and "Traceback" not in err, err   # said for what it is
  assert "jax.pure_callback failed" not in err and "CpuCallback" not in err, err
  assert len(err.splitlines()) < 40, err
  assert ">> 7 |   o_ref[...] = x_ref[pl.ds(i * 8 + 4, 8)] * 2.0" in err, err
  assert "hint:" in err and ("PALLAS_PROF_CHECK=bounds" in err)
  if check:
    assert "reads x_ref (shape (32,), float32) at index [32:36]" in err, err
  # report.json and report.html say it too
  (entry,) = json.loads((out / "report.json").read_text())["errors"]
  assert entry["stage"] == "run" and entry["primitive"] == "get"
  assert entry["location"] == f"{script}:7" and entry["hint"]
  assert "failed at run time" in entry["report"]
  page = (out / "report.html").read_text()
  assert "failed at run time: <code>kernel</code>" in page and "what to do:" in page
  assert "error: kernel `kernel` failed at run time at" in result.stdout   # the report's last word
  # the whole traceback when asked for
  full = pallas_prof("run", "--traceback", "--out", str(tmp_path / "again"), str(script),
                     cwd=tmp_path)
  assert "Traceback (most recent call last)" in full.stderr


@pytest.mark.no_gpu
def test_a_failure_the_script_catches_is_a_note(tmp_path):
  script = tmp_path / "catches.py"
  script.write_text(READS_PAST.replace(
      "print(f(jnp.arange(32, dtype=jnp.float32)))",
      "import pallas_prof\ntry:\n  f(jnp.arange(32, dtype=jnp.float32))\n"
      "except pallas_prof.BoundsError as e:\n  print('CAUGHT', e.location)\n"))
  out = tmp_path / "out"
  result = pallas_prof("run", "--out", str(out), str(script), cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert f"CAUGHT {script}:7" in result.stdout
  report = json.loads((out / "report.json").read_text())
  assert report["errors"] == []
  assert any("caught 1 failure(s)" in n and "BoundsError" in n for n in report["notes"])


# --- item 6: run directories that lost files or were damaged -----------------------------

def test_show_in_a_run_without_its_kernel_files_says_so(softmax_run, tmp_path):
  out, _ = softmax_run
  broken = tmp_path / "broken"
  shutil.copytree(out, broken)
  shutil.rmtree(broken / "kernels")
  for extra in ([], ["--eject", str(tmp_path / "k.py")], ["--sass"]):
    result = pallas_prof("show", "softmax_kernel", "--dir", str(broken), *extra)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "are not in the run directory any more" in result.stderr, result.stderr
    assert "pallas-prof run" in result.stderr


@pytest.mark.parametrize("damage, says", [
    (lambda r: r["kernels"][0].update(label=3), "kernels[0].label is a number where a string"),
    (lambda r: r["kernels"][0].update(grid="64"), "kernels[0].grid is a string where a list"),
    (lambda r: r.update(kernels={"a": 1}), "kernels is an object where a list"),
    (lambda r: r["kernels"][0].pop("name"), "kernels[0].name is missing"),
    (lambda r: r["profile"]["kernels"][0]["static"].update(equations="x"),
     "profiles[0].kernels[0].static.equations is a string where a list"),
])
def test_a_damaged_report_is_refused_with_where(softmax_run, tmp_path, damage, says):
  out, _ = softmax_run
  bad = tmp_path / "bad"
  shutil.copytree(out, bad)
  report = json.loads((bad / "report.json").read_text())
  damage(report)
  (bad / "report.json").write_text(json.dumps(report))
  for command in (["report", str(bad)], ["show", "softmax_kernel", "--dir", str(bad)],
                  ["diff", str(out), str(bad)]):
    result = pallas_prof(*command)
    assert result.returncode == 1, (command, result.stdout)
    assert "Traceback" not in result.stderr, result.stderr
    assert f"{bad}/report.json is damaged: {says}" in result.stderr, result.stderr


# --- item 7: tune on a machine without a GPU --------------------------------------------

@pytest.mark.no_gpu
def test_tune_without_a_gpu_says_so_before_running_the_script(tmp_path):
  marker = tmp_path / "ran"
  script = tmp_path / "script.py"
  script.write_text(f"open({str(marker)!r}, 'w').close()\n")
  result = pallas_prof("tune", str(script), cwd=tmp_path)
  assert result.returncode == 2
  assert "tuning times kernels on an NVIDIA GPU" in result.stderr
  assert "the script was not run" in result.stderr and not marker.exists()


# --- item 8: words that mislead ---------------------------------------------------------

@pytest.mark.no_gpu
def test_a_cpu_run_says_what_it_shows_and_no_wait_for_a_worker(softmax_run):
  out, result = softmax_run
  text = " ".join(result.stdout.split())        # as read, whatever the terminal's wrapping
  assert "no NVIDIA GPU" in text and "Triton's interpreter" in text and "need a GPU" in text
  if not driver.nvidia_driver_loaded():
    assert "pip install" not in text             # no package to install on a machine without one
  assert " wait" not in text and "compile worker" not in text
  # the wait is kept in report.json, where it is pallas-prof's own compile's
  report = json.loads((out / "report.json").read_text())
  assert report["kernels"][0]["compile"]["worker_wait_ms"] is not None


def test_report_names_the_run_and_does_not_say_it_wrote_it(softmax_run, monkeypatch):
  monkeypatch.setenv("COLUMNS", "200")       # the closing line on one line, its folder long
  out, _ = softmax_run
  result = pallas_prof("report", str(out))
  assert result.returncode == 0
  last = result.stdout.strip().splitlines()[-1]
  assert last.startswith(f"the run is in {out}/") and "wrote" not in result.stdout


def test_a_kernel_filter_that_matches_nothing_says_what_there_was(tmp_path):
  result = pallas_prof("run", "--kernel", "nomatch", "--no-analysis", "--out", str(tmp_path / "o"),
                       os.path.join(EXAMPLES, "softmax.py"))
  assert result.returncode == 0, result.stderr
  assert "no pallas_call kernels were lowered" not in result.stdout
  assert "--kernel 'nomatch' matched none of the 1 kernel(s)" in result.stdout
  assert "softmax_kernel#" in result.stdout


def test_show_of_an_unknown_kernel_lists_those_there_are(softmax_run, tmp_path):
  out, _ = softmax_run
  root = tmp_path / "pallas-prof-out"
  root.mkdir()
  shutil.copytree(out, root / "20260101-000000")
  result = pallas_prof("show", "no_such_kernel", cwd=tmp_path)
  assert result.returncode == 1
  assert "they have: softmax_kernel#" in result.stderr, result.stderr


# --- item 9: terminal fit ---------------------------------------------------------------

@pytest.mark.parametrize("stage", ["source", "ttir", "llir", "ptx", "sass"])
def test_show_fits_columns_and_describes_each_equation_once(softmax_run, monkeypatch, stage):
  monkeypatch.setenv("COLUMNS", "100")
  out, _ = softmax_run
  result = pallas_prof("show", "softmax_kernel", "--dir", str(out), f"--{stage}")
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert max(len(line) for line in lines) <= 100
  headers = [line for line in lines if line.startswith("── [")]
  assert len(headers) == len(set(headers)) > 3                   # one per equation, no repeats
  assert not any(re.search(r"# \[\d+\] \w+ @ ", line) for line in lines)   # no trailing copy
  exp = next(line for line in lines if line.startswith("── [4] exp @ softmax.py:21"))
  assert re.search(r"\(\d+\.\d% of (instructions|the time)\)$", exp), exp   # the weight, whole
  wide = pallas_prof("show", "softmax_kernel", "--dir", str(out), f"--{stage}", "--wide")
  assert max(len(line) for line in wide.stdout.splitlines()) >= max(len(line) for line in lines)


@pytest.mark.no_gpu      # a CPU run's tables (a GPU run's split in two at this width)
def test_at_100_columns_the_run_reads_whole(softmax_run, monkeypatch):
  monkeypatch.setenv("COLUMNS", "100")
  out, _ = softmax_run
  text = pallas_prof("report", str(out)).stdout
  lines = text.splitlines()
  assert max(len(line) for line in lines) <= 100
  # the source column keeps the user's line where the instruction mix can give way
  assert any("x = x - jnp.max(x, axis=1, keepdims=True)" in line for line in lines), text
  compile_rows = [line for line in lines if line.startswith("softmax_kernel#")]
  assert len(compile_rows) == 1                                  # the row on one line
  # units: shared memory in bytes with its unit, the same in the table and the page
  assert re.search(r"\b\d+ B\b", compile_rows[0]), compile_rows
  # the verdict does not repeat the hot-equations table
  assert "heaviest equations" not in text


@pytest.mark.no_gpu      # two CPU runs: no runtimes, so no runtime columns
def test_diff_on_cpu_fits_100_columns_and_says_what_got_worse(softmax_run, tmp_path, monkeypatch):
  monkeypatch.setenv("COLUMNS", "100")
  out, _ = softmax_run
  b = tmp_path / "b"
  shutil.copytree(out, b)
  report = json.loads((b / "report.json").read_text())
  res = report["kernels"][0]["resources"]
  res["registers"] += 20
  res["shared_bytes"] = 24576
  (b / "report.json").write_text(json.dumps(report))
  result = pallas_prof("diff", str(out), str(b), "--fail-on-regression", "5")
  assert result.returncode == 1
  lines = result.stdout.splitlines()
  assert max(len(line) for line in lines) <= 100
  row = next(line for line in lines if line.startswith("softmax_kernel#"))
  assert row.split()[-1] == "worse" and "-> 24 KiB" in row and "median" not in result.stdout
  assert any(line.startswith("worse: softmax_kernel#") and "registers (per thread) +" in line
             for line in lines)


# --- item 12: the examples ----------------------------------------------------------------

def test_matmul_example_covers_any_m_and_n_without_a_warning():
  sys.path.insert(0, EXAMPLES)
  try:
    import jax
    import jax.numpy as jnp
    import matmul
    import pallas_prof
    a = jax.random.normal(jax.random.PRNGKey(0), (200, 96), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (96, 300), jnp.float32)
    with warnings.catch_warnings():
      warnings.simplefilter("error", pallas_prof.UncoveredOutputWarning)
      out = matmul.matmul(a, b, bm=64, bn=64, bk=32)
    ref = jnp.dot(a, b, precision="highest")
    # on a GPU the kernel's dot multiplies in TF32 (JAX's default precision there): a
    # 10-bit mantissa over K=96 terms of unit size
    tol = 1e-3 if jax.default_backend() == "cpu" else 5e-2
    assert float(jnp.max(jnp.abs(out - ref))) < tol
    with pytest.raises(ValueError, match="K=96 is not a multiple of bk=64"):
      matmul.matmul(a, b, bk=64)
  finally:
    sys.path.remove(EXAMPLES)


def test_no_example_divides_a_grid_down():
  """`n // block` in a grid leaves the last elements unwritten when n is not a multiple."""
  for name in sorted(os.listdir(EXAMPLES)):
    if name.endswith(".py"):
      text = open(os.path.join(EXAMPLES, name)).read()
      for grid in re.findall(r"grid=\(([^)]*)\)", text):
        assert "//" not in grid, f"{name}: grid=({grid})"


# --- found by following the README in a fresh clone ---------------------------------------

def test_show_and_report_find_the_run_written_with_out(tmp_path):
  """`run --out runs/a` then `show KERNEL` / `report`: the run just made, not an older one
  under pallas-prof-out/ (which is all they looked at)."""
  older = pallas_prof("run", "--no-analysis", os.path.join(EXAMPLES, "vector_add.py"),
                      cwd=tmp_path)
  assert older.returncode == 0, older.stderr
  newer = pallas_prof("run", "--no-analysis", "--out", "runs/a",
                      os.path.join(EXAMPLES, "softmax.py"), cwd=tmp_path)
  assert newer.returncode == 0, newer.stderr
  shown = pallas_prof("show", "softmax_kernel", cwd=tmp_path)
  assert shown.returncode == 0 and "from runs/a" in shown.stdout.splitlines()[0], shown.stdout
  report = pallas_prof("report", cwd=tmp_path)
  assert report.stdout.strip().splitlines()[-1].startswith("the run is in runs/a/"), report.stdout
  # a run of another working directory is not taken for this one's
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  assert pallas_prof("show", "softmax_kernel", cwd=elsewhere).returncode == 1


def test_output_into_a_pipe_that_closes_early_is_no_traceback(tmp_path):
  """`pallas-prof rules | head -3` printed a BrokenPipeError traceback when head had gone."""
  import subprocess
  env = dict(os.environ, PYTHONPATH=os.path.dirname(EXAMPLES))
  child = subprocess.Popen([sys.executable, "-m", "pallas_prof", "rules"], env=env, cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  child.stdout.close()                       # the reader is gone before anything is written
  err = child.stderr.read().decode()
  assert child.wait(timeout=300) == 141
  assert "Traceback" not in err and "BrokenPipe" not in err, err
