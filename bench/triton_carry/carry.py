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

The GPU machine has no zstd; Python's lzma unpacks xz. Each part's SHA-256 is in the
manifest and is checked before anything is unpacked: a part cut short by a transfer is
refused, not half-installed.
"""
from __future__ import annotations

import argparse
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

STASH = "/tmp/pallas-prof-carry"
LEFT_OUT = (                        # relative to the triton package; not needed on an NVIDIA GPU
    "backends/amd/lib/libtriton_amd_codegen.so",
    "backends/nvidia/lib/cupti-blackwell",
    "instrumentation/libGPUInstrumentationTestLib.so",
)
STRIPPED = ("_C/libtriton.so", "_C/libproton.so")


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def pack(version: str, out: str, python_version: str = "3.12") -> dict:
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
    for rel in LEFT_OUT:
      path = os.path.join(package, rel)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
    for static in glob.glob(os.path.join(package, "**", "*.a"), recursive=True):
      os.remove(static)
    for rel in STRIPPED:
      subprocess.run(["strip", "--strip-unneeded", os.path.join(package, rel)], check=True)
    archive = os.path.join(work, "triton.tar.xz")
    with tarfile.open(archive, "w:xz", preset=6) as tar:
      for name in sorted(os.listdir(tree)):
        tar.add(os.path.join(tree, name), arcname=name)
    size = os.path.getsize(archive)
    half = (size + 1) // 2
    parts = []
    with open(archive, "rb") as f:
      for i in (1, 2):
        path = os.path.join(out, f"triton-{version}.part{i}")
        with open(path, "wb") as g:
          g.write(f.read(half))
        parts.append({"file": os.path.basename(path), "bytes": os.path.getsize(path),
                      "sha256": _sha256(path)})
  manifest = {"version": version, "python": python_version, "wheel": os.path.basename(wheel),
              "archive_bytes": size, "parts": parts, "left_out": list(LEFT_OUT) + ["*.a"],
              "stripped": list(STRIPPED)}
  with open(os.path.join(out, f"triton-{version}.json"), "w") as f:
    json.dump(manifest, f, indent=1)
  return manifest


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
  p = sub.add_parser("stash")
  p.add_argument("--part", required=True)
  p = sub.add_parser("unpack")
  p.add_argument("--version", required=True)
  p.add_argument("--into", required=True)
  p.add_argument("--carry-dir", default=".carry")
  args = parser.parse_args(argv)
  if args.command == "pack":
    print(json.dumps(pack(args.version, args.out), indent=1))
  elif args.command == "stash":
    print(stash(args.part))
  else:
    print(unpack(args.version, args.into, args.carry_dir))
  return 0


if __name__ == "__main__":
  sys.exit(main())
