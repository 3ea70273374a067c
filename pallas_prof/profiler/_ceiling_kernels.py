"""Triton kernels the profiler launches itself to measure ceilings (a real file:
Triton reads kernel source back with inspect)."""
import triton
import triton.language as tl


@triton.jit
def pallas_prof_copy(src, dst, BLOCK: tl.constexpr):
  # n is a multiple of BLOCK: no mask, 16-byte vector loads and stores
  offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
  tl.store(dst + offsets, tl.load(src + offsets))
