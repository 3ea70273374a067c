"""safe_files: whole or nothing, private folders, reads that refuse what is not a file."""
from __future__ import annotations

import os
import stat

import pytest

from pallas_prof import safe_files
from tests.faults.inject import enospc_env


def test_write_atomic_replaces_whole_and_leaves_no_temp(tmp_path):
  path = tmp_path / "a.json"
  path.write_text("old")
  safe_files.write_atomic(str(path), '{"new": 1}')
  assert path.read_text() == '{"new": 1}'
  assert os.listdir(tmp_path) == ["a.json"]
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_write_atomic_failure_keeps_old_file_and_removes_temp(tmp_path, monkeypatch):
  path = tmp_path / "a.json"
  path.write_text("old")
  real_fsync = os.fsync

  def full(fd):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(os, "fsync", full)
  with pytest.raises(OSError):
    safe_files.write_atomic(str(path), "new")
  monkeypatch.setattr(os, "fsync", real_fsync)
  assert path.read_text() == "old"
  assert os.listdir(tmp_path) == ["a.json"]


def test_write_atomic_on_a_full_disk_in_a_child(tmp_path):
  import subprocess
  import sys
  full = tmp_path / "full"
  full.mkdir()
  (full / "a.json").write_text("old")
  code = ("import sys; from pallas_prof import safe_files\n"
          "try:\n  safe_files.write_atomic(sys.argv[1], 'x' * 1000)\n"
          "except OSError as e:\n  print('refused', e.errno)\n")
  done = subprocess.run([sys.executable, "-c", code, str(full / "a.json")], capture_output=True,
                        text=True, env=enospc_env(str(full), after_bytes=10), timeout=60)
  assert done.stdout.strip() == "refused 28", done.stderr
  assert (full / "a.json").read_text() == "old" and os.listdir(full) == ["a.json"]


def test_private_dir_is_owner_only(tmp_path):
  path = tmp_path / "cache" / "kernels"
  safe_files.private_dir(str(path))
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_private_dir_makes_the_parents_it_makes_owner_only_too(tmp_path):
  # os.makedirs would give "cache" and "compiled" the umask's mode (often 0755)
  os.chmod(tmp_path, 0o755)
  old = os.umask(0o022)
  try:
    safe_files.private_dir(str(tmp_path / "cache" / "compiled" / "ab"))
  finally:
    os.umask(old)
  for level in ("cache", "cache/compiled", "cache/compiled/ab"):
    assert stat.S_IMODE(os.stat(tmp_path / level).st_mode) == 0o700, level
  assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o755     # a folder that was there keeps its mode


def test_private_dir_refuses_a_file_in_the_way(tmp_path):
  (tmp_path / "cache").write_text("not a folder")
  with pytest.raises(OSError):
    safe_files.private_dir(str(tmp_path / "cache" / "kernels"))


def test_read_regular_refuses_fifo_link_and_large_files(tmp_path):
  fifo = tmp_path / "fifo"
  os.mkfifo(fifo)
  with pytest.raises(safe_files.UnsafeFile, match="not a regular file"):
    safe_files.read_regular(str(fifo), 100)
  target = tmp_path / "t"
  target.write_bytes(b"abc")
  link = tmp_path / "link"
  link.symlink_to(target)
  with pytest.raises(safe_files.UnsafeFile, match="symbolic link"):
    safe_files.read_regular(str(link), 100)
  with pytest.raises(safe_files.UnsafeFile, match="allowed"):
    safe_files.read_regular(str(target), 2)
  assert safe_files.read_regular(str(target), 3) == b"abc"


def test_others_can_write_names_each_way_in(tmp_path):
  """A folder is this user's alone when it is theirs and writable by no one else, and no
  folder or link above it lets another user swap it (issue 48, item 8)."""
  mine = tmp_path / "mine"
  safe_files.private_dir(str(mine))
  assert safe_files.others_can_write(str(mine)) is None
  assert safe_files.others_can_write(str(mine / "not" / "yet")) is None   # made there, 700
  os.chmod(mine, 0o777)
  assert "writable by all users (mode 777)" in safe_files.others_can_write(str(mine))
  # in it, a folder of this user's: others may add entries beside it, and swap it away
  inner = mine / "inner"
  safe_files.private_dir(str(inner))
  assert "above it, is writable by all users without the sticky bit" in \
      safe_files.others_can_write(str(inner))
  os.chmod(mine, 0o1777)                    # as /tmp: only an entry's owner may move it
  assert safe_files.others_can_write(str(inner)) is None
  if os.geteuid() == 0:                     # (only root can give a file to another user)
    os.chown(inner, 65534, 65534)
    assert "owned by another user (uid 65534)" in safe_files.others_can_write(str(inner))
    os.chown(inner, 0, 0)
    link = tmp_path / "link"
    os.symlink(inner, link)
    os.lchown(link, 65534, 65534)
    assert "a link owned by another user" in safe_files.others_can_write(str(link))
