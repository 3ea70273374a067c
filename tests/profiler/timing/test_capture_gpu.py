"""In-situ capture on a GPU survives the pattern that ended the process under triton
3.9's Proton (graphs made before the capture, then many captures) and counts every
launch right. Each run is a child process: an abort ends the child, and the test says
so, rather than taking the test run with it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _run(*args, timeout=600):
  done = subprocess.run([sys.executable, "-m", "tests.profiler.timing.capture_pattern", *args],
                        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
  assert done.returncode in (0, 1), (f"the process died (exit {done.returncode}):\n"
                                     f"{done.stderr[-3000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1]), done


def _cupti_python() -> bool:
  try:
    from pallas_prof.profiler.timing import cupti_activity
    cupti_activity.load()
    return True
  except Exception:  # noqa: BLE001
    return False


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("via_tuner", [False, True], ids=["capture", "tuner_clock"])
def test_fifty_captures_over_ten_jitted_fwd_bwd_functions(via_tuner):
  if not _cupti_python():
    pytest.fail("cupti-python is not installed: in-situ capture on a GPU needs it "
                "(pip install cupti-python)")
  summary, done = _run("--source", "cupti", "--functions", "10", "--captures", "50",
                       *(["--via-tuner"] if via_tuner else []))
  assert summary["captures"] == 50 and summary["wrong_count"] == 0, summary["wrong"]
  assert summary["graph_launches"] > 0, "no launch came from a CUDA graph: the pattern was not made"


@pytest.mark.gpu
@pytest.mark.slow
def test_proton_where_it_would_be_chosen_survives_the_pattern():
  from pallas_prof.profiler.timing import proton_capture
  if proton_capture.why_unsafe():
    pytest.skip(proton_capture.why_unsafe())
  summary, _ = _run("--source", "proton", "--functions", "10", "--captures", "50")
  assert summary["wrong_count"] == 0, summary["wrong"]
