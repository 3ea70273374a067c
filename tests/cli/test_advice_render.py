"""The advice section in the terminal: a wrapped line keeps its indent."""
from __future__ import annotations

from rich.console import Console

from pallas_prof.advice.schema import Action, Diagnosis, Evidence, KernelAdvice
from pallas_prof.cli.summary import KernelSummary
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
  row = KernelSummary("k#1", "k", advice=advice)
  lines = [ln.rstrip() for ln in _text(advice_lines(row, 96), 96).splitlines()]
  assert lines[0] == "advice for k#1 (not measured: no GPU)"
  assert max(len(ln) for ln in lines) <= 96
  assert len(lines) > 8                                   # the long ones did wrap
  for ln in lines[1:]:
    assert ln.startswith("  "), ln                        # nothing back at the margin
  action = next(i for i, ln in enumerate(lines) if ln.startswith("  1. [d] smaller blocks"))
  assert lines[action + 1].startswith("     ") and not lines[action + 1].startswith("     apply")


def _advice(label, *kinds):
  return KernelAdvice(label=label, name=label.split("#")[0], measured="not measured: no GPU",
                      diagnoses=[Diagnosis("few_programs", "8 programs on 132 SMs")],
                      actions=[Action(k, f"action {k}", "few_programs", estimate_pct=10.0)
                               for k in kinds])


def test_the_kinds_are_said_once_under_the_last_advice():
  """Issue 39: the terminal never said what [a]-[d] mean. One line, after the last kernel's
  advice, for the kinds shown (its words are schema.KINDS')."""
  from pallas_prof.advice.schema import KINDS
  from pallas_prof.cli.report import KernelEntry, RunReport
  report = RunReport(kernels=(KernelEntry("one#1", "one"), KernelEntry("two#2", "two")),
                     advice=(_advice("one#1", "d"), _advice("two#2", "a", "d")))
  lines = _text([report], 400).splitlines()
  legend = [i for i, ln in enumerate(lines) if ln.startswith("  kinds: ")]
  assert len(legend) == 1, lines
  last_advice = max(i for i, ln in enumerate(lines) if ln.startswith("  1. ["))
  assert legend[0] > last_advice
  said = lines[legend[0]]
  for kind in ("a", "d"):
    assert f"[{kind}] {KINDS[kind]}" in said
  assert "[b]" not in said and "[c]" not in said
  # nothing to explain without actions
  bare = RunReport(kernels=(KernelEntry("one#1", "one"),), advice=(_advice("one#1"),))
  assert "kinds:" not in _text([bare], 400)


def test_the_page_lists_the_kinds_of_its_actions():
  from pallas_prof.advice.schema import KINDS
  from pallas_prof.cli.html.advice import advice_view
  from pallas_prof.cli.report import KernelEntry, RunReport
  from pallas_prof.cli.summary import summaries
  run = RunReport(kernels=(KernelEntry("two#2", "two"),), advice=(_advice("two#2", "c", "a"),))
  (row,) = summaries(run)
  assert advice_view(row).kinds == (("a", KINDS["a"]), ("c", KINDS["c"]))
