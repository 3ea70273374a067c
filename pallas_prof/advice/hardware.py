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


# per compute capability: CUDA C++ Programming Guide, "Technical Specifications per
# Compute Capability" (resident warps and blocks per SM, shared memory per SM); the SM
# counts are the named part's, for the advice that spreads a grid over the SMs
LIMITS = {
    75: SmLimits(warps=32, blocks=16, shared_bytes=65536, sms=40, part="T4"),
    80: SmLimits(warps=64, blocks=32, shared_bytes=167936, sms=108, part="A100"),
    86: SmLimits(warps=48, blocks=16, shared_bytes=102400, sms=84, part="RTX 30x0 / A40"),
    89: SmLimits(warps=48, blocks=24, shared_bytes=102400, sms=128, part="RTX 40x0 / L40"),
    87: SmLimits(warps=48, blocks=16, shared_bytes=167936, sms=16, part="Jetson AGX Orin"),
    90: SmLimits(),
    100: SmLimits(sms=148, part="B200"),
    103: SmLimits(sms=148, part="sm_103 (B200's SM count)"),
    120: SmLimits(warps=48, blocks=32, shared_bytes=131072, sms=170, part="RTX 5090"),
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


@dataclasses.dataclass(frozen=True)
class CuLimits:
  """What an AMD compute unit holds (a workgroup processor of two CUs on RDNA, where
  a workgroup's waves spread over its four SIMDs)."""
  waves_per_simd: int                # resident waves per SIMD
  simds: int                         # SIMDs a workgroup's waves are spread over
  lds_bytes: int                     # LDS per CU (per WGP on RDNA)
  part: str


# LDS and SIMDs: AMD's CDNA2, CDNA3 and CDNA4 ISA reference guides (64 KiB of LDS per CU
# on MI200 and MI300, 160 KiB on MI350; four SIMDs per CU) and the RDNA3 and RDNA4 ISA
# guides (128 KiB of LDS per WGP of four SIMDs); resident waves per SIMD as LLVM's AMDGPU
# backend counts them (AMDGPUBaseInfo getMaxWavesPerEU: 8 from gfx90a on CDNA, 16 from
# gfx10.3), the limit its "; Occupancy:" figure is taken against
CU_LIMITS = {
    "gfx90a": CuLimits(8, 4, 65536, "MI200"),
    "gfx942": CuLimits(8, 4, 65536, "MI300"),
    "gfx950": CuLimits(8, 4, 163840, "MI350"),
    "gfx1100": CuLimits(16, 4, 131072, "RX 7900"),
    "gfx1200": CuLimits(16, 4, 131072, "RX 9060"),
    "gfx1201": CuLimits(16, 4, 131072, "RX 9070"),
}


def amd_occupancy(num_warps: int, llvm_waves: int | None, lds_bytes: int | None,
                  lim: CuLimits) -> Occupancy:
  """Workgroups per CU (in Occupancy's CTA fields) as LLVM's occupancy (the waves per SIMD
  its registers allow), the LDS and the waves a SIMD holds allow; `pct` is of those waves."""
  per_simd = -(-max(num_warps, 1) // lim.simds)     # each workgroup's waves on one SIMD
  by = {"waves": lim.waves_per_simd // per_simd}
  if llvm_waves:
    by["registers"] = min(llvm_waves, lim.waves_per_simd) // per_simd
  if lds_bytes:
    by["LDS"] = lim.lds_bytes // lds_bytes
  limiter = min(by, key=lambda k: (by[k], ["registers", "LDS", "waves"].index(k)))
  groups = max(0, by[limiter])
  return Occupancy(groups, groups * num_warps, 100.0 * groups * per_simd / lim.waves_per_simd,
                   limiter, by)


# --- matrix rates ----------------------------------------------------------------------------
# Dense peak FLOP/s per compute capability and dot class (profiler/static/cost.dot_class), as
# NVIDIA's data sheets for the SXM parts give them (H100/H200 for sm_90, A100 for sm_80);
# "f32" is float32 without tensor cores, what an "ieee" float32 dot runs at (Triton
# multiplies it with FMAs). A GPU's measured ceiling (profiler/timing/ceilings.py: cuBLAS)
# is used before these where there is one: it is what a good kernel reaches there.
MATRIX_PEAKS = {
    90: {"tf32": 494.7e12, "bf16": 989.4e12, "f16": 989.4e12, "fp8": 1978.9e12,
         "int8": 1978.9e12, "f32": 66.9e12},
    80: {"tf32": 156e12, "bf16": 312e12, "f16": 312e12, "int8": 624e12, "f32": 19.5e12},
}


# HBM bandwidth of the same parts (H200, A100 80GB), from the same data sheets: with the peaks,
# the ridge above which a kernel's dots, not its bytes, bound it when no GPU measured either
BANDWIDTH = {90: 4.8e12, 80: 2.0e12}


def _family(cc: int) -> int:
  return 90 if 90 <= cc < 100 else 80 if 80 <= cc < 90 else cc


def bandwidth(cc: int | None) -> float | None:
  return BANDWIDTH.get(_family(cc)) if cc else None


def matrix_peak(cc: int | None, dot_class: str | None) -> float | None:
  """The data sheet's dense FLOP/s for dots of this class on this compute capability (sm_9x
  as sm_90, sm_8x as sm_80), None where the table has none."""
  if not cc or not dot_class:
    return None
  return MATRIX_PEAKS.get(_family(cc), {}).get(dot_class)
