"""The page's code listings: the user's kernel, the generated Triton source, PTX and SASS,
each line with the weight of the equations behind it (the run report's weights, as
model.equation_weights gives them, and the run's kernel files as kernel_files.py read them
before the page is made)."""
from __future__ import annotations

import dataclasses
import os

from ..report import RunReport
from ..saved_runs.files import interactive_lines, source_lines
from ..summary import KernelSummary
from .equations import WeightedEquation
from .kernel_files import SavedKernel
from ...profiler.static.correlate import annotated_listing


@dataclasses.dataclass(frozen=True)
class Line:
  """One line of a listing with the weight of what it lowered to."""
  number: int
  text: str
  weight: float | None = None       # share of the kernel's instructions (or samples)
  eqns: tuple[int, ...] = ()        # equations behind the line
  note: str = ""                    # "[4] exp @ softmax.py:21", the primitives, a stall reason
  stall: str = ""                   # the top stall reason, when the profile measured one
  failing: bool = False             # the line a run-time or lowering error names


@dataclasses.dataclass(frozen=True)
class Listing:
  title: str
  lines: tuple[Line, ...]
  missing: str = ""                 # why there is no listing (no cubin, no nvdisasm, old run)


def find_user_file(run: RunReport, path: str | None) -> str | None:
  """The user's file as the run saw it: absolute, or relative to the directory the run
  started in, which is not recorded: try the script's directory and its parents, then here."""
  if not path:
    return None
  if os.path.isabs(path):
    return path if os.path.isfile(path) else None
  script_dir = os.path.dirname(run.script or "")
  candidates = []
  d = script_dir
  while d and d != os.path.dirname(d):
    candidates.append(os.path.join(d, path))
    d = os.path.dirname(d)
  candidates.append(os.path.abspath(path))
  for c in candidates:
    if os.path.isfile(c):
      return c
  return None


def _failing_lines(run: RunReport, path: str) -> set[int]:
  """The lines of `path` that the run's errors name (their file:line)."""
  out = set()
  for err in run.errors:
    file, _, line = str(err.location or "").rpartition(":")
    found = find_user_file(run, file) if line.isdigit() and file else None   # as the run saw it
    if found and os.path.realpath(found) == os.path.realpath(path):
      out.add(int(line))
  return out


def user_listing(run: RunReport, s: KernelSummary, eqs: list[WeightedEquation]) -> Listing:
  """The kernel's function in the user's file, each line heated by its equations."""
  info = s.source_info or ""                   # "softmax_kernel at examples/softmax.py:18"
  where = info.rsplit(" at ", 1)[-1] if " at " in info else ""
  file_part, _, def_line = where.rpartition(":")
  files = {e.user_file for e in eqs if e.user_file} or {file_part or None}
  main_file = file_part if file_part in files or not eqs else sorted(f for f in files if f)[0]
  path = find_user_file(run, main_file)
  title = f"your kernel: {main_file or '?'}"
  cell = interactive_lines(main_file) if path is None else ()
  if path is None and not cell:
    return Listing(title, (), missing=f"the source file {main_file!r} is not on this machine "
                                      "(the weights per equation are in the generated source)")
  text = list(source_lines(path)) if path is not None else list(cell)
  if not text:
    return Listing(title, (), missing=f"the source file {main_file!r} is not a readable Python "
                                      "file here (a regular .py file)")
  by_line: dict[int, list[WeightedEquation]] = {}
  for e in eqs:
    if e.user_file == main_file and e.user_line:
      by_line.setdefault(e.user_line, []).append(e)
  start = int(def_line) if def_line.isdigit() else min(by_line, default=1)
  end = _block_end(text, start)
  if by_line:
    start, end = min(start, min(by_line)), max(end, max(by_line))
  failing = _failing_lines(run, path) if path is not None else set()
  lines = []
  for n in range(max(1, start), min(len(text), end) + 1):
    mine = by_line.get(n, [])
    weight = sum(e.weight or 0.0 for e in mine) if mine else None
    stalls = [e.stall for e in sorted(mine, key=lambda e: -(e.weight or 0))]
    lines.append(Line(n, text[n - 1], weight, tuple(e.index for e in mine),
                      ", ".join(f"[{e.index}] {e.primitive}" for e in mine),
                      next((s for s in stalls if s), ""), failing=n in failing))
  return Listing(title, tuple(lines))


def _block_end(text: list[str], start: int) -> int:
  """The last line of the function that starts at `start` (decorators above it aside)."""
  if not 1 <= start <= len(text):
    return start
  indent = len(text[start - 1]) - len(text[start - 1].lstrip())
  end = start
  for n in range(start + 1, len(text) + 1):
    line = text[n - 1]
    if not line.strip():
      continue
    if len(line) - len(line.lstrip()) <= indent:
      break
    end = n
  return end


def generated_listing(saved: SavedKernel, eqs: list[WeightedEquation]) -> Listing:
  gk = saved.generated
  title = "generated Triton source"
  if gk is None:
    return Listing(title, (), missing=saved.missing)
  line_map = gk.line_map
  by_index = {e.index: e for e in eqs}
  lines = []
  for n, code in enumerate(gk.code_lines(), start=1):
    i = line_map.get(n)
    e = by_index.get(i) if i is not None else None
    lines.append(Line(n, code,
                      (e.weight or 0.0) if e else None, (i,) if i is not None else (),
                      f"[{e.index}] {e.primitive}" if e else "",
                      e.stall if e else ""))
  return Listing(title, tuple(lines))


def stage_listings(saved: SavedKernel, weights: dict[int, float]) -> tuple[Listing, ...]:
  """PTX and SASS, each instruction heated by its equation (the profiler's correlation)."""
  ck = saved.compiled
  if ck is None or "ptx" not in ck.asm:
    why = saved.missing or "this run directory holds no compiled stages"
    return (Listing("PTX", (), missing=why), Listing("SASS", (), missing=why))
  out = []
  for stage in ("ptx", "sass"):
    try:
      annotated = annotated_listing(ck, stage)
    except Exception as e:  # noqa: BLE001 - no nvdisasm, no cubin: the page says why
      out.append(Listing(stage.upper(), (), missing=f"{type(e).__name__}: {e}"))
      continue
    out.append(Listing(stage.upper(), tuple(
        Line(a.number, a.text,
             weights.get(a.eqn, a.weight) if a.is_instruction and a.eqn is not None
             else (a.weight if a.is_instruction else None),
             (a.eqn,) if a.eqn is not None else (),
             f"[{a.eqn}] {a.primitive}" if a.eqn is not None and a.is_instruction else "")
        for a in annotated)))
  return tuple(out)
