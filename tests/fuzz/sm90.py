"""Compiles a fuzz program's kernels for sm_90 on the CPU and reads their SASS.

Triton's interpreter (the fuzzer's CPU path) never runs Triton's compiler
passes, so a kernel that Triton cannot compile for a GPU (issue 28: a scan
failing ConvertTritonGPUToLLVM) passes on the CPU. bench/fuzz.py --compile-sm90
runs each program through pallas-prof on the CPU as usual, then compiles the
kernels that run lowered (pallas_prof.backend.registry, named fuzz_<seed>) for
sm_90 with Triton's own ptxas (no GPU needed), and disassembles each cubin to
look for the ptxas hazard of issue 32 (tests/fuzz/sass_hazards.py).

A stage failure is a finding (pallas-prof's bug or Triton's, never a
documented limitation, save running out of shared memory or registers); an
in-place predicated select is a *hazard lead*, strong where packed 16-bit math
reads it afterwards: not a failure, a program to run on a GPU.
"""
from __future__ import annotations

import dataclasses
import os
import re
import time

from tests.fuzz.programs import Program
from tests.fuzz.sass_hazards import HazardLead, hazard_leads

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
    return out


def kernel_name(program: Program) -> str:
  return f"fuzz_{program.seed}"


def forget(program: Program) -> None:
  """Drops the registry's records of an earlier program with the same name
  (shrunk programs share seeds) and the compiled kernels this process keeps."""
  from pallas_prof.backend import compile as pcompile
  from pallas_prof.backend import registry
  registry.forget(kernel_name(program))
  pcompile.clear_memory_cache()


def compile_sm90(program: Program) -> Sm90Outcome:
  """Compiles the kernels the program's last run lowered for sm_90 (call after
  tests.fuzz.check.check or run_pallas_prof on the CPU)."""
  from pallas_prof import LoweringError
  from pallas_prof.backend import compile as pcompile
  from pallas_prof.backend import lineinfo, registry
  records = [r for r in registry.kernels() if r.name == kernel_name(program)]
  if not records:
    return Sm90Outcome("no_kernel")
  t0 = time.perf_counter()
  leads: list[HazardLead] = []
  seen = set()
  for rec in records:
    gk = rec.generated
    if gk.key in seen:
      continue
    seen.add(gk.key)
    log, offset = _worker_log()
    try:
      ck = pcompile.compile_kernel(gk, TARGET, use_disk_cache=False)
    except LoweringError as e:
      text = f"{type(e).__name__}: {e}"
      status = "limitation" if "out of resource" in text else "stage_failure"
      said = _worker_said(log, offset)
      if said:
        text += f"\n  the compile worker said: {said}"
      return Sm90Outcome(status, len(seen), text, signature(e, said), leads,
                         time.perf_counter() - t0)
    leads += hazard_leads(lineinfo.disassemble(ck.cubin, "-c"))
  return Sm90Outcome("compiled", len(seen), leads=leads, seconds=time.perf_counter() - t0)


_ADDRESSES = re.compile(r"0x[0-9a-f]+|\b\d+\b")
_ASSERTION = re.compile(r"(?P<where>[\w./+-]+\.(?:cpp|cc|h|hpp|inc):\d+):.*?Assertion [`']"
                        r"(?P<condition>.*)' failed")
_PIPELINE = re.compile(r"Pipeline failed while executing \[`(?P<pass>[\w:.-]+)`")
_LLVM_ERROR = re.compile(r"LLVM ERROR: .*")


def _worker_log() -> tuple[str | None, int]:
  """The compile worker's stderr log (Triton's C++ assertions and MLIR diagnostics
  land there, not in the Python error) and its size now."""
  from pallas_prof.backend import compile_worker
  path = getattr(getattr(compile_worker, "_worker", None), "log_path", None)
  try:
    return path, os.path.getsize(path) if path else 0
  except OSError:
    return path, 0


def _worker_said(path: str | None, offset: int) -> str:
  """The assertion (file:line and condition), else the failing pass, else an LLVM
  error, that the worker wrote after `offset`; "" when none."""
  from pallas_prof.backend import compile_worker
  now = getattr(getattr(compile_worker, "_worker", None), "log_path", None)
  if now != path:       # a fresh worker (the old one died): its whole log is new
    path, offset = now, 0
  try:
    with open(path, errors="replace") as f:
      f.seek(offset)
      text = f.read()
  except (OSError, TypeError):
    return ""
  m = _ASSERTION.search(text)
  if m:
    return f"{m.group('where').rsplit('/', 1)[-1]}: Assertion `{m.group('condition')}' failed"
  m = _PIPELINE.search(text) or _LLVM_ERROR.search(text)
  return m.group(0) if m else ""


def signature(error: BaseException, said: str = "") -> str:
  """The stage, and the worker's assertion or failing pass (else the first line of
  the error), numbers blanked but an assertion's source line: one per bug,
  whatever the program's shapes."""
  stage = getattr(error, "stage", None) or "?"
  if said:
    return f"{stage}: {said[:240]}"
  reason = (getattr(error, "reason", None) or str(error)).strip().splitlines()
  first = reason[0] if reason else ""
  return f"{stage}: {_ADDRESSES.sub('N', first)[:200]}"


class CompileFailure(Exception):
  """A program's kernel failed a stage of Triton's compile for sm_90 (bench/fuzz.py
  raises it inside hypothesis, which then shrinks the program)."""
