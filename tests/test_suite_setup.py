"""The suite's own setup (tests/conftest.py) holds where a newcomer runs it (issue 48, item 13).

- Under `nohup` every process inherits SIGHUP ignored: the tests that end a compile worker
  by SIGHUP must still see it ended.
- With -q pytest hides its header, where the run's random seed is: a failure must still
  name the seed that replays it, and with pytest-xdist every worker must use that seed.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pytest(args, cwd, env=None, hangup_ignored=False, timeout=300):
  env = dict(os.environ if env is None else env, PYTHONPATH=ROOT)
  env.pop("PYTEST_XDIST_WORKER", None)
  command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
  if hangup_ignored:      # as `nohup` starts it (a shell's trap, not a preexec_fn: JAX's threads)
    command = ["sh", "-c", 'trap "" HUP; exec "$@"', "sh", *command]
  return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=timeout)


def test_the_sighup_tests_pass_under_nohup():
  """The compile worker tests that end a worker by SIGHUP, run as `nohup pytest` runs them."""
  done = _pytest(["tests/faults/test_compile_worker.py", "-k", "ended_from_outside and SIGHUP"],
                 cwd=ROOT, hangup_ignored=True)
  out = done.stdout + done.stderr
  assert done.returncode == 0, out
  passed = re.search(r"(\d+) passed", out)
  assert passed and int(passed.group(1)) >= 1 and "failed" not in out, out


FAILING = """
import tests.conftest

def test_draws(rng):
    assert rng.random() < 0, f"drawn with seed {tests.conftest.SEED}"
"""


def test_a_failure_under_q_names_the_seed_every_xdist_worker_drew_with(tmp_path):
  """Each failed test's report, and the run's summary, name the seed; the workers drew with it."""
  for i in range(2):
    (tmp_path / f"test_fails_{i}.py").write_text(FAILING)
  env = {k: v for k, v in os.environ.items() if k != "PALLAS_PROF_TEST_SEED"}
  done = _pytest(["-p", "tests.conftest", "-n", "2"], cwd=tmp_path, env=env)
  out = done.stdout + done.stderr
  assert done.returncode == 1 and "2 failed" in out, out
  named = re.findall(r"replay with PALLAS_PROF_TEST_SEED=(\d+)", out)
  assert len(named) == 3 and len(set(named)) == 1, out      # two failures and the summary
  drawn = re.findall(r"drawn with seed (\d+)", out)
  assert len(drawn) >= 2 and set(drawn) == set(named), out
