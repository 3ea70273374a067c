"""bench/advice_known_answers.py on a CPU: each planted kernel lowered at its full size and
compiled for sm_90, the advice from those static facts (the GPU run is the lead's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.no_gpu     # asserts what a machine without a GPU says


def test_the_known_answers_are_diagnosed_from_static_facts(tmp_path):
  out = tmp_path / "advice.json"
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  result = subprocess.run(
      [sys.executable, "bench/advice_known_answers.py", "--out", str(out), "--only",
       "no_pipelining,too_few_warps,tiny_blocks,uncoalesced,transcendental,rms_norm"],
      capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert "no NVIDIA GPU" in result.stderr.splitlines()[0]
  data = json.loads(out.read_text())
  assert data["gpu"] is False and not data["skipped"], data["skipped"]
  cases = {c["case"]: c for c in data["cases"]}
  assert set(cases) == {"no_pipelining", "too_few_warps", "tiny_blocks", "uncoalesced",
                        "transcendental"}
  for name, c in cases.items():
    assert c["checks"]["cause_named"], (name, c["checks"])       # the defect's rule
    assert c["checks"]["cause_line"].startswith("advice_cases.py:"), name
    assert c["hand_fix"] is None and c["planted"]["median_s"] is None      # nothing timed
    assert all(a["status"] in ("not measured: no GPU", "not measured: it changes your code "
                               "(the saving is an estimate)") or a["status"].startswith("tried:")
               for a in c["advice"]["actions"]), name
  assert cases["transcendental"]["checks"]["d_first"] is True
  tiny = cases["tiny_blocks"]["advice"]["actions"][0]
  assert tiny["kind"] == "c" and "block 64 -> 4096" in tiny["title"] and tiny["compiled"]
  assert cases["too_few_warps"]["advice"]["actions"][0]["title"] == "num_warps 1 -> 4"
  (rms,) = data["norms"]
  assert rms["op"] == "rms_norm fwd+bwd" and len(rms["kernels"]) == 3
  dw = next(k for k in rms["kernels"] if "dw_db" in k["label"])
  assert {"underfilled", "small_loop_steps"} & {d["rule"] for d in dw["advice"]["diagnoses"]}
