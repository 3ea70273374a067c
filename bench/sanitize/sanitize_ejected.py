"""compute-sanitizer over pallas-prof's kernels with no JAX in the checked process.

Under compute-sanitizer, JAX processes ended with the sanitizer itself dying of signal
11 on the H200 (2026-12-02, bench/results/archive/sanitizer_h200_*), once while XLA compiled a
reference, so those runs gave no verdict on pallas-prof's kernels. This is the other
route: the same kernels, ejected (`pallas-prof show --eject`: the generated Triton
source with a launcher that needs numpy, triton and cuda-python only), each launched in
a process of its own where nothing but Triton's launcher touches the GPU.

    python3 bench/sanitize/sanitize_ejected.py prepare DIR      # no sanitizer: run the programs
                                                       # through pallas-prof, eject each kernel
    compute-sanitizer --tool memcheck --target-processes all \
        python3 bench/sanitize/sanitize_ejected.py run DIR      # each ejected program in turn
    python3 bench/sanitize/sanitize_ejected.py run DIR --interpret   # the same on a CPU (a dry run)

`prepare` runs bench/sanitize/sanitize_examples.py and bench/sanitize/sanitize_ops.py (the workloads of
bench/sanitize/sanitize_gpu.sh) through `pallas-prof run --no-analysis` and ejects every kernel
they lowered into DIR/ejected/. Inputs are the ejected launcher's random values (floats
in [-2, 2], integers in [-100, 100]): a kernel that takes indices from an integer input
may then read out of bounds because of its inputs, not its code, and `run` names those
kernels apart. `run` exits non-zero when a program failed (compute-sanitizer's own
summary says whether it found errors).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = {"examples": ["bench/sanitize/sanitize_examples.py"], "ops": ["bench/sanitize/sanitize_ops.py"]}


def prepare(out: str, programs: list[str]) -> int:
  sys.path.insert(0, ROOT)
  from pallas_prof.cli import run_directory
  from pallas_prof.cli.eject import eject
  ejected_dir = os.path.join(out, "ejected")
  os.makedirs(ejected_dir, exist_ok=True)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT,
                                                                  os.environ.get("PYTHONPATH")])))
  index, failed = [], []
  for name in programs:
    run_dir = os.path.join(out, f"run_{name}")
    cmd = [sys.executable, "-m", "pallas_prof.cli.main", "run", "--no-analysis", "--no-trace",
           "--no-insitu", "--out", run_dir, *[os.path.join(ROOT, p) for p in PROGRAMS[name]]]
    print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
      failed.append(name)
      print(f"{name}: pallas-prof run exit {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
    kernels = os.path.join(run_dir, "kernels")
    for kdir in sorted(os.listdir(kernels)) if os.path.isdir(kernels) else []:
      gk, _ = run_directory.load_kernel(os.path.join(kernels, kdir))
      path = os.path.join(ejected_dir, f"{name}__{kdir}.py")
      eject(gk, path, aliases=run_directory.load_aliases(os.path.join(kernels, kdir)))
      int_inputs = [p.name for p in gk.params if p.role == "input" and
                    ("int" in p.dtype or p.dtype == "bool")]
      index.append({"program": name, "kernel": kdir, "file": os.path.basename(path),
                    "integer_inputs": int_inputs})
  with open(os.path.join(out, "ejected.json"), "w") as f:
    json.dump(index, f, indent=1)
  print(f"ejected {len(index)} kernels into {ejected_dir}; programs failed: {failed or 'none'}")
  return 1 if failed or not index else 0


def run(out: str, interpret: bool) -> int:
  with open(os.path.join(out, "ejected.json")) as f:
    index = json.load(f)
  # the ejected programs need no pallas-prof: keep it (and JAX) off their path
  env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET",)}
  env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                      if p and os.path.abspath(p) != ROOT)
  failed = []
  for entry in index:
    path = os.path.join(out, "ejected", entry["file"])
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, path, "--seed", "1"]
                          + (["--interpret"] if interpret else []),
                          env=env, capture_output=True, text=True)
    note = (f" (random integer inputs {entry['integer_inputs']}: an out-of-bounds report may "
            "be theirs)" if entry["integer_inputs"] else "")
    status = "ok" if proc.returncode == 0 else f"EXIT {proc.returncode}"
    print(f"{entry['file']}: {status}, {time.perf_counter() - t0:.1f} s{note}", flush=True)
    if proc.returncode:
      failed.append(entry["file"])
      print(proc.stderr[-1500:], flush=True)
  print(f"ejected programs failed: {failed or 'none'} (of {len(index)})")
  return 1 if failed else 0


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("step", choices=["prepare", "run"])
  parser.add_argument("dir")
  parser.add_argument("--programs", default="examples,ops",
                      help="prepare: comma-separated, of " + ", ".join(PROGRAMS))
  parser.add_argument("--interpret", action="store_true",
                      help="run: under Triton's interpreter (a dry run on a CPU)")
  args = parser.parse_args(argv)
  if args.step == "prepare":
    return prepare(args.dir, [p for p in args.programs.split(",") if p])
  return run(args.dir, args.interpret)


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
