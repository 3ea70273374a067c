"""Triton kernels the profiler launches itself: to measure ceilings, and to make
the L2 cache cold before a timed launch (a real file: Triton reads kernel
source back with inspect)."""
import triton
import triton.language as tl


@triton.jit
def pallas_prof_copy(src, dst, BLOCK: tl.constexpr):
  # n is a multiple of BLOCK: no mask, 16-byte vector loads and stores
  offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
  tl.store(dst + offsets, tl.load(src + offsets))


@triton.jit
def pallas_prof_l2_flush(src, out, BLOCK: tl.constexpr):
  # Reads BLOCK int32 and adds their sum to out[0]. Read-only on `src`, so the
  # lines it leaves in L2 are clean (nothing to write back during the next,
  # timed, kernel); the one atomic makes the loads observable, so the compiler
  # cannot drop them. Default eviction policy: evict-first loads would not
  # displace the lines already in L2.
  offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
  tl.atomic_add(out, tl.sum(tl.load(src + offsets), axis=0))

