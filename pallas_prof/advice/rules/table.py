"""The diagnosis rules' table: each rule is a small function of KernelFacts returning
Findings (a Diagnosis and the actions that answer it), registered in order with
@rule("name"), like the lowering's rules; each can be called and tested alone.

Helpers here build what every rule needs: a diagnosis about an equation (its line and
share), evidence, and actions of each kind (schema.KINDS)."""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..facts import EqFacts, KernelFacts
from ..schema import Action, Diagnosis, Evidence


@dataclasses.dataclass
class Finding:
  diagnosis: Diagnosis
  actions: list[Action] = dataclasses.field(default_factory=list)


Rule = Callable[[KernelFacts], list[Finding]]
RULES: dict[str, Rule] = {}


def rule(name: str):
  def register(fn: Rule) -> Rule:
    if name in RULES:
      raise ValueError(f"advice rule {name!r} registered twice")
    fn.rule_name = name
    RULES[name] = fn
    return fn
  return register


def about(rule_name: str, text: str, f: KernelFacts, e: EqFacts | None = None,
          evidence=(), share: float | None = None) -> Diagnosis:
  """A diagnosis of the kernel (e None: located at the kernel's function) or of an equation."""
  if e is None:
    return Diagnosis(rule_name, text, list(evidence), None, None, f.kernel_file, f.kernel_line,
                     share)
  return Diagnosis(rule_name, text, list(evidence), e.index, e.primitive, e.user_file,
                   e.user_line, e.weight if share is None else share)


def fact(what: str, text: str, measured: bool = False, value: float | None = None) -> Evidence:
  return Evidence(what, text, measured, value)


def config(rule_name: str, change: dict, f: KernelFacts, why: str = "",
           estimate: tuple[float | None, str] = (None, "")) -> Action:
  """Kind a: a compiler parameter pallas-prof sets itself (no change to the code)."""
  now = {"num_warps": f.num_warps, "num_stages": f.num_stages,
         "launch_group": f.launch_group, "tma": int(f.tma), "persistent": f.persistent,
         "loop_stages": f.loop_stages}
  title = ", ".join(f"{k} {now[k]} -> {v}" for k, v in change.items())
  return Action("a", title + (f" ({why})" if why else ""), rule_name, dict(change),
                user_file=f.kernel_file, user_line=f.kernel_line, estimate_pct=estimate[0],
                estimate_basis=estimate[1])


def blocks(rule_name: str, goal: str, f: KernelFacts, why: str,
           estimate: tuple[float | None, str] = (None, ""), **target) -> Action:
  """A block-shape change, as an intent (goal: "larger", "smaller", "wider"); blockshape.py
  makes it concrete: a variant pallas-prof re-traces (kind c) or an edit (kind d)."""
  return Action("c", f"{goal} blocks ({why})", rule_name, {"block": goal, **target},
                user_file=f.kernel_file, user_line=f.kernel_line, estimate_pct=estimate[0],
                estimate_basis=estimate[1])


def edit(rule_name: str, title: str, text: str, e: EqFacts | None, f: KernelFacts,
         estimate: tuple[float | None, str] = (None, "")) -> Action:
  """Kind d: an edit of the user's code at their line."""
  file, line = (e.user_file, e.user_line) if e is not None else (f.kernel_file, f.kernel_line)
  where = f"{file.rsplit('/', 1)[-1]}:{line}" if file else "your kernel"
  return Action("d", title, rule_name, {}, edit=f"at {where}: {text}", user_file=file,
                user_line=line, estimate_pct=estimate[0], estimate_basis=estimate[1])


def fmt_bytes(n: float | None) -> str:
  if n is None:
    return "?"
  for unit in ("B", "KiB", "MiB", "GiB"):
    if abs(n) < 1024 or unit == "GiB":
      return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024
  return f"{n}"


def pct(x: float | None) -> str:
  return "?" if x is None else f"{100 * x:.0f} %"
