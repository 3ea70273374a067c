"""Each diagnosis rule alone, on SYNTHETIC facts (synthetic.py): what a rule concludes
from given facts. Recorded profiles are in test_recorded_profiles.py."""
from __future__ import annotations

import dataclasses
import types

import pytest

from pallas_prof.advice import rank as rank_mod
from pallas_prof.advice.rules import RULES
from pallas_prof.advice.schema import Action, Trial

from .synthetic import Stall, synthetic_eq, synthetic_facts, synthetic_rates, synthetic_work


def test_the_table_holds_each_rule_once_in_order():
  assert list(RULES)[:2] == ["at_roof", "small_programs"]
  assert {"unpipelined_loop", "too_few_warps", "spills", "uncoalesced", "rereads",
          "transcendental_bound", "sampling_gaps"} <= set(RULES)


def test_at_roof_from_95_percent():
  assert RULES["at_roof"](synthetic_facts(rates=synthetic_rates(95.0), median_s=1e-4))
  assert not RULES["at_roof"](synthetic_facts(rates=synthetic_rates(94.9), median_s=1e-4))


def _adder(programs=1 << 18, block=64):
  n = programs * block
  eqs = [synthetic_eq(0, "get", block_shape=(block,), dtype="float32", bytes_read=4 * block,
                      operand="x_ref", contiguous_bytes=4 * block),
         synthetic_eq(1, "get", block_shape=(block,), dtype="float32", bytes_read=4 * block,
                      operand="y_ref", contiguous_bytes=4 * block),
         synthetic_eq(2, "add", block_shape=(block,), dtype="float32"),
         synthetic_eq(3, "swap", block_shape=(block,), dtype="float32", bytes_written=4 * block,
                      operand="o_ref", contiguous_bytes=4 * block)]
  work = synthetic_work(bytes=12 * n, block_bytes=12 * n, programs=programs)
  return eqs, work


def test_small_programs_names_the_bytes_per_program_and_asks_for_larger_blocks():
  eqs, work = _adder()
  found = RULES["small_programs"](synthetic_facts(eqs, grid=(1 << 18,), work=work))
  (finding,) = found
  assert finding.diagnosis.text == "each program moves 768 B: launch and tail overhead dominate"
  (action,) = finding.actions
  assert action.change == {"block": "larger", "factor": 128}


def test_small_programs_is_quiet_when_each_program_runs_long():
  eqs, work = _adder()
  # 262,144 programs of 16 CTAs per SM on 132 SMs: 30 ms is ~29 us of an SM slot each
  f = synthetic_facts(eqs, grid=(1 << 18,), work=work, median_s=30e-3,
                      rates=synthetic_rates(1.0))
  assert not RULES["small_programs"](f)


def test_unpipelined_k_loop():
  eqs = [synthetic_eq(0, "broadcast_in_dim", block_shape=(128, 128), dtype="float32"),
         synthetic_eq(1, "scan", trips=64, line=20, inclusive_weight=0.9),
         synthetic_eq(2, "get", parent=1, line=21, block_shape=(128, 64), dtype="bfloat16",
                      bytes_read=16384, operand="a_ref", contiguous_bytes=128),
         synthetic_eq(3, "get", parent=1, line=22, block_shape=(64, 128), dtype="bfloat16",
                      bytes_read=16384, operand="b_ref", contiguous_bytes=256),
         synthetic_eq(4, "dot_general", parent=1, line=23, block_shape=(128, 128),
                      dtype="float32")]
  assert not RULES["unpipelined_loop"](synthetic_facts(eqs, num_stages=3))
  (finding,) = RULES["unpipelined_loop"](synthetic_facts(eqs, num_stages=1))
  d = finding.diagnosis
  assert d.text == "K loop not pipelined: num_stages=1" and d.eqn == 1 and d.user_line == 20
  assert [a.change for a in finding.actions] == [{"num_stages": 2}, {"num_stages": 3},
                                                 {"num_stages": 4}]
  assert all(a.kind == "a" for a in finding.actions)


def _rows_loop(block_bytes=512, nested=False, writes=None):
  """JAX's norms' dw/db loop: two (16, 16) bfloat16 blocks and a row of rstd an iteration,
  summed over rows (no dot). Its record says whether loop_stages applies, as the lowering's
  does (tests/advice/test_lowering_facts.py checks the lowering's)."""
  eqs = [synthetic_eq(1, "scan", trips=1024, line=20, inclusive_weight=0.95,
                      stageable=not (nested or writes)),
         synthetic_eq(2, "masked_load", parent=1, line=21, block_shape=(16, 16),
                      dtype="bfloat16", bytes_read=block_bytes, operand="x_ref",
                      contiguous_bytes=32),
         synthetic_eq(3, "masked_load", parent=1, line=22, block_shape=(16, 16),
                      dtype="bfloat16", bytes_read=block_bytes, operand="do_ref",
                      contiguous_bytes=32),
         synthetic_eq(4, "masked_load", parent=1, line=23, block_shape=(16,), dtype="float32",
                      bytes_read=64, operand="rstd_ref", contiguous_bytes=64),
         synthetic_eq(5, "reduce_sum", parent=1, line=24, block_shape=(16,), dtype="float32")]
  if nested:
    eqs.append(synthetic_eq(6, "scan", parent=1, trips=8, line=25))
  if writes:
    eqs.append(synthetic_eq(6, writes, parent=1, line=25, block_shape=(16,), dtype="float32",
                            bytes_written=64, operand="o_ref"))
  return eqs


def test_a_loop_without_a_dot_is_not_pipelined_at_any_num_stages_and_gets_loop_stages():
  """Triton's num_stages pipelines only a dot's loads: the rows loop waits at num_stages=3
  too. The actions pipeline it per loop, with the warps cut to where each thread's share of
  the 512-byte block is 4 bytes (8 -> 4); a kernel whose loops are pipelined already, and a
  loop around another loop, get none."""
  for stages in (1, 3):
    (finding,) = RULES["unpipelined_loop"](synthetic_facts(_rows_loop(), num_stages=stages,
                                                           num_warps=8))
    d = finding.diagnosis
    assert d.text == "loop not pipelined: it has no dot, and Triton pipelines only a dot's loads"
    assert d.rule == "unstaged_loop" and d.eqn == 1 and d.user_line == 20
    assert [a.change for a in finding.actions] == [{"loop_stages": 2, "num_warps": 4},
                                                   {"loop_stages": 3, "num_warps": 4}]
    assert all(a.kind == "a" for a in finding.actions)
    assert "4 warps so that each thread copies 4 bytes or more" in finding.actions[0].title
  (wide,) = RULES["unpipelined_loop"](synthetic_facts(_rows_loop(block_bytes=8192), num_warps=8))
  assert [a.change for a in wide.actions] == [{"loop_stages": 2}, {"loop_stages": 3}]
  staged = dataclasses.replace(synthetic_facts(_rows_loop(), num_warps=8), loop_stages=3)
  assert not RULES["unpipelined_loop"](staged)
  assert not RULES["unpipelined_loop"](synthetic_facts(_rows_loop(nested=True), num_warps=8))
  # a loop that writes memory: the lowering keeps it as written (Triton's pipeliner would
  # issue later loads before its stores), so nothing is offered
  for primitive in ("swap", "masked_swap", "addupdate", "atomic_rmw"):
    assert not RULES["unpipelined_loop"](synthetic_facts(_rows_loop(writes=primitive),
                                                         num_warps=8)), primitive
  # a loop whose record does not say it is stageable (one saved before the fact was
  # recorded reads as False): nothing is offered
  unknown = [dataclasses.replace(e, stageable=False) for e in _rows_loop()]
  assert not RULES["unpipelined_loop"](synthetic_facts(unknown, num_warps=8))


def test_one_warp_per_row_of_4096_floats():
  eqs = [synthetic_eq(0, "get", block_shape=(1, 4096), dtype="float32", bytes_read=16384)]
  (finding,) = RULES["too_few_warps"](synthetic_facts(eqs, num_warps=1, grid=(8192,)))
  assert finding.diagnosis.text == "one warp per row of 4096 floats"
  assert [a.change for a in finding.actions] == [{"num_warps": 4}, {"num_warps": 8}]
  assert not RULES["too_few_warps"](synthetic_facts(eqs, num_warps=4, grid=(8192,)))


def test_spills_offer_more_warps_and_smaller_blocks():
  eqs = [synthetic_eq(0, "get", block_shape=(8, 8192), dtype="float32")]
  (finding,) = RULES["spills"](synthetic_facts(eqs, spills=72, registers=255, num_warps=8))
  assert [(a.kind, a.change) for a in finding.actions] == [
      ("a", {"num_warps": 16}), ("c", {"block": "smaller", "factor": 2})]
  assert not RULES["spills"](synthetic_facts(eqs, spills=0))


def test_spills_of_many_values_a_thread_offer_blocks_small_enough_to_fit():
  """(16, 8192) floats over 128 threads are 1,024 values each: halving is not enough,
  blocks 8x smaller leave 128 a thread (the known-answer case's hand fix)."""
  eqs = [synthetic_eq(0, "get", block_shape=(16, 8192), dtype="float32")]
  (finding,) = RULES["spills"](synthetic_facts(eqs, spills=22780, registers=32, num_warps=4))
  assert [a.change for a in finding.actions] == [
      {"num_warps": 8}, {"block": "smaller", "factor": 2}, {"block": "smaller", "factor": 8}]
  assert finding.actions[2].title == "smaller blocks (/8, 128 values per thread)"


def test_a_column_read_is_uncoalesced():
  gk = types.SimpleNamespace(params=[types.SimpleNamespace(label="x_ref", shape=(4096, 8192))])
  eqs = [synthetic_eq(0, "get", block_shape=(4096, 1), dtype="float32", bytes_read=16384,
                      operand="x_ref", contiguous_bytes=4, weight=0.8)]
  (finding,) = RULES["uncoalesced"](synthetic_facts(eqs, generated=gk))
  assert finding.diagnosis.text == "x_ref reads runs of 4 B: uncoalesced, 8x the memory " \
      "traffic it needs"
  kinds = [(a.kind, a.change.get("block")) for a in finding.actions]
  assert kinds == [("c", "wider"), ("d", None)]
  assert finding.actions[0].change["last"] == 32                  # 128 B of float32
  # a whole row of the array is all there is to read
  gk.params[0].shape = (4096, 1)
  assert not RULES["uncoalesced"](synthetic_facts(eqs, generated=gk))


def test_a_layout_edit_only_where_the_block_has_longer_rows_the_other_way():
  """Transposing a (1, 2) block of a wide array gives runs of one element: no better than
  the two it reads, so the edit is not offered (widening the block is)."""
  gk = types.SimpleNamespace(params=[types.SimpleNamespace(label="x_ref", shape=(4096, 8192))])
  eqs = [synthetic_eq(0, "get", block_shape=(1, 2), dtype="float32", bytes_read=8,
                      operand="x_ref", contiguous_bytes=8, weight=0.8)]
  (finding,) = RULES["uncoalesced"](synthetic_facts(eqs, generated=gk))
  assert [(a.kind, a.change.get("block")) for a in finding.actions] == [("c", "wider")]
  # an (8, 2) block transposed reads runs of 8 floats, 32 B: the edit and its estimate
  eqs = [dataclasses.replace(eqs[0], block_shape=(8, 2))]
  (finding,) = RULES["uncoalesced"](synthetic_facts(eqs, generated=gk))
  (edit,) = [a for a in finding.actions if a.kind == "d"]
  assert "holds 8+ consecutive elements" in edit.edit
  assert edit.estimate_pct == pytest.approx(100 * 0.8 * (1 - 8 / 32))


def test_rereads_name_the_lines_that_read_again():
  eqs = [synthetic_eq(i, "get", line=10 * (i + 1), operand="x_ref", bytes_read=8192,
                      block_shape=(1, 2048), dtype="float32") for i in range(3)]
  work = synthetic_work(bytes=1 << 26, block_bytes=3 << 26)
  (finding,) = RULES["rereads"](synthetic_facts(eqs, work=work))
  assert finding.diagnosis.text == "reads x_ref 3 times: 3.0x the bytes it must move"
  assert finding.actions[0].kind == "d" and "kernel.py:10, kernel.py:20, kernel.py:30" \
      in finding.actions[0].edit


def test_a_loop_invariant_transcendental_is_hoisted_first():
  eqs = [synthetic_eq(0, "scan", trips=64, line=30, inclusive_weight=0.95),
         synthetic_eq(1, "exp", parent=0, line=31, weight=0.6, invariant=True,
                      text="b:f32[1024] = exp x", sass_instructions=40, loop_instructions=40),
         synthetic_eq(2, "sin", parent=0, line=32, weight=0.3, invariant=False,
                      sass_instructions=90, loop_instructions=90),
         synthetic_eq(3, "add", parent=0, line=33, weight=0.05, sass_instructions=8,
                      loop_instructions=8)]
  (finding,) = RULES["transcendental_bound"](synthetic_facts(eqs, measured=True))
  assert finding.diagnosis.text == "exp/sin take 90 % of the time" and not finding.actions
  (finding,) = RULES["loop_invariant"](synthetic_facts(eqs))
  assert finding.diagnosis.text == "exp (kernel.py:31) computes the same value in all 64 " \
      "iterations of the loop (kernel.py:30)"
  (hoist,) = finding.actions
  assert hoist.kind == "d" and hoist.title == "hoist exp (kernel.py:31) out of the loop " \
      "(kernel.py:30)"
  assert round(hoist.estimate_pct) == 59                         # 60 % x 63/64
  assert "of the instructions executed (static: no GPU)" in hoist.estimate_basis
  warps = Action("a", "num_warps 4 -> 8", "x", {"num_warps": 8})
  assert rank_mod.rank([warps, hoist])[0] is hoist
  # a value that changes in the loop is not hoisted
  changing = dataclasses.replace(eqs[1], invariant=False)
  assert not RULES["loop_invariant"](synthetic_facts([*eqs[:1], changing, *eqs[2:]]))
  # nor one the compiler already evaluates once (its instructions outside the machine loop:
  # hoisted; or most of them, a loop of its own inside the function), nor in a loop the
  # compiler unrolled, nor without a compile to tell
  for loop_instructions in (0, 12):
    hoisted = dataclasses.replace(eqs[1], loop_instructions=loop_instructions)
    assert not RULES["loop_invariant"](synthetic_facts([*eqs[:1], hoisted, *eqs[2:]]))
  unrolled = [dataclasses.replace(e, loop_instructions=0) for e in eqs]
  assert not RULES["loop_invariant"](synthetic_facts(unrolled))
  uncompiled = [dataclasses.replace(e, loop_instructions=0, sass_instructions=0) for e in eqs]
  assert not RULES["loop_invariant"](synthetic_facts(uncompiled))


def test_one_transcendental_is_named_once_in_the_singular():
  eqs = [synthetic_eq(0, "exp", line=21, weight=0.35),
         synthetic_eq(1, "add", line=22, weight=0.65)]
  (finding,) = RULES["transcendental_bound"](synthetic_facts(eqs))
  assert finding.diagnosis.text == "exp takes 35 % of the instructions executed (static: no GPU)"
  (weights,) = [e for e in finding.diagnosis.evidence if e.what == "weights"]
  assert weights.text == "35 % of the instructions at exp (kernel.py:21)"   # no second 35 %


def test_few_programs():
  (finding,) = RULES["few_programs"](synthetic_facts(grid=(32,)))
  assert finding.diagnosis.text == "32 programs on 132 SMs: 100 SMs have nothing to do"
  assert finding.actions[0].change == {"block": "smaller", "factor": 16}
  # 512 programs on 132 SMs: 4 waves of programs with a sixteenth of the work, each program
  # (2 MiB, 128 memory floors) keeping its start, a floor's time
  assert finding.actions[0].estimate_pct == pytest.approx(100 * (1 - 4 * (1 + 128 / 16) / 129))


def test_one_program_is_said_in_the_singular():
  """Issue 39: the 8x8 dot's advice said "grid 1 = 1 programs"."""
  (finding,) = RULES["few_programs"](synthetic_facts(grid=(1,)))
  assert finding.diagnosis.text == "1 program on 132 SMs: 131 SMs have nothing to do"
  assert finding.diagnosis.evidence[0].text == "grid 1 = 1 program, 132 SMs (assumed)"
  assert "1 programs" not in finding.actions[0].estimate_basis
  (almost,) = RULES["few_programs"](synthetic_facts(grid=(131,)))
  assert almost.diagnosis.text.endswith("1 SM has nothing to do")


def test_a_call_without_a_grid_names_its_grid_as_the_kernels_table_does():
  """`pallas-prof run` in a terminal said "grid  = 1 program" of a call without a grid."""
  (finding,) = RULES["few_programs"](synthetic_facts(grid=()))
  assert finding.diagnosis.evidence[0].text == "grid () = 1 program, 132 SMs (assumed)"


def test_measured_savings_rank_above_estimates_and_failures_last():
  held = Action("a", "held", "r", trial=Trial(100e-6, 50e-6, 50.0, 2.0, True))
  noise = Action("a", "noise", "r", trial=Trial(100e-6, 99e-6, 1.0, 2.0, True))
  differs = Action("c", "differs", "r", trial=Trial(None, None, None, None, False, "outputs differ"))
  estimate = Action("d", "estimate", "r", estimate_pct=30.0)
  order = [a.title for a in rank_mod.rank([differs, noise, estimate, held])]
  assert order == ["held", "estimate", "noise", "differs"]
  assert rank_mod.saving_text(held) == "-50 % (100.0 -> 50.0 us, noise 2.0 %), outputs equal"
  assert rank_mod.saving_text(noise).endswith("within the noise, not kept")
  # the H200 at 0598928 said "+69 % ... within the noise" of num_warps 4 -> 2 (noise 0.4 %)
  slower = Action("a", "slower", "r", trial=Trial(483.6e-6, 815.4e-6, -68.6, 0.4, True))
  assert rank_mod.saving_text(slower).endswith("+69 % (483.6 -> 815.4 us, noise 0.4 %), "
                                               "outputs equal: slower, not kept")
  assert rank_mod.saving_text(Action("a", "x", "r", trial=Trial(100e-6, 101e-6, -1.0, 2.0,
                                                                True))).endswith("noise, not kept")


def test_sampling_gaps_list_the_lines_that_cannot_be_ranked():
  from pallas_prof.profiler.attribution_schema import LineWeight, SamplingRun
  run = SamplingRun("cupti", "lib", 26, 32, 3, 1000, 300, 0, None, None, None, 1.0)
  lines = [LineWeight("/u/k.py", 7, 0.5, 350.0, [0], None, rank_note="not told apart from k.py:8")]
  (finding,) = RULES["sampling_gaps"](synthetic_facts(sampling=run, lines=lines, measured=True))
  assert finding.diagnosis.text == "CUPTI dropped 30.0 % of the samples: 1 line(s) cannot be ranked"
  assert "k.py:7 (350 samples): not told apart from k.py:8" in finding.diagnosis.evidence[1].text


def test_occupancy_limited_needs_memory_waits_when_measured():
  quiet = synthetic_facts(registers=255, num_warps=8, measured=True,
                          stalls=[Stall("selected", "issuing", 0.8, 800)])
  assert not RULES["occupancy_limited"](quiet)
  waiting = synthetic_facts(registers=255, num_warps=8, measured=True,
                            stalls=[Stall("long_scoreboard", "waiting for global memory", 0.6, 600)])
  (finding,) = RULES["occupancy_limited"](waiting)
  assert finding.diagnosis.text == "1 CTA per SM (12 % of its warps), limited by registers"


def test_a_loop_that_loads_little_per_iteration():
  eqs = [synthetic_eq(0, "scan", trips=512, line=40, inclusive_weight=0.9),
         synthetic_eq(1, "masked_load", parent=0, line=41, block_shape=(16, 16), dtype="bfloat16",
                      bytes_read=512, operand="x_ref", sass_instructions=16, loop_instructions=4),
         synthetic_eq(2, "masked_load", parent=0, line=42, block_shape=(16, 16), dtype="bfloat16",
                      bytes_read=512, operand="do_ref", sass_instructions=4, loop_instructions=4),
         synthetic_eq(3, "reduce_sum", parent=0, line=43, sass_instructions=15,
                      loop_instructions=15)]
  (finding,) = RULES["small_loop_steps"](synthetic_facts(eqs, grid=(512,), num_stages=3))
  assert finding.diagnosis.text == ("each of the loop's 512 iterations loads 1.0 KiB per "
                                    "program: it waits for its loads, one small step at a time")
  assert [(a.kind, a.change) for a in finding.actions] == [("a", {"num_stages": 4}), ("d", {})]
  # loads the compiler took out of the loop (no instruction of theirs in a machine loop)
  hoisted = [dataclasses.replace(e, loop_instructions=0) if e.bytes_read else e for e in eqs]
  assert not RULES["small_loop_steps"](synthetic_facts(hoisted, grid=(512,)))


def test_a_grid_that_leaves_cta_slots_empty():
  # 512 programs of 8 warps at 32 registers: 8 CTAs an SM, 1056 slots on 132 SMs
  f = synthetic_facts(grid=(512,), num_warps=8, registers=32)
  (finding,) = RULES["underfilled"](f)
  assert finding.diagnosis.text == "512 programs fill 48 % of the GPU's CTA slots (132 SMs x 8)"
  assert finding.actions[0].change == {"block": "smaller", "factor": 4}
  busy = synthetic_facts(grid=(512,), num_warps=8, registers=32, measured=True,
                         stalls=[Stall("selected", "issuing", 0.9, 900)])
  assert not RULES["underfilled"](busy)
  assert not RULES["underfilled"](synthetic_facts(grid=(4096,), num_warps=8, registers=32))


def test_every_rule_has_a_place_in_the_order_of_diagnoses():
  from pallas_prof.advice.engine import PRIORITY
  assert set(PRIORITY) == set(RULES) and len(PRIORITY) == len(RULES)


def test_below_its_roof_with_no_cause_the_neighbouring_settings_are_to_be_measured():
  """A measured kernel at 60 %: the settings next to its own, as what-ifs `advise` times
  (no estimate); num_stages only where there is a loop for them to pipeline."""
  hot = synthetic_eq(0, "reduce_sum", weight=0.6, block_shape=(8, 1024), dtype="float32")
  f = synthetic_facts([hot], measured=True, median_s=1e-4, rates=synthetic_rates(60.0))
  (finding,) = RULES["below_roof"](f)
  assert finding.diagnosis.text.startswith("at 60 % of the copy bandwidth: the time goes to "
                                           "reduce_sum")
  assert [(a.kind, a.change) for a in finding.actions] == [
      ("a", {"num_warps": 2}), ("a", {"num_warps": 8})]
  assert all(a.estimate_pct is None and "measured where tried" in a.estimate_basis
             for a in finding.actions)
  loop = synthetic_eq(1, "scan", trips=512, line=20)
  f = synthetic_facts([hot, loop], measured=True, median_s=1e-4, num_warps=16,
                      rates=synthetic_rates(60.0))
  (finding,) = RULES["below_roof"](f)
  assert [a.change for a in finding.actions] == [{"num_warps": 8}, {"num_stages": 2},
                                                 {"num_stages": 4}]
  # not measured, or at 80 % and more: nothing
  assert not RULES["below_roof"](synthetic_facts([hot], rates=synthetic_rates(60.0)))
  assert not RULES["below_roof"](synthetic_facts([hot], measured=True, median_s=1e-4,
                                                 rates=synthetic_rates(80.0)))


def _forget_transcendentals():
  from pallas_prof.advice import facts
  clear = getattr(getattr(facts, "transcendental_primitives", None), "cache_clear", None)
  if clear is not None:
    clear()


def test_a_primitive_the_rule_table_records_as_transcendental_counts_as_one(monkeypatch):
  """The advice's transcendental primitives are the ones the lowering's rule table records
  as such (a rule's `work`): one registered there is counted, with no second list to edit."""
  import jax
  from pallas_prof.backend.lowering import rules
  special = jax.extend.core.Primitive("planted_special_fn")
  monkeypatch.setitem(rules.table.WORK, special, rules.TRANSCENDENTAL)
  _forget_transcendentals()
  try:
    eqs = [synthetic_eq(0, "planted_special_fn", line=21, weight=0.5),
           synthetic_eq(1, "add", line=22, weight=0.5)]
    (finding,) = RULES["transcendental_bound"](synthetic_facts(eqs))
    assert finding.diagnosis.text.startswith("planted_special_fn takes 50 %")
  finally:
    monkeypatch.undo()
    _forget_transcendentals()


def test_every_transcendental_rule_of_this_jax_is_one_for_the_advice():
  """log2 (a primitive of jax 0.11 and later, lowered to libdevice.log2) was missing from
  the advice's hand-written list; each primitive the table records counts."""
  from jax import lax
  from pallas_prof.backend.lowering import rules
  recorded = rules.primitives_doing(rules.TRANSCENDENTAL)
  assert {"exp", "tanh", "logistic", "erf_inv", "pow", "atan2"} <= recorded
  assert ("log2" in recorded) == (getattr(lax, "log2_p", None) is not None)
  for name in sorted(recorded):
    eqs = [synthetic_eq(0, name, line=21, weight=0.5), synthetic_eq(1, "add", line=22)]
    assert RULES["transcendental_bound"](synthetic_facts(eqs)), name


def test_few_programs_are_not_split_finer_than_small_programs_allow():
  """A 2-program kernel of 128-row blocks was told "block 128 -> 1": 128 programs of a few
  hundred bytes each, which small_programs would then tell to grow again. The split stops
  where each program still moves SMALL_PROGRAM_BYTES, and where even a halving would go
  below, the diagnosis stays and no block action is given."""
  from pallas_prof.advice.rules.launch import SMALL_PROGRAM_BYTES
  # 2 programs of 64 KiB each: 4x keeps 16 KiB per program (the rule asks 256x)
  (finding,) = RULES["few_programs"](synthetic_facts(
      grid=(2,), work=synthetic_work(bytes=2 * 64 * 1024, block_bytes=2 * 64 * 1024, programs=2)))
  assert finding.actions[0].change == {"block": "smaller", "factor": 4}
  (why,) = [e for e in finding.diagnosis.evidence if e.what == "work per program"]
  assert why.text == "each program moves 64.0 KiB: split at most 4x, to keep 16.0 KiB or more each"
  # 2 programs of 24 KiB: no halving keeps 16 KiB; the diagnosis is said, nothing is proposed
  (finding,) = RULES["few_programs"](synthetic_facts(
      grid=(2,), work=synthetic_work(bytes=2 * 24 * 1024, block_bytes=2 * 24 * 1024, programs=2)))
  assert finding.actions == []
  assert finding.diagnosis.text == "2 programs on 132 SMs: 130 SMs have nothing to do"
  (why,) = [e for e in finding.diagnosis.evidence if e.what == "work per program"]
  assert "too little to split" in why.text
  # a kernel whose time is its dot is split down to the dot's floor, not the bytes' (the rule
  # asks 256x; 2^29 FLOPs a program keep a 128x128x128 tile's FLOPs at 128x)
  (dot,) = RULES["few_programs"](synthetic_facts(
      grid=(2,), work=synthetic_work(bytes=4096, block_bytes=4096, programs=2, dot_flops=1 << 30)))
  assert dot.actions[0].change["factor"] == 128
  assert SMALL_PROGRAM_BYTES == 16 * 1024     # what the sizes above are chosen around


def test_underfilled_is_not_split_finer_than_small_programs_allow():
  facts = synthetic_facts(grid=(200,),
                          work=synthetic_work(bytes=200 * 20 * 1024, block_bytes=200 * 20 * 1024,
                                              programs=200))
  findings = RULES["underfilled"](facts)
  if facts.waves is None or facts.waves >= 1:
    pytest.fail(f"the synthetic kernel must underfill the GPU: waves {facts.waves}")
  (finding,) = findings
  assert finding.actions == []
  assert any("too little to split" in e.text for e in finding.diagnosis.evidence)


def test_a_split_cap_needs_the_bytes_each_program_moves():
  """Without a work model's bytes the rule's own factor stands (nothing to cap it by); with
  a partial cap, underfilled proposes that cap, not its own factor."""
  from pallas_prof.advice.rules.launch import _split_cap
  unknown = dataclasses.replace(synthetic_facts(grid=(2,)), work=None)
  assert unknown.bytes_per_program is None
  assert _split_cap(unknown, 256) == (256, [])
  facts = synthetic_facts(grid=(200,), work=synthetic_work(
      bytes=200 * 40 * 1024, block_bytes=200 * 40 * 1024, programs=200))
  (finding,) = RULES["underfilled"](facts)
  # the rule asks 16x (16 CTA slots on each of 132 SMs); 40 KiB a program: halved keeps 20 KiB
  assert finding.actions[0].change["factor"] == 2


def _dot_work(programs, reread=8):
  return synthetic_work(bytes=1 << 24, block_bytes=reread << 24, dot_flops=1 << 34,
                        flops=1 << 34, dot_dtype="float32", programs=programs)


def test_launch_order_offers_groups_then_resident_programs_in_grouped_order():
  # 40 x 25 programs of a dot that re-reads its operands 8x, 8 warps of 168 registers: one
  # program an SM at once, so more programs than the GPU holds
  f = synthetic_facts(grid=(40, 25), work=_dot_work(1000), num_warps=8, registers=168)
  (finding,) = RULES["launch_order"](f)
  resident = f.sms * f.occupancy.ctas_per_sm
  assert 0 < resident < 1000
  # and, whatever the order, fewer larger programs re-read each block fewer times
  assert [a.change for a in finding.actions] == [
      {"launch_group": 8}, {"launch_group": 8, "persistent": resident},
      {"block": "larger", "factor": 2}]
  assert f"{resident} resident programs loop over the 1,000 points" in finding.actions[1].title
  assert any(e.what == "waves" for e in finding.diagnosis.evidence)


def test_launch_order_keeps_a_group_already_set_and_offers_larger_blocks_when_both_are():
  f = dataclasses.replace(synthetic_facts(grid=(40, 25), work=_dot_work(1000), num_warps=8,
                                          registers=168), launch_group=4)
  (finding,) = RULES["launch_order"](f)
  assert [a.change for a in finding.actions] == [
      {"launch_group": 4, "persistent": f.sms * f.occupancy.ctas_per_sm},
      {"block": "larger", "factor": 2}]
  (both,) = RULES["launch_order"](dataclasses.replace(f, persistent=264))
  assert [a.change for a in both.actions] == [{"block": "larger", "factor": 2}]


def test_no_resident_programs_where_the_grid_fits_at_once_nor_without_rereads():
  few = synthetic_facts(grid=(8, 4), work=_dot_work(32))
  (finding,) = RULES["launch_order"](few)
  assert [a.change for a in finding.actions] == [{"launch_group": 8}]
  assert RULES["launch_order"](synthetic_facts(grid=(40, 25),
                                               work=_dot_work(1000, reread=2))) == []
