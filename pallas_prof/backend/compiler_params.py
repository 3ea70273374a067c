"""What a pl.pallas_call asks of pallas-prof's lowering: pallas-prof's CompilerParams (checked
at the user's line) and the LoweringOptions that a call's params (pallas-prof's, JAX's
Triton ones or none) and the process's modes give.

Import CompilerParams from pallas_call_rule (or pallas_prof): importing that module registers
the rule that makes JAX hand such calls to pallas-prof.
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Any

from . import compat
from .options import (DEFAULT_NUM_STAGES, DEFAULT_NUM_WARPS, ROCM_DEFAULT_NUM_STAGES,
                      LoweringOptions, option_problem)


@dataclasses.dataclass(frozen=True)
class CompilerParams:
  """Selects pallas-prof for a pl.pallas_call and tunes its Triton kernel.

  Attributes:
    num_warps: warps per program (default 4).
    num_stages: software-pipelining stages for loops (default 3).
    compute_capability: compile for this capability instead of the device's
      (e.g. 90 for sm_90); useful to inspect code for another GPU.
    zero_outputs: indices of outputs to zero before the launch (accumulating
      kernels); outputs written with atomics are zeroed automatically.
    enable_fp_fusion: let Triton contract a multiply and an add into one FMA
      (Triton's own default). Off by default: XLA and JAX's built-in backend
      round the two separately, and pallas-prof computes what they compute.
    autotune: True or pallas_prof.Autotune(configs=..., budget_s=...) to time
      num_warps/num_stages candidates on the GPU and run the fastest whose outputs
      equal the default's (pallas_prof/tune/params.py); None: PALLAS_PROF_AUTOTUNE=1
      decides; False: never.
    launch_group: > 1 launches the programs of a 2-D (or wider) grid in groups of
      this many along the first dimension (Triton's matmul-tutorial order), for
      operand blocks shared in L2 by programs that run together; the same
      results. Ignored where the grid does not allow it (pallas_prof/backend/lowering/grid.py).
      The tuner tries 4 and 8 by default.
    persistent: > 0 launches this many programs in all (e.g. the GPU's SM count), each
      looping over the grid's points in steps of it, where the grid has more: the same
      results, with no tail wave and resident programs (pallas_prof/backend/lowering/grid.py).
      Not with tma, nor in the profiler's probed variant; the tuner tries it where an
      Autotune config names it ({"persistent": 132}), advise where re-reads or waves say so.
      Checked under the interpreter and compiled for sm_90, NOT YET RUN ON A GPU.
    loop_stages: > 0 makes each innermost loop that loads, has no dot and writes no
      memory (Triton's pipeliner would issue later loads before its stores) Triton's
      `tl.range(lo, hi, num_stages=loop_stages)`, so Triton pipelines its loads (copies
      into shared memory issued that many iterations ahead): a loop that sums over rows
      (the norms' backward dw/db) otherwise waits for each iteration's loads. The kernel's
      num_stages pipelines only the loads that feed a dot, and Triton copies ahead only
      loads of 4 bytes or more a thread. The same results; the tuner tries 3 (with the
      kernel's warps, and 1, 2 and 4) where a kernel has such a loop. Timed on the H200
      (the tuner keeps it for JAX's norms' dw/db kernel) and fuzzed there.
    tma: True loads dense blocks of the inputs, and stores an output's one block,
      through Hopper's TMA (Triton tensor descriptors made in the kernel) where that
      provably moves the same elements; other accesses stay plain, and a
      TmaFallbackWarning says why (pallas_prof/backend/lowering/features/tma.py).
      sm_90 or newer; needs jax >= 0.11 on the GPU (global scratch). Checked under
      Triton's interpreter and compiled for sm_90, NOT YET RUN ON A GPU; the tuner
      tries it only where an Autotune config names it ({"tma": 1}).
  """
  num_warps: int | None = None
  num_stages: int | None = None
  compute_capability: int | None = None
  zero_outputs: tuple[int, ...] = ()
  enable_fp_fusion: bool = False
  autotune: Any = None
  launch_group: int | None = None
  tma: bool | None = None
  persistent: int | None = None
  loop_stages: int | None = None

  # JAX's CompilerParams protocol wants a backend tag
  BACKEND = "triton"

  def __post_init__(self):
    # checked here, at the user's line: Triton would refuse these deep in a GPU compile
    # (num_warps not a power of two), or compile a block CUDA cannot launch (over 1024
    # threads), or the value would be ignored without a word
    def bad(field, value, want):
      raise ValueError(f"CompilerParams({field}={value!r}): {want}")
    for name in ("num_warps", "num_stages", "launch_group", "persistent", "loop_stages"):
      value = getattr(self, name)
      if value is not None and option_problem(name, value):
        bad(name, value, option_problem(name, value))
    cc = self.compute_capability
    if cc is not None and (not _is_int(cc) or cc < 70):
      bad("compute_capability", cc, "must be an integer like 80 or 90 (sm_80, sm_90), "
          "70 or more")
    if any(not _is_int(i) or i < 0 for i in self.zero_outputs):
      bad("zero_outputs", self.zero_outputs, "must be output indices (integers >= 0)")


def _is_int(value) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def num_warps_stages(cp) -> tuple[int, int]:
  warps = getattr(cp, "num_warps", None) if cp is not None else None
  stages = getattr(cp, "num_stages", None) if cp is not None else None
  return (DEFAULT_NUM_WARPS if warps is None else int(warps),
          DEFAULT_NUM_STAGES if stages is None else int(stages))


def lowering_options(cp, platform: str, check_bounds: bool = False,
                     debug: bool = False) -> LoweringOptions:
  """What the call's CompilerParams (pallas-prof's, JAX's Triton ones or None) and the
  process's modes ask of its lowering."""
  num_warps, num_stages = num_warps_stages(cp)
  if platform == "rocm" and getattr(cp, "num_stages", None) is None:
    num_stages = ROCM_DEFAULT_NUM_STAGES      # what JAX's built-in backend takes there
  ours = isinstance(cp, CompilerParams)
  cc = cp.compute_capability if ours else None
  if platform == "cuda":
    cc = cc or compat.gpu_compute_capability() or 90
  else:
    cc = cc or 90
  return LoweringOptions(num_warps=num_warps, num_stages=num_stages, compute_capability=cc,
                         enable_fp_fusion=bool(getattr(cp, "enable_fp_fusion", False)),
                         launch_group=int(cp.launch_group or 0) if ours else 0,
                         persistent=int(cp.persistent or 0) if ours else 0,
                         loop_stages=int(cp.loop_stages or 0) if ours else 0,
                         tma=bool(cp.tma) if ours and platform != "rocm" else False,
                         check_bounds=check_bounds,
                         debug=debug)
