"""What an SM holds, per compute capability (NVIDIA's CUDA occupancy figures), and the
occupancy of a kernel from its registers, shared memory and warps.

Occupancy here is what the figures allow (as CUDA's occupancy calculator computes it),
not what was measured: a kernel replayed on a GPU may run fewer CTAs per SM when
the driver reserves more, which the replay's cuOccupancyMaxActiveBlocksPerMultiprocessor
would show.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SmLimits:
  registers: int = 65536             # 32-bit registers per SM
  register_unit: int = 256           # registers are allocated per warp in units of this
  max_registers_per_thread: int = 255
  warps: int = 64                    # resident warps per SM
  blocks: int = 32                   # resident CTAs per SM
  shared_bytes: int = 233472         # shared memory per SM usable by CTAs
  shared_reserved: int = 1024        # the driver's shared memory per CTA
  sms: int = 132                     # SMs of the usual part (H100 SXM / H200)
  part: str = "H100/H200"


LIMITS = {
    80: SmLimits(warps=64, blocks=32, shared_bytes=167936, sms=108, part="A100"),
    86: SmLimits(warps=48, blocks=16, shared_bytes=102400, sms=84, part="RTX 30x0 / A40"),
    89: SmLimits(warps=48, blocks=24, shared_bytes=102400, sms=128, part="RTX 40x0 / L40"),
    90: SmLimits(),
}


def limits(cc: int | None) -> SmLimits:
  if cc in LIMITS:
    return LIMITS[cc]
  return LIMITS[90] if not cc or cc >= 90 else LIMITS[80]


@dataclasses.dataclass(frozen=True)
class Occupancy:
  ctas_per_sm: int
  warps_per_sm: int
  pct: float                         # of the warps an SM holds
  limiter: str                       # "registers", "shared memory", "warps", "blocks"
  by_limit: dict                     # limiter -> CTAs per SM it allows

  def text(self) -> str:
    return (f"{self.ctas_per_sm} CTA{'s' if self.ctas_per_sm != 1 else ''} per SM, "
            f"{self.warps_per_sm} warps ({self.pct:.0f} % of what an SM holds), "
            f"limited by {self.limiter}")


def occupancy(num_warps: int, registers: int | None, shared_bytes: int | None,
              lim: SmLimits) -> Occupancy:
  """CTAs per SM as registers, shared memory, warps and the CTA limit allow."""
  by = {"warps": lim.warps // max(num_warps, 1), "blocks": lim.blocks}
  if registers:
    per_warp = -(-registers * 32 // lim.register_unit) * lim.register_unit
    by["registers"] = lim.registers // (per_warp * max(num_warps, 1))
  if shared_bytes:
    by["shared memory"] = lim.shared_bytes // (shared_bytes + lim.shared_reserved)
  limiter = min(by, key=lambda k: (by[k], ["registers", "shared memory", "warps",
                                            "blocks"].index(k)))
  ctas = max(0, by[limiter])
  warps = ctas * num_warps
  return Occupancy(ctas, warps, 100.0 * warps / lim.warps, limiter, by)
