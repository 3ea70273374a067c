"""One kernel compiled for other GPUs than the one it runs on: compiled, refused or failed.

For people who write a kernel on one GPU and deploy it on another: the same
GeneratedKernel goes through the same compile (worker, cache, diagnosis) for
each target, and each answer is one of

  compiled  the target's binary exists; its registers, spills, shared memory/LDS
  refused   the kernel uses what the target lacks (an fp8 type, an instruction,
            more shared memory than it has): the kernel's to change, said at the
            user's line with what to do (failures/target_features.py)
  failed    any other compile failure (Triton's, pallas-prof's, the machine's),
            as the CompileError the run would raise
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..artifacts import CompiledKernel, GeneratedKernel
from ..errors import CompileError
from ..targets import Target, as_target
from .compile import compile_kernel
from .failures import workarounds

# what a refusal's diagnosis is: a feature the target lacks, or more than it has
REFUSED_KINDS = ("target", "resources")


@dataclasses.dataclass(frozen=True)
class TargetOutcome:
  kernel: str
  target: Target
  status: str                              # "compiled", "refused" or "failed"
  compiled: CompiledKernel | None = None
  error: CompileError | None = None

  @property
  def reason(self) -> str:
    """The error's first line ("" when it compiled)."""
    return "" if self.error is None else str(self.error.reason).splitlines()[0]

  def figures(self) -> dict[str, Any]:
    """Registers, spills and shared memory, in the target's own terms: an NVIDIA
    target's spills are ptxas's bytes, an AMD one's LLVM's registers spilled."""
    ck = self.compiled
    if ck is None:
      return {}
    extra = dict(ck.target_resources)
    if ck.target.backend == "hip":
      spills = (extra.get("vgpr_spills") or 0) + (extra.get("sgpr_spills") or 0)
      spill_unit = "registers"
    else:
      spills, spill_unit = ck.spills, "bytes"
    return {"registers": ck.registers, "spills": spills, "spill_unit": spill_unit,
            "shared_bytes": ck.shared_bytes, "num_warps": ck.num_warps,
            "warp_size": ck.target.warp_size, **extra}


def is_refusal(error: CompileError) -> bool:
  d = error.diagnosis
  return d is not None and d.fault == "kernel" and d.kind in REFUSED_KINDS


def compile_for(gk: GeneratedKernel, target, *, relower=None,
                use_disk_cache: bool = True) -> TargetOutcome:
  """gk compiled for `target` (a Target, ("cuda", 80), or text: "sm_80", "gfx942"); with
  `relower` (the kernel's registry record's), through the workarounds a run would take
  where Triton fails (failures/workarounds.py)."""
  target = as_target(target)
  try:
    if relower is not None:
      ck = workarounds.compile_working_around(gk, target, relower,
                                              use_disk_cache=use_disk_cache)
    else:
      ck = compile_kernel(gk, target, use_disk_cache=use_disk_cache)
  except CompileError as e:
    return TargetOutcome(gk.name, target, "refused" if is_refusal(e) else "failed", error=e)
  return TargetOutcome(gk.name, target, "compiled", compiled=ck)


def compile_for_targets(gk: GeneratedKernel, targets, *, relower=None,
                        use_disk_cache: bool = True) -> list[TargetOutcome]:
  return [compile_for(gk, t, relower=relower, use_disk_cache=use_disk_cache) for t in targets]
