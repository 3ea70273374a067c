"""Which tl.cumsum forms Triton fails to compile for sm_90: a sweep in plain Triton
(no pallas-prof, no JAX, no GPU), for any installed Triton.

    python3 bench/probes/triton_scan_sweep.py [--sizes 1,2,16,64] [--warps 1,4,8] [--dtypes fp32]
                                       [--out bench/results/triton_scan_sweep_<triton>_<commit>.txt]

Each case loads a rows x cols block (vectorised, as pallas-prof's kernels load:
the pointers 16-byte aligned) and scans:
  col_axis0 / col_axis1   a loaded vector as a column, v[:, None], along axis 0 / 1
  row_axis1 / row_axis0   a loaded vector as a row, v[None, :], along axis 1 / 0
  full_axis0 / full_axis1 the block itself
Prints one line per case (ok, or FAIL with the exception and whether an assertion
was printed) and a count per form; what Triton writes to stderr is kept out.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import itertools
import os
import subprocess
import sys
import tempfile

TEMPLATE = '''import triton
import triton.language as tl


@triton.jit
def k(v_ref, m_ref, o_ref):
    rows = tl.arange(0, {M})
    cols = tl.arange(0, {N})
    m = tl.load(m_ref + rows[:, None] * {N} + cols[None, :])
    {body}
    tl.store(o_ref + rows[:, None] * {N} + cols[None, :], r)
'''
BODIES = {
    "col_axis0": "v = tl.load(v_ref + rows)\n    r = tl.cumsum(v[:, None], axis=0) * m",
    "col_axis1": "v = tl.load(v_ref + rows)\n    r = tl.cumsum(v[:, None], axis=1) * m",
    "row_axis1": "v = tl.load(v_ref + cols)\n    r = tl.cumsum(v[None, :], axis=1) * m",
    "row_axis0": "v = tl.load(v_ref + cols)\n    r = tl.cumsum(v[None, :], axis=0) * m",
    "full_axis0": "r = tl.cumsum(m, axis=0)",
    "full_axis1": "r = tl.cumsum(m, axis=1)",
}
TYPES = {"fp32": "*fp32", "i32": "*i32", "fp16": "*fp16"}


def compile_case(folder: str, form: str, rows: int, cols: int, warps: int, dtype: str) -> str:
  import triton
  from triton.backends.compiler import GPUTarget
  from triton.compiler import ASTSource
  path = os.path.join(folder, f"{form}_{rows}x{cols}_w{warps}_{dtype}.py")
  with open(path, "w") as f:
    f.write(TEMPLATE.format(M=rows, N=cols, body=BODIES[form]))
  spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  source = ASTSource(fn=module.k, signature={n: TYPES[dtype] for n in ("v_ref", "m_ref", "o_ref")},
                     attrs={(i,): [["tt.divisibility", 16]] for i in range(3)})
  with tempfile.TemporaryFile() as err:      # Triton's C++ diagnostics: kept, not shown
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(err.fileno(), 2)
    try:
      triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
      status = "ok"
    except Exception as e:  # noqa: BLE001 - what the sweep records
      status = f"FAIL {type(e).__name__}"
    finally:
      os.dup2(saved, 2)
      os.close(saved)
    err.seek(0)
    said = err.read()
  return status + (" (assertion)" if b"Assertion" in said else "")


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--sizes", default="1,2,16,64")
  parser.add_argument("--warps", default="1,4,8")
  parser.add_argument("--dtypes", default="fp32")
  parser.add_argument("--commit", default=None)
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  import triton
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                                         capture_output=True, text=True).stdout.strip()
  lines = [f"# python3 bench/probes/triton_scan_sweep.py {' '.join(sys.argv[1:])}",
           f"# commit {commit or 'unknown'}, triton {triton.__version__}, target cuda:90"]
  print("\n".join(lines), flush=True)
  folder = tempfile.mkdtemp(prefix="scan-sweep-")
  failed = collections.Counter()
  total = collections.Counter()
  sizes = [int(s) for s in args.sizes.split(",")]
  for form, rows, cols, warps, dtype in itertools.product(
      BODIES, sizes, sizes, [int(w) for w in args.warps.split(",")], args.dtypes.split(",")):
    status = compile_case(folder, form, rows, cols, warps, dtype)
    total[form] += 1
    failed[form] += status != "ok"
    line = f"{form} {rows}x{cols} num_warps={warps} {dtype}: {status}"
    lines.append(line)
    print(line, flush=True)
  summary = [f"# {form}: {failed[form]} of {total[form]} failed" for form in BODIES]
  print("\n".join(summary))
  if args.out:
    with open(args.out, "w") as f:
      f.write("\n".join(lines[:2] + summary + lines[2:]) + "\n")


if __name__ == "__main__":
  main()
