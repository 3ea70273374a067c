"""cli/run_writes.py in-process: --out claimed or refused, --force's swap, the missing files'
notes and closing line; processes.fresh_dir's names (tests/faults/test_run_writes.py runs
the whole command under faults)."""
from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys

import pytest

from pallas_prof.cli import processes, run_writes


def _refused(capsys, call) -> str:
  with pytest.raises(SystemExit) as stop:
    call()
  assert stop.value.code == 2
  return capsys.readouterr().err


def test_an_empty_or_new_out_is_claimed_with_a_marker_the_run_removes(tmp_path):
  for out in (tmp_path / "new", tmp_path / "empty"):
    if out.name == "empty":
      out.mkdir()
    folder = run_writes.claim(str(out))
    assert folder.path == folder.final == str(out) and not folder.aside
    marker = (out / run_writes.MARKER).read_text().split()
    assert marker == [socket.gethostname(), str(os.getpid())]
    assert run_writes.finish(folder) == (str(out), None)
    assert os.listdir(out) == []


def test_an_out_with_files_is_refused_unless_force(tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / "report.json").write_text("{}")
  (out / "kernels").mkdir()
  err = _refused(capsys, lambda: run_writes.claim(str(out)))
  assert f"--out {out} is not empty (it holds kernels/, report.json)" in err
  assert "add --force" in err
  assert sorted(os.listdir(out)) == ["kernels", "report.json"]      # untouched


def test_force_writes_beside_and_swaps_the_whole_folder_at_the_end(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "report.json").write_text('{"old": 1}')
  (out / "old-only.txt").write_text("from the run before")
  folder = run_writes.claim(str(out), force=True)
  assert folder.aside and os.path.dirname(folder.path) == str(tmp_path)
  assert (out / "old-only.txt").exists()             # the old run stays until the end
  with open(os.path.join(folder.path, "report.json"), "w") as f:
    f.write('{"new": 1}')
  assert run_writes.finish(folder) == (str(out), None)
  assert os.listdir(out) == ["report.json"]
  assert json.loads((out / "report.json").read_text()) == {"new": 1}
  assert os.listdir(tmp_path) == ["out"]             # nothing left aside


def test_force_replaces_only_a_runs_folder(tmp_path, capsys):
  out = tmp_path / "home"
  out.mkdir()
  (out / "thesis.tex").write_text("months of work")
  err = _refused(capsys, lambda: run_writes.claim(str(out), force=True))
  assert "none of a pallas-prof run (no report.json)" in err and "another --out" in err
  assert (out / "thesis.tex").read_text() == "months of work"


def test_a_folder_a_live_run_writes_is_refused_even_with_force(tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  try:
    (out / run_writes.MARKER).write_text(f"{socket.gethostname()} {writer.pid}\n")
    for force in (False, True):
      err = _refused(capsys, lambda: run_writes.claim(str(out), force=force))
      assert (f"--out {out} is being written by another pallas-prof run (process "
              f"{writer.pid} on {socket.gethostname()}); give each run its own --out") in err
  finally:
    writer.kill()
    writer.wait()
  # once that process is gone, its folder is a run that did not finish: --force may go
  err = _refused(capsys, lambda: run_writes.claim(str(out)))
  assert "holds the files of a run that did not finish" in err
  folder = run_writes.claim(str(out), force=True)
  assert run_writes.finish(folder) == (str(out), None)


def test_an_out_that_is_a_file_is_refused(tmp_path, capsys):
  out = tmp_path / "out"
  out.write_text("x")
  assert "is a file, not a folder" in _refused(capsys, lambda: run_writes.claim(str(out)))


def test_the_default_out_is_new_for_every_run_even_in_one_second(tmp_path):
  path = str(tmp_path / "pallas-prof-out" / "20261201-214500")
  names = [processes.fresh_dir(path) for _ in range(4)]
  assert len(set(names)) == 4 and all(os.path.isdir(n) for n in names)
  assert names[:3] == [path, f"{path}-{os.getpid()}", f"{path}-{os.getpid()}-2"]


def test_failed_writes_become_one_note_per_reason_and_one_closing_line(tmp_path, monkeypatch):
  files = run_writes.RunFiles(str(tmp_path))
  assert files.write(str(tmp_path / "report.json"), "{}")
  full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  def no_room(path, data, mode=0o600):
    raise full

  monkeypatch.setattr(run_writes, "write_atomic", no_room)
  for name in ("kernels/k/kernel.ptx", "report.html"):
    assert not files.write(str(tmp_path / name), "x")
  files.lost(str(tmp_path / "trace.perfetto.json"), OSError(errno.EROFS, os.strerror(errno.EROFS)))
  notes = files.notes()
  assert notes == [
      "2 file(s) of this run are missing (No space left on device): kernels/k/kernel.ptx, "
      "report.html; free space on the run folder's disk (or give --out on another) and run "
      "again",
      "1 file(s) of this run are missing (Read-only file system): trace.perfetto.json; give "
      "--out a folder you can write and run again"]
  line = run_writes.closing_line("runs/a", files, "final")
  assert line.startswith("pallas-prof: the run is in runs/a/, but 3 of its files are missing "
                         "(No space left on device; Read-only file system): ")
  assert "The notes of its report.json list them" in line
  assert "Without a report.json" in run_writes.closing_line("runs/a", files, "none")
  assert run_writes.closing_line("runs/a", run_writes.RunFiles("runs/a"), "final") is None
