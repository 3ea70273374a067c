"""Reading a run directory's files (cli/saved_runs/files.py): inside the run, regular files of
bounded size, JSON objects; the user's source lines only from regular .py files."""
from __future__ import annotations

import os
import threading

import pytest

from pallas_prof.cli.saved_runs import files as run_files
from pallas_prof.cli.saved_runs.files import RunFileError


def _run(tmp_path):
  run = tmp_path / "run"
  (run / "kernels" / "k").mkdir(parents=True)
  (run / "kernels" / "k" / "kernel.json").write_text('{"name": "k"}')
  (tmp_path / "outside.json").write_text('{"name": "outside"}')
  return run


def _finishes(call, seconds: float = 20):
  """call()'s result or exception, failing the test if it blocks (a FIFO opened for
  reading waits for a writer that never comes)."""
  box = {}

  def target():
    try:
      box["value"] = call()
    except BaseException as e:  # noqa: BLE001 - handed to the test
      box["error"] = e
  t = threading.Thread(target=target, daemon=True)
  t.start()
  t.join(seconds)
  assert not t.is_alive(), "the read blocked"
  if "error" in box:
    raise box["error"]
  return box["value"]


def test_a_file_of_the_run_reads(tmp_path):
  run = _run(tmp_path)
  assert run_files.read_json(str(run), "kernels/k/kernel.json") == {"name": "k"}


@pytest.mark.parametrize("rel", ["../outside.json", "kernels/../../outside.json", "", None, 3])
def test_paths_leading_out_are_refused(tmp_path, rel):
  run = _run(tmp_path)
  with pytest.raises(RunFileError) as e:
    run_files.read_json(str(run), rel)
  assert "pallas-prof:" in str(e.value) and "pallas-prof run" in str(e.value)


def test_an_absolute_path_is_refused_even_inside_the_run(tmp_path):
  run = _run(tmp_path)
  with pytest.raises(RunFileError, match="not a path inside the run directory"):
    run_files.read_json(str(run), str(run / "kernels" / "k" / "kernel.json"))


def test_links_leading_out_are_refused(tmp_path):
  run = _run(tmp_path)
  os.symlink(tmp_path / "outside.json", run / "link.json")
  os.symlink(tmp_path, run / "kernels" / "out")
  for rel in ("link.json", "kernels/out/outside.json"):
    with pytest.raises(RunFileError, match="leads outside the run directory"):
      run_files.read_json(str(run), rel)


def test_a_fifo_is_refused_without_blocking(tmp_path):
  run = _run(tmp_path)
  os.mkfifo(run / "report.json")
  with pytest.raises(RunFileError, match="not a regular file"):
    _finishes(lambda: run_files.read_json(str(run), "report.json"))


def test_a_file_over_the_cap_is_refused(tmp_path):
  run = _run(tmp_path)
  with open(run / "kernel.ptx", "wb") as f:           # sparse: costs no disk
    f.truncate(run_files.MAX_FILE_BYTES + 1)
  with pytest.raises(RunFileError, match="too large"):
    run_files.read_bytes(str(run), "kernel.ptx")


@pytest.mark.parametrize("data, problem", [(b"\xff\xfe{}", "not UTF-8"), (b"[1, 2]", "a JSON list"),
                                           (b"{", "not JSON"), (b"[" * 100000, "")])
def test_damaged_json_is_named(tmp_path, data, problem):
  run = _run(tmp_path)
  (run / "report.json").write_bytes(data)
  with pytest.raises(RunFileError, match=f"report.json is damaged: {problem}"):
    run_files.read_json(str(run), "report.json")


def test_source_lines_come_from_regular_python_files_only(tmp_path):
  good = tmp_path / "kernel.py"
  good.write_text("def k():\n  return 1\n")
  assert run_files.source_line(str(good), 2) == "  return 1"
  assert run_files.source_line(str(good), 3) == "" and run_files.source_line(str(good), "2") == ""
  secret = tmp_path / "id_rsa"
  secret.write_text("PRIVATE\n")
  assert run_files.source_lines(str(secret)) == ()
  fifo = tmp_path / "fifo.py"
  os.mkfifo(fifo)
  assert _finishes(lambda: run_files.source_lines(str(fifo))) == ()
  big = tmp_path / "big.py"
  with open(big, "wb") as f:
    f.truncate(run_files.MAX_SOURCE_BYTES + 1)
  assert run_files.source_lines(str(big)) == ()
  assert run_files.source_lines(None) == () and run_files.source_lines(7) == ()
