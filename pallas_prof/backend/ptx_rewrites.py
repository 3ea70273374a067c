"""PTX rewrites that keep ptxas from miscompiling a kernel: exact, local, logged.

ptxas 12.8, 12.9 and 13.0 (Triton 3.6's, and the one jaxlib runs on the H200)
fold integer negations into a three-input min/max (VIMNMX3) and drop one of
them: the PTX `max(-a, max(-b, max(-c, -d)))` of a row max of negated int32
values became `max(-a, c, max(-b, -d))` in SASS, so `jnp.max(-x, axis=1)` was
wrong on the GPU in every row whose maximum sat in that lane (the GPU fuzzer,
seed 20261204; ptxas 13.4 gets it right). Written as `~x + 1` (the same
two's-complement value, INT_MIN included), a negation is no longer an operand
modifier ptxas can lose.

Applied to Triton's PTX stage (triton_run's stage hook), so the PTX handed to
jaxlib, the cubin Triton assembles and the profiler's replays all come from the
rewritten text. Imports nothing: the compile worker loads it by path.
"""
from __future__ import annotations

import re

# neg.s32 %r5, %r6;  /  neg.s16 %rs3, %rs4;
_NEG = re.compile(r"^(\s*)neg\.s(16|32)(\s+)(%\w+),\s*(%\w+);", re.MULTILINE)

NOTE = ("// pallas-prof: {n} integer negation(s) written as not+add (ptxas up to 13.0 "
        "drops a negation it folds into a 3-input min/max)")


def rewrite(ptx: str) -> tuple[str, int]:
  """(the PTX with each integer `neg` as `not` + `add 1`, how many were rewritten)."""
  def as_not_add(m: re.Match) -> str:
    indent, bits, space, dst, src = m.groups()
    return (f"{indent}not.b{bits}{space}{dst}, {src};\n"
            f"{indent}add.s{bits}{space}{dst}, {dst}, 1;")

  text, n = _NEG.subn(as_not_add, ptx)
  if n:
    text = _note(text, NOTE.format(n=n))
  return text, n


def _note(ptx: str, line: str) -> str:
  """The note after PTX's leading comment block (where `pallas-prof show --ptx` shows it)."""
  head, sep, rest = ptx.partition("\n.version")
  return f"{head}\n{line}{sep}{rest}" if sep else f"{line}\n{ptx}"
