"""Static correlation of a compiled kernel with its jaxpr equations.

Every instruction of the PTX and of the SASS is attributed, through the line
info Triton keeps (`-lineinfo`), to a line of the generated Triton source and
so, through the GeneratedKernel's line map, to a jaxpr equation and the
user's file:line. Works on a machine without a GPU: it needs only the
compile output (and nvdisasm, which ships in the triton wheel).

The stages' line info (PTX, SASS, TTIR/TTGIR, LLIR) is read by backend/compiling/lineinfo.py,
whose docstring says how each stage's locations resolve; the source's is the line map.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
import threading
from collections import Counter, defaultdict
from typing import Iterable, Sequence

from ...backend.artifacts import target_text
from ...backend.compiling.lineinfo import (SASS_FILE, Loc, Resolver, SassUnavailable, chains_of,
                                           disassemble, parse_sass, ptx_locations)
from ..schema import AnnotatedLine, EquationProfile, StaticProfile

CATEGORIES = ("global_load", "global_store", "shared_load", "shared_store", "tensor_core",
              "special_function", "atomic", "barrier", "shuffle")
STAGES = ("source", "ttir", "ttgir", "llir", "ptx", "sass")


# --- instruction classification ----------------------------------------------------------

_SFU_PTX = ("ex2.", "lg2.", "rsqrt.", "sin.", "cos.", "tanh.", "rcp.approx", "sqrt.approx")


def classify_ptx(opcode: str) -> tuple[str, ...]:
  """Categories of one PTX opcode (e.g. 'ld.global.v4.b32')."""
  op = opcode
  cats = []
  if op.startswith(("ld.global", "ldu.global")):
    cats.append("global_load")
  elif op.startswith(("st.global",)):
    cats.append("global_store")
  elif op.startswith(("red.global", "atom.global", "red.", "atom.")) and ".shared" not in op:
    cats += ["atomic", "global_load", "global_store"]
  elif op.startswith("cp.async.bulk.tensor") or op.startswith("cp.async.bulk"):
    # TMA: .shared::cluster.global = load to shared, .global.shared::cta = store
    if re.search(r"\.shared(::\w+)?\.global", op):
      cats += ["global_load", "shared_store"]
    elif re.search(r"\.global\.shared", op):
      cats += ["global_store", "shared_load"]
  elif op.startswith("cp.async.c"):            # cp.async.ca / .cg: global -> shared
    cats += ["global_load", "shared_store"]
  elif op.startswith(("ld.shared", "ldmatrix")):
    cats.append("shared_load")
  elif op.startswith(("st.shared", "stmatrix")):
    cats.append("shared_store")
  elif op.startswith(("atom.shared", "red.shared")):
    cats += ["atomic", "shared_load", "shared_store"]
  if op.startswith(("mma.", "wgmma.mma_async", "tcgen05.mma")):
    cats.append("tensor_core")
  if op.startswith(_SFU_PTX):
    cats.append("special_function")
  if op.startswith(("bar.", "barrier.", "bar ")) or op == "bar":
    cats.append("barrier")
  if op.startswith("shfl."):
    cats.append("shuffle")
  return tuple(cats)


_TENSOR_SASS = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "DMMA", "BMMA", "BGMMA", "OMMA",
                "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA")


def classify_sass(opcode: str) -> tuple[str, ...]:
  """Categories of one SASS opcode (e.g. 'LDG.E.128', 'HGMMA.64x128x16.F32.BF16')."""
  base = opcode.split(".")[0]
  cats = []
  if base in ("LDG", "UTMALDG", "LDGSTS") or base.startswith("UBLKCP"):
    cats.append("global_load")
  if base in ("STG", "UTMASTG", "UTMAREDG"):
    cats.append("global_store")
  if base in ("RED", "REDG", "ATOMG", "ATOM", "REDAS"):
    cats += ["atomic", "global_load", "global_store"]
  if base in ("LDS", "LDSM"):
    cats.append("shared_load")
  if base in ("STS", "STSM", "LDGSTS", "UTMALDG"):
    cats.append("shared_store")
  if base == "UTMASTG":
    cats.append("shared_load")
  if base in ("ATOMS",):
    cats += ["atomic", "shared_load", "shared_store"]
  if base in _TENSOR_SASS:
    cats.append("tensor_core")
  if base == "MUFU":
    cats.append("special_function")
  if base in ("BAR", "SYNCS", "WARPSYNC"):
    cats.append("barrier")
  if base == "SHFL":
    cats.append("shuffle")
  return tuple(dict.fromkeys(cats))


# --- PTX ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Instruction:
  stage: str                    # "ptx" | "sass"
  number: int                   # PTX: 1-based line; SASS: 1-based line of the listing
  text: str
  opcode: str
  categories: tuple[str, ...]
  generated_line: int | None
  eqn: int | None
  loop_depth: int = 0
  address: int | None = None    # SASS: byte offset in the function
  inherited: bool = False       # line 0 (no location): the equation of the instruction before


_PTX_LABEL = re.compile(r"^\s*(\$?[\w.$]+):\s*(//.*)?$")
_PTX_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w.$]+)\s*;")


def _ptx_opcode(line: str) -> str | None:
  """The opcode of a PTX instruction line, or None for directives, labels, braces."""
  s = line.split("//", 1)[0].strip()
  if not s or s.startswith((".", "}", "{", "$", "//")) or s.endswith(":"):
    if s.startswith("{") and len(s) > 1:
      s = s[1:].strip()      # `{ .reg ... }` blocks of inline asm never hold opcodes here
      if not s or s.startswith("."):
        return None
    else:
      return None
  if s.startswith("@"):
    parts = s.split(None, 1)
    if len(parts) < 2:
      return None
    s = parts[1]
  op = s.split(None, 1)[0].rstrip(";")
  if not op or not (op[0].isalpha()):
    return None
  return op


def _loop_depths(labels: dict[str, int], branches: list[tuple[int, str]], n: int) -> list[int]:
  """Loop depth of positions 0..n-1 from backward branches (label before branch)."""
  delta = [0] * (n + 1)
  for pos, target in branches:
    start = labels.get(target)
    if start is not None and start < pos:     # start == pos: the trap loop after EXIT
      delta[start] += 1
      delta[pos + 1] -= 1
  depth, out = 0, []
  for i in range(n):
    depth += delta[i]
    out.append(depth)
  return out


def ptx_instructions(gk, ptx: str) -> list[Instruction]:
  resolver = Resolver(gk)
  lines, chains = ptx_locations(ptx)
  labels = {}
  branches = []
  for i, line in enumerate(lines):
    m = _PTX_LABEL.match(line)
    if m:
      labels[m.group(1)] = i
    b = _PTX_BRANCH.search(line.split("//", 1)[0])
    if b:
      branches.append((i, b.group(1)))
  depths = _loop_depths(labels, branches, len(lines))
  out = []
  in_function = False
  for i, line in enumerate(lines):
    stripped = line.strip()
    if stripped.startswith((".visible .entry", ".entry", ".func", ".visible .func")):
      in_function = True
    if stripped.startswith(".section"):
      in_function = False
    if not in_function:
      continue
    op = _ptx_opcode(line)
    if op is None:
      continue
    gen_line, eqn = resolver.resolve(chains[i])
    out.append(Instruction("ptx", i + 1, stripped, op, classify_ptx(op), gen_line, eqn,
                           depths[i]))
  return _inherit_line_zero(out, gk)


def _inherit_line_zero(instrs: list[Instruction], gk=None) -> list[Instruction]:
  """LLVM marks code it merged or hoisted with line 0 ("no location": `.loc 1 0 0`);
  inside an inlined libdevice sin, such code was most of the samples of a sin/cos
  loop on the H200. Such an instruction belongs to the equation of the nearest
  instruction before it that has one (instructions before any stay unattributed).
  Triton 3.9's LLVM puts the kernel's closing code (`ret`, and in SASS the EXIT
  and its padding) on the kernel's `def` line instead of line 0: the same."""
  nowhere = {0, _def_line(gk)} - {None}
  last = None
  for ins in instrs:
    if ins.eqn is not None:
      last = ins
    elif ins.generated_line in nowhere and last is not None:
      ins.eqn, ins.generated_line, ins.inherited = last.eqn, last.generated_line, True
  return instrs


def _def_line(gk) -> int | None:
  """The generated file's line that defines the kernel function."""
  if gk is None:
    return None
  head = f"def {gk.name}("
  return next((n for n, line in enumerate(gk.source.splitlines(), start=1)
               if line.startswith(head)), None)


# --- SASS ---------------------------------------------------------------------------------

def sass_instructions(gk, cubin: bytes, ptx: str | None,
                      ptx_instrs: Sequence[Instruction] = ()) -> tuple[list[Instruction], str]:
  """SASS instructions attributed to equations, and the listing they come from."""
  resolver = Resolver(gk)
  ptx_chains = None
  if ptx:
    _, ptx_chains = ptx_locations(ptx)
  listing = disassemble(cubin, "-gp")
  rows, labels, branches = parse_sass(listing)
  via_ptx = bool(rows) and all(r[4] is None or r[4][0] == ".nv_debug_ptx_txt" for r in rows)
  if not via_ptx or ptx_chains is None:
    listing = disassemble(cubin, "-g")
    rows, labels, branches = parse_sass(listing)
    via_ptx = False
  depths = _loop_depths(labels, branches, len(rows))
  ptx_by_line = {i.number: i for i in ptx_instrs}
  tensor_eqns = {i.eqn for i in ptx_instrs if "tensor_core" in i.categories}
  out = []
  for i, (n, addr, text, opcode, where) in enumerate(rows):
    if where is None:
      gen_line, eqn = None, None
    elif via_ptx:
      ptx_line = where[1]
      chain = ptx_chains[ptx_line - 1] if 0 < ptx_line <= len(ptx_chains) else ()
      gen_line, eqn = resolver.resolve(chain)
    else:
      gen_line, eqn = resolver.resolve([Loc(where[0], where[1])])
    categories = classify_sass(opcode)
    if via_ptx and "tensor_core" in categories and len(tensor_eqns) == 1:
      # Only PTX mma/wgmma become tensor-core SASS; ptxas's line table sometimes
      # credits one (after unrolling and scheduling) to a neighbouring line.
      # With a single equation owning every PTX tensor-core instruction, that
      # equation is where it came from.
      source = ptx_by_line.get(where[1])
      if source is None or "tensor_core" not in source.categories:
        owner = next(iter(tensor_eqns))
        owner_line = next(x.generated_line for x in ptx_instrs if x.eqn == owner
                          and "tensor_core" in x.categories)
        gen_line, eqn = owner_line, owner
    out.append(Instruction("sass", n, text, opcode, categories, gen_line, eqn,
                           depths[i], address=addr))
  return _inherit_line_zero(out, gk), listing


# --- the kernel's correlation -----------------------------------------------------------------

@dataclasses.dataclass
class Correlation:
  """Everything attributed for one compiled kernel (kept in memory, not serialised)."""
  kernel: str
  ptx: list[Instruction]
  sass: list[Instruction]
  sass_listing: str | None
  sass_error: str | None
  profile: StaticProfile


_cache: dict[str, Correlation] = {}
_cache_lock = threading.Lock()


def correlate(ck, *, top: int = 5) -> Correlation:
  """Attributes the PTX and SASS of a CompiledKernel to its equations."""
  gk = ck.generated
  if gk is None:
    raise ValueError(f"kernel {ck.name}: the CompiledKernel carries no GeneratedKernel, "
                     "so its instructions cannot be mapped to equations")
  with _cache_lock:
    hit = _cache.get(ck.key)
  if hit is not None:
    return hit
  ptx = ptx_instructions(gk, ck.asm.get("ptx", ""))
  sass, listing, error = [], None, None
  if not ck.asm.get("cubin") and hasattr(ck, "cubin_deferred"):
    # lazy: at the top it would load jax, numpy whenever this module is imported
    from ...backend.compiling.compile import assemble_cubin
    ck = assemble_cubin(ck)  # a cubin deferred by the GPU launch path
  cubin = ck.asm.get("cubin")
  if cubin:
    try:
      sass, listing = sass_instructions(gk, cubin, ck.asm.get("ptx"), ptx)
    except (SassUnavailable, OSError, subprocess.SubprocessError) as e:
      error = str(e)
  else:
    error = "the compile output has no cubin"
  profile = _static_profile(ck, gk, ptx, sass, error, top)
  result = Correlation(ck.name, ptx, sass, listing, error, profile)
  with _cache_lock:
    _cache[ck.key] = result
  return result


def _counts(instrs: Iterable[Instruction]) -> dict[str, int]:
  c = Counter()
  for ins in instrs:
    c.update(ins.categories)
  return {k: c.get(k, 0) for k in CATEGORIES}


def user_location(gk, index: int | None) -> tuple[str | None, int | None, str | None]:
  """The user's file, line and function for an equation (inherited from the
  enclosing equation when the equation itself has none, e.g. inside jnp.where)."""
  seen = set()
  while index is not None and index not in seen:
    seen.add(index)
    e = gk.eqns[index]
    if e.file is not None and e.line is not None:
      return e.file, e.line, e.function
    index = e.parent
  return None, None, None


def _static_profile(ck, gk, ptx, sass, sass_error, top) -> StaticProfile:
  by_eqn_ptx = defaultdict(list)
  by_eqn_sass = defaultdict(list)
  lines_of = defaultdict(set)
  for ins in ptx:
    by_eqn_ptx[ins.eqn].append(ins)
    if ins.eqn is not None and ins.generated_line is not None:
      lines_of[ins.eqn].add(ins.generated_line)
  for ins in sass:
    by_eqn_sass[ins.eqn].append(ins)
    if ins.eqn is not None and ins.generated_line is not None:
      lines_of[ins.eqn].add(ins.generated_line)
  for line, idx in gk.line_map.items():
    lines_of[idx].add(line)
  primary = sass if sass else ptx
  by_primary = by_eqn_sass if sass else by_eqn_ptx
  total = len(primary) or 1
  equations = []
  for e in gk.eqns:
    p, s = by_eqn_ptx.get(e.index, []), by_eqn_sass.get(e.index, [])
    mine = by_primary.get(e.index, [])
    file, line, function = user_location(gk, e.index)
    equations.append(EquationProfile(
        index=e.index, path=e.path, primitive=e.primitive, text=e.text, user_file=file,
        user_line=line, function=function, parent=e.parent, region=e.region,
        generated_lines=sorted(lines_of.get(e.index, ())),
        ptx_instructions=len(p), sass_instructions=len(s),
        weight=len(mine) / total, inclusive_weight=0.0,
        loop_instructions=sum(1 for i in mine if i.loop_depth > 0),
        ptx_counts=_counts(p), sass_counts=_counts(s), out_avals=list(e.out_avals)))
  _fill_inclusive(equations, total, by_primary)
  ranked = sorted((e for e in equations if e.weight > 0), key=lambda e: -e.weight)
  unattributed = by_primary.get(None, [])
  return StaticProfile(
      kernel=ck.name, target=target_text(ck.target), generated_path=gk.path,
      grid=list(gk.grid), launch_grid=list(gk.launch_grid), num_warps=ck.num_warps,
      num_stages=ck.num_stages, resources=ck.resources(),
      ptx_instructions=len(ptx), sass_instructions=len(sass),
      weight_basis="sass" if sass else "ptx", sass_error=sass_error,
      ptx_counts=_counts(ptx), sass_counts=_counts(sass),
      unattributed_instructions=len(unattributed), unattributed_counts=_counts(unattributed),
      equations=equations, top_equations=[e.index for e in ranked[:top]])


def _fill_inclusive(equations: list[EquationProfile], total: int, by_primary) -> None:
  children = defaultdict(list)
  for e in equations:
    if e.parent is not None:
      children[e.parent].append(e.index)

  def inclusive(i: int, seen: set) -> int:
    if i in seen:
      return 0
    seen.add(i)
    return len(by_primary.get(i, [])) + sum(inclusive(c, seen) for c in children[i])

  for e in equations:
    e.inclusive_weight = inclusive(e.index, set()) / total


# --- annotated listings ---------------------------------------------------------------------

def annotated_listing(ck, stage: str) -> list[AnnotatedLine]:
  """The text of one stage, each line paired with its equation, the user's
  file:line and the equation's weight (its share of the kernel's instructions).

  stage: one of source, ttir, ttgir, llir, ptx, sass.
  """
  if stage not in STAGES:
    raise ValueError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
  gk = ck.generated
  corr = correlate(ck)
  weights = {e.index: e.weight for e in corr.profile.equations}
  resolver = Resolver(gk)

  def line_for(number, text, gen_line, eqn, instr=False):
    file, uline, _ = user_location(gk, eqn) if eqn is not None else (None, None, None)
    return AnnotatedLine(
        number=number, text=text, generated_line=gen_line, eqn=eqn,
        primitive=gk.eqns[eqn].primitive if eqn is not None else None,
        user_location=f"{file}:{uline}" if file else None,
        weight=weights.get(eqn, 0.0) if eqn is not None else None,
        is_instruction=instr)

  out = []
  if stage == "source":
    for n, text in enumerate(gk.source.splitlines(), start=1):
      out.append(line_for(n, text, n, gk.line_map.get(n)))
  elif stage == "ptx":
    by_line = {i.number: i for i in corr.ptx}
    lines, chains = ptx_locations(ck.asm.get("ptx", ""))
    for n, text in enumerate(lines, start=1):
      ins = by_line.get(n)
      if ins is not None:
        out.append(line_for(n, text, ins.generated_line, ins.eqn, True))
      else:
        out.append(line_for(n, text, None, None))
  elif stage == "sass":
    if corr.sass_listing is None:
      raise SassUnavailable(corr.sass_error or "no SASS")
    by_line = {i.number: i for i in corr.sass}
    for n, text in enumerate(corr.sass_listing.splitlines(), start=1):
      if SASS_FILE.match(text):
        continue      # nvdisasm's own line-info comments: the annotation replaces them
      ins = by_line.get(n)
      if ins is not None:
        out.append(line_for(n, text, ins.generated_line, ins.eqn, True))
      else:
        out.append(line_for(n, text, None, None))
  else:
    text = ck.asm.get(stage)
    if text is None:
      raise ValueError(f"the compile output has no {stage} stage")
    for n, (line, chain) in enumerate(zip(text.splitlines(), chains_of(stage, text), strict=True),
                                start=1):
      gen_line, eqn = resolver.resolve(chain) if chain else (None, None)
      out.append(line_for(n, line, gen_line, eqn))
  return out


def clear_cache() -> None:
  with _cache_lock:
    _cache.clear()


__all__ = ["correlate", "annotated_listing", "Correlation", "Instruction", "classify_ptx",
           "classify_sass", "disassemble", "CATEGORIES", "STAGES", "user_location",
           "SassUnavailable"]
