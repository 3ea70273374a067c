"""Triton bugs that compile and compute wrong numbers, read off a compiled kernel's IR.

A failing stage says so (compile_diagnostics.py); these do not, so they are
looked for in every compiled kernel, and the kernel is then lowered otherwise
(workarounds.py) as for a failure.

  scan_lane_stride  Triton 3.6's ScanOpToLLVM takes the lane distance between
                    neighbours along the scanned axis from the tensor's shape
                    instead of its layout: where the layout spreads more lanes
                    over a non-scanned dimension than it has elements (a
                    broadcast column, `jnp.cumsum(x[:, None], axis=0)`: a
                    tensor<4x1> on threadsPerWarp [8, 4]), its shuffles read
                    the wrong lanes (`shfl.sync.up` by 1 where 4 is right) and
                    the scan is wrong on the GPU, right under the interpreter
                    (the H200 fuzz run of 2026-12-03, seed 20261204). Triton
                    3.9 computes the stride from the layout; 3.7 and 3.8 are
                    not checked and count as affected.
"""
from __future__ import annotations

import re

from .compile_diagnostics import Diagnosis, _ops_in_ir
from ..lineinfo import Resolver
from .. import triton_compat

_BLOCKED = re.compile(r"#ttg\.blocked<\{(.*)\}>")
_FIELD = re.compile(r"(\w+)\s*=\s*\[([\d,\s]*)\]")
_TENSOR = re.compile(r"tensor<([\dx]+)x[a-z]+\d*\s*,\s*(#[a-z]+\d*)")


def scan_stride_bug_present() -> bool:
  return triton_compat.triton_version() < (3, 9)


def find(ck) -> Diagnosis | None:
  """A Diagnosis of the scans a Triton bug will compute wrongly in ck, or None."""
  gk = ck.generated
  ttgir = (ck.asm or {}).get("ttgir") or ""
  if gk is None or not ttgir or not scan_stride_bug_present():
    return None
  risky = [op for op in _ops_in_ir(ttgir, "tt.scan", Resolver(gk)) if _replicated(op)]
  if not risky:
    return None
  # (workarounds.py also tries the kernel's other scans: Triton may fold two scans'
  # locations into one)
  equations = tuple(dict.fromkeys(op.eqn_index for op in risky if op.eqn_index is not None))
  return Diagnosis(
      stage="llir", kind="silent miscompile",
      summary=("Triton's scan lowering would read the wrong lanes (ScanOpToLLVM's lane "
               "stride along a non-scanned dimension that the layout replicates): the "
               "compiled scan is wrong on the GPU"),
      failing_pass="ConvertTritonGPUToLLVM", assertion_source="ScanOpToLLVM.cpp",
      op_kind="tt.scan", ops=tuple(risky), equations=equations,
      mapped_by="the scans' locations in ttgir", fault="triton",
      fault_reason=("Triton 3.6 derives the shuffle distance from the tensor's shape, not "
                    "its layout (fixed by Triton 3.9)"))


def _replicated(op) -> bool:
  """A scan whose input has fewer elements along a non-scanned dimension than its
  layout gives that dimension lanes of one warp."""
  axis = re.search(r"axis = (\d+)", op.attributes or "")
  tensor = _TENSOR.search(op.types or "")
  if axis is None or tensor is None:
    return False
  shape = [int(d) for d in tensor.group(1).split("x")]
  layout = next((l.split(" = ", 1)[1] for l in op.layouts if l.startswith(tensor.group(2) + " ")),
                "")
  blocked = _BLOCKED.search(layout)
  if blocked is None or len(shape) < 2:
    return False
  fields = {k: [int(v) for v in vals.split(",") if v.strip()]
            for k, vals in _FIELD.findall(blocked.group(1))}
  per_thread, lanes = fields.get("sizePerThread", []), fields.get("threadsPerWarp", [])
  if len(per_thread) != len(shape) or len(lanes) != len(shape):
    return False
  return any(shape[d] < per_thread[d] * lanes[d]
             for d in range(len(shape)) if d != int(axis.group(1)))
