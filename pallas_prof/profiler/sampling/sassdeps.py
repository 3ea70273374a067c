"""Which load a stalled SASS instruction waits for: register dependencies.

A warp stalled on a scoreboard (long: global/local memory; short: shared memory,
MUFU, shuffles) at instruction I waits for a register that a variable-latency
instruction is still writing. The rule: take the registers I reads; for each,
find its most recent writer walking back in program order: from I to the start
of the innermost machine-code loop holding I, then from that loop's end back to
I (the previous iteration: software-pipelined loads), then before the loop. A
writer that is a load of the right kind (global/local for long_scoreboard;
shared loads, MUFU, shuffles for short_scoreboard) is a producer; the wait is
split evenly among the distinct producers found.

Limits: the scoreboard masks in the instruction encoding are not read, so a
wait on something other than a register value (a store's source registers not
yet read before they are overwritten, an LDGSTS/TMA copy, a DEPBAR) finds no
load and stays where it was seen; a predicated writer counts as the writer;
control flow other than the loops' back edges (if/else) is read as straight-line
order; one exception is made for asynchronous copies: a long-scoreboard wait whose
registers come from no load, inside a loop that issues LDGSTS (cp.async), is
charged to those copies (cp.async.wait_group is a scoreboard wait that ptxas folds
into the next instruction: a pipelined matmul's loop control showed it on the H200); the walk stops after MAX_BACK instructions; registers are matched by number (R4.64 is R4, R5; a load of .64/.128
writes 2/4 registers, an LDSM .2/.4 2/4).
"""
from __future__ import annotations

import itertools
import re
from typing import Sequence

_REG = re.compile(r"(?<![\w.])R(\d+)(?:\.(64|128))?\b")
_NO_DEST = ("ST", "STG", "STS", "STL", "RED", "REDG", "REDAS", "LDGSTS", "BAR", "BRA", "BRX",
            "JMP", "EXIT", "RET", "CALL", "DEPBAR", "SYNCS", "WARPSYNC", "MEMBAR", "FENCE",
            "ERRBAR", "CCTL", "NOP", "BSYNC", "BSSY", "UTMALDG", "UTMASTG", "UTMAREDG",
            "UTMAPF", "UBLKCP", "ARRIVES", "WARPGROUP", "BPT", "YIELD", "KILL", "NANOSLEEP")
LONG_PRODUCERS = ("LDG", "LD", "LDL", "ATOMG", "ATOM", "TEX", "TLD", "SULD", "SUATOM")
SHORT_PRODUCERS = ("LDS", "LDSM", "ATOMS", "MUFU", "SHFL", "S2R", "LDC")


def base(opcode: str) -> str:
  return opcode.split(".")[0]


def _body(text: str) -> str:
  t = text.strip().rstrip(";").strip()
  if t.startswith("@"):
    t = t.split(None, 1)[1] if " " in t else ""
  return t


def _width(opcode: str) -> int:
  parts = opcode.split(".")
  if parts[0] == "LDSM":
    tail = parts[-1]
    return int(tail) if tail.isdigit() and tail in ("1", "2", "4") else 1
  if "128" in parts:
    return 4
  if "64" in parts or "WIDE" in parts:
    return 2
  return 1


def registers(text: str, opcode: str) -> tuple[set[int], set[int]]:
  """(written, read) general registers of one SASS instruction's text."""
  body = _body(text)
  operands = body.split(None, 1)[1] if " " in body else ""
  regs = [(int(m.group(1)), m.group(2), m.start()) for m in _REG.finditer(operands)]
  if not regs:
    return set(), set()
  b = base(opcode)
  if b in _NO_DEST or b.startswith(("ST", "RED", "UTMA", "UBLK")) or b.endswith("SETP") \
      or b == "PLOP3":
    written, reads = set(), regs
    if b.startswith("ST") and len(regs) > 1:     # the data register(s) of a store
      r, wide, pos = regs[-1]
      reads = regs[:-1] + [(r, wide or {2: "64", 4: "128"}.get(_width(opcode)), pos)]
  else:
    first, wide, _ = regs[0]
    n = _width(opcode) if b in LONG_PRODUCERS + SHORT_PRODUCERS + ("IMAD",) else 1
    if b in ("HMMA", "IMMA"):
      n = 4
    if wide:
      n = max(n, 2 if wide == "64" else 4)
    written = set(range(first, first + n))
    reads = regs[1:]
  read = set()
  for r, wide, _ in reads:
    read.add(r)
    if wide:
      read.update(range(r, r + (2 if wide == "64" else 4)))
  if b in ("HMMA", "IMMA", "HGMMA", "FFMA", "DFMA") and regs[-1][0] == regs[0][0]:
    read.add(regs[0][0])      # accumulate in place
  return written, read


def loops(labels: dict[str, int], branches: Sequence[tuple[int, str]]) -> list[tuple[int, int]]:
  """(first, last) instruction positions of each loop (a backward branch)."""
  out = []
  for pos, target in branches:
    start = labels.get(target)
    if start is not None and start < pos:
      out.append((start, pos))
  return out


def _scan_order(i: int, inner: tuple[int, int] | None):
  if inner is None:
    return range(i - 1, -1, -1)
  start, end = inner
  return itertools.chain(range(i - 1, start - 1, -1), range(end, i, -1),
                         range(start - 1, -1, -1))


ASYNC_COPIES = ("LDGSTS",)
MAX_BACK = 256      # instructions walked back: a load further back has long completed


class Dependencies:
  """The register and loop facts of one kernel's SASS, computed once."""

  def __init__(self, texts: Sequence[str], opcodes: Sequence[str],
               spans: Sequence[tuple[int, int]]):
    self.regs = [registers(t, o) for t, o in zip(texts, opcodes, strict=True)]
    self.bases = [base(o) for o in opcodes]
    self.spans = list(spans)
    self._copies: dict[tuple[int, int], list[int]] = {}

  def inner_loop(self, i: int) -> tuple[int, int] | None:
    return min((s for s in self.spans if s[0] <= i <= s[1]), key=lambda s: s[1] - s[0],
               default=None)

  def producers(self, i: int, reason: str) -> list[int]:
    """Positions of the loads whose values instruction i waits for (see the module
    docstring); [] when none is found."""
    kinds = LONG_PRODUCERS if reason == "long_scoreboard" else SHORT_PRODUCERS
    wanted = set(self.regs[i][1])
    found: list[int] = []
    inner = self.inner_loop(i)
    for j in itertools.islice(_scan_order(i, inner), MAX_BACK):
      if not wanted:
        break
      hit = wanted & self.regs[j][0]
      if not hit:
        continue
      wanted -= hit
      if self.bases[j] in kinds and j not in found:
        found.append(j)
    if not found and reason == "long_scoreboard" and inner is not None:
      found = self.async_copies(inner)
    return found

  def async_copies(self, loop: tuple[int, int]) -> list[int]:
    """The asynchronous global->shared copies (LDGSTS, cp.async) of a loop:
    `cp.async.wait_group` becomes a scoreboard wait that ptxas may fold into
    whatever instruction comes next, so a long-scoreboard wait at an instruction
    whose registers come from no load, in such a loop, waits for those copies."""
    if loop not in self._copies:
      self._copies[loop] = [j for j in range(loop[0], loop[1] + 1)
                            if self.bases[j] in ASYNC_COPIES]
    return self._copies[loop]
