"""A run stopped while a long launch runs under Triton's interpreter exits at once.

The launch runs in a thread of XLA's (a host callback), and at exit JAX waits for the
computations in flight: `timeout 300 pallas-prof run tests/profiler/ground_truth.py --large`
on a CPU wrote its report at the SIGTERM, then sat for the 23 minutes the launch had left.
A launch now ends before its next program once the process exits
(backend/running/long_runs.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from pallas_prof.cli.report import RunReport
from . import inject
from .test_run_writes import _command, _env, _leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# inputs from jax.random and an eager reference beside the jitted kernel (as the ground-truth
# corpus has them): JAX's exit then waits for the launch (without them it did not, here)
SCRIPT = """\
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.experimental import pallas as pl

def slow(x_ref, o_ref):
  def body(i, acc):
    return acc * 0.5 + jnp.sin(acc)
  o_ref[...] = lax.fori_loop(0, 400, body, x_ref[...]) * 2.0

def run(x):
  spec = pl.BlockSpec((1, 128), lambda i: (i, 0))
  return pl.pallas_call(slow, grid=(x.shape[0],), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

x = jax.random.uniform(jax.random.PRNGKey(0), (40000, 128), jnp.float32, 0.05, 0.9)
ref = lax.fori_loop(0, 400, lambda i, v: v * 0.5 + jnp.sin(v), x) * 2.0
out = np.asarray(jax.jit(run)(x), np.float32)
print("finished", float(np.abs(out - np.asarray(ref)).max()), flush=True)
"""


@pytest.mark.fault("signal")
def test_a_sigterm_during_a_long_interpreted_launch_ends_the_run_at_once(tmp_path):
  script = tmp_path / "long_launch.py"
  script.write_text(SCRIPT)
  out = str(tmp_path / "out")
  env = _env(tmp_path, str(tmp_path / "cache"))
  env["PALLAS_PROF_INTERPRETER_WARN_S"] = "1"     # said once the launch's pace is known
  proc = subprocess.Popen(_command(out, str(script)), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
  lines: list[str] = []
  reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
  reader.start()
  deadline = time.monotonic() + 240
  while not any("LongInterpreterRunWarning" in line for line in lines):
    assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
    time.sleep(0.2)
  time.sleep(1.0)                                  # well inside the launch's minutes
  stopped = time.monotonic()
  proc.send_signal(signal.SIGTERM)
  try:
    proc.wait(timeout=60)
  except subprocess.TimeoutExpired:
    proc.kill()
    pytest.fail("the run was still running 60 s after its SIGTERM (its launch held the exit)")
  reader.join(timeout=10)
  text = "".join(lines)
  assert time.monotonic() - stopped < 30, text
  inject.assert_alive(proc.returncode, text)
  assert proc.returncode == 128 + signal.SIGTERM, text
  assert "finished" not in text
  # the launch ended quietly: no traceback of JAX's clean-up, no "pallas-prof bug" hint
  assert "Traceback" not in text and "pallas-prof bug" not in text, text
  inject.assert_report(out)
  report = RunReport.load(out)
  assert "SIGTERM" in " ".join(report.notes)
  # the header's exit is the process's: the Terminated raised in np.asarray's wait reaches
  # the script as JAX's error, and the report said "exit 1"
  assert report.exit_code == 128 + signal.SIGTERM, report.exit_code
  assert [k.name for k in report.kernels] == ["slow"], report.kernels
  assert not _leftovers(out), _leftovers(out)
