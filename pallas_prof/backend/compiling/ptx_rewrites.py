"""PTX rewrites before ptxas: three keep it from miscompiling a kernel, one keeps its line
table true. Exact, local, logged.

Integer negations:

ptxas 12.8, 12.9 and 13.0 (Triton 3.6's, and the one jaxlib runs on the H200)
fold integer negations into a three-input min/max (VIMNMX3) and drop one of
them: the PTX `max(-a, max(-b, max(-c, -d)))` of a row max of negated int32
values became `max(-a, c, max(-b, -d))` in SASS, so `jnp.max(-x, axis=1)` was
wrong on the GPU in every row whose maximum sat in that lane (the GPU fuzzer,
seed 20261204; ptxas 13.4 gets it right). Written as `~x + 1` (the same
two's-complement value, INT_MIN included), a negation is no longer an operand
modifier ptxas can lose.

Nested 16-bit selects with a shared operand:

ptxas 12.8 to 13.0 fuse `selp.b16 a, x, e, p; selp.b16 b, a, e, q` (LLVM's
form of a select on `p & q`) into one select predicated in place over e's
register, then pair a 16-bit multiply that still needs the old e into an
HFMA2 after that write (the GPU fuzzer's seed 18680, a float16
dynamic_update_slice; a user's `jnp.where((i >= s) & (i < s + 3), v * 2, v)`
with v live compiles to the same SASS). One select on `p & q` (or `p | q`
where the shared operand is the other branch) into a fresh register is what
ptxas then sees.

Packed 16-bit integer adds of a constant:

ptxas 12.8 and 12.9 (13.4 keeps it; 13.0 not checked) narrow an
`add.s16x2`/`add.u16x2` whose result has only one half read to a
`VIADD.16x2 d, a, 0x0`: the constant operand (a `mov.b32` immediate that
ptxas propagates) is lost, so the add returns its other operand. LLVM packs
int16 math in pairs, and a pair where one element is masked off for good
(the 9th of 16 rows a thread holds, in a 9-row block) keeps one half: int16
`x // 7` tests its remainder as `x * 28087 + 4681 > 9362` (unsigned), and on
the H200 that row's floor division was off by one wherever the test flipped
(the GPU fuzzer, seed 1250; packed min/max and float16/bfloat16 math narrow
right). Each packed integer add is written as two 16-bit adds of its halves,
the same values, which ptxas compiles to plain 32-bit adds that keep it.

One source location per inline asm block (always applied; only debug directives change):

LLVM 21 (Triton 3.9's) writes a `.loc` for every line of an inline asm block, numbering
them from the statement's own line on: a three-line load (`mov; mov; ld.global`) at
kernel line 15 carries `.loc 1 15 9`, `.loc 1 16 9`, `.loc 1 17 9`. Those are not
source locations, but ptxas takes them as such, and the last one stays in effect after
the block. So the cubin's line table charged the load to the next two lines of the
generated source, and libdevice's code after an inline asm block to whatever lines
followed the call: `sin` of a large argument takes libdevice's slow argument reduction,
whose `mad.lo.cc`/`madc.hi` block is two lines long, and the rest of the slow path (the
loop, its local-memory table and the float64 multiply) went to the kernel's next
equations, most of a sin kernel's instructions and samples to the multiply after it.
Every reader of the cubin's line info saw it: static counts, PC sampling, ncu's source
counters, the pytest gate and `show --sass`. The statement's location is the one in
effect where the block begins (LLVM writes it before `// begin inline asm` when it
changes); a block opening with `{` has no `.loc` for that line, so its first `.loc` is
already the next line. Every `.loc` inside a block is dropped, so the block and what
follows it keep the statement's location; a block before any location keeps its first
(there is nothing better to keep). No instruction changes
(tests/backend/compiling/test_ptx_lineinfo.py compares the SASS). Triton 3.6's LLVM
writes no `.loc` inside a block: its PTX passes through unchanged.

All are applied to Triton's PTX stage (triton_run's stage hook), so the PTX handed to
jaxlib, the cubin Triton assembles and the profiler's replays all come from the
rewritten text. PALLAS_PROF_PTX_REWRITES=0 turns the three miscompile rewrites off (to see what ptxas
does without them; compile keys tell the two apart). Imports nothing of
pallas-prof at import (pallas_prof/settings.py only in enabled(), which the worker never
calls): the compile worker loads it by path.
"""
from __future__ import annotations

import re

ENV = "PALLAS_PROF_PTX_REWRITES"


def enabled() -> bool:
  """Read where a compile is asked for (compile.compile_request), not in the worker,
  whose environment is the one it started with (and which loads this file without the
  package: hence the import here)."""
  # lazy: the compile worker runs this file by its path, without the package
  from ... import settings
  return settings.value(ENV)

# neg.s32 %r5, %r6;  /  neg.s16 %rs3, %rs4;
_NEG = re.compile(r"^(\s*)neg\.s(16|32)(\s+)(%\w+),\s*(%\w+);", re.MULTILINE)

NOTE = ("// pallas-prof: {n} integer negation(s) written as not+add (ptxas up to 13.0 "
        "drops a negation it folds into a 3-input min/max)")


def rewrite(ptx: str) -> tuple[str, int]:
  """(the PTX with all three rewrites, how many places they changed)."""
  text, negations = rewrite_negations(ptx)
  text, selects = fuse_nested_selects(text)
  text, adds = split_packed_adds(text)
  if negations:
    text = _note(text, NOTE.format(n=negations))
  if selects:
    text = _note(text, SELECT_NOTE.format(n=selects))
  if adds:
    text = _note(text, ADD_NOTE.format(n=adds))
  return text, negations + selects + adds


def rewrite_negations(ptx: str) -> tuple[str, int]:
  """(the PTX with each integer `neg` as `not` + `add 1`, how many)."""
  def as_not_add(m: re.Match) -> str:
    indent, bits, space, dst, src = m.groups()
    return (f"{indent}not.b{bits}{space}{dst}, {src};\n"
            f"{indent}add.s{bits}{space}{dst}, {dst}, 1;")

  return _NEG.subn(as_not_add, ptx)


SELECT_NOTE = ("// pallas-prof: {n} pair(s) of nested 16-bit selects written as one select "
               "(ptxas up to 13.0 overwrites a live value's register in place there)")

_SELP = re.compile(r"^(\s*)selp\.b16(\s+)(%\w+), (%\w+|-?\w+), (%\w+|-?\w+), (%p\d+);$")
_PRED_DECL = re.compile(r"(\.reg \.pred\s+%p<)(\d+)(>;)")


def fuse_nested_selects(ptx: str) -> tuple[str, int]:
  """Adjacent `selp.b16 a, x, e, p; selp.b16 b, a, e, q` (a read nowhere else) as
  `and.pred t, q, p; selp.b16 b, x, e, t` (b = q ? (p ? x : e) : e), and
  `selp.b16 a, x, e, p; selp.b16 b, x, a, q` as `or.pred t, q, p; selp.b16 b, x, e, t`
  (b = q ? x : (p ? x : e)): the same values, one select into a fresh register."""
  lines = ptx.split("\n")
  decls = [i for i, l in enumerate(lines) if _PRED_DECL.search(l)]
  if len(decls) != 1:     # registers are per function: one function, or leave it be
    return ptx, 0
  decl = decls[0]
  next_pred = int(_PRED_DECL.search(lines[decl]).group(2))
  uses = _register_uses(ptx)
  out, fused, i = [], 0, 0
  while i < len(lines):
    first, second = _SELP.match(lines[i]), _SELP.match(lines[i + 1]) if i + 1 < len(lines) else None
    if first and second and uses.get(first.group(3), 0) == 2:      # defined once, read once
      indent, space, a, x, e, p = first.groups()
      _, _, b, x2, e2, q = second.groups()
      t = f"%p{next_pred}"
      if x2 == a and e2 == e:
        out += [f"{indent}and.pred{space}{t}, {q}, {p};", f"{indent}selp.b16{space}{b}, {x}, {e}, {t};"]
      elif e2 == a and x2 == x:      # b = q ? x : (p ? x : e) = (q | p) ? x : e
        out += [f"{indent}or.pred{space}{t}, {q}, {p};", f"{indent}selp.b16{space}{b}, {x}, {e}, {t};"]
      else:
        out.append(lines[i])
        i += 1
        continue
      next_pred, fused, i = next_pred + 1, fused + 1, i + 2
      continue
    out.append(lines[i])
    i += 1
  if fused:
    out[decl] = _PRED_DECL.sub(lambda m: f"{m.group(1)}{next_pred}{m.group(3)}", out[decl])
  return "\n".join(out), fused


ADD_NOTE = ("// pallas-prof: {n} packed 16-bit integer add(s) written as two 16-bit adds "
            "(ptxas 12.8-12.9 drop the constant of one whose result has one half read)")

# add.s16x2 	%r318, %r316, %r317;   (PTX takes registers only for the packed types)
_ADD16X2 = re.compile(r"^(\s*)add\.([su])16x2(\s+)(%\w+),\s*(%\w+),\s*(%\w+);$", re.MULTILINE)


def split_packed_adds(ptx: str) -> tuple[str, int]:
  """(the PTX with each `add.{s,u}16x2 d, a, b` as two 16-bit adds of the halves in a
  scope of its own, how many). Per half it is the same wrapping add; no carry crosses."""
  def as_halves(m: re.Match) -> str:
    indent, sign, space, d, a, b = m.groups()
    return "\n".join(f"{indent}{line}" for line in (
        "{", ".reg .b16 %ppa<2>, %ppb<2>;",
        f"mov.b32{space}{{%ppa0, %ppa1}}, {a};",
        f"mov.b32{space}{{%ppb0, %ppb1}}, {b};",
        f"add.{sign}16{space}%ppa0, %ppa0, %ppb0;",
        f"add.{sign}16{space}%ppa1, %ppa1, %ppb1;",
        f"mov.b32{space}{d}, {{%ppa0, %ppa1}};", "}"))

  return _ADD16X2.subn(as_halves, ptx)


def _register_uses(ptx: str) -> dict[str, int]:
  """How many times each %register appears (its definition included)."""
  counts: dict[str, int] = {}
  for name in re.findall(r"%\w+", ptx):
    counts[name] = counts.get(name, 0) + 1
  return counts


def _note(ptx: str, line: str) -> str:
  """The note after PTX's leading comment block (where `pallas-prof show --ptx` shows it)."""
  head, sep, rest = ptx.partition("\n.version")
  return f"{head}\n{line}{sep}{rest}" if sep else f"{line}\n{ptx}"

_LOC = re.compile(r"^\s*\.loc\s")
_FUNCTION = re.compile(r"^\s*(?:\.\w+\s+)*\.(?:entry|func)\b")     # `.visible .entry k(`
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
    elif _FUNCTION.match(line):
      located = False             # (each function's line table starts afresh)
    elif _LOC.match(line):
      if in_block and located:
        dropped += 1
        continue
      located = True
    out.append(line)
  return "".join(out), dropped
