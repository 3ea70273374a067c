"""bench/triton_carry/carry.py's far side: the parts joined, checked and unpacked, tools
executable again; a part cut short by a transfer refused before anything is unpacked."""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile

import pytest

from bench.triton_carry import carry


def _carry_dir(tmp_path):
  """Two parts and a manifest, as `carry.py pack` writes them, of a tiny triton tree whose
  tool lost its execute bit (a wheel is a zip)."""
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w:xz") as tar:
    for name, data in (("triton/__init__.py", b"__version__ = '9.9.9'\n"),
                       ("triton/backends/nvidia/bin/ptxas", b"#!/bin/sh\necho ptxas\n")):
      info = tarfile.TarInfo(name)
      info.size, info.mode = len(data), 0o644
      tar.addfile(info, io.BytesIO(data))
  archive = buf.getvalue()
  half = (len(archive) + 1) // 2
  folder = tmp_path / ".carry"
  folder.mkdir()
  parts = []
  for i, chunk in ((1, archive[:half]), (2, archive[half:])):
    path = folder / f"triton-9.9.9.part{i}"
    path.write_bytes(chunk)
    parts.append({"file": path.name, "bytes": len(chunk),
                  "sha256": hashlib.sha256(chunk).hexdigest()})
  (folder / "triton-9.9.9.json").write_text(json.dumps({"version": "9.9.9", "parts": parts}))
  return folder


def test_unpack_joins_checks_and_restores_the_tools(tmp_path, monkeypatch):
  folder = _carry_dir(tmp_path)
  monkeypatch.setattr(carry, "STASH", str(tmp_path / "stash"))
  carry.stash(str(folder / "triton-9.9.9.part1"))      # call 1: part 1 kept on the machine
  os.remove(folder / "triton-9.9.9.part1")              # call 2 carries only part 2
  into = tmp_path / "site"
  carry.unpack("9.9.9", str(into), str(folder))
  assert (into / "triton" / "__init__.py").read_text() == "__version__ = '9.9.9'\n"
  assert os.access(into / "triton" / "backends" / "nvidia" / "bin" / "ptxas", os.X_OK)


def test_a_part_cut_short_is_refused_before_anything_is_unpacked(tmp_path, monkeypatch):
  folder = _carry_dir(tmp_path)
  monkeypatch.setattr(carry, "STASH", str(tmp_path / "stash"))
  part = folder / "triton-9.9.9.part2"
  part.write_bytes(part.read_bytes()[:-10])
  into = tmp_path / "site"
  with pytest.raises(SystemExit, match="does not match its SHA-256"):
    carry.unpack("9.9.9", str(into), str(folder))
  assert not (into / "triton").exists()
