"""Compiles a fuzz program's kernels for sm_90 on the CPU and reads their SASS.

Triton's interpreter (the fuzzer's CPU path) never runs Triton's compiler
passes, so a kernel that Triton cannot compile for a GPU (issue 28: a scan
failing ConvertTritonGPUToLLVM) passes on the CPU. bench/fuzz/fuzz.py --compile-sm90
runs each program through pallas-prof on the CPU as usual, then compiles the
kernels that run lowered (pallas_prof.backend.kernel_registry, named fuzz_<seed>) for
sm_90 with Triton's own ptxas (no GPU needed), as a GPU run would (where Triton
fails, through pallas-prof's workarounds, pallas_prof/backend/compiling/failures/workarounds.py),
and disassembles each cubin to look for the ptxas hazard of issue 32
(testkit/fuzz/sass_hazards.py).

A stage failure left after the workarounds is a finding (Triton's or
pallas-prof's, as the diagnosis says; a kernel that asks for more shared memory
or registers than the GPU has is a limitation); a workaround used is counted; an
in-place predicated select is a *hazard lead*, strong where packed 16-bit math
reads it afterwards: not a failure, a program to run on a GPU.
"""
from __future__ import annotations

import dataclasses
import re
import time

from testkit.fuzz.programs import Program
from testkit.fuzz.sass_hazards import HazardLead, hazard_leads, lost_packed_constants

TARGET = ("cuda", 90)


@dataclasses.dataclass
class Sm90Outcome:
  # "compiled" | "stage_failure" | "limitation" (out of shared memory or registers)
  # | "no_kernel" (nothing was lowered: the program was refused or never ran)
  status: str
  kernels: int = 0
  detail: str = ""
  signature: str = ""           # stage failures: what tells one bug from another
  leads: list[HazardLead] = dataclasses.field(default_factory=list)
  seconds: float = 0.0
  # what pallas-prof's workarounds changed to compile (plan_words), one per kernel that
  # needed one; on a failure, whose fault it was ("triton", "kernel", "pallas-prof")
  workarounds: list[str] = dataclasses.field(default_factory=list)
  fault: str | None = None
  # packed 16-bit adds whose constant ptxas dropped (sass_hazards.lost_packed_constants):
  # a miscompile, where pallas-prof's PTX rewrite did not reach one
  lost_constants: list[str] = dataclasses.field(default_factory=list)

  @property
  def strong_leads(self) -> list[HazardLead]:
    return [lead for lead in self.leads if lead.strong]

  def to_dict(self) -> dict:
    out = {"status": self.status, "kernels": self.kernels, "selects": len(self.leads),
           "strong": len(self.strong_leads), "seconds": round(self.seconds, 3)}
    if self.detail:
      out["detail"] = self.detail[:1500]
    if self.signature:
      out["signature"] = self.signature
    if self.leads:
      out["select_lines"] = [lead.select for lead in self.leads[:3]]
    if self.workarounds:
      out["workarounds"] = self.workarounds
    if self.fault:
      out["fault"] = self.fault
    if self.lost_constants:
      out["lost_constants"] = self.lost_constants[:3]
    return out


def kernel_name(program: Program) -> str:
  return f"fuzz_{program.seed}"


def forget(program: Program) -> None:
  """Drops the registry's records of an earlier program with the same name
  (shrunk programs share seeds) and the compiled kernels this process keeps."""
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend import kernel_registry
  kernel_registry.forget(kernel_name(program))
  pcompile.clear_memory_cache()


def compile_sm90(program: Program) -> Sm90Outcome:
  """Compiles the kernels the program's last run lowered for sm_90 (call after
  testkit.fuzz.check.check or run_pallas_prof on the CPU), as a GPU run would: where
  Triton fails, through pallas-prof's workarounds
  (pallas_prof/backend/compiling/failures/workarounds.py; PALLAS_PROF_WORKAROUNDS=0 for
  Triton's own failures)."""
  from pallas_prof import LoweringError
  from pallas_prof.backend.compiling import lineinfo
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.compiling.failures import workarounds
  records = [r for r in kernel_registry.kernels() if r.name == kernel_name(program)]
  if not records:
    return Sm90Outcome("no_kernel")
  t0 = time.perf_counter()
  leads: list[HazardLead] = []
  lost: list[str] = []
  used: list[str] = []
  seen = set()
  for rec in records:
    gk = rec.generated
    if gk.key in seen:
      continue
    seen.add(gk.key)
    try:
      ck = workarounds.compile_working_around(gk, TARGET, rec.relower, use_disk_cache=False)
    except LoweringError as e:
      failure = workarounds.classify_failure(e)
      text = f"{type(e).__name__}: {e}"
      status = "limitation" if failure.get("fault") == "kernel" else "stage_failure"
      return Sm90Outcome(status, len(seen), text, signature(failure), leads,
                         time.perf_counter() - t0, used, failure.get("fault"))
    plan = getattr(ck.generated, "workaround_plan", None)
    if plan is not None:
      used.append(plan_words(plan))
    sass = lineinfo.disassemble(ck.cubin, "-c")
    leads += hazard_leads(sass)
    lost += lost_packed_constants(sass)
  return Sm90Outcome("compiled", len(seen), leads=leads, seconds=time.perf_counter() - t0,
                     workarounds=used, lost_constants=lost)


def plan_words(plan) -> str:
  """A workaround plan in a few words, the same for every program that needed it."""
  forms = sorted({form for _, form in plan.scan_forms})
  return " + ".join([f"scan {form}" for form in forms]
                    + ([f"num_warps={plan.num_warps}"] if plan.num_warps else [])) or "none"


_NUMBERS = re.compile(r"0x[0-9a-f]+|\b\d+\b")


def signature(failure: dict) -> str:
  """One line per bug, whatever the program's shapes: the stage, and the assertion
  (file:line and condition), else the failing pass, else the summary with its numbers
  blanked (workarounds.classify_failure's fields)."""
  stage = failure.get("stage") or "?"
  if failure.get("assertion"):
    return f"{stage}: {failure['assertion'][:240]}"
  if failure.get("failing_pass"):
    return f"{stage}: {failure['failing_pass']} failed"
  return f"{stage}: {_NUMBERS.sub('N', failure.get('summary') or '')[:200]}"


class CompileFailure(Exception):
  """A program's kernel failed a stage of Triton's compile for sm_90 (bench/fuzz/fuzz.py
  raises it inside hypothesis, which then shrinks the program)."""
