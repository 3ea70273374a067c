"""The advice on recorded H200 profiles (recorded.py says where each comes from)."""
from __future__ import annotations

from pallas_prof.advice import diagnose
from pallas_prof.profiler.sampling import sampling_rounds

from . import recorded


def _advise(name, aval=None):
  kp, rep = recorded.kernel(name, aval)
  return diagnose(kp, device=rep.device, ceilings=rep.ceilings), kp


def test_softmax_at_98_percent_of_copy_bandwidth_is_at_its_roof_and_gets_no_advice():
  advice, kp = _advise("softmax_kernel")
  assert kp.rates.efficiency_pct > 95
  assert advice.at_roof and advice.actions == []
  assert [d.rule for d in advice.diagnoses] == ["at_roof"]
  assert advice.summary.startswith("at its roof: memory-bound") and "98%" in advice.summary


def test_the_spilling_copy_is_diagnosed_with_its_registers_and_values_per_thread():
  advice, kp = _advise("ka_copy_kernel", "float32[8192,8192]")
  assert kp.static.resources["registers"] == 255 and kp.static.resources["spill_stores"] == 36
  spill = next(d for d in advice.diagnoses if d.rule == "spills")
  assert spill.text == "registers spill: 72 bytes of spill stores and loads at 255 registers per thread"
  texts = [e.text for e in spill.evidence]
  assert any("8x8192" in t and "256 values each" in t for t in texts), texts
  assert any("1 CTA per SM" in t and "limited by registers" in t for t in texts), texts
  first = advice.actions[0]
  assert first.kind == "a" and first.change == {"num_warps": 16}
  assert first.apply == "compiler_params=pallas_prof.CompilerParams(num_warps=16, num_stages=3)"
  assert first.status == "not measured: `pallas-prof advise` tries it on the GPU"
  # the block-shape fix needs the pallas_call, which a recorded profile does not have
  smaller = next(a for a in advice.actions if a.rule == "spills" and a.kind == "d")
  assert "not recorded" in smaller.edit


def test_the_sin_cos_loop_is_its_transcendentals_not_its_launch():
  advice, _ = _advise("ka_loop_kernel")
  rules = [d.rule for d in advice.diagnoses]
  assert rules[0] == "transcendental_bound" and "small_programs" not in rules
  d = advice.diagnoses[0]
  assert d.text.startswith("cos/sin take 9") and d.primitive in ("sin", "cos")
  assert any(e.measured and "samples at cos" in e.text for e in d.evidence)
  # the recorded profile carries no loop-invariance facts (no GeneratedKernel): no hoisting,
  # only the neighbouring settings offered to time (at 1 % of the copy bandwidth)
  assert advice.actions and all(a.kind == "a" and a.rule == "below_roof"
                                for a in advice.actions)


def test_a_matmul_at_89_percent_is_not_at_its_roof():
  advice, kp = _advise("ka_matmul_kernel")
  assert 80 < kp.rates.efficiency_pct < 95 and kp.rates.bound == "compute"
  assert not advice.at_roof
  assert "occupancy_limited" not in [d.rule for d in advice.diagnoses]   # dots: few CTAs by design


def test_72_percent_dropped_samples_are_said():
  advice, kp = _advise("ka_copy_kernel", "float32[16384,2048]")
  d = next(d for d in advice.diagnoses if d.rule == "sampling_gaps")
  assert d.text.startswith("CUPTI dropped 72.6 % of the samples")
  assert "1,160,321 of 1,598,604" in d.evidence[0].text


def test_line_ranking_on_recorded_samples():
  """softmax's lines are told apart; with the recorded dropped count made larger than the
  gap between two lines, those two are not, and the note says why."""
  kp, _ = recorded.kernel("softmax_kernel")
  att = kp.attribution
  sampling_rounds.annotate(att, att.sampling.dropped_samples)
  assert all(ln.rank_note is None for ln in att.lines)
  by_line = {ln.user_line: ln for ln in att.lines}
  gap = (by_line[22].weight - by_line[20].weight) * att.total
  sampling_rounds.annotate(att, int(gap) + 1)
  assert "could belong to either" in by_line[22].rank_note
  assert by_line[22].rank_note.startswith("not told apart from softmax.py:20")
  assert by_line[19].rank_note is None


def test_a_kernel_below_its_roof_says_where_its_time_goes():
  """flash attention at 40 % of the f16 matrix rate: the hot exp line and its stalls."""
  advice, kp = _advise("flash_kernel")
  assert kp.rates.bound == "compute" and kp.rates.efficiency_pct < 80
  d = next(d for d in advice.diagnoses if d.rule == "below_roof")
  assert d.text.startswith("at 40 % of the matrix rate: the time goes to exp (flash_attention.py:")
  assert any(e.what == "stall reasons" and "issuing" in e.text for e in d.evidence)
  # with no model of which way is faster, the settings next to its own are offered to time
  near = [a for a in advice.actions if a.rule == "below_roof"]
  assert [a.title for a in near] == [
      "num_warps 4 -> 2 (a neighbouring setting)", "num_warps 4 -> 8 (a neighbouring setting)",
      "num_stages 3 -> 2 (a neighbouring setting)", "num_stages 3 -> 4 (a neighbouring setting)"]
  assert all(a.kind == "a" and a.status.endswith("tries it on the GPU") for a in near)


def test_an_edit_expected_to_save_under_one_percent_is_a_note_not_an_action():
  from pallas_prof.advice.rules.table import Finding
  from pallas_prof.advice.schema import Action, Diagnosis

  def rule(f):
    d = Diagnosis(rule="below_roof", text="below its roof")
    edit = lambda pct, title: Action(kind="d", title=title, rule="below_roof",   # noqa: E731
                                     edit=f"at kernel.py:3: {title}", estimate_pct=pct,
                                     estimate_basis=f"{pct} % by share")
    return [Finding(d, [edit(0.4, "hoist the tiny thing"), edit(0.99, "reorder a line"),
                        edit(5.0, "read the operand once"),
                        Action(kind="a", title="num_warps 4 -> 8", rule="below_roof",
                               change={"num_warps": 8}, estimate_pct=0.2)])]
  kp, rep = recorded.kernel("softmax_kernel")
  advice = diagnose(kp, device=rep.device, ceilings=rep.ceilings, rules={"below_roof": rule})
  titles = [a.title for a in advice.actions]
  # the tried kind a stays whatever its estimate: advise measures it
  assert titles == ["read the operand once", "num_warps 4 -> 8"], titles
  said = [n for n in advice.notes if n.startswith("not offered as an action")]
  assert said == ["not offered as an action: reorder a line: its estimated saving is under 1 % "
                  "(0.99 % by share)",
                  "not offered as an action: hoist the tiny thing: its estimated saving is "
                  "under 1 % (0.4 % by share)"], said
