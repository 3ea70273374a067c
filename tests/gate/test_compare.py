"""The gate's comparisons on figures written by hand: another toolchain is not compared,
an edited line keeps its equations, a kernel gone or new is said, not failed."""
from __future__ import annotations

from pallas_prof.gate import compare
from pallas_prof.gate.figures import SCHEMA, Baseline, EquationFigures, KernelFigures


def _kernel(**counts) -> KernelFigures:
  eqs = [EquationFigures(f"{p} `{src}`", i, p, f"k.py:{10 + i}", src, n)
         for i, (p, src, n) in enumerate(counts.pop("equations"))]
  return KernelFigures("k", "k#1", "(f32[8])", "k.py:9", "cuda:90", [1], "sass",
                       sum(e.instructions for e in eqs), 32, 0, 0, None, None, None, eqs)


TOOLS = {"jax": "0.10.2", "triton": "3.6.0", "target": "cuda:90"}
BEFORE = _kernel(equations=[("exp", "e = jnp.exp(x)", 40), ("swap", "o[...] = e", 10)])


def _baseline(kernels) -> Baseline:
  return Baseline(SCHEMA, "t.py::test_k", dict(TOOLS), kernels)


def test_a_baseline_of_another_toolchain_is_said_not_compared():
  grown = _kernel(equations=[("exp", "e = jnp.exp(x)", 400), ("swap", "o[...] = e", 10)])
  verdict = compare.against_baseline(_baseline({"k(f32[8])": BEFORE}), {"k(f32[8])": grown},
                                     {**TOOLS, "triton": "3.9.0"}, 5.0, "b.json")
  assert verdict.failures == []
  assert verdict.unchecked == ["baseline b.json was written with another toolchain (triton "
                               "3.6.0 -> 3.9.0): its counts are another compiler's, not "
                               "compared; update it with --pallas-prof-update"]
  same = compare.against_baseline(_baseline({"k(f32[8])": BEFORE}), {"k(f32[8])": grown},
                                  dict(TOOLS), 5.0, "b.json")
  assert same.failures[0].startswith("kernel k (k.py:9): instructions (per program) +720.0%")
  assert same.failures[1] == "  grew: [0] exp at k.py:10 `e = jnp.exp(x)`: 40 -> 400 instructions"


def test_an_edited_line_keeps_its_equations_and_small_moves_are_not_growth():
  edited = _kernel(equations=[("exp", "e = jnp.exp(x * 2)", 41), ("swap", "o[...] = e", 10)])
  assert compare.equation_growth(BEFORE, edited, 5.0) == []
  grown = _kernel(equations=[("exp", "e = jnp.exp(x * 2)", 80), ("swap", "o[...] = e", 10)])
  assert compare.equation_growth(BEFORE, grown, 5.0) == [
      "[0] exp at k.py:10 `e = jnp.exp(x * 2)`: 40 -> 80 instructions"]


def test_kernels_new_or_gone_are_said_and_do_not_fail():
  verdict = compare.against_baseline(_baseline({"k(f32[8])": BEFORE}), {"k(f32[16])": BEFORE},
                                     dict(TOOLS), 5.0, "b.json")
  assert verdict.failures == []
  assert verdict.notes == [
      "kernel k(f32[16]) is not in baseline b.json (new, or its shapes changed): not "
      "compared; --pallas-prof-update adds it",
      "kernel(s) in baseline b.json that the test no longer ran: k(f32[8])"]


def test_a_budget_failure_gives_the_marker_as_its_fix_and_names_no_baseline():
  """Issue 47, item 4: `@pytest.mark.pallas_prof(max_registers=4)` failed with "run with
  --pallas-prof-update", which cannot help (the budget is the marker's), and named a
  baseline file that did not exist yet."""
  verdict = compare.Verdict()
  compare.against_budgets({"max_registers": 4}, {"k(f32[8])": BEFORE}, "no GPU", verdict)
  assert verdict.failures == [] and verdict.exceeded == ["max_registers"]
  assert verdict.over_budget == ["kernel k (k.py:9) has 32 registers; the budget is "
                                 "max_registers=4"]
  message = compare.failure_message(verdict, None, "t.py::test_k", {"max_registers": 4})
  assert message == (
      "pallas-prof: the kernels of this test exceed their marker's budgets:\n"
      "kernel k (k.py:9) has 32 registers; the budget is max_registers=4\n"
      "(the budget is the marker's: @pytest.mark.pallas_prof(max_registers=4) on "
      "t.py::test_k; change the kernel to fit, or raise max_registers in that marker if the "
      "kernel is meant to need more; --pallas-prof-update writes baselines, not budgets)")
  assert "baseline:" not in message and "run with --pallas-prof-update" not in message


def test_growth_and_budgets_each_get_their_own_fix():
  grown = _kernel(equations=[("exp", "e = jnp.exp(x)", 400), ("swap", "o[...] = e", 10)])
  verdict = compare.against_baseline(_baseline({"k(f32[8])": BEFORE}), {"k(f32[8])": grown},
                                     dict(TOOLS), 5.0, "b.json")
  budgets = {"max_registers": 4, "max_instructions": 100}
  compare.against_budgets(budgets, {"k(f32[8])": grown}, "no GPU", verdict)
  message = compare.failure_message(verdict, "b.json", "t.py::test_k", budgets)
  head, *rest = message.splitlines()
  assert head == ("pallas-prof: the kernels of this test grew past their baseline and exceed "
                  "their marker's budgets:")
  assert "(baseline: b.json; if the change is meant, run with --pallas-prof-update and commit "\
         "the file)" in rest
  assert rest[-1].startswith("(the budgets are the marker's: @pytest.mark.pallas_prof("
                             "max_registers=4, max_instructions=100) on t.py::test_k; ")
  assert "raise max_registers and max_instructions in that marker" in rest[-1]
  assert compare.failure_message(compare.Verdict(), "b.json", "t.py::test_k", budgets) is None
