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

A kernel whose loads or stores go through TMA (CompilerParams(tma=True), lowered
for sm_90) compiles for a target without TMA too: Triton turns its tensor
descriptors into plain loads and stores. The outcome says so (tma_notes, one per
access) and a TmaFallbackWarning at the user's line of the first, as the lowering
does for an access TMA cannot serve (lowering/features/tma.py).
"""
from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Any

from ..artifacts import CompiledKernel, GeneratedKernel
from ..errors import CompileError
from ..targets import Target, as_target
from ..tma_note import TmaFallbackWarning, TmaNote
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
  # compiled for a target without TMA: the TMA accesses that became plain ones (TmaNote)
  tma_notes: tuple = ()

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
  notes = tma_without_hardware(gk, target)
  if notes:
    warn_tma_without_hardware(gk, target, notes)
  return TargetOutcome(gk.name, target, "compiled", compiled=ck, tma_notes=notes)


def has_tma(target: Target) -> bool:
  """pallas-prof's TMA is NVIDIA's tensor memory accelerator, there from sm_90."""
  return target.backend == "cuda" and int(target.arch) >= 90


_DESCRIPTOR = re.compile(r"^\s*(\w+) = tl\.make_tensor_descriptor\((\w+),")


def tma_without_hardware(gk: GeneratedKernel, target: Target) -> tuple:
  """The TmaNote of each access of `gk` through a tensor descriptor, when `target` has no
  TMA (none when it has, or the kernel uses none); each at the user's line of its equation."""
  if not gk.tma or has_tma(target):
    return ()
  lines = gk.code_lines()
  refs = dict(m.groups() for m in map(_DESCRIPTOR.match, lines) if m)   # descriptor -> ref
  reason = (f"{target.name} has no TMA (NVIDIA GPUs have it from sm_90): Triton compiles the "
            "tensor descriptor's {} as a plain one")
  notes = []
  for number, text in enumerate(lines, 1):
    for desc, ref in refs.items():
      access = re.search(rf"\b{desc}\.(load|store)\(", text)
      if access is None:
        continue
      index = gk.line_map.get(number)
      eqn = gk.eqns[index] if index is not None and 0 <= index < len(gk.eqns) else None
      what = ref if access.group(1) == "load" else f"the store to {ref}"
      notes.append(TmaNote(what, eqn and eqn.file, eqn and eqn.line,
                           reason.format(access.group(1))))
  return tuple(dict.fromkeys(notes))


def warn_tma_without_hardware(gk: GeneratedKernel, target: Target, notes: tuple) -> None:
  """One warning for the kernel and target, at the user's line of its first TMA access."""
  first = notes[0]
  accesses = ", ".join(n.access for n in notes)
  warnings.warn_explicit(
      f"kernel `{gk.name}` compiled for {target.name}, which has no TMA (NVIDIA GPUs have it "
      f"from sm_90): the TMA asked for with CompilerParams(tma=True) is not used for "
      f"{accesses}; Triton compiles them as plain loads and stores (same results). "
      "Compile for sm_90 or later to use TMA", TmaFallbackWarning,
      first.file or "an unknown line", first.line or 0)


def compile_for_targets(gk: GeneratedKernel, targets, *, relower=None,
                        use_disk_cache: bool = True) -> list[TargetOutcome]:
  return [compile_for(gk, t, relower=relower, use_disk_cache=use_disk_cache) for t in targets]
