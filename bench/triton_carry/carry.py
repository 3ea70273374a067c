"""Carry a Triton release to the GPU machine, which reaches no package registry and
takes at most 64 MiB per call.

A Triton wheel unpacks to about a gigabyte. What the GPU machine needs of it fits in two
calls: the libraries stripped of their symbol tables (`strip --strip-unneeded`), the
AMD code generator, static libraries, Blackwell's CUPTI and Triton's own test library
left out (AMD's Python files stay: `import triton` imports every backend), the rest
tarred and xz-compressed, then split in two parts.

    # here (needs pip, strip, xz): the parts and a manifest under .carry/ (git-ignored)
    python bench/triton_carry/carry.py pack --version 3.9.0
    # there, call 1 (carry .carry/triton-3.9.0.part1): keep part 1 while the machine is warm
    python3 bench/triton_carry/carry.py stash --part .carry/triton-3.9.0.part1
    # there, call 2, within the machine's warm time (carry .carry/triton-3.9.0.part2):
    python3 bench/triton_carry/carry.py unpack --version 3.9.0 --into /tmp/triton39
    export PYTHONPATH=/tmp/triton39:$PWD:/tmp/site

`pack --hopper-only` makes the archive smaller (xz's strongest preset, and two more things
left out; 61 MB for 3.9.0 against 73): the older `ptxas`, which Triton 3.9 runs only for targets
below sm_90 (`get_ptxas`: sm_90 and up assemble with `ptxas-blackwell`), so on the H200
nothing compiled for sm_90 needs it (a compile for sm_80 there fails with Triton's "ptxas not
found"); and Proton's library (`triton.profiler`), which pallas-prof's in-situ capture uses
only when asked for it by name or when cupti-python, carried in .whl, is missing. Every pack stores a file that
repeats another in its folder byte for byte (libcupti.so, .so.12 and .so.2025.1.1 are one
library) as a link to it: a wheel, being a zip, holds no links.

    python bench/triton_carry/carry.py pack --version 3.9.0 --hopper-only --parts 1 --out .carry/hopper

A call's 64 MiB hold the working tree too (this repository's is about 18 MB), so one part
with .whl (after `strip-wheels`, 2.0 MB) does not fit: `--parts 2` (the default) does.

The GPU machine has no zstd; Python's lzma unpacks xz. Each part's SHA-256 is in the
manifest and is checked before anything is unpacked: a part cut short by a transfer is
refused, not half-installed.
"""
from __future__ import annotations

import argparse
import base64
import glob
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

STASH = "/tmp/pallas-prof-carry"
LEFT_OUT = (                        # relative to the triton package; not needed on an NVIDIA GPU
    "backends/amd/lib/libtriton_amd_codegen.so",
    "backends/nvidia/lib/cupti-blackwell",
    "instrumentation/libGPUInstrumentationTestLib.so",
)
STRIPPED = ("_C/libtriton.so", "_C/libproton.so")
# what --hopper-only leaves out besides: the ptxas of targets below sm_90, and Proton
BELOW_HOPPER = ("backends/nvidia/bin/ptxas", "_C/libproton.so")


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def _links_for_copies(tree: str) -> list[str]:
  """Replace each file that repeats an earlier one of its folder byte for byte with a relative
  link to it; the names replaced, relative to the tree."""
  linked = []
  for folder, _, files in os.walk(tree):
    first: dict[tuple[int, str], str] = {}
    for name in sorted(files):
      path = os.path.join(folder, name)
      if os.path.islink(path):
        continue
      key = (os.path.getsize(path), _sha256(path))
      if key in first:
        os.remove(path)
        os.symlink(first[key], path)
        linked.append(os.path.relpath(path, tree))
      else:
        first[key] = name
  return linked


def pack(version: str, out: str, python_version: str = "3.12", hopper_only: bool = False,
         parts_count: int = 2) -> dict:
  os.makedirs(out, exist_ok=True)
  with tempfile.TemporaryDirectory(prefix="triton-carry-") as work:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", python_version,
                    "--implementation", "cp", "--platform", "manylinux_2_27_x86_64",
                    "--platform", "manylinux_2_28_x86_64", "-d", work, f"triton=={version}"],
                   check=True)
    wheel = glob.glob(os.path.join(work, "triton-*.whl"))[0]
    tree = os.path.join(work, "tree")
    shutil.unpack_archive(wheel, tree, "zip")
    package = os.path.join(tree, "triton")
    left_out = LEFT_OUT + (BELOW_HOPPER if hopper_only else ())
    for rel in left_out:
      path = os.path.join(package, rel)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
    for static in glob.glob(os.path.join(package, "**", "*.a"), recursive=True):
      os.remove(static)
    for rel in STRIPPED:
      if not os.path.exists(os.path.join(package, rel)):
        continue
      subprocess.run(["strip", "--strip-unneeded", os.path.join(package, rel)], check=True)
    linked = _links_for_copies(package)
    archive = os.path.join(work, "triton.tar.xz")
    preset = (9 | lzma.PRESET_EXTREME) if hopper_only else 6
    with tarfile.open(archive, "w:xz", preset=preset) as tar:
      for name in sorted(os.listdir(tree)):
        tar.add(os.path.join(tree, name), arcname=name)
    size = os.path.getsize(archive)
    count = parts_count
    share = -(-size // count)
    parts = []
    with open(archive, "rb") as f:
      for i in range(1, count + 1):
        path = os.path.join(out, f"triton-{version}.part{i}")
        with open(path, "wb") as g:
          g.write(f.read(share))
        parts.append({"file": os.path.basename(path), "bytes": os.path.getsize(path),
                      "sha256": _sha256(path)})
  manifest = {"version": version, "python": python_version, "wheel": os.path.basename(wheel),
              "archive_bytes": size, "parts": parts, "left_out": list(left_out) + ["*.a"],
              "stripped": list(STRIPPED), "linked": linked}
  with open(os.path.join(out, f"triton-{version}.json"), "w") as f:
    json.dump(manifest, f, indent=1)
  return manifest


def strip_wheels(folder: str) -> list[tuple[str, int, int]]:
  """Strip the symbol tables off every shared library in the wheels of `folder` (each wheel
  rewritten in place, its RECORD's hashes and sizes made true again): cupti-python's module
  shrinks from about 32 MB to 6 (its wheel from 7.7 MB to 0.9), room in a call's 64 MiB.
  Returns (wheel, bytes before, bytes after) for each wheel changed."""
  changed = []
  for wheel in sorted(glob.glob(os.path.join(folder, "*.whl"))):
    with zipfile.ZipFile(wheel) as z:
      members = [(info, z.read(info)) for info in z.infolist()]
    libraries = [info.filename for info, _ in members if info.filename.endswith(".so")]
    if not libraries:
      continue
    new: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="strip-wheel-") as work:
      for info, data in members:
        if info.filename in libraries:
          path = os.path.join(work, "lib.so")
          with open(path, "wb") as f:
            f.write(data)
          subprocess.run(["strip", "--strip-unneeded", path], check=True)
          with open(path, "rb") as f:
            new[info.filename] = f.read()
    record = next(info.filename for info, _ in members if info.filename.endswith(".dist-info/RECORD"))
    lines = []
    members_text = [(i.filename, d) for i, d in members]
    for line in dict(members_text)[record].decode().splitlines():
      name = line.split(",")[0]
      if name in new:
        digest = base64.urlsafe_b64encode(hashlib.sha256(new[name]).digest()).rstrip(b"=").decode()
        line = f"{name},sha256={digest},{len(new[name])}"
      lines.append(line)
    new[record] = ("\n".join(lines) + "\n").encode()
    before = os.path.getsize(wheel)
    with zipfile.ZipFile(wheel + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
      for name, data in members_text:
        z.writestr(name, new.get(name, data))
    os.replace(wheel + ".tmp", wheel)
    changed.append((os.path.basename(wheel), before, os.path.getsize(wheel)))
  return changed


def stash(part: str) -> str:
  os.makedirs(STASH, exist_ok=True)
  target = os.path.join(STASH, os.path.basename(part))
  shutil.copyfile(part, target)
  return target


def unpack(version: str, into: str, carry_dir: str = ".carry") -> str:
  manifest_path = os.path.join(carry_dir, f"triton-{version}.json")
  with open(manifest_path) as f:
    manifest = json.load(f)
  paths = []
  for part in manifest["parts"]:
    found = [p for p in (os.path.join(carry_dir, part["file"]), os.path.join(STASH, part["file"]))
             if os.path.exists(p)]
    if not found:
      raise SystemExit(f"carry: {part['file']} is neither in {carry_dir}/ nor in {STASH}/ (call 1 "
                       "stashes part 1; the machine must still be the same, warm one)")
    if _sha256(found[0]) != part["sha256"]:
      raise SystemExit(f"carry: {found[0]} does not match its SHA-256 in {manifest_path}: a "
                       "transfer cut it short; pack and carry it again")
    paths.append(found[0])
  os.makedirs(into, exist_ok=True)
  joined = os.path.join(tempfile.gettempdir(), f"triton-{version}.tar.xz")
  with open(joined, "wb") as out:
    for path in paths:
      with open(path, "rb") as f:
        shutil.copyfileobj(f, out)
  with lzma.open(joined) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
    tar.extractall(into, filter="data") if sys.version_info >= (3, 12) else tar.extractall(into)
  os.remove(joined)
  # a wheel is a zip, and unpacking a zip drops execute bits: Triton's tools (ptxas and
  # friends) would refuse to start
  for tool in glob.glob(os.path.join(into, "triton", "backends", "*", "bin", "*")):
    os.chmod(tool, 0o755)
  return into


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  sub = parser.add_subparsers(dest="command", required=True)
  p = sub.add_parser("pack")
  p.add_argument("--version", required=True)
  p.add_argument("--out", default=".carry")
  p.add_argument("--hopper-only", action="store_true",
                 help="no ptxas for targets below sm_90, no Proton, xz's strongest preset")
  p.add_argument("--parts", type=int, default=2, help="how many parts (one per device call)")
  p = sub.add_parser("strip-wheels", help="strip the shared libraries in a folder's wheels")
  p.add_argument("--folder", default=".whl")
  p = sub.add_parser("stash")
  p.add_argument("--part", required=True)
  p = sub.add_parser("unpack")
  p.add_argument("--version", required=True)
  p.add_argument("--into", required=True)
  p.add_argument("--carry-dir", default=".carry")
  args = parser.parse_args(argv)
  if args.command == "pack":
    print(json.dumps(pack(args.version, args.out, hopper_only=args.hopper_only,
                                parts_count=args.parts), indent=1))
  elif args.command == "strip-wheels":
    for name, before, after in strip_wheels(args.folder):
      print(f"{name}: {before:,} -> {after:,} bytes")
  elif args.command == "stash":
    print(stash(args.part))
  else:
    print(unpack(args.version, args.into, args.carry_dir))
  return 0


if __name__ == "__main__":
  sys.exit(main())
