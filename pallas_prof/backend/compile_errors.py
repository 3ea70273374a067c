"""A failed compile as a LoweringError that points at the equation.

Triton reports a failure with a line of the generated file (its front end)
or an IR location (later stages); both lead through the GeneratedKernel's
line map to the jaxpr equation and the user's line. A kernel that needs more
shared memory than the target has fails here too, naming the equations that
allocate it.
"""
from __future__ import annotations

from .errors import LoweringError
from .lineinfo import equations_in_ir, generated_lines_in_message
from .artifacts import GeneratedKernel
from .triton_run import STAGES, StageRecord

# Per-block shared memory a kernel may use (opt-in maximum), by compute capability.
SHARED_MEMORY_LIMIT = {70: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912,
                       89: 101376, 90: 232448, 100: 232448, 120: 101376}


class TritonFailure(Exception):
  """A Triton error reported as data (from this process or the compile worker)."""

  def __init__(self, kind: str, message: str, lineno: int | None = None):
    super().__init__(message)
    self.kind = kind
    self.node = type("Node", (), {"lineno": lineno})() if lineno is not None else None

  def __str__(self) -> str:
    return f"{self.kind}: {self.args[0]}" if self.args[0] else self.kind


def next_stage(records: list[StageRecord]) -> str:
  """The stage a compile failed in: the first it did not finish."""
  done = {r.stage for r in records}
  for s in STAGES:
    if s not in done:
      return s
  return "cubin"


def check_shared_memory(ck, gk: GeneratedKernel) -> None:
  """LoweringError if the compiled kernel needs more shared memory than its target has."""
  limit = SHARED_MEMORY_LIMIT.get(ck.target[1])
  if limit is None or ck.shared_bytes <= limit:
    return
  eqns = equations_in_ir(gk, ck.asm.get("ttgir", ""), ("local_alloc",))
  raise LoweringError(
      f"the kernel needs {ck.shared_bytes} bytes of shared memory; sm_{ck.target[1]} "
      f"allows {limit} per block",
      hint="use smaller blocks (BlockSpec / pl.ds sizes), fewer num_stages, or a "
           "narrower dtype for the operands staged through shared memory",
      kernel=gk.name, eqn=eqns[0] if eqns else None, stage="ttgir",
      details={"shared memory users": ", ".join(f"[{e.index}] {e.primitive} @ {e.location}"
                                               for e in eqns) or "unknown",
               "num_stages": gk.num_stages},
      jaxpr_text=gk.jaxpr_text)


def compile_error(gk: GeneratedKernel, error: BaseException, stage: str) -> LoweringError:
  """A Triton failure as a LoweringError pointing at the equation if we can."""
  text = str(error)
  eqn = None
  line = getattr(getattr(error, "node", None), "lineno", None)
  if line is not None:
    # Triton numbers lines from the kernel's `def`
    eqn = gk.eqn_at_line(line + _def_line(gk) - 1)
  if eqn is None:
    eqn = next((e for e in map(gk.eqn_at_line, generated_lines_in_message(gk, text))
                if e is not None), None)
  first = text.strip().splitlines()[-1] if text.strip() else type(error).__name__
  hint = "this is Triton rejecting the generated code; run `pallas-prof show` on the kernel " \
         "to read it, and try smaller blocks or another num_warps/num_stages"
  if "out of resource" in text or "shared memory" in text.lower():
    hint = "use smaller blocks or fewer num_stages"
  return LoweringError(f"Triton failed in the {stage} stage: {first[:400]}", hint=hint,
                       kernel=gk.name, eqn=eqn, stage=stage, cause=error,
                       jaxpr_text=gk.jaxpr_text)


def _def_line(gk: GeneratedKernel) -> int:
  for i, line in enumerate(gk.source.splitlines(), start=1):
    if line.startswith(f"def {gk.name}("):
      return i
  return 1
