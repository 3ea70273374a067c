"""bench/fuzz/fuzz_rejudge.py: a saved reproducer, or a program a fuzz log kept whole, judged
against XLA's jit and the op-by-op reference (testkit/fuzz/op_by_op.py); and fuzz.py's worker
keeps a counted-apart program whole (inputs and seed), so that it can be judged again."""
from __future__ import annotations

import argparse
import json
import os

from bench.fuzz import fuzz, fuzz_rejudge
from testkit.fuzz import check as check_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(ROOT, "bench", "corpus",
                        "fuzz_cpu_04e1a5d_seed20261240_jax012_triton39_targets_repro",
                        "repro_kernel_0_eb4dd29e.py")


def test_the_recorded_cpu_float16_difference_is_judged_the_references():
  """pallas-prof equals the op-by-op reference wherever this runs. Whether XLA's jit on
  the CPU skips a float16 rounding depends on the machine's CPU (the machine that recorded
  the case: it did; a later CI machine without it: it did not), so the verdict is checked
  against what XLA's jit did here, not against the recording."""
  case = fuzz_rejudge.judge(RECORDED)
  assert case["elements_ours_not_equal_op_by_op"] == [0, 0], case
  if case["elements_xla_jit_not_equal_op_by_op"][0] > 0:
    assert case["verdict"].startswith("the reference's"), case
    assert case["check_now"] == "xla_skips_16bit_rounding", case
  else:
    assert case["elements_xla_jit_not_equal_op_by_op"] == [0, 0], case
    assert case["verdict"] == "no difference from XLA's jit", case
    assert case["check_now"] == "ok", case


def test_a_counted_apart_program_is_logged_whole_and_judged_again(tmp_path, monkeypatch):
  """The worker's log keeps an xla_* outcome's program with its inputs' specs and seed (the
  logs before kept its source alone, which cannot be run again), and --log reads it back as
  the same Program."""
  seen = []

  def counted_apart(program, device=None, on_stage=None):
    seen.append(program)
    return check_module.Outcome("xla_skips_16bit_rounding", "made up")
  monkeypatch.setattr(check_module, "check", counted_apart)
  args = argparse.Namespace(device="cpu", kind="values", log=str(tmp_path / "fuzz.jsonl"), seed=3,
                            batch=2, examples=2, seconds=None, shrink=False, once=True,
                            corpus=str(tmp_path / "repro"), compile_sm90=False,
                            second_target=False, out=str(tmp_path / "s.json"))
  fuzz.worker(args)
  records = [json.loads(line) for line in open(args.log)]
  assert [r["status"] for r in records] == ["xla_skips_16bit_rounding"] * len(seen) and seen
  logged = fuzz_rejudge.logged_programs(args.log)
  assert [program for _, program in logged] == seen
  assert all("(xla_skips_16bit_rounding)" in where for where, _ in logged)
