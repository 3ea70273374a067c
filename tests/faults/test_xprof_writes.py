"""`pallas-prof run --xprof DIR` when the disk under DIR fills while pallas-prof's plane is
added to JAX's profile (instrument/xplane.py add_to_profile, after the run folder is
finished). JAX writes its profile from C++, which the injected ENOSPC does not reach;
pallas-prof's rewrite of that file goes through Python's open, which it does: so JAX's
profile is whole and only the plane finds the disk full, as on a disk that fills between
the two. Asserts: the run ends with the script's exit code (as the other disk-full runs
do) and one line naming the profile file, what it lacks and the call that adds the plane
later; the run folder is whole; no part of the new profile is left beside JAX's; the
printed call, run once there is room, adds the plane.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest

from pallas_prof.instrument import xplane
from . import inject
from .test_run_writes import ROOT, SCRIPT, _command, _env, _files, _leftovers


def _profile_files(logdir: str) -> list[str]:
  return sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*")))


def _planes(path: str) -> set[str]:
  with open(path, "rb") as f:
    return {p.name for p in xplane.messages()["XSpace"].FromString(f.read()).planes}


@pytest.mark.fault("enospc")
def test_a_disk_that_fills_while_the_plane_is_added_keeps_jaxs_profile_whole(tmp_path):
  script = tmp_path / "tiny.py"
  script.write_text(SCRIPT)
  disk = tmp_path / "disk"
  disk.mkdir()
  logdir, out = str(disk / "xprof"), str(tmp_path / "out")
  # each file written under the disk stops after a few kilobytes: the plane's is larger
  env = inject.enospc_env(str(disk), after_bytes=4096,
                          env=_env(tmp_path, str(tmp_path / "cache")))
  done = subprocess.run(_command(out, str(script), options=("--xprof", logdir)),
                        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode == 0, done.stdout + done.stderr          # the script's own code
  assert "ran" in done.stdout and "done" in done.stdout
  # JAX's profile is there, whole, without the plane; nothing beside it
  [profile] = [p for p in _profile_files(logdir) if p.endswith(xplane.FILE_SUFFIX)]
  assert [os.path.basename(p) for p in _profile_files(logdir) if p.startswith(".")
          or ".partial" in p or p.endswith(".tmp")] == []
  assert not [n for n in os.listdir(os.path.dirname(profile)) if n.startswith(".")]
  planes = _planes(profile)
  assert "/host:CPU" in planes and xplane.PLANE_NAME not in planes, planes
  # one line says which file lacks what, and the call that adds it
  lines = [ln for ln in done.stderr.splitlines() if "pallas-prof's plane was not added" in ln]
  assert len(lines) == 1, done.stderr
  inject.assert_clear(lines[0], f"--xprof {logdir}", profile, "No space left on device",
                      "JAX's profile there is whole", "add_to_profile")
  # the run folder is whole: its report and traces are JSON, no temporary file
  inject.assert_report(out)
  assert not _leftovers(out), _leftovers(out)
  for rel, data in _files(out).items():
    if rel.endswith(".json"):
      json.loads(data)
  # nothing of the fault stays: the printed call, on a disk with room, adds the plane
  call = re.search(r'python -c "(.+)"', lines[0]).group(1)
  later = subprocess.run([sys.executable, "-c", call], capture_output=True, text=True,
                         env=_env(tmp_path, str(tmp_path / "cache")), cwd=ROOT, timeout=120)
  assert later.returncode == 0, later.stderr
  assert xplane.PLANE_NAME in _planes(profile) and "/host:CPU" in _planes(profile)
