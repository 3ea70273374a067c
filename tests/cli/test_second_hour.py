"""A newcomer's second hour (issue 39): their own kernels and scripts, on a CPU machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.cli.test_cli import ROOT, pallas_prof

INTERPRETED = textwrap.dedent("""\
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def add_kernel(x_ref, y_ref, o_ref):
      o_ref[...] = x_ref[...] + y_ref[...]

    x = jnp.arange(128, dtype=jnp.float32)
    out = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         interpret=True)(x, x)             # LINE 8
    print("SUM", float(out.sum()))
    """)


def test_a_kernel_jax_interprets_is_said_not_silently_missing(tmp_path):
  """interpret=True: JAX's own interpreter ran the kernel, pallas-prof never saw it, and the
  run said only that no kernel was lowered. The run now says which kernel, where, and what
  to do, on the terminal and in report.json; what JAX computed is unchanged."""
  script = tmp_path / "interpreted.py"
  script.write_text(INTERPRETED)
  result = pallas_prof("run", "--no-analysis", "--out", str(tmp_path / "out"), str(script),
                       cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert "SUM 16256.0" in result.stdout                  # JAX's interpreter still ran it
  said = " ".join((result.stdout + result.stderr).split())
  assert f"`add_kernel` at {script}:8" in said, said
  assert "interpret=True" in said and "Drop interpret=True" in said, said
  notes = json.loads((tmp_path / "out" / "report.json").read_text())["notes"]
  assert any(f"`add_kernel` at {script}:8" in n and "Drop interpret=True" in n
             for n in notes), notes


# --- item 4: a reader that leaves (`| head`) ---------------------------------------------

SMALL_KERNEL = textwrap.dedent("""\
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def double_kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * 2

    x = jnp.arange(64, dtype=jnp.float32)
    y = pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    for i in range(5000):          # more than a pipe holds: the writer meets the closed end
      print("VALUE", i, float(y[1]))
    """)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
  where = tmp_path_factory.mktemp("small")
  script = where / "small.py"
  script.write_text(SMALL_KERNEL)
  result = pallas_prof("run", "--no-analysis", "--out", str(where / "run"), str(script),
                       cwd=where)
  assert result.returncode == 0, result.stderr
  return where


def _into_a_closed_pipe(args, cwd):
  """`pallas-prof ARGS | head -1` with a reader that left before anything was written: the
  exit status and what was said on stderr."""
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  child = subprocess.Popen([sys.executable, "-m", "pallas_prof", *args], env=env, cwd=cwd,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  child.stdout.close()
  err = child.stderr.read().decode()
  return child.wait(timeout=300), err


@pytest.mark.parametrize("command", ["run", "run --json", "show", "report", "diff", "rules"])
def test_a_closed_pipe_ends_every_command_as_sigpipe_and_keeps_the_run(small_run, command):
  """`pallas-prof run script.py | head` exited 1 without a word (rich's console ends a write
  into a closed pipe with SystemExit(1)), and a script printing more than the pipe held
  died of BrokenPipeError with a traceback. Every command now ends as a Unix tool a closed
  pipe ended: no traceback, no message, exit 141; a run's directory is written first."""
  out = small_run / ("piped_" + command.replace(" --", "_"))
  args = {"run": ["run", "--no-analysis", "--out", str(out), "small.py"],
          "run --json": ["run", "--json", "--no-analysis", "--out", str(out), "small.py"],
          "show": ["show", "--dir", "run", "double_kernel"],
          "report": ["report", "run"],
          "diff": ["diff", "run", "run"],
          "rules": ["rules"]}[command]
  code, err = _into_a_closed_pipe(args, small_run)
  assert code == 141, err
  for word in ("Traceback", "BrokenPipe", "Exception ignored", "Errno"):
    assert word not in err, err
  if command.startswith("run"):
    report = json.loads((out / "report.json").read_text())
    assert [k["name"] for k in report["kernels"]] == ["double_kernel"]
    if command == "run":       # the script's own output met the closed pipe first
      assert report["exit_code"] == 141 and any("the reader of the script's output left" in n
                                                for n in report["notes"]), report["notes"]


# --- item 6: the runs stay out of the user's git -----------------------------------------

def test_a_folder_of_runs_pallas_prof_made_is_ignored_by_git_and_no_other_is(tmp_path):
  """pallas-prof-out/ (or --out runs/a's runs/) showed up in `git status` of the user's
  repository. The folder pallas-prof makes for its runs holds a .gitignore of `*` (as
  pytest's cache does); one that was there, the current folder, a user's file: untouched."""
  script = tmp_path / "plain.py"
  script.write_text("print('hello')\n")
  user_ignore = "my own rules\n"
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / ".gitignore").write_text(user_ignore)
  for out in (None, None, "runs/a", "mine/a"):
    args = ["run", "--no-analysis", *(["--out", out] if out else []), str(script)]
    result = pallas_prof(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
  for made in ("pallas-prof-out", "runs"):
    lines = (tmp_path / made / ".gitignore").read_text().splitlines()
    assert lines[-1] == "*" and all(line.startswith("#") for line in lines[:-1]), lines
  assert (tmp_path / "mine" / ".gitignore").read_text() == user_ignore
  assert not (tmp_path / ".gitignore").exists()          # the current folder is the user's
  assert len(list((tmp_path / "pallas-prof-out").iterdir())) == 3    # two runs and the file
