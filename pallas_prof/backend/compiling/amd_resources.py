"""An AMD kernel's resources, read from the AMDGCN assembly Triton's hip backend writes.

What ptxas's report is to an NVIDIA compile: LLVM's AMDGPU backend closes the
assembly with the kernel's figures, as comments ("; NumSgprs: 26",
"; Occupancy: 2") and as the code object's metadata (".vgpr_count: 196",
".vgpr_spill_count: 0"). Triton reads the same metadata from the hsaco when it
loads a kernel on a GPU (n_regs, n_spills); on a machine without one this is
where they are. LDS is Triton's own figure (metadata "shared": it allocates the
kernel's LDS dynamically, so the code object's fixed LDS size stays 0).
"""
from __future__ import annotations

import re
from typing import Any

# field -> the metadata key first, then LLVM's comment, whichever the assembly has
_FIGURES = {
    "vgprs": (r"\.vgpr_count:\s+(\d+)", r";\s*TotalNumVgprs:\s+(\d+)"),
    "sgprs": (r"\.sgpr_count:\s+(\d+)", r";\s*TotalNumSgprs:\s+(\d+)"),
    "agprs": (r";\s*NumAgprs:\s+(\d+)",),
    "vgpr_spills": (r"\.vgpr_spill_count:\s+(\d+)",),
    "sgpr_spills": (r"\.sgpr_spill_count:\s+(\d+)",),
    "scratch_bytes": (r"\.private_segment_fixed_size:\s+(\d+)", r";\s*ScratchSize:\s+(\d+)"),
    "occupancy_waves": (r";\s*Occupancy:\s+(\d+)",),
}


def parse_amdgcn(assembly: str) -> dict[str, int | None]:
  """The figures of _FIGURES found in `assembly` (None: not reported)."""
  out: dict[str, int | None] = {}
  for name, patterns in _FIGURES.items():
    out[name] = None
    for pattern in patterns:
      m = re.search(pattern, assembly)
      if m:
        out[name] = int(m.group(1))
        break
  return out


def compiled_fields(assembly: str, metadata: dict[str, Any]) -> dict[str, Any]:
  """CompiledKernel's resource fields for an AMD compile: `registers` are the VGPRs
  (AGPRs included: what bounds occupancy, as an NVIDIA kernel's registers do),
  `stack_bytes` its scratch; ptxas's spill bytes have no AMD twin (LLVM counts
  registers spilled), so they stay None and target_resources keeps the counts."""
  figures = parse_amdgcn(assembly)
  figures["lds_bytes"] = int(metadata.get("shared", 0) or 0)
  return {"registers": figures["vgprs"], "stack_bytes": figures["scratch_bytes"],
          "spill_stores": None, "spill_loads": None,
          "target_resources": {k: v for k, v in figures.items() if v is not None}}
