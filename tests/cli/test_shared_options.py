"""run's and advise's shared options are declared once (cli/shared_options.py): advise's
--kernel is checked as run's is, before the script runs (it was taken as any text, and a
typo ended the run after the script), and the options both have carry the same checks."""
from __future__ import annotations

import subprocess
import sys

import pytest

from pallas_prof.cli import main


def _actions(command: str) -> dict:
  sub = next(a for a in main._parser()._actions if a.dest == "command")
  return {a.dest: a for a in sub.choices[command]._actions}


def test_the_options_run_and_advise_share_have_the_same_checks():
  run, advise = _actions("run"), _actions("advise")
  for dest in ("kernel", "out", "force", "no_sampling", "json", "script"):
    assert run[dest].type is advise[dest].type, dest
  assert run["kernel"].type is not None                     # a check, not any text


@pytest.mark.parametrize("argv, needle", [
    (["advise", "--kernel", "(", "never_run.py"], "is not a regular expression"),
    (["advise", "--device", "0,1", "never_run.py"], "takes one GPU index"),
    (["run", "--kernel", "[", "never_run.py"], "is not a regular expression"),
])
def test_a_bad_shared_option_is_refused_before_the_script_runs(tmp_path, argv, needle):
  marker = tmp_path / "ran"
  script = tmp_path / "never_run.py"
  script.write_text(f"open({str(marker)!r}, 'w').close()\n")
  argv = [a if a != "never_run.py" else str(script) for a in argv]
  done = subprocess.run([sys.executable, "-m", "pallas_prof", *argv], capture_output=True,
                        text=True, cwd=tmp_path, timeout=120)
  assert done.returncode == 2, done.stdout + done.stderr
  assert needle in done.stderr and "--" + argv[1].lstrip("-") in done.stderr, done.stderr
  assert not marker.exists()
