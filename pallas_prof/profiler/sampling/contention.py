"""Contention charged to the instructions that cause it.

A PC sample says where one warp stood and why it did not issue. Two kinds of
reason are not the fault of the instruction the warp stands at:

- `not_selected`: the warp was ready, and the scheduler issued another warp's
  instruction. The slot went to whatever was issued, so these samples move to
  the instructions that were issuing, in proportion to their `selected` samples
  over the whole kernel.
- a full pipe queue (`mio_throttle`, `lg_throttle`, `tex_throttle`,
  `math_pipe_throttle`): the warp waits for a pipe that the warps' instructions
  of that pipe keep busy, so these samples move to the instructions of that
  pipe, in proportion to their `selected` samples.

Why: with warp-state samples alone, a throughput-bound kernel's weight sits
where warps queue, not where the work is. On the H200 a kernel with a loop of
16 rounds followed by one of 48 rounds of the same body (tests/profiler/
known_answer.py, ka_two) had most of its samples in the first loop, mostly
"not selected" and "queue full" at its first special-function instructions,
and far fewer in the second; the issued (`selected`) samples split 1:3.5, as the
work does (the recorded samples: tests/profiler/fixtures/pcsampling/ka_two_kernel-714ff6).
Removing the first loop saves a quarter of the time, not three quarters.

Limits: the samples say neither which warp was issued at the moment nor which
instruction filled the queue, so the charge follows the kernel-wide issue
mix: right for the steady state of a kernel whose phases overlap across its
warps, blurred where one phase runs alone (a prologue, the last wave).
Instructions are put in a pipe by their SASS opcode (PIPES); an unknown
opcode counts as math. Where a pipe issued nothing that was sampled, its
throttle samples stay where they were.
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

ISSUE = "not_selected"
THROTTLES = {"mio_throttle": "mio", "lg_throttle": "lg", "tex_throttle": "tex",
             "math_pipe_throttle": "math"}

# SASS opcode (before the first '.') -> the pipe whose queue it waits for
PIPES = {
    **{op: "mio" for op in ("MUFU", "LDS", "STS", "LDSM", "STSM", "ATOMS", "SHFL", "S2R",
                             "S2UR", "MATCH", "REDUX", "LDC", "ULDC", "BAR", "MEMBAR",
                             "CS2R", "VOTE", "B2R", "R2B")},
    **{op: "lg" for op in ("LDG", "STG", "LDL", "STL", "LD", "ST", "ATOM", "ATOMG", "RED",
                            "LDGSTS", "CCTL", "UBLKCP", "UTMALDG", "UTMASTG", "SYNCS")},
    **{op: "tex" for op in ("TEX", "TLD", "TLD4", "TMML", "TXD", "TXQ", "SULD", "SUST",
                             "SUATOM", "SURED")},
}
CONTROL = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BSYNC", "WARPSYNC",
           "NOP", "YIELD", "BPT", "KILL"}


def pipe(opcode: str) -> str | None:
  """The pipe an instruction issues into: mio, lg, tex or math; None for control flow."""
  words = opcode.split()
  if words and words[0].startswith("@"):       # a predicate guard: "@!P0 BRA"
    words = words[1:]
  base = (words[0] if words else "").split(".")[0].upper()
  if base in CONTROL:
    return None
  return PIPES.get(base, "math")


def charges(per_instruction: Mapping[int, Mapping[str, float]], opcodes: Sequence[str],
            owner: Sequence) -> list[tuple[object, object, str, float]]:
  """(from equation, to equation, reason, samples) for every move the rule above makes.
  per_instruction: instruction index -> reason -> samples (issued and not);
  owner: instruction index -> its equation (None where none)."""
  everyone: Counter = Counter()                 # equation -> issued samples
  by_pipe: dict[str, Counter] = {}
  for k, reasons in per_instruction.items():
    n = float(reasons.get("selected", 0))
    p = pipe(opcodes[k])
    if n <= 0 or p is None:
      continue
    everyone[owner[k]] += n
    by_pipe.setdefault(p, Counter())[owner[k]] += n
  waiting: Counter = Counter()                  # (equation, reason) -> samples to move
  for k, reasons in per_instruction.items():
    for reason, n in reasons.items():
      if n and (reason == ISSUE or reason in THROTTLES):
        waiting[(owner[k], reason)] += float(n)
  moves = []
  for (source, reason), n in waiting.items():
    targets = everyone if reason == ISSUE else by_pipe.get(THROTTLES[reason], Counter())
    total = float(sum(targets.values()))
    if total <= 0:
      continue
    for target, w in targets.items():
      if target != source:
        moves.append((source, target, reason, n * w / total))
  return moves
