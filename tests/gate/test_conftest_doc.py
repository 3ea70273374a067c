"""docs/pytest.md's conftest.py line, as a user copies it (issue 48, item 20): a plain
`pytest` of a Pallas test on a CPU failed with JAX's "Only interpret mode is supported";
the page's conftest makes the same test pass. Run in child processes, each a fresh JAX."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

USER_TEST = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def test_double():
  x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
  out = pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  assert (out == x * 2.0).all()
'''


def documented_conftest() -> str:
  """The code block under docs/pytest.md's line `# conftest.py`."""
  with open(os.path.join(ROOT, "docs", "pytest.md"), encoding="utf-8") as f:
    text = f.read()
  m = re.search(r"^    # conftest\.py\n((?:    .*\n|\n)+)", text, re.M)
  assert m, "docs/pytest.md gives no conftest.py block"
  return "\n".join(line[4:] for line in m.group(1).splitlines()) + "\n"


def _pytest(folder) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop("PYTEST_XDIST_WORKER", None)
  return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         str(folder)], cwd=folder, env=env, capture_output=True, text=True,
                        timeout=300)


@pytest.mark.no_gpu          # on a GPU JAX runs the kernel with or without pallas-prof
def test_the_documented_conftest_runs_a_pallas_test_suite_on_a_cpu(tmp_path):
  without = tmp_path / "without"
  without.mkdir()
  (without / "test_user.py").write_text(USER_TEST)
  done = _pytest(without)
  assert done.returncode == 1 and "Only interpret mode is supported" in done.stdout, \
      done.stdout[-3000:]
  with_it = tmp_path / "with"
  with_it.mkdir()
  (with_it / "test_user.py").write_text(USER_TEST)
  conftest = documented_conftest()
  assert "pallas_prof.install()" in conftest, conftest
  (with_it / "conftest.py").write_text(conftest)
  done = _pytest(with_it)
  assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr
