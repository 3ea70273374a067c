"""Every single-GPU example, one after another, in one process: the examples'
workload for bench/sanitize/sanitize_gpu.sh (one process, so compute-sanitizer pays
for JAX's start once, not once per example).

    python3 bench/sanitize/sanitize_examples.py [names...]     # default: all but multi_gpu

Each example checks its own result against XLA and returns its exit status;
this exits non-zero when any of them failed.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]   # pipeline imports the others
EXAMPLES = ("vector_add", "softmax", "layer_norm", "matmul", "flash_attention", "pipeline")


def main(argv: list[str]) -> int:
  failed = []
  for name in argv or EXAMPLES:
    path = os.path.join(ROOT, "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    t0 = time.perf_counter()
    print(f"== {name}: start", flush=True)    # a process that dies shows where
    spec.loader.exec_module(module)
    # the pipeline at 512 wide: its 4096-wide default runs for minutes under racecheck,
    # and its kernels are the same code at any width
    status = module.main(["--seed", "1"] + (["--n", "512"] if name == "pipeline" else []))
    print(f"== {name}: exit {status}, {time.perf_counter() - t0:.1f} s", flush=True)
    if status:
      failed.append(name)
  print(f"examples failed: {failed or 'none'}")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
