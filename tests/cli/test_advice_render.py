"""The advice section in the terminal: a wrapped line keeps its indent."""
from __future__ import annotations

import types

from rich.console import Console

from pallas_prof.advice.schema import Action, Diagnosis, Evidence, KernelAdvice
from pallas_prof.cli.terminal.advice_render import advice_lines


def _text(lines, width: int) -> str:
  con = Console(width=width, no_color=True, record=True, markup=False)
  for line in lines:
    con.print(line)
  return con.export_text()


def test_wrapped_advice_lines_hang_under_their_first_line():
  """At 96 columns the softmax example's advice wrapped to the left margin, so that
  "132 SMs (an upper bound))" read as a line of its own."""
  long = "the work of 64 programs spread over 132 SMs (an upper bound), " * 3
  advice = KernelAdvice(
      label="k#1", name="k", measured="not measured: no GPU",
      diagnoses=[Diagnosis("few_programs", "64 programs on 132 SMs " * 6,
                           [Evidence("grid", "grid 64 = 64 programs " * 8)])],
      actions=[Action("d", "smaller blocks", "few_programs", estimate_pct=52.0,
                      estimate_basis=long, apply="split each program's work " * 8)])
  report = types.SimpleNamespace(kernel_advice=lambda label: advice)
  kernel = types.SimpleNamespace(label="k#1")
  lines = [ln.rstrip() for ln in _text(advice_lines(report, kernel, 96), 96).splitlines()]
  assert lines[0] == "advice for k#1 (not measured: no GPU)"
  assert max(len(ln) for ln in lines) <= 96
  assert len(lines) > 8                                   # the long ones did wrap
  for ln in lines[1:]:
    assert ln.startswith("  "), ln                        # nothing back at the margin
  action = next(i for i, ln in enumerate(lines) if ln.startswith("  1. [d] smaller blocks"))
  assert lines[action + 1].startswith("     ") and not lines[action + 1].startswith("     apply")
