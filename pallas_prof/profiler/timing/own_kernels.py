"""The profiler's own Triton kernels (_ceiling_kernels: the copy ceiling, the L2
flush), compiled for the device and wrapped as LaunchSpecs for the Replayer."""
from __future__ import annotations

from ...backend.compiling import triton_compat
from ..launchspec import LaunchSpec, ptx_param_count


def compile_own_kernel(fn, signature: dict, constexprs: dict, cc: int, num_warps: int):
  """Compiles one of the profiler's own kernels (_ceiling_kernels) for sm_`cc`;
  pointer arguments are declared 16-byte aligned (the buffers are cuMemAlloc'd)."""
  # lazy: at the top it would load jax whenever this module is imported
  from ...backend.compiling.compile import triton_lock
  pointers = [i for i, t in enumerate(signature.values()) if t.startswith("*")]
  with triton_lock():
    # fp fusion named, not left to Triton's default: Triton 3.9 warns when it is left
    # (its default changes in 3.10); these kernels copy and count, no float math to fuse
    return triton_compat.compile_source(
        fn, signature, constexprs=constexprs,
        attrs={(i,): [["tt.divisibility", 16]] for i in pointers},
        target=triton_compat.gpu_target("cuda", cc, 32),
        options={"num_warps": num_warps, "enable_fp_fusion": False})


def own_launch_spec(compiled, grid: tuple[int, int, int], num_warps: int, params):
  """A LaunchSpec of a kernel compiled by compile_own_kernel."""
  md = compiled.metadata
  return LaunchSpec(
      name=md.name, cubin=compiled.asm["cubin"], launch_grid=grid,
      num_warps=num_warps, warp_size=32, shared=int(md.shared), num_ctas=1,
      global_scratch_size=int(getattr(md, "global_scratch_size", 0) or 0),
      global_scratch_align=int(getattr(md, "global_scratch_align", 1) or 1),
      profile_scratch_size=int(getattr(md, "profile_scratch_size", 0) or 0),
      profile_scratch_align=int(getattr(md, "profile_scratch_align", 1) or 1),
      params=list(params), aliases=[], zeroed_outputs=[],
      ptx_param_count=ptx_param_count(compiled.asm["ptx"], md.name))
