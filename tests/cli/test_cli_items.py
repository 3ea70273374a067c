"""What a new user hit (issue 19, part 5), each as the user ran it: subprocesses on the CPU."""
from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest

from pallas_prof.cli.report import RunReport
from tests.cli.test_cli import EXAMPLES, pallas_prof, softmax_run  # noqa: F401 - a fixture


def test_run_of_a_missing_script_says_so_and_writes_nothing(tmp_path):
  result = pallas_prof("run", "nope.py", cwd=tmp_path)
  assert result.returncode == 2
  assert result.stderr.splitlines()[0] == "pallas-prof: no such file: nope.py"
  assert "Traceback" not in result.stdout + result.stderr
  assert list(tmp_path.iterdir()) == []         # no pallas-prof-out/<timestamp>/
  folder = pallas_prof("run", str(tmp_path), cwd=tmp_path)
  assert folder.returncode == 2 and "without a __main__.py" in folder.stderr


def test_run_json_keeps_stdout_json_and_the_script_output_on_stderr(tmp_path):
  script = tmp_path / "chatty.py"
  script.write_text(textwrap.dedent(f"""
      import os, subprocess, sys
      sys.path.insert(0, {EXAMPLES!r})
      import numpy as np
      import softmax
      print("a line from the script")
      os.write(1, b"a line written to fd 1\\n")
      subprocess.run([sys.executable, "-c", "print('a line from a child process')"])
      softmax.softmax(np.ones((4, 33), np.float32)).block_until_ready()
      """))
  out = tmp_path / "out"
  result = pallas_prof("run", "--json", "--no-analysis", "--out", str(out), str(script))
  assert result.returncode == 0, result.stderr
  report = json.loads(result.stdout)            # all of stdout is the one JSON document
  assert report == json.loads((out / "report.json").read_text())
  assert report["command"] == ["pallas-prof", "run", "--json", "--no-analysis", "--out",
                               str(out), str(script)]
  assert [k["name"] for k in report["kernels"]] == ["softmax_kernel"]
  for line in ("a line from the script", "a line written to fd 1", "a line from a child process"):
    assert line in result.stderr and line not in result.stdout


def test_otlp_trace_is_named_jsonl_and_holds_json_lines(tmp_path):
  out = tmp_path / "out"
  result = pallas_prof("run", "--no-analysis", "--out", str(out),
                       os.path.join(EXAMPLES, "softmax.py"))
  assert result.returncode == 0, result.stderr
  report = json.loads((out / "report.json").read_text())
  assert report["traces"]["otlp_json"] == "trace.otlp.jsonl"
  assert not (out / "trace.otlp.json").exists()
  lines = (out / "trace.otlp.jsonl").read_text().splitlines()
  assert lines and all("resourceSpans" in json.loads(line) for line in lines)
  assert "trace.otlp.jsonl" in result.stdout     # the run's last line names its files
  # report.json read back through the typed report gives back every key and value
  typed = RunReport.load(str(out))
  assert typed.to_dict() == report and RunReport.from_json(typed.to_json()) == typed
  assert typed.kernels[0].name == "softmax_kernel" and typed.traces.otlp_json == "trace.otlp.jsonl"


@pytest.mark.no_gpu
def test_diff_on_cpu_compares_what_the_runs_have(softmax_run, tmp_path, monkeypatch):
  """Runs without a GPU have no runtimes: diff compares registers, shared memory, spills
  and instruction counts, fails on their growth, and says nothing timed was compared."""
  monkeypatch.setenv("COLUMNS", "200")       # the verdicts on one line each
  out, _ = softmax_run
  a, b = tmp_path / "a", tmp_path / "b"
  shutil.copytree(out, a)
  shutil.copytree(out, b)
  same = pallas_prof("diff", str(a), str(b), "--fail-on-regression", "5")
  assert same.returncode == 0, same.stdout + same.stderr
  assert "no runtimes compared" in same.stdout
  report = json.loads((b / "report.json").read_text())
  kernel = report["kernels"][0]
  registers = kernel["resources"]["registers"]
  kernel["resources"]["registers"] = round(registers * 1.25)         # a test input
  static = report["profile"]["kernels"][0]["static"]
  static["sass_instructions"] = round(static["sass_instructions"] * 1.5)
  (b / "report.json").write_text(json.dumps(report))
  worse = pallas_prof("diff", str(a), str(b), "--fail-on-regression", "5")
  assert worse.returncode == 1, worse.stdout
  assert f"{registers} -> {round(registers * 1.25)}" in worse.stdout
  assert "registers (per thread) +" in worse.stdout and \
      "instructions (per program) +50.0%" in worse.stdout
  assert "no runtimes compared" in worse.stdout
  lenient = pallas_prof("diff", str(a), str(b), "--fail-on-regression", "60")
  assert lenient.returncode == 0, lenient.stdout


def test_show_looks_through_recent_runs(tmp_path):
  """A newer run without the kernel does not hide it: show finds it in an earlier run
  and says where."""
  first = pallas_prof("run", "--no-analysis", os.path.join(EXAMPLES, "softmax.py"), cwd=tmp_path)
  assert first.returncode == 0, first.stderr
  plain = tmp_path / "no_kernels.py"
  plain.write_text("print('no kernels here')\n")
  second = pallas_prof("run", "--no-analysis", str(plain), cwd=tmp_path)
  assert second.returncode == 0, second.stderr
  runs = sorted(p for p in (tmp_path / "pallas-prof-out").iterdir() if p.is_dir())
  assert len(runs) == 2
  shown = pallas_prof("show", "softmax_kernel", cwd=tmp_path)
  assert shown.returncode == 0, shown.stderr
  assert "── [4] exp @ softmax.py:21" in shown.stdout
  older = next(r for r in runs if json.loads((r / "report.json").read_text())["kernels"])
  assert f"showing it from pallas-prof-out/{older.name}, 1 run(s) back" in shown.stderr
  missing = pallas_prof("show", "no_such_kernel", cwd=tmp_path)
  assert missing.returncode != 0 and \
      "no kernel 'no_such_kernel' in the 2 most recent run(s) under pallas-prof-out/;" \
      in missing.stderr


def test_examples_print_their_seed_and_take_one(tmp_path):
  """The examples draw random inputs: each run prints its seed, and --seed redraws them."""
  import re
  import subprocess
  import sys
  env = dict(os.environ, PYTHONPATH=os.path.dirname(EXAMPLES))

  def run(*args):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "softmax.py"), *args],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout

  fresh = run()
  seed = re.match(r"seed (\d+) \(--seed \1 draws the same inputs\)\n", fresh).group(1)
  again = run("--seed", seed)
  assert again == fresh          # the same inputs: the same error, to the last digit printed
  assert run("--seed", "7").startswith("seed 7 ")


def test_show_says_where_it_looked_when_the_last_run_was_written_with_out(tmp_path, monkeypatch):
  """The last run was `run --out runs/a`: the message said "in the 2 most recent runs under
  pallas-prof-out/ (newest: runs/a)", a newest run that is not under it."""
  from pallas_prof.cli import run_directory
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.chdir(tmp_path)
  kernel = {"label": "k#abc123", "name": "k", "grid": [4], "num_warps": 4, "num_stages": 3}
  for run in ("pallas-prof-out/20261203-113438", "runs/a"):
    os.makedirs(run)
    RunReport.from_dict({"schema": "pallas-prof/run/1", "kernels": [kernel]}).save(run)
  os.utime("pallas-prof-out/20261203-113438/report.json", (1, 1))   # the older one
  run_directory.remember_run("runs/a")
  with pytest.raises(SystemExit) as info:
    run_directory.locate_kernel("softmax_kernel")
  text = str(info.value)
  assert "in the 2 most recent run(s) (under pallas-prof-out/ and the last run made here " \
         "with --out, runs/a); the newest is runs/a and they have: k#abc123." in text, text


def test_the_scripts_own_exception_is_in_the_report(tmp_path):
  """A script that raised (here before any kernel ran, as JAX's own check of a static
  slice does) left report.json and report.html with "exit 1" and nothing on why."""
  script = tmp_path / "boom.py"
  script.write_text("def helper():\n  raise RuntimeError('boom\\nsecond line')\n\nhelper()\n")
  out = tmp_path / "run"
  result = pallas_prof("run", "--no-analysis", "--out", str(out), str(script), cwd=tmp_path)
  assert result.returncode == 1
  assert "RuntimeError: boom" in result.stderr                  # the traceback, as before
  report = RunReport.load(str(out))
  assert report.exit_code == 1 and not report.errors
  assert "the script raised RuntimeError: boom (at boom.py:2)" in report.notes, report.notes
  assert "note: the script raised RuntimeError: boom (at boom.py:2)" in result.stdout
  assert "the script raised RuntimeError: boom (at boom.py:2)" in (out / "report.html").read_text()
  script.write_text("import sys\nsys.exit(3)\n")                # an exit is not an exception
  # the same --out again: --force replaces the run there (without it, refused)
  result = pallas_prof("run", "--no-analysis", "--force", "--out", str(out), str(script),
                       cwd=tmp_path)
  assert result.returncode == 3
  assert not [n for n in RunReport.load(str(out)).notes if "the script raised" in n]


def test_pallas_prof_alone_lists_the_commands():
  """`pallas-prof` with nothing after it said "the following arguments are required:
  command" and no more."""
  result = pallas_prof()
  assert result.returncode == 2
  assert "pallas-prof run [options] script.py [script args]" in result.stderr
  assert "required" not in result.stderr and not result.stdout


STATIC_SLICE_SCRIPT = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def kernel(x_ref, o_ref):
  o_ref[...] = x_ref[pl.ds(4, 40)] * 2.0      # JAX's own check refuses this slice

pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((40,), jnp.float32))(jnp.zeros(40))
"""


def test_the_scripts_traceback_has_no_pallas_prof_frames_unless_asked(tmp_path):
  """A failure JAX raised while tracing the kernel showed a frame of
  pallas_prof/advice/recipes.py (run's wrapper around pl.pallas_call) between the
  user's call and JAX's; --traceback keeps every frame."""
  script = tmp_path / "static_slice.py"
  script.write_text(STATIC_SLICE_SCRIPT)
  plain = pallas_prof("run", "--no-analysis", "--out", str(tmp_path / "a"), str(script),
                      cwd=tmp_path)
  assert plain.returncode == 1
  assert 'static_slice.py", line 6, in kernel' in plain.stderr, plain.stderr
  assert "Out of bound slice" in plain.stderr
  assert os.path.join("pallas_prof", "advice", "recipes.py") not in plain.stderr, plain.stderr
  full = pallas_prof("run", "--no-analysis", "--traceback", "--out", str(tmp_path / "b"),
                     str(script), cwd=tmp_path)
  assert os.path.join("pallas_prof", "advice", "recipes.py") in full.stderr, full.stderr
