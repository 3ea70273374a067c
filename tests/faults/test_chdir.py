"""A script that changes the working folder (Hydra and many launchers do) during `pallas-prof
run --out runs/a` (issue 48, item 2). It split the run in two: the traces and the marker in
./runs/a, report.json and kernels/ in runs/a under the script's new folder, so that
`pallas-prof report runs/a` found no report. Now the run's paths are those of the folder
the run started in: --out, the path settings (the cache here), and the run's own work
after the script (the working folder is given back when the script ends)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pallas_prof.cli.report import RunReport
from . import inject
from .test_run_writes import SCRIPT, _env, _leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MOVES_AWAY = """\
import os
os.makedirs("elsewhere", exist_ok=True)
os.chdir("elsewhere")
"""


@pytest.mark.fault("chdir")
def test_a_script_that_changes_folder_keeps_the_run_whole_where_it_started(tmp_path):
  (tmp_path / "moves.py").write_text(MOVES_AWAY + SCRIPT)
  env = _env(tmp_path, "cache")                   # a relative cache folder too
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", "runs/a",
                         "moves.py"], capture_output=True, text=True, env=env, cwd=tmp_path,
                        timeout=300)
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode == 0, done.stdout + done.stderr
  run = tmp_path / "runs" / "a"
  inject.assert_report(str(run))                  # the report is where the run started
  report = RunReport.load(str(run))
  assert {"double", "shift"} <= {k.name for k in report.kernels}, report.kernels
  for kernel in report.kernels:                   # with the files it lists beside it
    for rel in kernel.files.values():
      assert (run / rel).is_file(), rel
  assert (run / "trace.otlp.jsonl").is_file() and (run / "trace.perfetto.json").is_file()
  assert not _leftovers(str(run)), _leftovers(str(run))
  moved = tmp_path / "elsewhere"
  assert moved.is_dir()                           # the script did move
  assert not (moved / "runs").exists(), sorted(p.name for p in moved.iterdir())
  assert not (moved / "cache").exists(), "the cache followed the script's folder"
  assert (tmp_path / "cache").is_dir()
  assert "runs/a/" in done.stdout, done.stdout  # the report names the folder as given
