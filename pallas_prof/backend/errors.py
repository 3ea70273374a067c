"""KernelError and its kinds: what went wrong, where in the user's code, and what to do."""
from __future__ import annotations

import os
from typing import Any

from . import compat
from .equation_text import aval_texts, with_ref_names


class KernelError(Exception):
  """A kernel that failed: LoweringError (and CompileError) before it ran,
  running/runtime_errors.KernelRuntimeError while it ran. One set of typed fields, so
  that instrument/errors.py renders any of them from the error alone:

  reason (what went wrong), hint (what to do), kernel (its name), eqn (the
  EquationRecord of the failing equation, with the user's file:line), jaxpr_text
  (the kernel's printed jaxpr), rule (the primitive whose rule failed), stage (the
  compiler stage, "run" at run time), details (label -> text, more lines), cause (the
  underlying exception), source_excerpt, ref_names ((the jaxpr's name, the kernel's
  name) of its refs, so that an equation names a ref as the kernel does: `x_ref`, not
  `b`); equations (every equation a failure points at, `eqn` the first) and where
  (what ran a kernel that failed at run time) where a kind has them.
  """

  at_run_time: bool = False           # instrument/errors.py titles the report by it
  where: str | None = None
  equations: tuple = ()

  def __init__(self, reason: str, *, hint: str | None = None, kernel: str | None = None,
               eqn=None, jaxpr_text: str | None = None, rule: str | None = None,
               stage: str | None = None, details: dict[str, Any] | None = None,
               cause: BaseException | None = None, source_excerpt: str | None = None,
               ref_names=(), message: str | None = None):
    self.reason: str = reason
    self.hint: str | None = hint
    self.kernel: str | None = kernel
    self.eqn = eqn
    self.jaxpr_text: str | None = jaxpr_text
    self.rule: str | None = rule
    self.stage: str | None = stage
    self.details: dict[str, Any] = dict(details or {})
    self.cause: BaseException | None = cause
    self.source_excerpt: str | None = source_excerpt
    self.ref_names: tuple = tuple(ref_names or ())
    # str(error): `message` where the raiser words it whole, else composed from the fields
    super().__init__(message or self._message())

  def _message(self) -> str:
    """str(error): each kind words its own; this is the plain reason and hint."""
    return self.reason + (f"\n  hint: {self.hint}" if self.hint else "")

  def named(self, text: str | None) -> str | None:
    """`text` (an equation, the jaxpr) with the kernel's names for its refs."""
    return with_ref_names(text, self.ref_names)

  @property
  def primitive(self) -> str | None:
    return None if self.eqn is None else self.eqn.primitive

  @property
  def location(self) -> str | None:
    if self.eqn is None or self.eqn.file is None:
      return None
    return f"{self.eqn.file}:{self.eqn.line}"


class LoweringError(KernelError, compat.ErrorWithUserContext):
  """A Pallas kernel could not be lowered (or compiled) by pallas-prof.

  The message names the kernel, the primitive, the equation and the user's
  file:line, and says what is supported instead; the fields are KernelError's.

  Its base class tells JAX the error already carries the user's context, so
  JAX does not chain a copy of it (the message printed twice); the backend's
  frames leave JAX's filtered tracebacks (pallas_call_rule.py), so outside
  `pallas-prof run` the user sees their own frames and this message once.
  """

  def _message(self) -> str:
    parts = []
    where = f" in kernel `{self.kernel}`" if self.kernel else ""
    if self.eqn is not None:
      parts.append(f"cannot lower `{self.eqn.primitive}`{where}: {self.reason}")
      parts.append(f"  equation: {self.named(self.eqn.text)}")
      if self.eqn.in_avals:
        parts.append(f"  operands: {aval_texts(self.eqn.in_avals)}")
      if self.eqn.file is not None:
        fn = f" (in {self.eqn.function})" if self.eqn.function else ""
        parts.append(f"  at {self.eqn.file}:{self.eqn.line}{fn}")
    else:
      stage = f" ({self.stage})" if self.stage else ""
      parts.append(f"cannot compile{where}{stage}: {self.reason}")
    for key, value in self.details.items():
      parts.append(f"  {key}: {value}")
    if self.hint:
      parts.append(f"  hint: {self.hint}")
    if self.cause is not None and str(self.cause) and str(self.cause) not in self.reason:
      first = str(self.cause).strip().splitlines()[0][:300]
      parts.append(f"  underlying error: {type(self.cause).__name__}: {first}")
    return "\n".join(parts)

  def short(self) -> str:
    loc = f" at {os.path.basename(self.eqn.file)}:{self.eqn.line}" if self.eqn and self.eqn.file else ""
    prim = f"`{self.eqn.primitive}`" if self.eqn else "kernel"
    return f"{prim}{loc}: {self.reason}"


class CompileError(LoweringError):
  """Triton could not compile the kernel pallas-prof generated: a stage failed
  (an MLIR pass, an assertion in Triton's C++, ptxas) or the compile worker died.

  Besides a LoweringError's fields: `diagnosis` (compile_diagnostics.Diagnosis:
  the failing pass, the assertion, the op and its layout, whose fault it is),
  `equations` (the EquationRecords it points at; `eqn` is the first),
  `reproducer` (what pallas-prof wrote to reproduce it: {"script": ..., "source":
  ..., "mlir": ...}) and `workaround` (what pallas-prof did or could do about it).
  A LoweringError still: `except LoweringError` catches it.
  """

  def __init__(self, reason: str, *, diagnosis=None, equations=(), reproducer=None,
               workaround: str | None = None, **kwargs):
    self.diagnosis = diagnosis
    self.equations = tuple(equations)
    self.reproducer = dict(reproducer or {})
    self.workaround = workaround
    if kwargs.get("eqn") is None and self.equations:
      kwargs["eqn"] = self.equations[0]
    super().__init__(reason, **kwargs)

  @property
  def fault(self) -> str | None:
    """"triton", "kernel", "pallas-prof" or "machine" (None: not diagnosed)."""
    return None if self.diagnosis is None else self.diagnosis.fault

  def _message(self) -> str:
    where = f" `{self.kernel}`" if self.kernel else ""
    stage = f" ({self.stage} stage)" if self.stage else ""
    parts = [f"cannot compile kernel{where}{stage}: {self.reason}"]
    for indices, e in by_line(self.equations or ((self.eqn,) if self.eqn is not None else ())):
      at = f" at {e.file}:{e.line}" if e.file is not None else ""
      parts.append(f"  from [{', '.join(map(str, indices))}] {e.primitive}{at}: "
                   f"{self.named(e.text)}")
    for key, value in self.details.items():
      first, *rest = str(value).splitlines() or [""]
      parts.append(f"  {key}: {first}")
      parts += [f"    {line}" for line in rest]
    if self.hint:
      parts.append(f"  hint: {self.hint}")
    return "\n".join(parts)

  def with_details(self, details: dict[str, Any], *, hint: str | None = None,
                   workaround: str | None = None) -> "CompileError":
    """This error with more details (a key given replaces the old), another hint,
    and what pallas-prof's workarounds did."""
    return CompileError(self.reason, diagnosis=self.diagnosis, equations=self.equations,
                        reproducer=self.reproducer, workaround=workaround or self.workaround,
                        hint=hint or self.hint, kernel=self.kernel, eqn=self.eqn,
                        jaxpr_text=self.jaxpr_text, rule=self.rule, stage=self.stage,
                        details={**self.details, **details}, cause=self.cause,
                        ref_names=self.ref_names)


def by_line(equations) -> list[tuple[list[int], Any]]:
  """Equations grouped by the user's line and primitive (an unrolled loop makes one
  line many equations): (their indices, the first), in order."""
  groups: dict[tuple, tuple[list[int], Any]] = {}
  for e in equations:
    key = (e.file, e.line, e.primitive) if e.file is not None else (e.index,)
    groups.setdefault(key, ([], e))[0].append(e.index)
  return list(groups.values())


class Unsupported(Exception):
  """Raised by a rule for an unsupported parameter or operand.

  The dispatcher turns it into a LoweringError carrying the equation and the
  user's line; rules only say what is wrong and what to do instead. `where`:
  (file, line, function) of the user's code the problem is written at, when that
  is not the equation's line (a BlockSpec's, for a bad block size), and
  `details`, more lines for the message.
  """

  def __init__(self, reason: str, hint: str | None = None, *, where=None,
               details: dict[str, Any] | None = None):
    self.reason = reason
    self.hint = hint
    self.where = where
    self.details = dict(details or {})
    super().__init__(reason)


def in_chain(error: BaseException | None, kind: type):
  """The first exception of `kind` in `error`'s chain (itself, then what it was raised
  from or during): JAX may wrap or chain a kernel's error."""
  seen = set()
  probe = error
  while probe is not None and id(probe) not in seen:
    seen.add(id(probe))
    if isinstance(probe, kind):
      return probe
    probe = probe.__cause__ or probe.__context__
  return None

