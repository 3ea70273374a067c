"""A CUDA driver older than CUDA 11.0 (issue 48, item 5): the run ended in a ValueError
traceback from the PTX-version table after the script had run, and report.json was never
written. Now it is a compile failure of the machine's, which names the driver and what to
do, and the run reports it with the rest."""
from __future__ import annotations

import json
import subprocess

import pytest

from pallas_prof.backend.compiling import compile_cache, triton_compat
from pallas_prof.backend.errors import CompileError
from . import inject
from .test_run_writes import SCRIPT, _command, _env

OLD = 10020         # cuDriverGetVersion of CUDA 10.2


@pytest.mark.fault("bad_input")
def test_a_run_for_an_old_driver_writes_its_report_naming_the_driver(tmp_path):
  script = tmp_path / "tiny.py"
  script.write_text(SCRIPT)
  out = tmp_path / "out"
  env = _env(tmp_path, str(tmp_path / "cache"))
  env["PALLAS_PROF_CUDA_DRIVER_VERSION"] = str(OLD)    # a CPU run compiles for sm_90
  done = subprocess.run(_command(str(out), str(script)), capture_output=True, text=True,
                        env=env, timeout=300)
  inject.assert_alive(done.returncode, done.stderr)     # no ValueError traceback
  assert done.returncode == 0, done.stdout + done.stderr   # the script's own exit code
  inject.assert_report(str(out))
  errors = json.loads((out / "report.json").read_text())["errors"]
  assert {e["kernel"].split("#")[0] for e in errors} == {"double", "shift"}, errors
  for e in errors:
    inject.assert_clear(e["reason"] + e["hint"], "CUDA 10.2", "CUDA 11.0",
                        "PALLAS_PROF_CUDA_DRIVER_VERSION")
    assert e["compile_failure"]["fault"] == "machine"
  assert "CUDA 10.2" in done.stdout


def test_the_machines_old_driver_is_said_with_what_to_do(monkeypatch):
  monkeypatch.delenv("PALLAS_PROF_CUDA_DRIVER_VERSION", raising=False)
  monkeypatch.setattr(triton_compat, "_driver_version", lambda: OLD)
  with pytest.raises(CompileError) as caught:
    compile_cache.launch_ptx_version(90)
  inject.assert_clear(str(caught.value), "CUDA 10.2", "cuDriverGetVersion",
                      "update the NVIDIA driver", "nvidia-smi")
  assert caught.value.fault == "machine"
