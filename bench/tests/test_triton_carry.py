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


def test_copies_travel_as_links_and_unpack_as_the_same_bytes(tmp_path, monkeypatch):
  """A wheel holds libcupti.so three times (a zip has no links): the pack keeps one and
  links the others to it, and what unpacks reads the same under every name."""
  tree = tmp_path / "tree" / "triton" / "lib"
  tree.mkdir(parents=True)
  library = os.urandom(4096)
  for name in ("libcupti.so", "libcupti.so.12", "libcupti.so.2025.1.1"):
    (tree / name).write_bytes(library)
  (tree / "other.so").write_bytes(os.urandom(4096))
  linked = carry._links_for_copies(str(tmp_path / "tree" / "triton"))
  assert sorted(linked) == ["lib/libcupti.so.12", "lib/libcupti.so.2025.1.1"]
  assert os.readlink(tree / "libcupti.so.12") == "libcupti.so"
  assert not os.path.islink(tree / "other.so")
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w:xz") as tar:
    tar.add(str(tmp_path / "tree" / "triton"), arcname="triton")
  folder = tmp_path / ".carry"
  folder.mkdir()
  (folder / "triton-9.9.9.part1").write_bytes(buf.getvalue())
  (folder / "triton-9.9.9.json").write_text(json.dumps({"version": "9.9.9", "parts": [
      {"file": "triton-9.9.9.part1", "sha256": hashlib.sha256(buf.getvalue()).hexdigest()}]}))
  monkeypatch.setattr(carry, "STASH", str(tmp_path / "stash"))
  into = tmp_path / "site"
  carry.unpack("9.9.9", str(into), str(folder))
  for name in ("libcupti.so", "libcupti.so.12", "libcupti.so.2025.1.1"):
    assert (into / "triton" / "lib" / name).read_bytes() == library


def test_strip_wheels_shrinks_the_libraries_and_keeps_the_record_true(tmp_path):
  """A wheel's shared library loses its symbol tables; RECORD's hash and size for it are
  rewritten to match, and the other members stay as they were."""
  import base64
  import glob
  import shutil
  import subprocess
  import sys
  import zipfile
  if shutil.which("strip") is None:
    pytest.skip("binutils' strip is not installed")
  source = tmp_path / "lib.c"
  source.write_text("int answer(void) { return 42; }\n")
  library = tmp_path / "lib.so"
  compiler = shutil.which("cc") or shutil.which("gcc")
  if compiler is None:    # no compiler: any shared library of this Python with symbols
    library.write_bytes(open(glob.glob(os.path.join(os.path.dirname(sys.executable), "..", "lib",
                                                    "python3*", "lib-dynload", "*.so"))[0],
                             "rb").read())
  else:
    subprocess.run([compiler, "-g", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
  data = library.read_bytes()
  wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
  init = b"x = 1\n"
  with zipfile.ZipFile(wheel, "w") as z:
    z.writestr("pkg/__init__.py", init)
    z.writestr("pkg/mod.so", data)
    z.writestr("pkg-1.0.dist-info/RECORD", "pkg/__init__.py,sha256=old,6\npkg/mod.so,sha256=old,1\n"
               "pkg-1.0.dist-info/RECORD,,\n")
  (changed,) = carry.strip_wheels(str(tmp_path))
  assert changed[0] == wheel.name and changed[2] < changed[1]
  with zipfile.ZipFile(wheel) as z:
    stripped = z.read("pkg/mod.so")
    record = z.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
    assert z.read("pkg/__init__.py") == init
  assert len(stripped) < len(data)
  digest = base64.urlsafe_b64encode(hashlib.sha256(stripped).digest()).rstrip(b"=").decode()
  assert f"pkg/mod.so,sha256={digest},{len(stripped)}" in record
  assert "pkg/__init__.py,sha256=old,6" in record       # not a library: left as it was
