"""bench/advice/advice_checks.py on advice shaped as a GPU run gives it. SYNTHETIC: no figure here
was measured; these tests check what the checks and the Proof list conclude from given
trials (the GPU run of bench/advice/advice_known_answers.py is the lead's)."""
from __future__ import annotations

from bench.advice import advice_checks as checks
from bench.advice.advice_cases import CASES
from bench.advice.advice_known_answers import _advice_dict
from pallas_prof.advice.schema import Action, Diagnosis, Evidence, KernelAdvice, Trial

CASE = {c.name: c for c in CASES}


def _trial(saving, noise=1.0, equal=True):
  before = 100e-6
  return Trial(before, before * (1 - saving / 100), saving, noise, equal, launches=30)


def _advice(rule, actions, at_roof=False, measured_evidence=True):
  d = Diagnosis(rule, f"{rule} (synthetic)", [Evidence("roofline", "x", measured_evidence)],
                user_file="/b/advice_cases.py", user_line=55)
  return KernelAdvice("k#0", "k", at_roof=at_roof, summary=d.text, diagnoses=[d],
                      actions=actions, measured="measured")


def test_the_best_measured_saving_that_held_is_compared_with_the_hand_fix():
  advice = _advice("unpipelined_loop", [
      Action("a", "num_stages 1 -> 2", "unpipelined_loop", trial=_trial(30.0)),
      Action("a", "num_stages 1 -> 3", "unpipelined_loop", trial=_trial(41.0)),
      Action("a", "num_stages 1 -> 4", "unpipelined_loop", trial=_trial(60.0, equal=False)),
      Action("a", "num_warps 4 -> 8", "unpipelined_loop", trial=_trial(0.5, noise=3.0))])
  c = checks.case_checks(CASE["no_pipelining"], advice, {"saving_pct": 44.0}, gpu=True)
  assert c["cause_named"] and c["cause_line"] == "advice_cases.py:55" and c["cause_rank"] == 1
  assert c["best_measured"]["title"] == "num_stages 1 -> 3"   # outputs that differ never count
  assert c["points_from_hand"] == -3.0 and c["within_points"] is True
  far = checks.case_checks(CASE["no_pipelining"], advice, {"saving_pct": 52.0}, gpu=True)
  assert far["within_points"] is False
  # nothing held: a saving of 0 against the hand fix's; no hand fix timed: no verdict
  none = _advice("unpipelined_loop", [Action("a", "num_stages 1 -> 3", "unpipelined_loop",
                                             trial=_trial(0.5, noise=2.0))])
  assert checks.case_checks(CASE["no_pipelining"], none, {"saving_pct": 15.0},
                            gpu=True)["within_points"] is False
  assert checks.case_checks(CASE["no_pipelining"], advice, {"error": "x"},
                            gpu=True)["within_points"] is None


def test_a_kind_d_fix_must_be_ranked_first():
  hoist = Action("d", "hoist sin", "loop_invariant", estimate_pct=90.0)
  warps = Action("a", "num_warps 4 -> 8", "spills", trial=_trial(12.0))
  case = CASE["transcendental"]
  assert checks.case_checks(case, _advice("loop_invariant", [hoist, warps]), {"saving_pct": 95.0},
                            gpu=True)["d_first"] is True
  second = checks.case_checks(case, _advice("loop_invariant", [warps, hoist]), None, gpu=True)
  assert second["d_first"] is False and "within_points" not in second


def test_the_kernel_with_nothing_planted_must_be_at_its_roof_with_no_actions():
  case = CASE["at_roof"]
  roof = _advice("at_roof", [], at_roof=True)
  c = checks.case_checks(case, roof, None, gpu=True)
  assert c["at_roof"] is True and c["no_actions"] and c["cause_named"] is True
  below = _advice("below_roof", [Action("a", "num_warps 4 -> 8", "below_roof")])
  c = checks.case_checks(case, below, None, gpu=True)
  assert c["at_roof"] is False and not c["no_actions"]


def _norm(gpu=True, measured_evidence=True):
  fwd = _advice("below_roof", [Action("a", "num_warps 8 -> 4", "below_roof",
                                      trial=_trial(20.0))], measured_evidence=measured_evidence)
  dw = _advice("small_loop_steps", [Action("a", "num_stages 3 -> 4", "small_loop_steps",
                                           trial=_trial(0.2, noise=2.0)),
                                    Action("d", "load more per iteration", "small_loop_steps")])
  kernels = [{"label": f"k{i}", "replay_median_s": t, "advice": _advice_dict(a)}
             for i, (a, t) in enumerate([(fwd, 200e-6), (dw, 400e-6)])]
  norm = {"op": "layer_norm fwd+bwd", "kernels": kernels,
          "pallas_wall_s": 640e-6, "xla_wall_s": 288e-6}
  norm["checks"] = checks.norm_checks(norm, gpu)
  return norm


def test_a_norm_op_is_explained_with_measured_evidence_and_what_held():
  n = _norm()
  c = n["checks"]
  assert c["explained"] is True and c["actions_a_to_c"] == 2 and c["actions_tried"] == 2
  (kept,) = c["measured_improvements"]
  assert kept["kernel"] == "k0" and kept["action"] == "num_warps 8 -> 4"
  assert abs(kept["saving_s"] - 40e-6) < 1e-12
  assert abs(c["gap_s"] - 352e-6) < 1e-12 and abs(c["gap_closed_share"] - 40 / 352) < 1e-9
  # only static evidence does not explain a measured gap
  assert _norm(measured_evidence=False)["checks"]["kernels_explained"]["k0"] is False


def test_the_proof_list_of_a_gpu_run():
  planted = _advice("unpipelined_loop", [Action("a", "num_stages 1 -> 3", "unpipelined_loop",
                                                trial=_trial(41.0))])
  hoist = _advice("loop_invariant", [Action("d", "hoist sin", "loop_invariant",
                                            estimate_pct=90.0)])
  roof = _advice("at_roof", [], at_roof=True)
  cases = []
  for name, advice, hand in (("no_pipelining", planted, {"saving_pct": 44.0}),
                             ("transcendental", hoist, {"saving_pct": 93.0}),
                             ("at_roof", roof, None)):
    case = CASE[name]
    cases.append({"case": name, "hand_fix_kind": case.fix_kind, "advice": _advice_dict(advice),
                  "checks": checks.case_checks(case, advice, hand, gpu=True)})
  result = {"gpu": True, "cases": cases, "norms": [_norm()], "skipped": ["spills: failed: X"]}
  assert checks.proof_lines(result) == [
      "Proof (issue 29), item by item",
      "- cause and line named: 2/2: no_pipelining yes (advice_cases.py:55), transcendental yes "
      "(advice_cases.py:55)",
      "- measured fix of kinds a-c within 10 points of the hand fix: 1/1: no_pipelining yes "
      "(advice -41 %, hand -44 %)",
      "- kind-d fix ranked first (transcendental): yes: hoist sin",
      "- at its roof, no advice (at_roof): yes, no actions: at_roof (synthetic)",
      "- layer_norm fwd+bwd: 0.640 ms vs XLA 0.288 ms; explained with evidence: yes; actions "
      "tried 2/2; measured: k0 num_warps 8 -> 4 -20 %",
      "- not run: spills: failed: X"]


def test_a_planted_defect_that_costs_nothing_here_gets_no_verdict():
  """The H200 at d875290: too_few_warps' hand fix saved 2 % (the row kernel with one warp
  was at 95 % of copy bandwidth), so doing nothing was 'within 10 points' of it, and its
  advice, rightly "at its roof", was 'cause not named'. Neither is a verdict."""
  roof = _advice("at_roof", [], at_roof=True)
  c = checks.case_checks(CASE["too_few_warps"], roof, {"saving_pct": 2.4}, gpu=True)
  assert c["planted_costs"] is False and c["cause_named"] is None and c["within_points"] is None
  assert "2.4 %" in c["note"] and "10-point" in c["note"]
  lines = checks.proof_lines({"gpu": True, "norms": [], "skipped": [], "cases": [
      {"case": "too_few_warps", "hand_fix_kind": "a", "checks": c}]})
  assert "- cause and line named: 0/0" in lines[1] and "not a known answer" in lines[2]
  assert "within 10 points of the hand fix: 0/0" in lines[3]
  costs = checks.case_checks(CASE["too_few_warps"], roof, {"saving_pct": 73.0}, gpu=True)
  assert costs["cause_named"] is False and costs["within_points"] is False
  assert "planted_costs" not in costs


def test_a_structural_hand_fix_is_matched_by_the_structural_variants_only():
  """The narrow reduction's hand fix is a split (kind e): a knob of kind a that saved as
  much does not stand for it, and the split's measured saving is what is compared."""
  case = CASE["narrow_reduction"]
  stages = Action("a", "num_stages 3 -> 4", "small_loop_steps", trial=_trial(70.0))
  split = Action("e", "split the loop over 20 programs per block", "long_reduction",
                 trial=_trial(66.0))
  wider = Action("e", "split ..., with block_n=16 -> 128", "long_reduction",
                 trial=_trial(90.0, equal=False))                 # outputs differ: never counts
  advice = _advice("long_reduction", [stages, split, wider])
  c = checks.case_checks(case, advice, {"saving_pct": 72.0}, gpu=True)
  assert c["best_measured"]["title"] == split.title and c["within_points"] is True
  assert c["points_from_hand"] == -6.0
  knob_only = checks.case_checks(case, _advice("long_reduction", [stages]),
                                 {"saving_pct": 72.0}, gpu=True)
  assert knob_only["best_measured"] is None and knob_only["within_points"] is False
  lines = checks.proof_lines({"gpu": True, "norms": [], "skipped": [], "cases": [
      {"case": case.name, "hand_fix_kind": "e", "checks": c}]})
  assert lines[2] == ("- measured fix of kind e (structural, whole calls) within 10 points of "
                      "the hand fix: 1/1: narrow_reduction yes (advice -66 %, hand -72 %)")
  assert not any("kinds a-c" in ln for ln in lines)


def test_the_narrow_reductions_hand_fix_gives_the_planted_kernels_sums():
  """Under the interpreter, at a small shape (48 loop steps, 384 columns): the hand-written
  split and the planted kernel sum the same columns (to f32 reassociation)."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  import pallas_prof
  from bench.advice import advice_cases
  pallas_prof.install()
  x = jax.random.normal(jax.random.key(5), (1536, 384), jnp.float32).astype(jnp.bfloat16)
  planted = np.asarray(advice_cases._column_sums(x, block_n=16))
  fixed = np.asarray(advice_cases._column_sums_split(x, block_n=128, splits=16))
  want = np.asarray(x, np.float32).sum(axis=0)
  np.testing.assert_allclose(planted, want, rtol=1e-5, atol=1e-3)
  np.testing.assert_allclose(fixed, want, rtol=1e-5, atol=1e-3)


def test_the_loop_steps_hand_fix_gives_the_planted_attention():
  """Under the interpreter, at a small shape (2 heads, 192 rows: three query blocks, their
  loops 4, 8 and 12 steps of 16): block_k 16 and 64 give the causal softmax attention
  numpy computes."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  import pallas_prof
  from bench.advice import advice_cases
  pallas_prof.install()
  keys = jax.random.split(jax.random.key(3), 3)
  q, k, v = [jax.random.normal(key, (2, 192, 64), jnp.float32).astype(jnp.bfloat16)
             for key in keys]
  qf, kf, vf = (np.asarray(t, np.float32) for t in (q, k, v))
  s = np.where(np.tril(np.ones((192, 192), bool)), np.einsum("hqd,hkd->hqk", qf, kf), -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  want = np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), vf)
  for block_k in (16, 64):
    got = np.asarray(advice_cases._causal_attention(q, k, v, block_k), np.float32)
    np.testing.assert_allclose(got, want, atol=2e-2)     # bf16 outputs and p
