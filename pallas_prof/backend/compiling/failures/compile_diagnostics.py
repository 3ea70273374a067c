"""What a failed compile's diagnostics say: which pass failed, the assertion,
the op and its layout, and which equations (so which of the user's lines) it
comes from; and whose fault it is.

Triton's C++ writes its diagnostics to the compile worker's stderr
(compile_worker.compiler_output keeps them per compile); its Python error
says little more than "PassManager::run failed". This module reads both,
and the text of every stage the compile finished (triton_run keeps them for
a failed compile), as plain text: no Triton, no JAX.

Equations are found two ways:
  - locations: an MLIR error at `file:line:col` of the generated source, a
    ptxas error at a PTX line (its `.loc`), Triton's front end's line: each
    generated line belongs to one equation (GeneratedKernel.line_map);
  - the op kind: where the failing op has no location (an assertion in
    ScanOpToLLVM.cpp names none), the kind of op that C++ file lowers
    (triton_faults.OPS_OF_SOURCE) and the ops of that kind in the last IR
    that was printed (with their locations, types and layouts); without any
    IR, the primitives that lower to that kind of op.
"""
from __future__ import annotations

import dataclasses
import os
import re

from ..lineinfo import MlirLocs, Resolver, ptx_locations
from .triton_faults import (IR_NAMES, OPS_OF_PASS, OPS_OF_SOURCE, PRIMITIVES_OF_OP,
                            asks_too_much, fault_of)

_ASSERTION = re.compile(r"(?P<file>[\w./+-]+\.(?:cpp|cc|h|hpp|inc)):(?P<line>\d+):\s*"
                        r"(?P<function>.*?):\s*Assertion [`'](?P<condition>.*)' failed")
_PIPELINE = re.compile(r"Pipeline failed while executing \[`(?P<pass>[\w:.-]+)`")
_LLVM_ERROR = re.compile(r"LLVM ERROR: (?P<text>.*)")
_MLIR_DIAG = re.compile(r"^(?:loc\()?\"?(?P<file>[^\s\"]+?)\"?:(?P<line>\d+):(?P<col>\d+)\)?:\s*"
                        r"(?P<severity>error|note|warning|remark):\s*(?P<text>.*)$")
_OP_IN_TEXT = re.compile(r"'(?P<op>[a-z_]+\.[\w.]+)' op\b")
_CURRENT_OP = re.compile(r'see current operation:\s*(?:%\S+\s*=\s*)?"?(?P<op>[a-z_]+\.[\w.]+)')
# ptxas names itself `ptxas` (Triton 3.6) or `ptxas-blackwell` (3.9's, for every target)
_PTXAS = re.compile(r"ptxas(?:-\w+)? (?P<file>\S+), line (?P<line>\d+); (?P<severity>error|warning)"
                    r"\s*:\s*(?P<text>.*)")
_PTXAS_FATAL = re.compile(r"ptxas(?:-\w+)? fatal\s*:\s*(?P<text>.*)")
_LAYOUT_ALIAS = re.compile(r"^(#[\w]+) = (#ttg\.[\w]+<.*>|#[\w.]+<.*>)\s*$")
# what MLIR says about the pipeline as a whole, which names no op of the kernel
_GENERIC = ("Failures have been detected while processing an MLIR pass pipeline",)

MAX_OPS = 8           # ops of the failing kind listed
MAX_MESSAGES = 8      # diagnostics kept, the first ones


@dataclasses.dataclass(frozen=True)
class FailedOp:
  """An op of the kind that failed, as the last IR printed before the failure shows it."""
  op: str                           # "tt.scan"
  eqn_index: int | None             # the equation whose generated line made it
  generated_line: int | None
  attributes: str                   # "axis = 0 : i32, reverse = false"
  types: str                        # "(tensor<16x1xf32, #blocked>) -> tensor<16x1xf32, #blocked>"
  layouts: tuple[str, ...]          # "#blocked = #ttg.blocked<{...}>", each layout it names

  def describe(self) -> str:
    attrs = f" <{self.attributes}>" if self.attributes else ""
    layouts = "; ".join(self.layouts)
    return f"{self.op}{attrs} : {self.types}" + (f"  with {layouts}" if layouts else "")


@dataclasses.dataclass(frozen=True)
class Diagnosis:
  """A failed compile, read: what failed, where in the kernel, and whose fault it is."""
  stage: str                        # the stage that failed: ttir, ttgir, llir, ptx, cubin
  kind: str                         # assertion | pass failure | llvm error | ptxas | crash |
                                    # front end | resources | error | machine (machine_faults.py)
  summary: str                      # one line: what failed
  failing_pass: str | None = None   # "ConvertTritonGPUToLLVM"
  assertion: str | None = None      # "ScanOpToLLVM.cpp:158 in AddPartialReduce: `cond`"
  assertion_source: str | None = None   # "ScanOpToLLVM.cpp"
  messages: tuple[str, ...] = ()    # MLIR's errors and notes, LLVM ERROR, ptxas's errors
  op_kind: str | None = None        # the kind of op that failed ("tt.scan"), if known
  ops: tuple[FailedOp, ...] = ()    # the kernel's ops of that kind
  equations: tuple[int, ...] = ()   # the equations it points at (indices), most likely first
  mapped_by: str = ""               # how they were found
  fault: str = "triton"             # triton | kernel | pallas-prof | machine
  fault_reason: str = ""
  mlir_reproducer: str | None = None    # the module MLIR dumped with its pass pipeline

  def to_dict(self) -> dict:
    out = dataclasses.asdict(self)
    out.pop("mlir_reproducer")
    out["ops"] = [dict(dataclasses.asdict(o), text=o.describe()) for o in self.ops]
    return out


def diagnose(gk, stage: str, error_type: str, message: str, *, output: str = "",
             ir: dict[str, str] | None = None, lineno: int | None = None,
             crashed: str | None = None) -> Diagnosis:
  """Reads a failed compile of `gk`: Triton's error (`error_type`, `message`, the front
  end's `lineno`), what the compile wrote to stderr (`output`), the text of the
  stages it finished (`ir`: stage -> text), and for a worker that died, how (`crashed`)."""
  ir = dict(ir or {})
  text = f"{output}\n{message}"
  resolver = Resolver(gk)
  assertion = _ASSERTION.search(text)
  pipeline = _PIPELINE.search(text)
  llvm_error = _LLVM_ERROR.search(text)
  messages, located = _mlir_messages(text, resolver)
  ptxas, ptx_eqns = _ptxas_messages(text, ir.get("ptx", ""), resolver)
  failing_pass = pipeline.group("pass") if pipeline else None
  source = os.path.basename(assertion.group("file")) if assertion else None
  op_kind = _op_kind(text, source, failing_pass)
  ir_stage, last_ir = _ir_before(stage, ir)
  ops = _ops_in_ir(last_ir, op_kind, resolver) if op_kind and last_ir else ()
  eqns, mapped_by = _equations(gk, lineno, located, ptx_eqns, ops, op_kind, source,
                               failing_pass, ir_stage)
  kind = ("crash" if crashed else "assertion" if assertion else "llvm error" if llvm_error
          else "ptxas" if ptxas else "pass failure" if failing_pass
          else "front end" if error_type == "CompilationError" else "error")
  assertion_text = None
  if assertion:
    assertion_text = (f"{source}:{assertion.group('line')} in "
                      f"{_short_function(assertion.group('function'))}: "
                      f"`{assertion.group('condition')}`")
  # what the failure says in words (the IR an MLIR failure dumps could say anything)
  said = "\n".join([message, *ptxas, *messages, llvm_error.group(0) if llvm_error else ""])
  if kind in ("front end", "error", "pass failure") and asks_too_much(said):
    kind = "resources"
  fault, why = fault_of(kind, stage, said, has_inline_asm="inline_asm" in gk.source)
  return Diagnosis(
      stage=stage, kind=kind,
      summary=_summary(kind, stage, failing_pass, assertion_text, llvm_error, ptxas, crashed,
                       message),
      failing_pass=failing_pass, assertion=assertion_text, assertion_source=source,
      messages=tuple((ptxas + messages + ([llvm_error.group(0)] if llvm_error else []))
                     [:MAX_MESSAGES]),
      op_kind=op_kind, ops=tuple(ops[:MAX_OPS]), equations=tuple(eqns), mapped_by=mapped_by,
      fault=fault, fault_reason=why, mlir_reproducer=_mlir_reproducer(output))


def _short_function(signature: str) -> str:
  """`void AddPartialReduce(SmallVector<...> &, ...)` -> `AddPartialReduce`."""
  head = signature.split("(", 1)[0].strip()
  return head.split()[-1] if head else signature


def _summary(kind, stage, failing_pass, assertion, llvm_error, ptxas, crashed, message) -> str:
  where = f"its {failing_pass} pass" if failing_pass else f"the {stage} stage"
  if kind == "crash":
    return f"Triton's compiler crashed ({crashed}) in the {stage} stage" + (
        f": assertion {assertion}" if assertion else "")
  if assertion:
    return f"{where} hit a failed assertion: {assertion}"
  if llvm_error:
    return f"{where} stopped with {llvm_error.group(0).strip()}"
  if ptxas:
    return f"ptxas rejected the PTX Triton generated: {ptxas[0]}"
  if failing_pass:
    return f"{where} failed"
  last = message.strip().splitlines()[-1] if message.strip() else "no message"
  return f"the {stage} stage failed: {last[:300]}"


def _mlir_messages(text: str, resolver: Resolver) -> tuple[list[str], list[int]]:
  """MLIR's located diagnostics (`file:line:col: error: ...`), as short lines, and
  the equations of those on lines of the generated source."""
  messages, eqns = [], []
  for line in text.splitlines():
    m = _MLIR_DIAG.match(line.strip())
    if not m or m.group("severity") not in ("error", "note"):
      continue
    body = m.group("text").strip()
    if any(body.startswith(g) for g in _GENERIC):
      continue
    if body.startswith("Pipeline failed while executing"):
      continue
    where = f"{os.path.basename(m.group('file'))}:{m.group('line')}"
    if resolver.is_generated(m.group("file")):
      index = resolver.gk.line_map.get(int(m.group("line")))
      if index is not None:
        eqns.append(index)
        where += f" [{index}]"
    messages.append(f"{m.group('severity')} at {where}: {body[:300]}")
  return messages, eqns


def _ptxas_messages(text: str, ptx: str, resolver: Resolver) -> tuple[list[str], list[int]]:
  """ptxas's errors, each with the equation its PTX line came from (through `.loc`)."""
  messages, eqns = [], []
  per_line = ptx_locations(ptx)[1] if ptx else []
  for m in _PTXAS.finditer(text):
    if m.group("severity") != "error":
      continue
    line = int(m.group("line"))
    where = f"PTX line {line}"
    if 0 < line <= len(per_line) and per_line[line - 1]:
      generated, index = resolver.resolve(per_line[line - 1])
      if index is not None:
        eqns.append(index)
        where += f" (generated line {generated}, equation [{index}])"
    messages.append(f"{where}: {m.group('text').strip()}")
  for m in _PTXAS_FATAL.finditer(text):
    messages.append(f"ptxas fatal: {m.group('text').strip()}")
  return messages, eqns


def _op_kind(text: str, source: str | None, failing_pass: str | None) -> str | None:
  """The kind of op that failed: named by MLIR, else the one the asserting C++ file
  lowers, else the one the failing pass is about."""
  m = _CURRENT_OP.search(text) or _OP_IN_TEXT.search(text)
  if m:
    return m.group("op")
  if source:
    stem = os.path.splitext(source)[0]
    for key, op in OPS_OF_SOURCE.items():
      if key in stem:
        return op
  if failing_pass:
    for key, op in OPS_OF_PASS.items():
      if key in failing_pass:
        return op
  return None


def _ir_before(stage: str, ir: dict[str, str]) -> tuple[str, str]:
  """(stage, text): the MLIR the failing stage started from (the last one printed),
  with its locations."""
  for name in ("ttgir", "ttir") if stage in ("llir", "ptx", "cubin") else ("ttir",):
    if ir.get(name):
      return name, ir[name]
  return "", ""


def _ops_in_ir(text: str, op_kind: str, resolver: Resolver) -> list[FailedOp]:
  """The ops of `op_kind` in an MLIR text: attributes, types, layouts, equation.
  An op with a region (tt.scan, tt.reduce) opens on one line and has its types
  and location on the line that closes it."""
  names = IR_NAMES.get(op_kind, (op_kind,))
  lines = text.splitlines()
  locs = MlirLocs(text)
  layouts = {}
  for line in lines:
    m = _LAYOUT_ALIAS.match(line.strip())
    if m:
      layouts[m.group(1)] = m.group(2)
  found = []
  for i, line in enumerate(lines):
    m = re.search(r'=\s*"?(' + "|".join(re.escape(n) for n in names) + r')"?[\s(]', line)
    if not m:
      continue
    closing = line
    if line.rstrip().endswith("({"):
      depth = _indent(line)
      closing = next((lines[j] for j in range(i + 1, len(lines))
                      if _indent(lines[j]) == depth and lines[j].lstrip().startswith("})")),
                     line)
    attrs = re.search(r"<\{(.*?)\}>", line)
    typed = closing.split(" loc(")[0]
    type_text = typed.rsplit(" : ", 1)[1] if " : " in typed else ""
    chain = locs.line_chain(closing) or []
    generated, index = resolver.resolve(chain)
    named = sorted(set(re.findall(r"#[a-z]+\d*", type_text)) & set(layouts))
    found.append(FailedOp(op=m.group(1), eqn_index=index, generated_line=generated,
                          attributes=re.sub(r" : i32", "", attrs.group(1)) if attrs else "",
                          types=_plain_types(type_text),
                          layouts=tuple(f"{n} = {layouts[n]}" for n in named)))
  return found


def _plain_types(text: str) -> str:
  return re.sub(r"\s+", " ", text).strip()


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip(" "))


def _equations(gk, lineno, located, ptx_eqns, ops, op_kind, source, failing_pass, ir_stage):
  """The equations a failure points at, most direct evidence first, and how."""
  if lineno is not None:
    eqn = _front_end_equation(gk, lineno)
    if eqn is not None:
      return [eqn], "Triton's front end named the generated line"
  if located:
    return _unique(located), "MLIR's diagnostics located it on generated lines"
  if ptx_eqns:
    return _unique(ptx_eqns), "ptxas named PTX lines, whose line info leads to generated lines"
  basis = (f"the assertion is in {source}, which lowers {op_kind} ops" if source
           else f"the failing pass, {failing_pass}, works on {op_kind} ops" if failing_pass
           else f"MLIR named a {op_kind} op")
  by_ir = [o.eqn_index for o in ops if o.eqn_index is not None]
  if by_ir:
    return _unique(by_ir), (f"the failing op has no location; {basis}: the kernel's "
                            f"{op_kind} ops, found with their locations in {ir_stage}")
  prims = PRIMITIVES_OF_OP.get(op_kind or "", ())
  by_prim = [e.index for e in gk.eqns if e.primitive in prims]
  if by_prim:
    return _unique(by_prim), (f"the failing op has no location; {basis}: the equations "
                              f"whose primitives lower to {op_kind}")
  return [], "no location, and no op kind to go by"


def _front_end_equation(gk, lineno: int) -> int | None:
  """Triton's front end numbers lines from the kernel's `def`."""
  for i, line in enumerate(gk.source.splitlines(), start=1):
    if line.startswith(f"def {gk.name}("):
      return gk.line_map.get(lineno + i - 1)
  return None


def _unique(items):
  seen, out = set(), []
  for x in items:
    if x not in seen:
      seen.add(x)
      out.append(x)
  return out


def _mlir_reproducer(output: str) -> str | None:
  """The module MLIR dumps when a pass pipeline fails (its reproducer, with the
  pipeline in an `external_resources` block), as text for triton-opt."""
  end = output.find("#-}")
  if end < 0:
    return None
  start = output.rfind("module attributes", 0, end)
  if start < 0:
    return None
  # the layout aliases printed before the module belong to it
  head = output.rfind("\n", 0, start)
  lines_before = output[:head].splitlines()
  aliases = []
  for line in reversed(lines_before):
    if line.startswith("#") and " = " in line:
      aliases.insert(0, line)
    else:
      break
  return "\n".join(aliases + [output[start:end + 3]]) + "\n"
