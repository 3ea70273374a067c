"""Shared test setup: a private cache, fresh random inputs, dtype tolerances. tests/conftest.py
and bench/tests/conftest.py register it (its hooks and fixtures).

Every test draws new random inputs (never zeros). The seed of the run is
printed in the header, and (since -q hides the header) in each failed test's
report and in the summary of a run with failures; set PALLAS_PROF_TEST_SEED
to replay a failure.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import zlib
import tempfile

_CACHE = tempfile.mkdtemp(prefix="pallas-prof-test-cache-")
os.environ.setdefault("PALLAS_PROF_CACHE_DIR", _CACHE)
atexit.register(shutil.rmtree, _CACHE, True)   # ~24 MB per test process otherwise

# A suite started in the background by a shell without job control (`cmd &` in a script)
# inherits SIGINT ignored, and so would every run the tests start: their Ctrl-C tests would
# then test nothing. A handler of ours is reset to the default in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)


def _hangup_ignored(signum, frame):
  """The suite goes on after a hangup, as `nohup` asked."""


# A suite started under `nohup` inherits SIGHUP ignored, and so would every compile worker
# and run the tests start: the tests that end a worker by SIGHUP would then end nothing.
# The suite itself keeps ignoring hangups (through a handler, which no child inherits).
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
  signal.signal(signal.SIGHUP, _hangup_ignored)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SEED_ENV = "PALLAS_PROF_TEST_SEED"
SEED = int(os.environ.get(SEED_ENV) or np.random.SeedSequence().entropy % 2**32)
# pytest-xdist's workers (and the processes tests start) inherit the environment: one seed
# for the whole run, the one its report names
os.environ[SEED_ENV] = str(SEED)
SEED_WORDS = f"pallas-prof test seed: {SEED} (replay with {SEED_ENV}={SEED})"


def pytest_report_header(config):
  return SEED_WORDS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  """A failed test's report names the seed: -q leaves out the header that says it."""
  outcome = yield
  report = outcome.get_result()
  if report.failed:
    report.sections.append(("pallas-prof test seed", SEED_WORDS))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
  if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
    terminalreporter.write_line(SEED_WORDS)


@pytest.fixture
def rng(request):
  """A numpy Generator seeded from the run seed and the test's name."""
  name_hash = zlib.crc32(request.node.nodeid.encode())
  return np.random.default_rng([SEED, name_hash])


def pytest_collection_modifyitems(config, items):
  has_gpu = _has_gpu()
  skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (run on the device machine)")
  skip_no_gpu = pytest.mark.skip(reason="asserts what a machine without a GPU does")
  for item in items:
    if "gpu" in item.keywords and not has_gpu:
      item.add_marker(skip_gpu)
    if "no_gpu" in item.keywords and has_gpu:
      item.add_marker(skip_no_gpu)


def _has_gpu() -> bool:
  try:
    import jax
    return bool(jax.devices("gpu"))
  except Exception:  # noqa: BLE001
    return False


@pytest.fixture(autouse=True)
def _no_inherited_terminal_size(monkeypatch):
  """pytest-xdist's workers set COLUMNS=80 and LINES=24, which `pallas-prof` honours: a test
  gets the width of a pipe (render.PIPE_WIDTH) unless it sets COLUMNS itself, with or
  without -n."""
  monkeypatch.delenv("COLUMNS", raising=False)
  monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _install_state_kept():
  """Each test leaves pallas-prof installed, or not, as it found it. Modules install it at
  import (collection), and a fixture that uninstalls on its way out left every later test of
  its process (pytest-xdist sends them in no fixed order) on JAX's own backend."""
  rule = sys.modules.get("pallas_prof.backend.pallas_call_rule")
  if rule is None:
    yield
    return
  from pallas_prof.backend.lowering.features import bounds
  active, mode = rule._takeover["active"], bounds._mode["bounds"]
  yield
  rule._takeover["active"] = active
  if bounds._mode["bounds"] != mode:
    bounds.set_check_bounds(mode)
