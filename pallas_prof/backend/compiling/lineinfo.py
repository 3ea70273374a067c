"""Line info of every compile stage: which generated line, and so which jaxpr
equation, each line of TTIR, TTGIR, LLIR, PTX and SASS comes from.

Used by compile (which equations own the ops of an IR, a location in a Triton
error) and by the profiler (instruction tables, measured samples per equation)
alike, so there is one parser per stage:

  ptx    `.loc` directives; an inlined helper (tl.sum, a reduction combiner)
         carries its call chain in the `.loc` comment (`@[ file:line ]`), so
         the innermost location that is a line of the kernel body wins.
  sass   `nvdisasm -gp` pairs every SASS instruction with the PTX line it
         came from (the cubin embeds the PTX: `.nv_debug_ptx_txt`), which
         then resolves like the PTX; `nvdisasm -g` (file:line directly, no
         inlining) is the fallback.
  ttir, ttgir  MLIR `loc(...)` attributes (`#locN` aliases, callsite, fused,
         named locations).
  llir   `!dbg` metadata (`DILocation` with `inlinedAt` chains).

A chain of locations is innermost first; `Resolver.resolve` turns it into
(generated line, equation index) through the GeneratedKernel's line map.
Needs no GPU: nvdisasm ships in the triton wheel.
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
from typing import Sequence

from . import triton_compat


# --- locations -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Loc:
  file: str
  line: int


class Resolver:
  """Turns chains of source locations into (generated line, equation index)."""

  def __init__(self, gk):
    self.gk = gk
    self.basename = os.path.basename(gk.path)

  def is_generated(self, file: str | None) -> bool:
    return bool(file) and os.path.basename(file) == self.basename

  def resolve(self, chain: Sequence[Loc]) -> tuple[int | None, int | None]:
    """chain: innermost first. The first location on a line of the kernel
    body (in the line map) wins; else the first one in the generated file."""
    fallback = None
    for loc in chain:
      if not self.is_generated(loc.file):
        continue
      eqn = self.gk.line_map.get(loc.line)
      if eqn is not None:
        return loc.line, eqn
      if fallback is None:
        fallback = loc.line
    return fallback, None


# --- PTX ---------------------------------------------------------------------------------

_LOC_DIRECTIVE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(.*)$")
_FILE_DIRECTIVE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
_CHAIN_LOC = re.compile(r"([^\s@\[\]]+):(\d+):(\d+)")
_INLINED_AT = re.compile(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)")


def ptx_locations(ptx: str):
  """Per PTX line (1-based): the chain of locations in effect (innermost first).

  A `.loc` of inlined code names only its immediate call site (`inlined_at
  F L C`). Where inlining nests (Triton 3.9: tl.sum -> reduce -> the
  combiner), that call site is itself inlined code, whose own `.loc` (the
  most recent one at that place, else any) names the next caller: the chain
  is followed up to the kernel body."""
  lines = ptx.splitlines()
  files = {}
  any_parent: dict[tuple[int, int, int], tuple[int, int, int]] = {}
  for line in lines:
    m = _FILE_DIRECTIVE.match(line)
    if m:
      files[int(m.group(1))] = m.group(2)
    m = _LOC_DIRECTIVE.match(line)
    inl = _INLINED_AT.search(m.group(4)) if m else None
    if inl:
      any_parent.setdefault(_loc_key(m), _loc_key(inl))
  recent_parent: dict[tuple[int, int, int], tuple[int, int, int]] = {}
  current: tuple[Loc, ...] = ()
  per_line = []
  in_asm = False
  for line in lines:
    stripped = line.strip()
    if stripped == "// begin inline asm":
      in_asm = True
    elif stripped == "// end inline asm":
      in_asm = False
    m = _LOC_DIRECTIVE.match(line)
    if m and in_asm and current:
      # LLVM 21 (Triton 3.9) numbers each line of an inline asm block from the
      # statement's line on (`.loc 1 15 9`, `.loc 1 16 9`, ...): the statement's
      # location is the one in effect at the block (ptx_rewrites.py drops these before
      # ptxas; a PTX saved by an older pallas-prof still has them)
      m = None
    if m:
      file = files.get(int(m.group(1)), "")
      chain = [Loc(file, int(m.group(2)))]
      rest = m.group(4)
      inl = _INLINED_AT.search(rest)
      if inl:
        recent_parent[_loc_key(m)] = _loc_key(inl)
        site, seen = _loc_key(inl), set()
        while site is not None and site not in seen and len(seen) < 64:
          seen.add(site)
          chain.append(Loc(files.get(site[0], ""), site[1]))
          site = recent_parent.get(site, any_parent.get(site))
      elif "@[" in rest:
        # LLVM writes the inlining chain in the comment: `// a.py:30:25 @[ b.py:15:28 ]`
        comment = rest.split("//", 1)[1] if "//" in rest else rest
        found = [Loc(f, int(l)) for f, l, _ in _CHAIN_LOC.findall(comment)]
        if len(found) > 1:
          # match basenames in the comment with the full paths of .file
          chain += [Loc(_full_path(files, x.file), x.line) for x in found[1:]]
      current = tuple(chain)
    per_line.append(current)
  return lines, per_line


def _loc_key(m: re.Match) -> tuple[int, int, int]:
  return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _full_path(files: dict[int, str], name: str) -> str:
  for path in files.values():
    if os.path.basename(path) == os.path.basename(name):
      return path
  return name


# --- SASS --------------------------------------------------------------------------------

_SASS_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*\*/)?\s*$")
SASS_FILE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_SASS_LABEL = re.compile(r"^\s*(\.L_[\w]+):")
_SASS_BRANCH = re.compile(r"\b(?:BRA|BRX|JMP)\b[^;]*?(\.L_[\w]+)")


class SassUnavailable(RuntimeError):
  pass


def _nvdisasm_path() -> str:
  try:
    return triton_compat.tool_path("nvdisasm")
  except (ImportError, AttributeError, RuntimeError, OSError) as e:
    # Triton absent or broken, a Triton without this tool's knob, its lookup finding no
    # binary (RuntimeError), or one it cannot run: try PATH; a bug of ours still raises
    import shutil
    path = shutil.which("nvdisasm")
    if path:
      return path
    raise SassUnavailable(f"nvdisasm not found (triton wheel or PATH): {e}") from None


def disassemble(cubin: bytes, mode: str = "-gp") -> str:
  """nvdisasm of a cubin, code only, with line info (`-g`, `-gp`)."""
  tool = _nvdisasm_path()
  with tempfile.TemporaryDirectory(prefix="pallas-prof-sass-") as d:
    path = os.path.join(d, "kernel.cubin")
    with open(path, "wb") as f:
      f.write(cubin)
    result = subprocess.run([tool, "-c", mode, path], capture_output=True, text=True,
                            timeout=120)
  if result.returncode != 0:
    raise SassUnavailable(f"nvdisasm {mode} failed ({result.returncode}): "
                          f"{result.stderr.strip()[:500]}")
  return result.stdout


def parse_sass(listing: str):
  """[(line number, address, text, opcode, (file, line) | None)], labels, branches."""
  rows, labels, branches = [], {}, []
  current = None
  for n, line in enumerate(listing.splitlines(), start=1):
    fm = SASS_FILE.match(line)
    if fm:
      current = (fm.group(1), int(fm.group(2)))
      continue
    lm = _SASS_LABEL.match(line)
    if lm:
      labels[lm.group(1)] = len(rows)
      continue
    im = _SASS_INSTR.match(line)
    if not im:
      continue
    text = im.group(2).strip().rstrip(";").strip()
    body = text
    if body.startswith("@"):
      body = body.split(None, 1)[1] if " " in body else ""
    opcode = body.split(None, 1)[0] if body else ""
    bm = _SASS_BRANCH.search(text)
    if bm:
      branches.append((len(rows), bm.group(1)))
    rows.append((n, int(im.group(1), 16), text, opcode, current))
  return rows, labels, branches


# --- MLIR (ttir, ttgir) and LLVM IR ----------------------------------------------------------

_MLIR_ALIAS = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")


def _balanced_end(text: str, start: int) -> int:
  """Index just past the ')' matching the '(' at text[start]."""
  depth = 0
  in_str = False
  i = start
  while i < len(text):
    c = text[i]
    if in_str:
      if c == "\\":
        i += 1
      elif c == '"':
        in_str = False
    elif c == '"':
      in_str = True
    elif c in "([":
      depth += 1
    elif c in ")]":
      depth -= 1
      if depth == 0:
        return i + 1
    i += 1
  return -1


class MlirLocs:
  def __init__(self, text: str):
    self.aliases: dict[str, str] = {}
    for line in text.splitlines():
      m = _MLIR_ALIAS.match(line.strip())
      if m:
        self.aliases[m.group(1)] = m.group(2)
    self._cache: dict[str, list[Loc]] = {}

  def chain(self, expr: str, depth: int = 0) -> list[Loc]:
    """Locations of a loc expression, innermost (callee) first."""
    expr = expr.strip()
    if depth > 50 or not expr:
      return []
    if expr in self._cache:
      return self._cache[expr]
    out: list[Loc] = []
    if expr.startswith("#loc"):
      m = re.match(r"#loc\d*", expr)
      out = self.chain(self.aliases.get(m.group(0), ""), depth + 1)
    elif expr.startswith("callsite("):
      inner = expr[len("callsite("):-1]
      callee, _, caller = _split_top(inner, " at ")
      out = self.chain(callee, depth + 1) + self.chain(caller, depth + 1)
    elif expr.startswith("fused"):
      start = expr.find("[")
      end = _balanced_end(expr, start) if start >= 0 else -1
      if start >= 0 and end > 0:
        for part in _split_commas(expr[start + 1:end - 1]):
          out += self.chain(part, depth + 1)
    elif expr.startswith('"'):
      m = re.match(r'"((?:[^"\\]|\\.)*)"(.*)$', expr, re.S)
      if m:
        rest = m.group(2).strip()
        fl = re.match(r":(\d+):(\d+)", rest)
        if fl:
          out = [Loc(m.group(1), int(fl.group(1)))]
        elif rest.startswith("("):
          out = self.chain(rest[1:rest.rfind(")")], depth + 1)    # a named location
    self._cache[expr] = out
    return out

  def line_chain(self, line: str) -> list[Loc] | None:
    """The chain of the op's trailing `loc(...)`, or None if it has none."""
    stripped = line.rstrip()
    if stripped.lstrip().startswith("#loc"):
      return None
    pos = stripped.rfind("loc(")
    while pos >= 0:
      end = _balanced_end(stripped, pos + 3)
      if end == len(stripped) or stripped[end:].strip() in ("", "{", ")", ":", "}"):
        return self.chain(stripped[pos + 4:end - 1])
      pos = stripped.rfind("loc(", 0, pos)
    return None


def _split_top(text: str, sep: str) -> tuple[str, str, str]:
  depth = 0
  for i in range(len(text)):
    c = text[i]
    if c in "([":
      depth += 1
    elif c in ")]":
      depth -= 1
    elif depth == 0 and text.startswith(sep, i):
      return text[:i], sep, text[i + len(sep):]
  return text, "", ""


def _split_commas(text: str) -> list[str]:
  parts, depth, cur = [], 0, []
  for c in text:
    if c in "([":
      depth += 1
    elif c in ")]":
      depth -= 1
    if c == "," and depth == 0:
      parts.append("".join(cur))
      cur = []
    else:
      cur.append(c)
  if cur:
    parts.append("".join(cur))
  return parts


_LLVM_META = re.compile(r"^(![0-9]+)\s*=\s*(?:distinct\s+)?!(\w+)\((.*)\)\s*$")
_LLVM_DBG = re.compile(r"!dbg\s+(![0-9]+)")


class LlvmLocs:
  def __init__(self, text: str):
    self.meta: dict[str, tuple[str, dict[str, str]]] = {}
    for line in text.splitlines():
      m = _LLVM_META.match(line.strip())
      if m:
        fields = {}
        for part in _split_commas(m.group(3)):
          if ":" in part:
            k, v = part.split(":", 1)
            fields[k.strip()] = v.strip()
        self.meta[m.group(1)] = (m.group(2), fields)

  def _file_of_scope(self, ref: str, depth: int = 0) -> str:
    kind, fields = self.meta.get(ref, ("", {}))
    if depth > 20:
      return ""
    if kind == "DIFile":
      name = fields.get("filename", "").strip('"')
      directory = fields.get("directory", "").strip('"')
      return os.path.join(directory, name) if directory else name
    if "file" in fields:
      return self._file_of_scope(fields["file"], depth + 1)
    if "scope" in fields:
      return self._file_of_scope(fields["scope"], depth + 1)
    return ""

  def chain(self, ref: str) -> list[Loc]:
    out, seen = [], set()
    while ref and ref not in seen:
      seen.add(ref)
      kind, fields = self.meta.get(ref, ("", {}))
      if kind != "DILocation":
        break
      out.append(Loc(self._file_of_scope(fields.get("scope", "")), int(fields.get("line", 0))))
      ref = fields.get("inlinedAt", "")
    return out

  def line_chain(self, line: str) -> list[Loc] | None:
    if line.startswith("!"):
      return None
    m = _LLVM_DBG.search(line)
    return self.chain(m.group(1)) if m else None


# --- per stage -----------------------------------------------------------------------------

def chains_of(stage: str, text: str) -> list[list[Loc] | None]:
  """Per line (0-based) of an IR stage's text: its location chain, or None."""
  if stage == "ptx":
    return [list(c) or None for c in ptx_locations(text)[1]]
  locs = LlvmLocs(text) if stage == "llir" else MlirLocs(text)
  return [locs.line_chain(line) for line in text.splitlines()]


def equations_in_ir(gk, ir_text: str, ops: tuple[str, ...] = (), stage: str = "ttgir"):
  """The equations (EqnInfo, first appearance order) whose generated lines
  produced the IR ops whose line contains one of `ops` (all ops when empty)."""
  resolver = Resolver(gk)
  found, seen = [], set()
  for line, chain in zip(ir_text.splitlines(), chains_of(stage, ir_text), strict=True):
    if not chain or (ops and not any(op in line for op in ops)):
      continue
    _, index = resolver.resolve(chain)
    if index is not None and index not in seen:
      seen.add(index)
      found.append(gk.eqns[index])
  return found


_MESSAGE_LOC = re.compile(r'loc\("([^"]+)":(\d+):(\d+)\)')


def generated_lines_in_message(gk, message: str) -> list[int]:
  """Lines of the generated file named by `loc("file":line:col)` in a message
  (a Triton error's text)."""
  name = os.path.basename(gk.path)
  return [int(m.group(2)) for m in _MESSAGE_LOC.finditer(message)
          if os.path.basename(m.group(1)) == name]
