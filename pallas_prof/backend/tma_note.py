"""TmaNote: why one access of a kernel that asked for TMA stays a plain one.

Kept with the kernel (GeneratedKernel.tma_notes), written into its source's
header, warned at the user's line (pallas_call_rule.warn_tma_fallbacks) and listed
in report.json: each reads the fields it needs, none parses the text.
"""
from __future__ import annotations

import dataclasses
import os

from ..serial import Saved


class TmaFallbackWarning(UserWarning):
  """CompilerParams(tma=True): a load of the kernel could not use TMA (it stays a plain load)."""


@dataclasses.dataclass(frozen=True)
class TmaNote(Saved):
  access: str             # the ref read ("x_ref"), or "the store to o_ref"
  file: str | None        # the user's line of the access
  line: int | None
  reason: str             # why TMA cannot serve it

  def __str__(self) -> str:
    if not self.access:   # a note saved as text alone (kernel.json before the records)
      return self.reason
    where = f"{self.file}:{self.line}" if self.file else "an unknown line"
    return f"{self.access} at {where}: {self.reason}"

  def portable(self) -> str:
    """As str(), with the file's name for its path (the form of the generated source,
    whose sha256 is the kernel's key: lowering/lower.py's portable_location)."""
    if not self.access or not self.file:
      return str(self)
    return str(dataclasses.replace(self, file=os.path.basename(self.file)))

  @classmethod
  def upgrade_layout(cls, saved):
    """kernel.json's note: a dict, or the text an earlier pallas-prof saved (its reason)."""
    if isinstance(saved, str):
      return {"access": "", "file": None, "line": None, "reason": saved}
    return saved
