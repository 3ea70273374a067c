"""A failed compile as a CompileError that points at the equations and says why.

Triton's error, what its compile wrote to stderr and the stages it finished
are read by compile_diagnostics.py (the failing pass, the assertion, the op
and its layout, the equations, whose fault); a fault of Triton's gets a
reproducer (reproducer.py). A kernel that needs more shared memory than the
target has fails here too, naming the equations that allocate it.
"""
from __future__ import annotations

from ...artifacts import GeneratedKernel
from .compile_diagnostics import Diagnosis, diagnose
from ...errors import CompileError
from ..lineinfo import equations_in_ir
from . import target_features
from ..triton_compat import triton_release
from .reproducer import write as write_reproducer
from .triton_faults import ADVICE_OF_OP
from ..triton_run import StageRecord, stages_of

# Per-block shared memory a kernel may use (opt-in maximum), by compute capability
# (CUDA C Programming Guide, "Technical Specifications per Compute Capability");
# AMD's by gfx name, the LDS a workgroup may allocate (AMD's CDNA3 ISA guide for
# gfx942; CDNA4's for gfx950, which grew it; RDNA's per workgroup likewise).
SHARED_MEMORY_LIMIT = {70: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912,
                       89: 101376, 90: 232448, 100: 232448, 103: 232448, 120: 101376,
                       "gfx90a": 65536, "gfx942": 65536, "gfx950": 163840,
                       "gfx1100": 65536, "gfx1200": 65536, "gfx1201": 65536}


class TritonFailure(Exception):
  """A Triton error reported as data (from this process or the compile worker), with
  what the compile wrote to stderr (`output`) and the stages it finished (`ir`)."""

  def __init__(self, kind: str, message: str, lineno: int | None = None, *,
               output: str = "", ir: dict[str, str] | None = None):
    super().__init__(message)
    self.kind = kind
    self.node = type("Node", (), {"lineno": lineno})() if lineno is not None else None
    self.output = output
    self.ir = dict(ir or {})

  @classmethod
  def from_answer(cls, err: dict) -> "TritonFailure":
    """From a worker's answer's "error" (triton_run.run_triton, worker_output.with_output)."""
    return cls(err["type"], err["message"], err.get("lineno"), output=err.get("stderr", ""),
               ir=err.get("ir"))

  def __str__(self) -> str:
    return f"{self.kind}: {self.args[0]}" if self.args[0] else self.kind


def next_stage(records: list[StageRecord], backend: str = "cuda") -> str:
  """The stage a compile failed in: the first it did not finish."""
  done = {r.stage for r in records}
  stages = stages_of(backend)
  for s in stages:
    if s not in done:
      return s
  return stages[-1]


def check_shared_memory(ck, gk: GeneratedKernel) -> None:
  """CompileError if the compiled kernel needs more shared memory than its target has."""
  limit = SHARED_MEMORY_LIMIT.get(ck.target[1])
  if limit is None or ck.shared_bytes <= limit:
    return
  eqns = equations_in_ir(gk, ck.asm.get("ttgir", ""), ("local_alloc",))
  memory = "shared memory" if ck.target.backend == "cuda" else "LDS (shared memory)"
  reason = (f"the kernel needs {ck.shared_bytes} bytes of {memory}; {ck.target.name} "
            f"allows {limit} per block")
  diagnosis = Diagnosis(stage="ttgir", kind="resources", summary=reason,
                        op_kind="ttg.local_alloc", equations=tuple(e.index for e in eqns),
                        mapped_by="the ttgir's shared-memory allocations, by their locations",
                        fault="kernel",
                        fault_reason="the kernel asks for more shared memory than the GPU has")
  raise CompileError(
      reason, hint="use smaller blocks (BlockSpec / pl.ds sizes), fewer num_stages, or a "
                   "narrower dtype for the operands staged through shared memory",
      kernel=gk.name, eqn=eqns[0] if eqns else None, stage="ttgir", diagnosis=diagnosis,
      details={"shared memory users": ", ".join(f"[{e.index}] {e.primitive} @ {e.location}"
                                               for e in eqns) or "unknown",
               "num_stages": gk.num_stages},
      jaxpr_text=gk.jaxpr_text, ref_names=gk.ref_names)


def compile_error(gk: GeneratedKernel, error: BaseException, stage: str,
                  request: dict | None = None, crashed: str | None = None) -> CompileError:
  """A failed compile of `gk` (`request`: what was asked of Triton) as a CompileError."""
  text = str(error)
  output = getattr(error, "output", "") or ""
  lineno = getattr(getattr(error, "node", None), "lineno", None)
  diagnosis = diagnose(gk, stage, getattr(error, "kind", type(error).__name__),
                       error.args[0] if error.args else text, output=output,
                       ir=getattr(error, "ir", None), lineno=lineno, crashed=crashed)
  refused = target_features.refusal(gk, diagnosis, text, request)
  if refused is not None:        # no bug to reproduce: the target lacks what the kernel uses
    return refused
  reproducer = {}
  if diagnosis.fault == "triton" and request is not None:
    reproducer = write_reproducer(gk, request, diagnosis.summary, output,
                                  diagnosis.mlir_reproducer)
  eqns = [gk.eqns[i] for i in diagnosis.equations]
  return CompileError(
      _reason(diagnosis), diagnosis=diagnosis, equations=eqns, reproducer=reproducer,
      hint=_hint(gk, diagnosis, reproducer), kernel=gk.name, stage=stage, cause=error,
      details=_details(gk, diagnosis, reproducer), jaxpr_text=gk.jaxpr_text,
      ref_names=gk.ref_names)


def silent_fault_error(gk: GeneratedKernel, d: Diagnosis, stage: str = "llir") -> CompileError:
  """A compile that succeeded into code a Triton bug makes wrong (silent_faults.py), as a
  CompileError: what the workarounds get around, or what is raised where they cannot."""
  eqns = [gk.eqns[i] for i in d.equations]
  return CompileError(_reason(d), diagnosis=d, equations=eqns, hint=_hint(gk, d, {}),
                      kernel=gk.name, stage=stage, details=_details(gk, d, {}),
                      jaxpr_text=gk.jaxpr_text, ref_names=gk.ref_names)


def _reason(d: Diagnosis) -> str:
  whose = {"triton": f"Triton {triton_release()}: "}.get(d.fault, "")
  return f"{whose}{d.summary}"


def _details(gk: GeneratedKernel, d: Diagnosis, reproducer: dict) -> dict[str, str]:
  out = {}
  if d.failing_pass:
    out["failing pass"] = f"{d.failing_pass} ({d.stage} stage)"
  if d.assertion:
    out["assertion"] = d.assertion
  if d.messages:
    out["diagnostics"] = "\n".join(d.messages)
  if d.op_kind:
    out["failing op"] = d.op_kind + ("" if d.ops else " (no op of that kind found in the IR)")
  ops: dict[tuple, list[str]] = {}      # the same op of one line (an unrolled loop's), once
  for op in d.ops:
    e = gk.eqns[op.eqn_index] if op.eqn_index is not None else None
    key = (e.primitive, e.location, op.describe()) if e else \
        (None, f"generated line {op.generated_line}", op.describe())
    ops.setdefault(key, []).append(str(e.index) if e else "")
  if ops:
    out["its ops in the kernel"] = "\n".join(
        (f"[{', '.join(indices)}] {primitive} at {where}: " if primitive else f"{where}: ")
        + text for (primitive, where, text), indices in ops.items())
  if d.equations:
    out["how the lines were found"] = d.mapped_by
  out["fault"] = f"{_FAULT_WORDS[d.fault]}: {d.fault_reason}"
  if reproducer.get("script"):
    out["reproducer"] = f"python {reproducer['script']}" + (
        f"  (MLIR's own: {reproducer['mlir']})" if reproducer.get("mlir") else "")
  return out


_FAULT_WORDS = {"triton": "Triton's, not your kernel's", "kernel": "the kernel's",
                "pallas-prof": "pallas-prof's",
                "machine": "the machine's, not Triton's nor the kernel's"}


def _hint(gk: GeneratedKernel, d: Diagnosis, reproducer: dict) -> str:
  if d.fault == "kernel":
    if "numel" in " ".join(d.messages) + d.summary:
      return "use smaller blocks (BlockSpec block shapes): a block of this many elements " \
             "is more than Triton allows"
    return "use smaller blocks or fewer num_stages"
  if d.fault == "pallas-prof":
    return (f"this is pallas-prof generating code Triton rejects: please report it with the "
            f"generated source ({gk.path}); `pallas-prof show` prints it")
  advice = ADVICE_OF_OP.get(d.op_kind or "", "try smaller blocks or another num_warps")
  report = (f"; `python {reproducer['script']}` reproduces it without pallas-prof or a GPU, "
            "for a Triton issue") if reproducer.get("script") else ""
  return f"until Triton is fixed: {advice}{report}"
