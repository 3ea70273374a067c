"""The fault suite's own tools: each mutation damages, each check fails on what it names."""
from __future__ import annotations

import numpy as np
import pytest

from . import inject


def test_every_mutation_changes_the_file():
  data = b'{"source": "def kernel(x_ref):\\n  return x_ref[...]\\n", "n": 12345}\n'
  for name, damaged in inject.mutations(data).items():
    assert damaged != data, name
    assert inject.kind_of(name) in inject.KINDS


def test_checks_fail_with_their_own_kind(tmp_path):
  with pytest.raises(inject.WrongAnswer):
    inject.assert_right(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
  inject.assert_right(np.array([1.0, np.nan]), np.array([1.0, np.nan]))
  with pytest.raises(inject.LostRun):
    inject.assert_report(str(tmp_path))
  (tmp_path / "report.json").write_text('{"kernels": [')
  with pytest.raises(inject.LostRun):
    inject.assert_report(str(tmp_path))
  (tmp_path / "report.json").write_text('{"kernels": []}')
  inject.assert_report(str(tmp_path))
  with pytest.raises(inject.AbortedProcess):
    inject.assert_alive(-6)
  with pytest.raises(inject.AbortedProcess):
    inject.assert_alive(1, "Traceback (most recent call last):\n  ...")
  inject.assert_alive(-15, sent=15)
  inject.assert_alive(2, "pallas-prof run: PALLAS_PROF_X=abc is not a number")
  with pytest.raises(inject.UnclearError):
    inject.assert_clear("something failed", "kernels/add_kernel_1234.py")


def test_the_table_counts_cases_by_kind_and_outcome(tmp_path):
  import subprocess
  import sys
  planted = tmp_path / "test_planted.py"
  planted.write_text(
      "import pytest\nfrom tests.faults import inject\n"
      "@pytest.mark.fault('truncate')\ndef test_ok():\n  pass\n"
      "@pytest.mark.fault('truncate', 'empty')\ndef test_wrong():\n"
      "  inject.assert_right([1.0], [2.0])\n"
      "@pytest.mark.fault('signal')\ndef test_lost(tmp_path):\n  inject.assert_report(str(tmp_path))\n")
  # the suite's conftest, which puts each case's kinds in its report
  (tmp_path / "conftest.py").write_text("from tests.faults.conftest import *  # noqa\n")
  root = inject.SITE.rsplit("/tests/", 1)[0]
  code = ("import sys, tools.fault_table as t\n"
          "import pytest\nc = t._Counter()\n"
          f"pytest.main(['-q', '-p', 'no:cacheprovider', '-n', '2', '--rootdir', {root!r}, '-c', {root + '/pyproject.toml'!r}, {str(planted)!r}], plugins=[c])\n"
          "import json; print(json.dumps(c.cases))\n")
  done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                        timeout=120)
  import json
  cases = json.loads(done.stdout.strip().splitlines()[-1])
  assert cases["truncate"]["passed"] == 1 and cases["truncate"]["wrong_answer"] == 1
  assert cases["empty"]["wrong_answer"] == 1 and cases["signal"]["lost_run"] == 1
