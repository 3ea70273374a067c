"""A test's kernels against their baseline, and against the budgets of its marker.

The kernel-wide figures are compared as `pallas-prof diff --fail-on-regression` compares
them (cli/compare/diff.py: more spills always fail; registers, shared memory and instructions
beyond the tolerance; per byte where the grid or the programs' work changed). The gate
adds what diff has no place for: each equation's instructions, so that a failure names
the equation and the user's line that grew, and the replay's time against its measured
noise. Every finding is a sentence with the kernel, the equation, the line, before and after.
"""
from __future__ import annotations

import dataclasses

from ..comparison import Figures, basis, labelled, regressions
from .figures import Baseline, EquationFigures, KernelFigures, kernel_key

# an equation is said to have grown only past the tolerance and by at least this many
# instructions: a handful moved between neighbouring equations by the scheduler is not news
MIN_EQUATION_GROWTH = 4
# a kernel's equations that a failure lists, the ones that grew most first
EQUATIONS_SHOWN = 3

BUDGETS = {
    "max_time_us": "replay time in µs (median; GPU only)",
    "no_spills": "True: no register spills",
    "max_registers": "registers per thread",
    "max_shared_bytes": "shared memory per program in bytes",
    "max_instructions": "instructions in the kernel (SASS, else PTX)",
}


@dataclasses.dataclass
class Verdict:
  """What the gate found for one test."""
  failures: list[str] = dataclasses.field(default_factory=list)     # against the baseline
  over_budget: list[str] = dataclasses.field(default_factory=list)  # against the marker
  exceeded: list[str] = dataclasses.field(default_factory=list)     # those budgets' names

  def exceeds(self, budget: str, text: str) -> None:
    self.over_budget.append(text)
    if budget not in self.exceeded:
      self.exceeded.append(budget)
  unchecked: list[str] = dataclasses.field(default_factory=list)   # said, not passed
  notes: list[str] = dataclasses.field(default_factory=list)


def _diff_figures(k: KernelFigures):
  # runtime is compared here against its noise, not by diff's percentage
  return Figures(k.name, None, k.registers, k.shared_bytes, k.spills, k.instructions,
                 k.instruction_basis, tuple(k.grid), k.program_bytes, k.work_bytes)


def _equation_text(e: EquationFigures) -> str:
  line = f" `{e.source}`" if e.source else ""
  return f"[{e.index}] {e.primitive} at {e.where or 'an unknown line'}{line}"


def equation_growth(before: KernelFigures, now: KernelFigures, tolerance_pct: float
                    ) -> list[str]:
  """The equations whose instructions grew past the tolerance (new ones from zero), most
  grown first, each with before and after."""
  matched = matching(before.equations, now.equations)
  grown = []
  for e in now.equations:
    was = matched[e.key].instructions if e.key in matched else 0
    more = e.instructions - was
    if more >= MIN_EQUATION_GROWTH and (was == 0 or 100.0 * more / was > tolerance_pct):
      what = f"{was} -> {e.instructions} instructions" if was else \
          f"new, {e.instructions} instructions"
      grown.append((more, f"{_equation_text(e)}: {what}"))
  grown.sort(key=lambda g: -g[0])
  return [text for _, text in grown]


def matching(before: list[EquationFigures], now: list[EquationFigures]
             ) -> dict[str, EquationFigures]:
  """Each equation of `now` (by key) with its counterpart in `before`: the same primitive on
  the same line of code; else, where the line was edited, the same primitive among those
  left unmatched, in order (an edited line keeps its store, say, though its text changed)."""
  old = {e.key: e for e in before}
  out = {e.key: old[e.key] for e in now if e.key in old}
  used = {e.key for e in out.values()}
  left: dict[str, list[EquationFigures]] = {}
  for e in before:
    if e.key not in used:
      left.setdefault(e.primitive, []).append(e)
  for e in now:
    if e.key not in out and left.get(e.primitive):
      out[e.key] = left[e.primitive].pop(0)
  return out


def kernel_regressions(before: KernelFigures, now: KernelFigures, tolerance_pct: float
                       ) -> list[str]:
  """Sentences for what grew in `now` over `before`; empty where nothing did."""
  a, b = _diff_figures(before), _diff_figures(now)
  worse = regressions(a, b, tolerance_pct, basis(a, b))
  slower = time_regression(before, now, tolerance_pct)
  if slower:
    worse.append(slower)
  if not worse:
    return []
  said = {"new spills": f"spills {before.spills or 0} -> {now.spills}"}
  grown = equation_growth(before, now, tolerance_pct)
  where = f" ({now.where})" if now.where else ""
  lines = [f"kernel {now.name}{where}: " + "; ".join(said.get(w, w) for w in worse)
           + _figures_before_after(before, now)]
  lines += [f"  grew: {g}" for g in grown[:EQUATIONS_SHOWN]]
  if len(grown) > EQUATIONS_SHOWN:
    lines.append(f"  and {len(grown) - EQUATIONS_SHOWN} more equation(s)")
  return lines


def _figures_before_after(before: KernelFigures, now: KernelFigures) -> str:
  pairs = [(labelled(what, False), getattr(before, name), getattr(now, name))
           for what, name in (("registers", "registers"), ("spills", "spills"),
                              ("shared", "shared_bytes"), ("instructions", "instructions"))]
  changed = [f"{name} {old} -> {new}" for name, old, new in pairs if old != new]
  return f" ({', '.join(changed)})" if changed else ""


def time_regression(before: KernelFigures, now: KernelFigures, tolerance_pct: float
                    ) -> str | None:
  """Slower only past both the measured noise (the two runs' noise added) and the
  tolerance; the equation whose time grew most is named (measured shares)."""
  rb, rn = before.runtime, now.runtime
  if rb is None or rn is None:
    return None
  grew = rn.median_us - rb.median_us
  allowed = max(rb.noise_us + rn.noise_us, rb.median_us * tolerance_pct / 100.0)
  if grew <= allowed:
    return None
  text = (f"SLOWER {rb.median_us:.2f} -> {rn.median_us:.2f} µs (+{grew:.2f} µs, more than "
          f"the noise {rb.noise_us + rn.noise_us:.2f} µs and the tolerance "
          f"{tolerance_pct:g}%)")
  hot = _most_grown_time(before, now)
  return f"{text}; most of it at {hot}" if hot else text


def _most_grown_time(before: KernelFigures, now: KernelFigures) -> str | None:
  old = {e.key: (e.time_share or 0.0) * before.runtime.median_us for e in before.equations}
  best, most = None, 0.0
  for e in now.equations:
    if e.time_share is None:
      continue
    more = e.time_share * now.runtime.median_us - old.get(e.key, 0.0)
    if more > most:
      best, most = e, more
  if best is None:
    return None
  return f"{_equation_text(best)} (+{most:.2f} µs)"


def against_baseline(baseline: Baseline, now: dict[str, KernelFigures],
                     toolchain: dict[str, str], tolerance_pct: float, path: str) -> Verdict:
  verdict = Verdict()
  if baseline.toolchain != toolchain:
    changed = ", ".join(f"{k} {baseline.toolchain.get(k)} -> {toolchain.get(k)}"
                        for k in sorted(set(baseline.toolchain) | set(toolchain))
                        if baseline.toolchain.get(k) != toolchain.get(k))
    verdict.unchecked.append(f"baseline {path} was written with another toolchain ({changed}): "
                             "its counts are another compiler's, not compared; update it "
                             "with --pallas-prof-update")
    return verdict
  for key, figures in now.items():
    old = baseline.kernels.get(key)
    if old is None:
      verdict.notes.append(f"kernel {key} is not in baseline {path} (new, or its shapes "
                           "changed): not compared; --pallas-prof-update adds it")
      continue
    verdict.failures += kernel_regressions(old, figures, tolerance_pct)
  gone = sorted(set(baseline.kernels) - set(now))
  if gone:
    verdict.notes.append(f"kernel(s) in baseline {path} that the test no longer ran: "
                         f"{', '.join(gone)}")
  return verdict


def budget_errors(budgets: dict) -> list[str]:
  """What is wrong with a marker's budgets: unknown names, values of the wrong kind."""
  out = [f"unknown budget {name!r} (known: {', '.join(BUDGETS)})" for name in budgets
         if name not in BUDGETS]
  for name, value in budgets.items():
    if name == "no_spills" and not isinstance(value, bool):
      out.append(f"no_spills={value!r}: give True or False")
    elif name in BUDGETS and name != "no_spills" and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
      out.append(f"{name}={value!r}: give a number of {BUDGETS[name]}")
  return out


def against_budgets(budgets: dict, now: dict[str, KernelFigures], why_untimed: str,
                    verdict: Verdict) -> None:
  """Each budget on each kernel of the test. One that cannot be checked here (time on a
  machine without a GPU; a count the compiler did not give) is said as not checked."""
  limits = [("max_registers", "registers"), ("max_shared_bytes", "shared_bytes"),
            ("max_instructions", "instructions")]
  for key, k in now.items():
    where = f" ({k.where})" if k.where else ""
    if budgets.get("no_spills"):
      if k.spills is None:
        verdict.unchecked.append(f"no_spills on {key}: the compiler gave no spill count")
      elif k.spills > 0:
        verdict.exceeds("no_spills", f"kernel {k.name}{where} spills {k.spills} register(s); "
                        "the budget is no_spills=True")
    for budget, field in limits:
      if budget not in budgets:
        continue
      value = getattr(k, field)
      if value is None:
        verdict.unchecked.append(f"{budget} on {key}: the compiler gave no {field}")
      elif value > budgets[budget]:
        verdict.exceeds(budget, f"kernel {k.name}{where} has {value} {field}; the budget is "
                        f"{budget}={budgets[budget]}")
    if "max_time_us" in budgets:
      if k.runtime is None:
        verdict.unchecked.append(f"max_time_us on {key}: {why_untimed}")
      elif k.runtime.median_us - k.runtime.noise_us > budgets["max_time_us"]:
        verdict.exceeds(
            "max_time_us", f"kernel {k.name}{where} takes {k.runtime.median_us:.2f} µs "
            f"(noise {k.runtime.noise_us:.2f} µs); the budget is "
            f"max_time_us={budgets['max_time_us']}")


def failure_message(verdict: Verdict, baseline: str | None, nodeid: str, budgets: dict
                    ) -> str | None:
  """What fails a test, each kind with the fix that works for it: a baseline's growth is
  accepted by --pallas-prof-update (naming `baseline`, the file it was read from); a budget
  is the marker's, so the marker is where it changes (an update writes baselines, never
  budgets). None where nothing failed."""
  if not verdict.failures and not verdict.over_budget:
    return None
  what = " and ".join(w for w, found in (("grew past their baseline", verdict.failures),
                                          ("exceed their marker's budgets", verdict.over_budget))
                      if found)
  lines = [f"pallas-prof: the kernels of this test {what}:"]
  if verdict.failures:
    lines += verdict.failures
    lines.append(f"(baseline: {baseline}; if the change is meant, run with "
                 "--pallas-prof-update and commit the file)" if baseline else
                 "(if the change is meant, run with --pallas-prof-update to write its baseline)")
  if verdict.over_budget:
    marker = ", ".join(f"{k}={v!r}" for k, v in budgets.items())
    numbers = [n for n in verdict.exceeded if n != "no_spills"]
    names = " and ".join(([f"raise {' and '.join(numbers)}"] if numbers else [])
                         + (["drop no_spills=True"] if "no_spills" in verdict.exceeded else []))
    lines += verdict.over_budget
    lines.append(f"(the budget{'s are' if len(verdict.exceeded) > 1 else ' is'} the marker's: "
                 f"@pytest.mark.pallas_prof({marker}) on {nodeid}; change the kernel to fit, "
                 f"or {names} in that marker if the kernel is meant to need more; "
                 "--pallas-prof-update writes baselines, not budgets)")
  return "\n".join(lines)


def by_key(figures: list[KernelFigures]) -> dict[str, KernelFigures]:
  return {kernel_key(k): k for k in figures}
