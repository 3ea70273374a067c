"""The fault suite's own tools (inject.py, site/sitecustomize.py) do what they claim."""
from __future__ import annotations

from tests.faults.inject import enospc_env


def test_the_injected_full_disk_stays_in_its_folder_after_a_file_is_closed(tmp_path):
  """A file descriptor number freed by a refused file, reused for a file elsewhere, writes
  there as usual (the injection once kept the number's budget, and a full folder made
  tempfile find no usable temporary folder at all)."""
  import subprocess
  import sys
  full = tmp_path / "full"
  full.mkdir()
  code = ("import os, sys\n"
          "fd = os.open(os.path.join(sys.argv[1], 'a'), os.O_WRONLY | os.O_CREAT)\n"
          "try:\n  os.write(fd, b'x')\nexcept OSError as e:\n  print('refused', e.errno)\n"
          "os.close(fd)\n"
          "again = os.open(os.path.join(sys.argv[2], 'b'), os.O_WRONLY | os.O_CREAT)\n"
          "print('same number', again == fd, 'wrote', os.write(again, b'yz'))\n")
  done = subprocess.run([sys.executable, "-c", code, str(full), str(tmp_path)],
                        capture_output=True, text=True, env=enospc_env(str(full)), timeout=60)
  assert done.stdout.split() == ["refused", "28", "same", "number", "True", "wrote", "2"], \
      done.stdout + done.stderr
