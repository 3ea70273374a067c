"""A kernel's verdict: one line for humans, made by the profiler as a record.

    Verdict
      findings        (str)   what the timing says: the roofline's verdict ("memory-bound:
                              ..."), "not timed", throttling, outputs never written or wrong
      static_only     bool    no GPU: the static figures alone
      heaviest_basis  str     what the heaviest equations are weighed by ("by PC samples",
                              "share of instructions"; "" in runs from before it was said)
      heaviest        str     the heaviest equations: "[4] exp @ softmax.py:21 N%, ..."

Its text (str(verdict), made here alone) is the line report.json, the spans and
`pallas-prof run` have always shown: "memory-bound: ...; heaviest equations (by PC
samples): [0] get @ softmax.py:19 N%". The renderers show `beside_table` under a table
of the hot equations: the findings alone (nothing for a static verdict, which has none).
A saved report's verdict is read back once, by from_text (serial.Text).
"""
from __future__ import annotations

import dataclasses

from ..serial import Misfit, Text

STATIC_ONLY = "static only"
_HEAVIEST = "heaviest equations"
_SEPARATOR = "; "


@dataclasses.dataclass(frozen=True)
class Verdict(Text):
  findings: tuple[str, ...] = ()
  static_only: bool = False
  heaviest_basis: str = ""
  heaviest: str = ""

  def __str__(self) -> str:
    head = (STATIC_ONLY,) if self.static_only else self.findings
    basis = f" ({self.heaviest_basis})" if self.heaviest_basis else ""
    tail = (f"{_HEAVIEST}{basis}: {self.heaviest}",) if self.heaviest else ()
    return _SEPARATOR.join(head + tail)

  def __bool__(self) -> bool:
    return bool(str(self))

  @property
  def beside_table(self) -> str:
    """The verdict under a table that lists the heaviest equations: the rest of it."""
    return _SEPARATOR.join(self.findings)

  @classmethod
  def from_text(cls, text: str, where: str) -> "Verdict":
    """The verdict a saved report holds as text; Misfit naming `where` for a text that
    str(Verdict) does not write."""
    head, marker, tail = text.partition(_HEAVIEST)
    basis = heaviest = ""
    if marker:
      if tail.startswith(" ("):
        basis, _, heaviest = tail[2:].partition("): ")
      else:                     # a run from before the basis was said
        heaviest = tail.removeprefix(": ")
      if head:
        head = head.removesuffix(_SEPARATOR)
    static = head == STATIC_ONLY
    verdict = cls(() if static or not head else (head,), static, basis, heaviest)
    if str(verdict) != text:
      raise Misfit(f"{where} is not a verdict pallas-prof writes ({text!r})")
    return verdict
