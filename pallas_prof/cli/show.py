"""`pallas-prof show KERNEL`: a compile stage, every line annotated with its
equation, your source line and (when profiled) its weight; `--eject FILE`
writes the kernel as a standalone Triton program."""
from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys

from rich.text import Text

from ..profiler import annotated_listing
from ..profiler.attribution_schema import Attribution, EquationWeight, LineWeight
from ..profiler.sampling import stalls
from ..profiler.schema import AnnotatedLine
from ..profiler.static.correlate import correlate

from ..safe_files import UnsafeFile
from . import run_directory
from .saved_runs.files import source_line, source_lines
from .targets import view as show_targets
from .terminal.render import console

STAGES = ("source", "ttir", "ttgir", "llir", "ptx", "sass")


@dataclasses.dataclass(frozen=True)
class Weights:
  """What show reads of a kernel's attribution, typed: the profiler's Attribution, or for a
  run from before attribution the static shares alone."""
  basis: str
  description: str
  shares: tuple[tuple[int, float], ...]        # (equation index, weight)
  lines: tuple[LineWeight, ...] = ()
  equations: tuple[EquationWeight, ...] = ()
  total: float = 0.0
  instructions: tuple[tuple, ...] = ()         # (SASS address, samples, top reason)

  @classmethod
  def of(cls, att: Attribution) -> "Weights":
    return cls(att.basis, att.description, tuple((e.index, e.weight) for e in att.equations),
               tuple(att.lines), tuple(att.equations), att.total,
               tuple(tuple(i) for i in att.instructions))

  @property
  def measured(self) -> bool:
    return self.basis != "static"


def annotated(gk, ck, stage: str):
  """AnnotatedLine objects for a stage (source works without a compile)."""
  if ck is None and stage != "source":
    raise SystemExit(f"pallas-prof: the kernel was not compiled, so there is no {stage}")
  if ck is None:
    lines = []
    for n, text in enumerate(gk.source.splitlines(), start=1):
      i = gk.line_map.get(n)
      e = gk.eqns[i] if i is not None else None
      lines.append(AnnotatedLine(number=n, text=text, generated_line=n, eqn=i,
                                 primitive=e.primitive if e else None,
                                 user_location=f"{e.file}:{e.line}" if e and e.file else None,
                                 weight=None))
    return lines
  return annotated_listing(ck, stage)


def show(args) -> int:
  targets = show_targets.targets_or_exit(args)   # a typo ends here, before a run is read
  run_dir, kdir = run_directory.locate_kernel(args.kernel, args.dir)
  gk, ck = run_directory.load_kernel_or_exit(kdir, run_dir)
  if args.eject:
    show_targets.check_saved_source(gk, kdir, "--eject writes it into a program you run")
    # lazy: at the top it would load triton whenever this module is imported
    from .eject import eject
    try:
      path = eject(gk, args.eject, aliases=run_directory.load_aliases(kdir, run_dir))
    except UnsafeFile as e:
      raise SystemExit(f"pallas-prof: {e}") from None
    except OSError as e:
      raise SystemExit(f"pallas-prof: cannot write {args.eject}: {e.strerror or e}; give "
                       "--eject a path in a directory that exists and you can write") from None
    print(f"wrote {path}: python {path} --interpret (CPU) or python {path} (GPU)")
    return 0
  con = console()
  stage = next((s for s in STAGES if getattr(args, s, False)), "source")
  if targets:
    show_targets.check_saved_source(gk, kdir)
    return _for_targets(args, con, gk, run_dir, targets, stage)
  att = _attribution_by_dir(run_dir, kdir)
  if getattr(args, "user", False):
    return show_user(con, gk, att, run_dir, wide=getattr(args, "wide", False))
  return _listing(args, con, gk, ck, stage, att, run_dir)


def _for_targets(args, con, gk, run_dir: str, targets, stage: str) -> int:
  """--target: the targets side by side, or with a stage flag each target's listing
  (the run's measured weights belong to the run's binary, so none are shown)."""
  if getattr(args, "user", False):
    raise SystemExit("pallas-prof: --user shows the run's measured lines; it does not "
                     "combine with --target")
  if stage == "source":
    return show_targets.show_table(con, gk, run_dir, targets, getattr(args, "json", False))
  fit = (lambda text: text) if getattr(args, "wide", False) else \
      (lambda text: _cut(text, con.width))
  code = 0
  for outcome in show_targets.compile_each(gk, targets):
    if outcome.compiled is None:
      print(f"pallas-prof: {outcome.target.name} {outcome.status}:\n{outcome.error}",
            file=sys.stderr)
      code = 1
    elif outcome.target.backend == "hip":
      show_targets.amd_listing(con, outcome, stage, fit)
    else:
      _listing(args, con, gk, outcome.compiled, stage, None, run_dir,
               f" compiled for {outcome.target.name}")
  return code


def _listing(args, con, gk, ck, stage: str, att, run_dir: str, compiled_for: str = "") -> int:
  lines = annotated(gk, ck, stage)
  weights = dict(att.shares) if att is not None else {}
  measured = att is not None and att.measured
  unit = "of the time" if measured else "of instructions"
  per_line = _instruction_samples(ck, att) if stage == "sass" and measured else {}
  fit = (lambda text: text) if getattr(args, "wide", False) else \
      (lambda text: _cut(text, con.width))
  con.print(Text(fit(f"{stage} of {gk.name}{compiled_for} ({gk.source_info}) from {run_dir}")))
  if att is not None:
    con.print(Text(fit(f"weights: {att.description}"), style="dim"))
  con.print(Text(fit("[n]: the line's equation, described where it first appears; lines "
                     "without one are the kernel's set-up (program ids, block offsets)"),
                 style="dim"))
  code = gk.code_lines() if stage == "source" else None
  described = set()
  tag_width = len(f"[{max((ln.eqn for ln in lines if ln.eqn is not None), default=0)}]")
  for ln in lines:
    if ln.eqn is not None and ln.eqn not in described:
      described.add(ln.eqn)
      e = gk.eqns[ln.eqn]
      user = source_line(e.file, e.line).strip()
      w = weights.get(ln.eqn, None if att is not None else ln.weight)
      share = f"   ({100 * w:.1f}% {unit})" if w is not None else ""
      lead = f"── [{e.index}] {e.primitive} @ {e.location}: "
      if not getattr(args, "wide", False):     # the user's line gives way, not the share
        user = _cut(user, max(12, con.width - len(lead) - len(share)))
      header = Text(fit(lead + user), style="bold cyan")
      header.append(share, style="yellow")
      con.print(header)
    tag = f"[{ln.eqn}]" if ln.eqn is not None else ""
    text = f"{ln.number:5d} {tag:>{tag_width}}  "
    if ln.number in per_line:
      share, reason = per_line[ln.number]
      text += f"{100 * share:5.1f}% {reason}: "
    line_text = code[ln.number - 1] if code and 1 <= ln.number <= len(code) else ln.text
    con.print(Text(fit(text + _clean(stage, line_text))))
  return 0


# what each stage's lines carry that the equation tags already say (MLIR's loc(#locN),
# LLVM's !dbg; the generated source's own comments come off through GeneratedKernel.code_lines),
# and SASS's column of spaces between an instruction's address and its text
_NOISE = {"ttir": re.compile(r"\s+loc\(#loc\d*\)$"), "ttgir": re.compile(r"\s+loc\(#loc\d*\)$"),
          "llir": re.compile(r",\s*!dbg !\d+$")}
_SASS_GAP = re.compile(r"^\s*(/\*[0-9a-f]+\*/)\s+")


def _clean(stage: str, text: str) -> str:
  text = text.expandtabs(4).rstrip()
  if stage in _NOISE:
    text = _NOISE[stage].sub("", text)
  if stage == "source":
    text = re.sub(r"(\S)\s{3,}(# .*)$", r"\1  \2", text)   # a note aligned far right
  elif stage == "sass":
    text = _SASS_GAP.sub(r"\1  ", text)
  return text


def _cut(text: str, width: int) -> str:
  """`text` in `width` columns: cut, ending in an ellipsis (`--wide` prints lines whole)."""
  return text if len(text) <= width else text[:width - 1] + "…"


def _instruction_samples(ck, att: Weights) -> dict[int, tuple[float, str]]:
  """SASS listing line -> (share of the samples, top stall in words)."""
  total = att.total or 0
  by_address = {int(a): (n, r) for a, n, r in att.instructions}
  out = {}
  for ins in correlate(ck).sass:
    hit = by_address.get(ins.address)
    if hit and total:
      out[ins.number] = (hit[0] / total, stalls.words(hit[1]) if hit[1] else "")
  return out


def show_user(con, gk, att: Weights | None, run_dir: str, wide: bool = False) -> int:
  """The user's kernel source, each line with its share and top stall reason."""
  files = [e.file for e in gk.eqns if e.file and e.line]
  if not files:
    raise SystemExit(f"pallas-prof: {gk.name} records no source lines of yours")
  path = max(set(files), key=files.count)
  lines = [e.line for e in gk.eqns if e.file == path and e.line]
  first, last = _function_span(path, min(lines), max(lines))
  if not source_line(path, first):
    raise SystemExit(f"pallas-prof: {path}, the kernel's source file the run names, is not "
                     "readable here (it is read only as a regular .py file); run the script "
                     "again with `pallas-prof run` where that file is, or show the generated "
                     "source without --user")
  by_line = {ln.user_line: ln for ln in (att.lines if att is not None else ())
             if ln.user_file == path}
  loads = {e.user_line: e for e in (att.equations if att is not None else ()) if e.waits}
  measured = att is not None and att.measured
  con.print(Text(f"{os.path.basename(path)} ({gk.name}) from {run_dir}"))
  described = att.description if att is not None else None
  for words in (f"weights: {described or 'none recorded'}",
                "" if measured else "not measured: share of instructions, no stall reasons"):
    if words:
      con.print(Text(words if wide else _cut(words, con.width), style="dim"))
  for n in range(first, last + 1):
    ln = by_line.get(n)
    cell = Text(f"{100 * ln.weight:5.1f}%" if ln else "      ", style="yellow")
    t = Text(f"{n:5d} ")
    t.append_text(cell)
    t.append(f"  {source_line(path, n).rstrip()}")
    why = []
    if ln and measured and ln.top_stall:
      why.append(ln.top_stall)
    e = loads.get(n)
    w = next((w for w in (e.waits if e is not None else ()) if w.reason == "long_scoreboard"
              and w.consumer_line != n), None)
    if w and measured:
      why.append(f"first used by {w.consumer_primitive} at :{w.consumer_line}")
    if ln and ln.time_s is not None:
      why.insert(0, f"{ln.time_s * 1e6:.1f} µs")
    if why:
      t.append(f"   # {'; '.join(why)}", style="dim")
    if not wide and len(t.plain) > con.width:
      t.truncate(con.width - 1)
      t.append("…")
    con.print(t, soft_wrap=True)
  return 0


def _function_span(path: str, lo: int, hi: int) -> tuple[int, int]:
  """The lines of the innermost function of `path` holding lines lo..hi."""
  try:
    tree = ast.parse("\n".join(source_lines(path)))
  except (SyntaxError, ValueError):
    return lo, hi
  best = None
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
        node.lineno <= lo and hi <= node.end_lineno:
      if best is None or node.lineno > best.lineno:
        best = node
  return (best.lineno, best.end_lineno) if best else (lo, hi)


def _attribution_by_dir(run_dir: str, kdir: str) -> Weights | None:
  """The kernel's attribution in the run's report (weights measured or static)."""
  report = run_directory.read_report(run_dir)
  for k in report.kernels:
    if os.path.normpath(os.path.dirname(k.files.get("kernel") or "")) == \
        os.path.relpath(kdir, run_dir):
      p = report.kernel_profile(k.label)
      if p is not None and p.attribution is not None:
        return Weights.of(p.attribution)
      if p is not None and p.static is not None:   # a run from before attribution
        return Weights("static", "static instruction share",
                       tuple((e.index, e.weight) for e in p.static.equations))
  return None
