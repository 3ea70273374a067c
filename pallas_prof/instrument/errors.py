"""Annotated reports of LoweringErrors: what failed, where in your code, what to do.

    try:
      f(x)
    except pallas_prof.LoweringError as e:
      pallas_prof.instrument.render_error(e)   # rich on a terminal, plain text otherwise
      text = pallas_prof.instrument.error_text(e)

A report shows the kernel, the user's source line with context, the jaxpr
with the failing equation marked, its avals and the kernel's block shapes,
the rule that failed (or the compiler stage), the underlying error, and a
hint. It works from the error alone: a KernelError's typed fields (backend/errors.py),
which LoweringError, CompileError and KernelRuntimeError share. Refs are named as the
kernel names them (`x_ref`, not the jaxpr's `b`).
"""
from __future__ import annotations

import dataclasses
import linecache
import os
import re
from typing import Any

from ..backend.equation_text import aval_texts
from ..backend.errors import KernelError, Unsupported, by_line
from ..backend.lowering.codegen import UnsupportedDtype

CONTEXT_LINES = 2          # source lines shown around the user's line
JAXPR_WINDOW = 12          # jaxpr lines shown around the marked equation of a long jaxpr
MAX_CAUSE_LINES = 12
MARK = ">>"


# --- what a report says -------------------------------------------------------------------------

@dataclasses.dataclass
class SourceLine:
  number: int
  text: str
  marked: bool


@dataclasses.dataclass
class Report:
  title: str
  reason: str
  location: str | None             # file:line (in function)
  source: list[SourceLine]
  jaxpr: list[tuple[str, bool]]    # (line, is the failing equation)
  jaxpr_note: str | None
  equation: list[tuple[str, str]]  # (label, text)
  hint: str | None
  # a compile failure that points at several equations (CompileError.equations):
  # the others, each as (where, its source lines)
  also: list[tuple[str, list[SourceLine]]] = dataclasses.field(default_factory=list)


def build_report(err: KernelError) -> Report:
  eqn, kernel, stage = err.eqn, err.kernel, err.stage
  where = f" in kernel `{kernel}`" if kernel else ""
  run_time = err.at_run_time
  if run_time:
    # lowering and compiling succeeded: the kernel failed while it ran
    at = f", at `{eqn.primitive}`" if eqn is not None else ""
    title = f"kernel `{kernel}` failed at run time{at}" if kernel else f"failed at run time{at}"
  elif eqn is not None and stage:
    title = f"cannot compile{where} ({stage} stage), at `{eqn.primitive}`"
  elif eqn is not None:
    title = f"cannot lower `{eqn.primitive}`{where}"
  elif stage:
    title = f"cannot compile{where} ({stage} stage)"
  else:
    title = f"cannot lower{where}"
  file, line, function = _user_location(err)
  location = None
  if file is not None:
    location = f"{file}:{line}" + (f" in {function}" if function else "")
  # a run-time report stays short: the equation and the line, not the whole jaxpr
  jaxpr, note = ([], None) if run_time else _marked_jaxpr(err.jaxpr_text or "",
                                                          eqn)
  jaxpr = [(_named(err, line), marked) for line, marked in jaxpr]
  return Report(title=title, reason=err.reason, location=location,
                source=_source_lines(file, line), jaxpr=jaxpr, jaxpr_note=note,
                equation=_equation_facts(err), hint=err.hint,
                also=_other_equations(err))


def _other_equations(err: KernelError) -> list[tuple[str, list[SourceLine]]]:
  """The equations besides `eqn` a compile failure points at, at the user's lines."""
  out = []
  main = err.eqn
  for indices, e in by_line(err.equations):
    if e.file is None or (main is not None and (e.file, e.line) == (main.file, main.line)):
      continue
    where = f"{e.file}:{e.line}" + (f" in {e.function}" if e.function else "")
    out.append((f"[{', '.join(map(str, indices))}] {e.primitive} at {where}",
                [s for s in _source_lines(e.file, e.line) if s.marked]))
  return out


def _user_location(err: KernelError) -> tuple[str | None, int | None, str | None]:
  eqn = err.eqn
  if eqn is not None and eqn.file is not None:
    return eqn.file, eqn.line, eqn.function
  # a kernel-level error: the kernel's own definition ("name at file:line")
  for value in err.details.values():
    m = re.search(r"^(\S+) at (.+):(\d+)$", str(value))
    if m and os.path.exists(m.group(2)):
      return m.group(2), int(m.group(3)), m.group(1)
  return None, None, None


def _source_lines(file: str | None, line: int | None) -> list[SourceLine]:
  if file is None or line is None:
    return []
  out = []
  for number in range(max(1, line - CONTEXT_LINES), line + CONTEXT_LINES + 1):
    text = linecache.getline(file, number)
    if not text and number > line:
      break
    out.append(SourceLine(number, text.rstrip("\n"), number == line))
  return out


def _named(err: KernelError, text: str | None) -> str | None:
  """`text` with the kernel's names for the jaxpr's refs (the error's ref_names)."""
  return err.named(text)


def _block_shapes(jaxpr_text: str) -> str | None:
  """The kernel's refs as it sees them (its blocks), from the jaxpr's binders."""
  head = jaxpr_text.split(". let", 1)[0]
  refs = re.findall(r"([a-z_]+):Ref<[^>]*>\{([^}]*)\}", head)
  if not refs:
    return None
  return ", ".join(f"{name}: {aval}" for name, aval in refs)


def _rule_name(primitive: str | None) -> str | None:
  if primitive is None:
    return None
  try:
    # lazy: guarded: the report still renders where the rules fail to import
    from ..backend.lowering.rules import all_rules
    rules = all_rules()
  except Exception:  # noqa: BLE001 - a report must render even if rules fail to import
    return None
  for prim, fn in rules.items():
    if getattr(prim, "name", None) == primitive:
      module = getattr(fn, "__module__", "?")
      return f"RULES[{primitive}] = {module}.{getattr(fn, '__qualname__', fn)}"
  return f"no rule for `{primitive}` is registered"


def _failed_inside_a_rule(err: KernelError) -> bool:
  """A rule that broke (pallas-prof's bug): the report names the rule, for the bug report.
  One that refused the equation (unsupported, or no rule at all), or a later stage's
  failure, is said in the user's terms: the equation, their line, what to do; a path into
  pallas-prof's rule table only sent them reading our source."""
  cause = err.cause
  return (not err.at_run_time and err.stage is None
          and cause is not None and not isinstance(cause, (Unsupported, UnsupportedDtype)))


def _cause_text(err: KernelError) -> str | None:
  cause = err.cause
  if cause is None:
    return None
  text = str(cause).strip()
  if not text:
    return type(cause).__name__
  if text in err.reason:
    return None
  lines = text.splitlines()
  if len(lines) > MAX_CAUSE_LINES:
    lines = lines[:MAX_CAUSE_LINES - 1] + [f"... ({len(lines) - MAX_CAUSE_LINES + 1} more lines)"]
  return f"{type(cause).__name__}: " + "\n".join(lines)


def _equation_facts(err: KernelError) -> list[tuple[str, str]]:
  eqn = err.eqn
  facts: list[tuple[str, str]] = []
  if eqn is not None:
    region = eqn.region if eqn.parent is None else f"{eqn.region} of equation [{eqn.parent}]"
    facts.append(("equation", f"[{eqn.index}] {_named(err, eqn.text)}   ({region})"))
    if eqn.in_avals:
      facts.append(("operands", aval_texts(eqn.in_avals)))
    if eqn.out_avals:
      facts.append(("results", aval_texts(eqn.out_avals)))
  blocks = _named(err, _block_shapes(err.jaxpr_text or ""))
  if blocks:
    facts.append(("blocks", blocks))
  stage = err.stage
  rule = _rule_name(err.rule or err.primitive) if _failed_inside_a_rule(err) else None
  if rule:
    facts.append(("rule", rule))
  if err.at_run_time:
    facts.append(("stage", "run time" + (f", found by {err.where}" if err.where else "")
                  + "; lowering and compiling had succeeded"))
  else:
    facts.append(("stage", f"Triton {stage}" if stage else "lowering (jaxpr -> Triton source)"))
  for key, value in err.details.items():
    facts.append((str(key), str(value)))
  cause = _cause_text(err)
  if cause:
    facts.append(("underlying error", cause))
  return facts


# --- the failing equation in the printed jaxpr ----------------------------------------------

def _indent(line: str) -> int:
  return len(line) - len(line.lstrip(" "))


def _find_equation_line(lines: list[str], eqn) -> int | None:
  """The line the lowering recorded for the equation (EquationRecord.jaxpr_line:
  where it starts in GeneratedKernel.jaxpr_text, the text the error carries)."""
  line = eqn.jaxpr_line
  return line if line is not None and 0 <= line < len(lines) else None


def _marked_jaxpr(jaxpr_text: str, eqn) -> tuple[list[tuple[str, bool]], str | None]:
  lines = jaxpr_text.rstrip("\n").splitlines()
  if not lines:
    return [], None
  marked = _find_equation_line(lines, eqn) if eqn is not None else None
  note = None
  if eqn is not None and marked is None:
    if eqn.region.startswith("index_map"):
      note = (f"the failing equation is in the {eqn.region} (a BlockSpec index map), "
              "not in the kernel's jaxpr")
    elif eqn.region == "call":
      note = ("the failure is the pallas_call's own (its grid and BlockSpecs), not an "
              "equation of the kernel's jaxpr")
    else:
      note = "the failing equation could not be located in the printed jaxpr"
  end_of_marked = marked
  if marked is not None:
    # a multi-line equation (nested jaxpr, long parameters) is marked whole
    depth = _indent(lines[marked])
    end_of_marked = marked
    for i in range(marked + 1, len(lines)):
      if _indent(lines[i]) > depth or (lines[i].strip().startswith(("]", ")")) and
                                       _indent(lines[i]) == depth):
        end_of_marked = i
        if lines[i].strip().startswith(("]", ")")) and _indent(lines[i]) == depth:
          break
      else:
        break
    if end_of_marked - marked > 6:
      end_of_marked = marked         # a whole loop body: mark its first line only
  out = [(line, marked is not None and marked <= i <= end_of_marked)
         for i, line in enumerate(lines)]
  if len(out) > 2 * JAXPR_WINDOW + 4:
    center = marked if marked is not None else 0
    lo = max(1, center - JAXPR_WINDOW)
    hi = min(len(out) - 1, center + JAXPR_WINDOW)
    window = [out[0]]
    if lo > 1:
      window.append((f"    ... ({lo - 1} lines)", False))
    window += out[lo:hi]
    if hi < len(out) - 1:
      window.append((f"    ... ({len(out) - 1 - hi} lines)", False))
    window.append(out[-1])
    out = window
  return out, note


# --- rendering ------------------------------------------------------------------------------------

def error_text(err: KernelError) -> str:
  """The report as plain text (no colour, no box drawing)."""
  r = build_report(err)
  out = [f"pallas-prof: {r.title}", f"  {r.reason}"]
  if r.location:
    out += ["", f"  --> {r.location}"]
    width = len(str(r.source[-1].number)) if r.source else 1
    for s in r.source:
      out.append(f"  {MARK if s.marked else '  '} {s.number:>{width}} | {s.text}")
  if r.also:
    out += ["", "  and the other lines it may come from:"]
    for where, lines in r.also:
      out.append(f"  --> {where}")
      out += [f"  {MARK} {s.number} | {s.text}" for s in lines]
  if r.jaxpr:
    marks = f" ({MARK} marks the failing equation)" if any(m for _, m in r.jaxpr) else ""
    out += ["", f"  jaxpr of the kernel{marks}:"]
    for line, marked in r.jaxpr:
      out.append(f"  {MARK if marked else '  '}   {line}")
    if r.jaxpr_note:
      out.append(f"  ({r.jaxpr_note})")
  if r.equation:
    out.append("")
    width = max(len(label) for label, _ in r.equation)
    for label, text in r.equation:
      first, *rest = text.splitlines() or [""]
      out.append(f"  {label + ':':<{width + 1}} {first}")
      out += [f"  {'':<{width + 1}} {more}" for more in rest]
  if r.hint:
    out += ["", f"  hint: {r.hint}"]
  return "\n".join(out) + "\n"


def render_error(err: KernelError, console=None, redact=None) -> None:
  """Prints the report: with colour and panels on a terminal, plain text otherwise.
  `redact` (pallas_prof/redaction's Redactor, as `pallas-prof run` passes it) masks the
  secrets in its texts (a path, a message) before they are printed."""
  # lazy: keeps rich out of this module's import (start-up time)
  from rich.console import Console
  console = console or Console(stderr=True)
  if not console.is_terminal:
    text = error_text(err)
    console.print(redact(text) if redact is not None else text, markup=False,
                  highlight=False, soft_wrap=True, end="")
    return
  console.print(rich_report(err, redact))


def rich_report(err: KernelError, redact=None):
  """The report as a rich renderable (a Panel); `redact` as render_error's."""
  # lazy: keeps rich out of this module's import (start-up time)
  from rich.console import Group
  from rich.panel import Panel
  from rich.table import Table
  from rich.text import Text

  r = build_report(err)
  if redact is not None:
    r = redact(r)             # every text of it: the location, the source, the reason
  parts: list[Any] = [Text(r.reason, style="bold")]
  if r.location:
    parts.append(Text(f"\n--> {r.location}", style="cyan"))
    width = len(str(r.source[-1].number)) if r.source else 1
    for s in r.source:
      style = "bold red" if s.marked else "dim"
      line = Text(f"{'>' if s.marked else ' '} {s.number:>{width}} │ ", style=style)
      line.append(s.text, style="bold" if s.marked else "")
      parts.append(line)
  if r.also:
    parts.append(Text("\nand the other lines it may come from:", style="cyan"))
    for where, lines in r.also:
      parts.append(Text(f"--> {where}", style="cyan"))
      for s in lines:
        parts.append(Text(f"> {s.number} │ {s.text}", style="bold red"))
  if r.jaxpr:
    parts.append(Text("\njaxpr of the kernel:", style="cyan"))
    for line, marked in r.jaxpr:
      parts.append(Text(f"{MARK if marked else '  '} {line}", style="bold red" if marked else "dim"))
    if r.jaxpr_note:
      parts.append(Text(f"({r.jaxpr_note})", style="italic"))
  if r.equation:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="cyan", no_wrap=True)
    table.add_column()
    for label, text in r.equation:
      table.add_row(Text(label), Text(text))
    parts += [Text(""), table]
  if r.hint:
    parts.append(Text.assemble("\n", ("hint: ", "bold green"), r.hint))
  return Panel(Group(*parts), title=f"pallas-prof: {r.title}", title_align="left",
               border_style="red")
