"""LoweringError: what went wrong, where in the user's code, and what to do."""
from __future__ import annotations

import os
from typing import Any

from . import compat


class LoweringError(compat.ErrorWithUserContext):
  """A Pallas kernel could not be lowered (or compiled) by pallas-prof.

  The message names the kernel, the primitive, the equation and the user's
  file:line, and says what is supported instead. The structured fields let
  pallas_prof.instrument render an annotated report.

  Its base class tells JAX the error already carries the user's context, so
  JAX does not chain a copy of it (the message printed twice); the backend's
  frames leave JAX's filtered tracebacks (registration.py), so outside
  `pallas-prof run` the user sees their own frames and this message once.
  """

  def __init__(self, reason: str, *, hint: str | None = None, kernel: str | None = None,
               eqn=None, jaxpr_text: str | None = None, rule: str | None = None,
               stage: str | None = None, details: dict[str, Any] | None = None,
               cause: BaseException | None = None, source_excerpt: str | None = None):
    self.reason = reason
    self.hint = hint
    self.kernel = kernel
    self.eqn = eqn
    self.jaxpr_text = jaxpr_text
    self.rule = rule
    self.stage = stage
    self.details = dict(details or {})
    self.cause = cause
    self.source_excerpt = source_excerpt
    super().__init__(self._message())

  @property
  def primitive(self) -> str | None:
    return None if self.eqn is None else self.eqn.primitive

  @property
  def location(self) -> str | None:
    if self.eqn is None or self.eqn.file is None:
      return None
    return f"{self.eqn.file}:{self.eqn.line}"

  def _message(self) -> str:
    parts = []
    where = f" in kernel `{self.kernel}`" if self.kernel else ""
    if self.eqn is not None:
      parts.append(f"cannot lower `{self.eqn.primitive}`{where}: {self.reason}")
      parts.append(f"  equation: {self.eqn.text}")
      if self.eqn.in_avals:
        parts.append(f"  operands: {', '.join(self.eqn.in_avals)}")
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


class Unsupported(Exception):
  """Raised by a rule for an unsupported parameter or operand.

  The dispatcher turns it into a LoweringError carrying the equation and the
  user's line; rules only say what is wrong and what to do instead.
  """

  def __init__(self, reason: str, hint: str | None = None):
    self.reason = reason
    self.hint = hint
    super().__init__(reason)
