"""A script that closes or replaces sys.stdout during `pallas-prof run`
(issue 48, item 3). Closing it turned a successful run into a ValueError traceback and
exit 1; a StringIO put there took the whole report, and the terminal showed nothing. The
report now goes where pallas-prof started writing, whatever the script did to the streams."""
from __future__ import annotations

import subprocess
import sys

import pytest

from . import inject
from .test_run_writes import _env

SCRIPTS = {
    "closed": "import sys\nprint('from the script')\nsys.stdout.close()\n",
    "stringio": "import io, sys\nsys.stdout = io.StringIO()\nprint('kept by the script')\n",
    "descriptor_closed": "import os, sys\nprint('from the script', flush=True)\nos.close(1)\n",
}


@pytest.mark.fault("stdout")
@pytest.mark.parametrize("what", list(SCRIPTS))
def test_the_report_reaches_the_terminal_whatever_the_script_did_to_its_streams(tmp_path,
                                                                                what):
  script = tmp_path / "script.py"
  script.write_text(SCRIPTS[what])
  out = tmp_path / "out"
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", str(out),
                         str(script)], capture_output=True, text=True,
                        env=_env(tmp_path, str(tmp_path / "cache")), cwd=tmp_path,
                        timeout=300)
  inject.assert_alive(done.returncode, done.stderr)      # no ValueError traceback
  assert done.returncode == 0, done.stdout + done.stderr
  inject.assert_report(str(out))
  assert f"wrote {out}/ (report.json" in done.stdout, (done.stdout, done.stderr)
  assert "kept by the script" not in done.stdout         # the script's output is its own
