"""bench/fuzz/fuzz.py --second-target, the runner's side: its worker counts each target's
answers (compiled, refused with its reason, failed under a signature, the first failure kept
as a reproducer) and --merge adds summaries up. The compiles themselves
(testkit/fuzz/second_target.py) are tested in tests/fuzz/test_fuzz_targets.py."""
from __future__ import annotations

import argparse

from bench.fuzz import fuzz, fuzz_summary
from testkit.fuzz import second_target, sm90


def _args(tmp_path):
  return argparse.Namespace(device="cpu", kind="values", log=str(tmp_path / "fuzz.jsonl"), seed=3,
                            batch=4, examples=100, seconds=None, shrink=True, once=True,
                            corpus=str(tmp_path / "repro"), compile_sm90=True, second_target=True,
                            out=str(tmp_path / "s.json"))


def test_the_worker_counts_each_targets_answers_and_keeps_a_failures_reproducer(tmp_path,
                                                                              monkeypatch):
  """sm_80 refuses and gfx942 fails (made up): sm_90 compiled all four programs, sm_80
  refused two with their reason, gfx942 failed two under one signature, whose first program
  is kept as a reproducer; --merge adds two such summaries up."""
  monkeypatch.setattr(sm90, "compile_sm90", lambda program: sm90.Sm90Outcome("compiled", 1))

  def answer(program, target):
    if target == "sm_80":
      return second_target.TargetCompile(target, "refused", 1, "sm_80 lacks it")
    return second_target.TargetCompile(target, "stage_failure", 1, "CompileError: boom",
                                       "gfx942 llir: boom", "triton")
  monkeypatch.setattr(second_target, "compile_for_target", answer)
  args = _args(tmp_path)
  fuzz.worker(args)
  summary = fuzz.summarize(args, 0.0, [fuzz.Job(0, args.log, [3])], final=True)
  targets = summary["targets"]
  assert {t: (p["programs"], p["compiled"], p["refused"], p["failed"])
          for t, p in targets.items()} == {"sm_90": (4, 4, 0, 0), "sm_80": (2, 0, 2, 0),
                                           "gfx942": (2, 0, 0, 2)}, targets
  assert targets["sm_80"]["refusal_reasons"] == {"sm_80 lacks it": 2}
  assert targets["gfx942"]["failure_signatures"] == {"gfx942 llir: boom": 2}
  [kept] = targets["gfx942"]["failures"]
  assert "/targets/" in kept["reproducer"] and kept["fault"] == "triton"
  assert "boom" in open(kept["reproducer"]).read() and kept["source"]
  merged = fuzz_summary.merge([summary, summary])["targets"]
  assert merged["gfx942"]["failure_signatures"] == {"gfx942 llir: boom": 4}
  assert merged["sm_80"]["refused"] == 4 and len(merged["gfx942"]["failures"]) == 2


def test_a_summary_without_second_targets_has_no_targets_part(tmp_path, monkeypatch):
  monkeypatch.setattr(sm90, "compile_sm90", lambda program: sm90.Sm90Outcome("compiled", 1))
  args = _args(tmp_path)
  args.second_target = False
  fuzz.worker(args)
  summary = fuzz.summarize(args, 0.0, [fuzz.Job(0, args.log, [3])], final=True)
  assert summary["sm90"]["programs"] == 4 and "targets" not in summary


def test_no_sm90_compiles_the_second_target_alone_in_every_worker(tmp_path, monkeypatch):
  """--second-target --no-sm90 (a long CPU run): no sm_90 compile, each program still
  compiled for its second target; the workers' command keeps it so (a worker given only
  --second-target would turn the sm_90 compile back on)."""
  def no_sm90(program):
    raise AssertionError("sm_90 compiled under --no-sm90")
  monkeypatch.setattr(sm90, "compile_sm90", no_sm90)
  monkeypatch.setattr(second_target, "compile_for_target",
                      lambda program, target: second_target.TargetCompile(target, "compiled", 1))
  args = _args(tmp_path)
  args.compile_sm90, args.no_sm90 = False, True
  fuzz.worker(args)
  summary = fuzz.summarize(args, 0.0, [fuzz.Job(0, args.log, [3])], final=True)
  assert "sm90" not in summary
  assert {t: p["compiled"] for t, p in summary["targets"].items()} == {"sm_80": 2, "gfx942": 2}
  command = fuzz._worker_command(args, args.log, 3)
  assert "--second-target" in command and "--no-sm90" in command
  assert "--compile-sm90" not in command
