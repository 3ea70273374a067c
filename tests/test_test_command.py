"""tools/test.sh (the README's test command) fails when a leg's tests fail.

It ran each leg as `( set -e; run_leg a ) || failed=...`, and bash ignores set -e in a
command tested with ||: a failing pytest went on to "leg a passed" and the script ended
"all legs passed" with exit 0. Here a leg runs against a stand-in python whose pytest
exits as told, in a copy of the script, so nothing is installed."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FAKE_PYTHON = """#!/usr/bin/env bash
case "$*" in
  *"pip freeze"*) printf 'jax==0.10.2\\njaxlib==0.10.2\\ntriton==3.6.0\\n' ;;
  *"-m pytest"*) echo "pytest stand-in: exit $FAKE_PYTEST_RC"; exit "$FAKE_PYTEST_RC" ;;
  *) exit 0 ;;
esac
"""


def _executable(path, text):
  path.write_text(text)
  path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(tmp_path, pytest_rc: int) -> subprocess.CompletedProcess:
  (tmp_path / "tools").mkdir(exist_ok=True)
  shutil.copy(os.path.join(ROOT, "tools", "test.sh"), tmp_path / "tools" / "test.sh")
  (tmp_path / ".venv-a" / "bin").mkdir(parents=True, exist_ok=True)
  _executable(tmp_path / ".venv-a" / "bin" / "python", FAKE_PYTHON)
  (tmp_path / "bin").mkdir(exist_ok=True)
  _executable(tmp_path / "bin" / "chromium", "#!/bin/sh\n")       # nothing to install
  env = dict(os.environ, LEGS="a", FAKE_PYTEST_RC=str(pytest_rc),
             PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
  return subprocess.run(["bash", str(tmp_path / "tools" / "test.sh")], capture_output=True,
                        text=True, env=env, timeout=120)


def test_a_failing_leg_fails_the_test_command(tmp_path):
  result = _run(tmp_path, pytest_rc=1)
  out = result.stdout + result.stderr
  assert "pytest stand-in: exit 1" in out, out
  assert result.returncode == 1, out
  assert "== FAILED leg(s): a" in out and "leg a passed" not in out, out


def test_a_passing_leg_passes(tmp_path):
  result = _run(tmp_path, pytest_rc=0)
  out = result.stdout + result.stderr
  assert result.returncode == 0, out
  assert "leg a passed" in out and "== all legs passed" in out, out
