"""tools/test.sh (the README's test command, and .ci/run's) fails when a leg's tests
fail. It once said "leg a passed" over two failing tests: `set -e` does nothing in a
command whose status `||` tests. Run here on a stand-in Python whose pytest fails or
passes as told, so the check takes a second, not a leg."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FAKE_PYTHON = """#!/usr/bin/env bash
# a stand-in for a leg's venv python: pip succeeds, pytest exits as FAKE_PYTEST_EXIT says
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0 ;;
  "-m pip") [ "$3" = freeze ] && echo "jax==0.10.2"; exit 0 ;;
  "-m pytest") echo "stand-in pytest: exit $FAKE_PYTEST_EXIT"; exit "$FAKE_PYTEST_EXIT" ;;
esac
[ "$1" = --version ] && echo "Python 3.11.0"
exit 0
"""


def _tree(tmp_path):
  (tmp_path / "tools").mkdir()
  shutil.copy(os.path.join(ROOT, "tools", "test.sh"), tmp_path / "tools" / "test.sh")
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  python = bin_dir / "python-standin"
  python.write_text(FAKE_PYTHON)
  chromium = bin_dir / "chromium"            # so the script does not try to install one
  chromium.write_text("#!/bin/sh\nexit 0\n")
  for f in (python, chromium):
    f.chmod(f.stat().st_mode | stat.S_IEXEC)
  return python, bin_dir


@pytest.mark.parametrize("pytest_exit, script_exit", [(1, 1), (2, 1), (0, 0)])
def test_a_leg_whose_tests_fail_fails_the_command(tmp_path, pytest_exit, script_exit):
  python, bin_dir = _tree(tmp_path)
  env = dict(os.environ, LEGS="a", PYTHON311=str(python), FAKE_PYTEST_EXIT=str(pytest_exit),
             PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
  done = subprocess.run(["bash", str(tmp_path / "tools" / "test.sh")], env=env,
                        capture_output=True, text=True, timeout=120)
  out = done.stdout + done.stderr
  assert done.returncode == script_exit, out
  assert ("== FAILED leg(s): a" in out) == bool(script_exit), out
  assert ("== leg a passed" in out) != bool(script_exit), out


def test_side_effects_are_announced_before_anything_is_done(tmp_path):
  """The command says what it installs and downloads, and how to skip each, before the
  first leg starts (it once apt-installed chromium and fetched Phoenix unannounced)."""
  python, bin_dir = _tree(tmp_path)
  env = dict(os.environ, LEGS="a", PYTHON311=str(python), FAKE_PYTEST_EXIT="0",
             PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", XDG_CACHE_HOME=str(tmp_path / "cache"))
  env.pop("PALLAS_PROF_NO_RECEIVER_INSTALL", None)
  env.pop("PALLAS_PROF_PHOENIX", None)
  done = subprocess.run(["bash", str(tmp_path / "tools" / "test.sh")], env=env,
                        capture_output=True, text=True, timeout=120)
  out = done.stdout
  assert done.returncode == 0, out + done.stderr
  phoenix = out.index("Arize Phoenix")
  assert "PALLAS_PROF_NO_RECEIVER_INSTALL=1" in out[phoenix:phoenix + 300]
  assert str(tmp_path / "cache" / "pallas-prof" / "phoenix-venv") in out
  assert phoenix < out.index("== leg a:")
  env["PALLAS_PROF_NO_RECEIVER_INSTALL"] = "1"
  done = subprocess.run(["bash", str(tmp_path / "tools" / "test.sh")], env=env,
                        capture_output=True, text=True, timeout=120)
  assert "Arize Phoenix" not in done.stdout


def test_the_browser_install_is_announced_with_its_switch():
  text = open(os.path.join(ROOT, "tools", "test.sh")).read()
  announce = text.index("installing it now with apt-get")
  assert "PALLAS_PROF_NO_BROWSER_INSTALL=1" in text[announce:announce + 200]
  assert announce < text.index("apt-get update")
