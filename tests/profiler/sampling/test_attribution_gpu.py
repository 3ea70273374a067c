"""Measured attribution on the GPU (issue #15): `pallas-prof run` of the known-answer
kernels and of softmax 8192x8192, weights from CUPTI PC samples of the replay.

PALLAS_PROF_ATTRIB_RUNS=DIR reads the run directories DIR/ka and DIR/softmax that
attribution_gpu.sh made instead of running them again."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .. import known_answer_checks as checks

pytestmark = pytest.mark.gpu
PROFILER_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(PROFILER_TESTS))


def _report(name, script, *args):
  given = os.environ.get("PALLAS_PROF_ATTRIB_RUNS")
  out = os.path.join(given, name) if given else None
  if out is None or not os.path.exists(os.path.join(out, "report.json")):
    import tempfile
    out = tempfile.mkdtemp(prefix=f"pallas-prof-{name}-")
    proc = subprocess.run([sys.executable, "-m", "pallas_prof.cli.main", "run", "--out", out,
                           script, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  with open(os.path.join(out, "report.json")) as f:
    return json.load(f)


@pytest.fixture(scope="module")
def known():
  report = _report("ka", os.path.join(PROFILER_TESTS, "known_answer.py"), "--large")
  return {k["name"]: k for k in checks.kernels(report)}


@pytest.mark.parametrize("kernel", ["ka_copy_kernel", "ka_loop_kernel", "ka_two_kernel",
                                    "ka_matmul_kernel"])
def test_known_answers_by_pc_sampling(known, kernel):
  k = known[kernel]
  assert k["weight_basis"] == "pc_sampling", k.get("errors")
  assert k["attribution"]["description"].startswith("CUPTI PC sampling")
  ok, text = checks.CHECKS[kernel](k)
  assert ok, text


def test_runtime_is_the_unsampled_replay_and_overhead_is_measured(known):
  for k in known.values():
    s = k["attribution"]["sampling"]
    assert k["attribution"]["replay_median_s"] == k["runtime"]["median_s"]
    assert s["unsampled_median_s"] > 0 and s["sampled_median_s"] > 0
    assert s["overhead_pct"] is not None
    # CUPTI drops a few samples when its buffers fill (0.3 % at the shortest periods, more
    # on a loaded machine): counted, and said in the description, never hidden
    assert s["total_samples"] > 1000 and s["dropped_samples"] <= 0.01 * s["total_samples"]
    assert (f"{s['dropped_samples']:,} of" in k["attribution"]["description"]) == \
        (s["dropped_samples"] > 0)
    # time per equation is its weight times the unsampled replay's median
    e = k["attribution"]["equations"][0]
    assert e["time_s"] == pytest.approx(e["weight"] * k["runtime"]["median_s"])


def test_softmax_wait_for_x_shows_at_its_load_line():
  report = _report("softmax", os.path.join(ROOT, "examples", "softmax.py"), "--large")
  (k,) = [k for k in checks.kernels(report) if k["name"] == "softmax_kernel"]
  assert k["weight_basis"] == "pc_sampling", k.get("errors")
  ok, text = checks.softmax_wait(k)
  assert ok, text
