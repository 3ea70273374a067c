"""One source location per inline asm block of the PTX, before ptxas reads it.

LLVM 21 (Triton 3.9's) writes a `.loc` for every line of an inline asm block, numbering
them from the statement's own line on: a three-line load (`mov; mov; ld.global`) at
kernel line 15 carries `.loc 1 15 9`, `.loc 1 16 9`, `.loc 1 17 9`. Those are not
source locations, but ptxas takes them as such, and the last one stays in effect after
the block. So the cubin's line table charged the load to the next two lines of the
generated source, and libdevice's code after an inline asm block to whatever lines
followed the call: `sin` of a large argument takes libdevice's slow argument reduction,
whose `mad.lo.cc`/`madc.hi` block is two lines long, and the rest of the slow path (the
loop, its local-memory table and the float64 multiply) went to the kernel's next
equations (80 % of a sin kernel's instructions on the multiply after it, in static
counts; 37 % in PC samples on the H200). Every reader of the cubin's line info saw it:
static counts, PC sampling, ncu's source counters, the pytest gate and `show --sass`.

The statement's location is the one in effect where the block begins (LLVM writes it
before `// begin inline asm` when it changes); the numbering inside counts the block's
lines from there, and a block opening with `{` has no `.loc` for that line, so its first
`.loc` is already the next line. Here every `.loc` inside a block is dropped, so the block
and what follows it keep the statement's location; a block before any location keeps its
first (there is nothing better to keep). Only debug directives change, never
an instruction (tests/backend/compiling/test_ptx_lineinfo.py compares the SASS).
Triton 3.6's LLVM writes no `.loc` inside a block: its PTX passes through unchanged.

Applied in Triton's PTX stage (triton_run's stage hook) with ptx_rewrites, so jaxlib's
copy, the cubin and the profiler's replays agree. Imports nothing of pallas-prof: the
compile worker loads it by path.
"""
from __future__ import annotations

import re

_LOC = re.compile(r"^\s*\.loc\s")
BEGIN, END = "// begin inline asm", "// end inline asm"


def one_location_per_asm_block(ptx: str) -> tuple[str, int]:
  """(the PTX with the `.loc` lines inside inline asm blocks dropped, how many were)."""
  if BEGIN not in ptx:
    return ptx, 0
  out: list[str] = []
  dropped = 0
  in_block = located = False      # located: a `.loc` is in effect (before or in the block)
  for line in ptx.splitlines(keepends=True):
    stripped = line.strip()
    if stripped == BEGIN:
      in_block = True
    elif stripped == END:
      in_block = False
    elif stripped.startswith(".entry") or stripped.startswith(".func"):
      located = False             # (each function's line table starts afresh)
    elif _LOC.match(line):
      if in_block and located:
        dropped += 1
        continue
      located = True
    out.append(line)
  return "".join(out), dropped
