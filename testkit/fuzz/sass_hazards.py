"""The SASS signature of the ptxas miscompile behind the GPU fuzzer's first miss.

Seed 18680 (issue 32): ptxas fused two nested `selp.b16` into one predicated
select that overwrote a still-live float16 value's register in place
(`@P0 SEL R3, R14, R3, !P3`), then computed a 16-bit multiply that needed the
old value with an HFMA2 placed after the overwrite. The signature alone is no
proof (an in-place select is legitimate wherever the old value is dead): the
fuzzer counts such selects as *hazard leads*, and calls a lead *strong* where
packed 16-bit math (HMUL2, HFMA2, HADD2, ...) in the same basic block reads the
overwritten register, directly or through registers copied or packed from it
(PRMT, MOV), as the miscompiled HFMA2 did. A strong lead is a program worth
running on a GPU; tests/backend/compiling/test_ptxas_hazards.py keeps pallas-prof's own
lowerings free of the signature.
"""
from __future__ import annotations

import dataclasses
import re

# `@P0 SEL R3, R14, R3, !P3 ;`: a select under a predicate; its destination and sources
IN_PLACE_PREDICATED_SELECT = re.compile(r"@!?P\d+\s+F?SEL\s+(R\d+),\s*(.*?);")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]+\*/\s+(@!?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")
_LABEL = re.compile(r"^\s*\.L_\w+:")
_REGISTER = re.compile(r"\bR(\d+)\b")
# packed 16-bit float math: two halves (or one, .H0_H0) per register
PACKED_16 = re.compile(r"^H(MUL2|FMA2|ADD2|MNMX2|SET2|SETP2)\b")
# `VIADD.16x2 R8, R8, 0x0 ;`: what ptxas 12.8-12.9 make of a packed 16-bit integer add of a
# constant whose result has one half read: the constant is gone (issue 32, seed 1250; a
# real add of zero never reaches SASS). pallas-prof's PTX rewrite splits such adds.
LOST_PACKED_CONSTANT = re.compile(r"VIADD\.16x2\s+R\d+,\s*R\d+,\s*0x0\s*;")
# instructions that end a basic block
_BLOCK_END = re.compile(r"^(BRA|BRX|JMP|JMX|EXIT|RET|CALL|BSYNC|BSSY|WARPSYNC|BAR)\b")


@dataclasses.dataclass(frozen=True)
class HazardLead:
  select: str                 # the predicated in-place select, as nvdisasm prints it
  readers: tuple[str, ...]    # packed 16-bit instructions after it that read its register
  # (directly, or through PRMT/MOV copies made after it), in the same basic block

  @property
  def strong(self) -> bool:
    return bool(self.readers)

  def to_dict(self) -> dict:
    return {"select": self.select, "readers": list(self.readers), "strong": self.strong}


def in_place_predicated_selects(sass: str) -> list[str]:
  """The predicated SEL/FSEL lines whose destination register is also a source."""
  found = []
  for m in IN_PLACE_PREDICATED_SELECT.finditer(sass):
    dest, sources = m.group(1), [s.strip() for s in m.group(2).split(",")[1:]]
    if dest in sources:
      found.append(m.group(0))
  return found


def lost_packed_constants(sass: str) -> list[str]:
  """The packed 16-bit integer adds whose constant ptxas dropped."""
  return LOST_PACKED_CONSTANT.findall(sass)


def _instructions(sass: str):
  """[(predicated, opcode, operand text, line)]; None where a basic block begins (a label)."""
  rows = []
  for line in sass.splitlines():
    if _LABEL.match(line):
      rows.append(None)
      continue
    m = _INSTRUCTION.search(line)
    if m:
      text = f"{m.group(1) or ''}{m.group(2)} {m.group(3)} ;"
      rows.append((bool(m.group(1)), m.group(2), m.group(3), text))
  return rows


def _registers(text: str) -> list[str]:
  return [f"R{n}" for n in _REGISTER.findall(text)]


def hazard_leads(sass: str) -> list[HazardLead]:
  """Each in-place predicated select, with the packed 16-bit instructions of its
  basic block after it that read the register it overwrote."""
  rows = _instructions(sass)
  leads = []
  for i, row in enumerate(rows):
    if row is None:
      continue
    m = IN_PLACE_PREDICATED_SELECT.search(row[3])
    if not m:
      continue
    dest, sources = m.group(1), [s.strip() for s in m.group(2).split(",")[1:]]
    if dest not in sources:
      continue
    leads.append(HazardLead(m.group(0), tuple(_readers_after(rows, i, dest))))
  return leads


def _readers_after(rows, start: int, dest: str) -> list[str]:
  tainted, readers = {dest}, []
  for row in rows[start + 1:]:
    if row is None:
      break
    predicated, opcode, operands, line = row
    if _BLOCK_END.match(opcode):
      break
    regs = _registers(operands)
    if not regs:
      continue
    written, read = regs[0], regs[1:]
    if opcode.startswith(("ST", "RED", "ATOM")) or opcode.startswith("ISETP") \
        or opcode.startswith("FSETP") or opcode.startswith("HSETP"):
      written, read = None, regs      # stores and predicate setters write no register
    reads_taint = any(r in tainted for r in read)
    if reads_taint and PACKED_16.match(opcode):
      readers.append(line)
    if written is not None:
      if reads_taint:
        tainted.add(written)
      elif not predicated:
        tainted.discard(written)       # overwritten by something else
  return readers
