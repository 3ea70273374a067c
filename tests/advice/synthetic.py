"""Hand-made KernelFacts for testing one rule's logic at a time. SYNTHETIC: none of these
figures was measured; tests that use them check what a rule concludes from given facts,
never what a kernel does (recorded.py holds the measured profiles)."""
from __future__ import annotations

import dataclasses

from pallas_prof.advice.facts import EqFacts, KernelFacts, Stall
from pallas_prof.advice.hardware import limits, occupancy
from pallas_prof.profiler.attribution_schema import SamplingRun
from pallas_prof.profiler.schema import Rates, WorkModel


def synthetic_eq(index, primitive, *, parent=None, line=10, **kw) -> EqFacts:
  return EqFacts(index=index, path=str(index), primitive=primitive, parent=parent,
                 text=kw.pop("text", f"x = {primitive} y"), user_file="/u/kernel.py",
                 user_line=line, **kw)


def synthetic_work(**kw) -> WorkModel:
  base = dict(source="model", bytes=1 << 26, block_bytes=1 << 26, flops=0, dot_flops=0,
              elementwise_flops=0, transcendentals=0, dot_dtype=None, programs=1024, exact=True,
              notes=[])
  base.update(kw)
  return WorkModel(**base)


def synthetic_rates(efficiency, bound="memory") -> Rates:
  return Rates(None, None, efficiency if bound == "memory" else None,
               efficiency if bound == "compute" else None, None, None, None, bound, efficiency,
               f"{bound}-bound: {efficiency:.0f}% (synthetic)")


def synthetic_facts(equations=(), *, registers=32, num_warps=4, num_stages=3, grid=(1024,),
                    spills=0, shared=0, work=None, median_s=None, rates=None, measured=False,
                    sampling=None, lines=(), stalls=(), generated=None, cc=90) -> KernelFacts:
  lim = limits(cc)
  programs = 1
  for g in grid:
    programs *= g
  work = work or synthetic_work(programs=programs)
  return KernelFacts(
      label="synthetic#000000", name="synthetic", cc=cc, limits=lim, sms=lim.sms,
      sms_assumed=True, grid=tuple(grid), programs=programs, num_warps=num_warps,
      num_stages=num_stages, launch_group=0, tma=False, registers=registers, spills=spills,
      shared_bytes=shared, occupancy=occupancy(num_warps, registers, shared, lim), work=work,
      median_s=median_s, rates=rates, ceilings=None, measured=measured,
      weight_basis="pc_sampling" if measured else "static",
      equations={e.index: e for e in equations}, stalls=tuple(stalls), sampling=sampling,
      lines=tuple(lines), kernel_file="/u/kernel.py", kernel_line=5, generated=generated)


__all__ = ["synthetic_eq", "synthetic_facts", "synthetic_rates", "synthetic_work", "Stall",
           "SamplingRun", "dataclasses"]
