"""Compiles a fuzz program's kernels for a second target besides sm_90, on the CPU.

bench/fuzz/fuzz.py --second-target compiles each program's kernels (those its
last run lowered, named fuzz_<seed>) for sm_80 and gfx942 in turns, by the
program's index in its job, through the compile a user's `compile_for` takes
(pallas_prof.backend.compiling.for_targets, with the workarounds a run would
take where Triton fails). The answer is the target's own:

  compiled       every kernel has the target's binary
  refused        a kernel uses what the target lacks (an fp8 type, more shared
                 memory/LDS than it has): the kernel's to change, not a failure
  stage_failure  any other compile failure: a finding, classified as sm_90's are
                 (testkit/fuzz/sm90.py: the signature tells one bug from another,
                 the diagnosis says whose fault it is)
  no_kernel      nothing was lowered (the program was refused or never ran)
"""
from __future__ import annotations

import dataclasses
import time

from testkit.fuzz import sm90
from testkit.fuzz.programs import Program

SECOND_TARGETS = ("sm_80", "gfx942")


def second_target(index: int) -> str:
  """The second target of a job's `index`-th program: sm_80, gfx942, sm_80, ..."""
  return SECOND_TARGETS[index % len(SECOND_TARGETS)]


@dataclasses.dataclass
class TargetCompile:
  target: str                   # as people write it: "sm_80", "gfx942"
  status: str                   # "compiled" | "refused" | "stage_failure" | "no_kernel"
  kernels: int = 0
  reason: str = ""              # refused: the refusal's first line; stage_failure: the error
  signature: str = ""           # stage_failure: the target and sm90.signature's line
  fault: str | None = None      # stage_failure: whose fault the diagnosis says it is
  seconds: float = 0.0

  def to_dict(self) -> dict:
    out = {"target": self.target, "status": self.status, "kernels": self.kernels,
           "seconds": round(self.seconds, 3)}
    for key in ("reason", "signature", "fault"):
      if getattr(self, key):
        out[key] = getattr(self, key) if key != "reason" else self.reason[:1500]
    return out


def compile_for_target(program: Program, target: str) -> TargetCompile:
  """The kernels the program's last run lowered (call after testkit.fuzz.check.check),
  compiled for `target`; the first kernel refused or failing decides the answer."""
  from pallas_prof import LoweringError
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.compiling.failures import workarounds
  from pallas_prof.backend.compiling.for_targets import compile_for
  records = [r for r in kernel_registry.kernels() if r.name == sm90.kernel_name(program)]
  if not records:
    return TargetCompile(target, "no_kernel")
  t0 = time.perf_counter()
  seen = set()
  for rec in records:
    if rec.generated.key in seen:
      continue
    seen.add(rec.generated.key)
    try:
      outcome = compile_for(rec.generated, target, relower=rec.relower, use_disk_cache=False)
    except LoweringError as e:     # a workaround's lowering failed: not a compile's answer
      return _failed(target, len(seen), e, workarounds.classify_failure(e), t0)
    if outcome.status == "refused":
      return TargetCompile(target, "refused", len(seen), outcome.reason,
                           seconds=time.perf_counter() - t0)
    if outcome.status == "failed":
      return _failed(target, len(seen), outcome.error,
                     workarounds.classify_failure(outcome.error), t0)
  return TargetCompile(target, "compiled", len(seen), seconds=time.perf_counter() - t0)


def _failed(target: str, kernels: int, error: BaseException, failure: dict,
            t0: float) -> TargetCompile:
  return TargetCompile(target, "stage_failure", kernels, f"{type(error).__name__}: {error}",
                       f"{target} {sm90.signature(failure)}", failure.get("fault"),
                       time.perf_counter() - t0)
