"""bench/fuzz/fuzz.py --compile-sm90, the runner's side: its worker keeps each stage failure
unshrunk then shrunk, each strong hazard lead with its reproducer and program, and its
summary counts them; bench/fuzz/fuzz_replay.py reruns the leads. The sm_90 checks
themselves (testkit/fuzz/sm90.py) are tested in tests/fuzz/test_fuzz_sm90.py."""
from __future__ import annotations

import argparse
import json
import os
import sys

from bench.fuzz import fuzz
from testkit.fuzz import sm90
from testkit.fuzz.programs import InputSpec, Program
from testkit.fuzz.sass_hazards import HazardLead
from testkit.fuzz.findings import FUZZ_18680


def _fake_compiles(monkeypatch, outcome):
  monkeypatch.setattr(sm90, "compile_sm90", lambda program: outcome)


def _worker_args(tmp_path, **more):
  return argparse.Namespace(device="cpu", kind="scans", log=str(tmp_path / "fuzz.jsonl"), seed=3,
                            batch=4, examples=100, seconds=None, shrink=True, once=True,
                            corpus=str(tmp_path / "repro"), compile_sm90=True, **more)


def test_a_stage_failure_is_kept_unshrunk_then_shrunk_and_summarized(tmp_path, monkeypatch):
  _fake_compiles(monkeypatch, sm90.Sm90Outcome("stage_failure", 1, "LoweringError: made up",
                                               "llir: made up"))
  args = _worker_args(tmp_path)
  fuzz.worker(args)
  records = [json.loads(line) for line in open(args.log)]
  first = [r for r in records if r["status"] == "sm90_candidate" and "reproducer" in r]
  assert len(first) == 1 and "/unshrunk/" in first[0]["reproducer"], records[:3]
  [final] = [r for r in records if r["status"] == "sm90_failure"]
  assert "/sm90/" in final["reproducer"] and final["signature"] == "llir: made up"
  assert "made up" in open(final["reproducer"]).read()
  summary = fuzz.summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu", seed=3),
                           0.0, [fuzz.Job(0, args.log, [3])], final=True)
  assert summary["sm90"]["stage_failures_found"] == 1
  assert summary["sm90"]["stage_failure_signatures"] == {"llir: made up": 1}
  assert summary["examples"] == 1 and summary["outcomes"]["sm90_failure"] == 1, summary


def test_a_strong_hazard_lead_comes_with_its_reproducer_and_program(tmp_path, monkeypatch):
  lead = HazardLead("@P0 SEL R3, R14, R3, !P3 ;", ("HMUL2 R5, R3.H0_H0, R6 ;",))
  _fake_compiles(monkeypatch, sm90.Sm90Outcome("compiled", 1, leads=[lead]))
  args = _worker_args(tmp_path)
  args.batch = 3
  fuzz.worker(args)
  records = [json.loads(line) for line in open(args.log)]
  assert len(records) == 3 and all(r["sm90"]["strong"] == 1 for r in records), records
  summary = fuzz.summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu", seed=3),
                           0.0, [fuzz.Job(0, args.log, [3])], final=True)
  part = summary["sm90"]
  assert part["hazard_selects"] == part["strong_hazard_selects"] == 3
  assert summary["differences_found"] == 0 and part["stage_failures_found"] == 0
  found = part["strong_hazard_leads"][0]
  assert "/hazard_leads/" in found["reproducer"] and found["leads"][0]["readers"]
  program = Program(**dict(found["program"], inputs=tuple(
      InputSpec(**dict(i, shape=tuple(i["shape"]))) for i in found["program"]["inputs"])))
  assert json.dumps(program.source) in open(found["reproducer"]).read()


def test_the_replay_runs_each_lead_on_several_inputs(tmp_path, monkeypatch):
  """bench/fuzz/fuzz_replay.py, here on the CPU (on the H200 with --device gpu): each strong
  lead a summary kept, rebuilt from its program and checked on --inputs input seeds."""
  from bench.fuzz import fuzz_replay
  from bench.fuzz.fuzz_summary import write_json
  program = dataclasses_asdict(FUZZ_18680)
  write_json(str(tmp_path / "s.json"), {"sm90": {"strong_hazard_leads": [
      {"reproducer": "r", "program": program}, {"reproducer": "no program kept"}]}})
  out = tmp_path / "replay.json"
  monkeypatch.setattr(sys, "argv", ["fuzz_replay.py", str(tmp_path / "s.json"), "--device",
                                    "cpu", "--inputs", "2", "--out", str(out)])
  fuzz_replay.main()
  result = json.loads(out.read_text())
  assert result["programs"] == 1 and result["runs"] == 2 and result["outcomes"] == {"ok": 2}
  assert [r["input_seed"] for r in result["each"]] == [18680, 18680 + 7919]


def dataclasses_asdict(program):
  import dataclasses
  return json.loads(json.dumps(dataclasses.asdict(program)))


def test_a_second_failure_met_while_shrinking_the_first_is_kept_too(tmp_path, monkeypatch):
  """Programs fail in two ways (by their source's length): the first met is shrunk; the
  other, met while the first shrinks (so not raised), still comes with its reproducer."""
  def two_ways(program):
    sig = ("llir: one", "ptx: two")[len(program.source) % 2]
    return sm90.Sm90Outcome("stage_failure", 1, f"LoweringError: {sig}", sig)

  monkeypatch.setattr(sm90, "compile_sm90", two_ways)
  args = _worker_args(tmp_path)
  fuzz.worker(args)
  summary = fuzz.summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu", seed=3),
                           0.0, [fuzz.Job(0, args.log, [3])], final=True)["sm90"]
  assert set(summary["stage_failure_signatures"]) == {"llir: one", "ptx: two"}, summary
  kept = {f["signature"]: f["reproducer"] for f in summary["stage_failures_unshrunk"]}
  assert set(kept) == {"llir: one", "ptx: two"} and all(os.path.exists(p) for p in kept.values())
  assert len(summary["stage_failures"]) == 1, summary     # the first, shrunk
