"""bench/fuzz.py, the long runner: --jobs N children at once with distinct
seeds, one merged summary; a child that dies is recorded as a crash with the
program it was running, and a fresh child takes its place."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench import fuzz

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_two_jobs_run_distinct_seeds_into_one_summary(tmp_path):
  """Job 0 in the bounds-checked mode (--check-jobs 1), job 1 without."""
  out = tmp_path / "fuzz.json"
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  done = subprocess.run(
      [sys.executable, os.path.join(ROOT, "bench", "fuzz.py"), "--jobs", "2", "--examples", "6",
       "--seed", "5", "--kind", "kernels", "--no-shrink", "--check-jobs", "1", "--out", str(out),
       "--corpus", str(tmp_path / "repro")],
      capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
  summary = json.loads(out.read_text())
  assert summary["final"] and summary["jobs"] == 2 and summary["crashes"] == []
  jobs = summary["per_job"]
  assert [j["job"] for j in jobs] == [0, 1]
  seeds = [s for j in jobs for s in j["seeds"]]
  assert len(seeds) == len(set(seeds)) >= 2, jobs
  # each job's log holds its own programs, and the summary adds them up
  logs = [tmp_path / j["log"] for j in jobs]
  assert all(p.exists() for p in logs) and len({p.name for p in logs}) == 2
  assert summary["examples"] == sum(j["examples"] for j in jobs) >= 6, summary
  assert summary["outcomes"].get("ok", 0) >= 1 and summary["differences_found"] == 0, summary
  # job 0 ran in the bounds-checked mode (its programs are valid: nothing raised)
  assert [j["check_bounds"] for j in jobs] == [True, False]
  assert 1 <= summary["examples_in_check_mode"] <= summary["examples"] - jobs[1]["examples"], summary


@pytest.mark.parametrize("stage", ["pallas-prof", "reference"])
def test_a_dead_child_is_a_crash_with_its_program_and_the_run_goes_on(tmp_path, monkeypatch,
                                                                      stage):
  """Children that write two programs and then abort (as an LLVM abort or a
  segfault would end them): each death is recorded with the program it ran,
  and new children (next seeds) finish the run. A child that died while the
  reference ran (XLA's constant folder died of SIGFPE on x % 0 in the CPU run
  of 2026-12-02) is the reference's crash, not pallas-prof's."""
  script = tmp_path / "dying_worker.py"
  script.write_text(
      "import json, os, sys\n"
      "log, seed = sys.argv[1], int(sys.argv[2])\n"
      "with open(log, 'a') as f:\n"
      "  for k in range(2):\n"
      "    f.write(json.dumps({'status': 'ok', 'detail': '', 'kind': 'values',\n"
      "                        'features': ['unary'], 'seconds': 0.01}) + '\\n')\n"
      "with open(log + '.current', 'w') as f:\n"
      "  json.dump({'source': 'def fn(x0):\\n  return (x0,)\\n', 'seed': seed,\n"
      f"             'describe': f'program {{seed}}', 'kind': 'values', 'stage': {stage!r}}}, f)\n"
      "os.abort()\n")
  monkeypatch.setattr(fuzz, "_worker_command",
                      lambda args, log, seed, kind=None: [sys.executable, str(script), log,
                                                          str(seed)])
  out = tmp_path / "fuzz.json"
  monkeypatch.setattr(sys, "argv", ["fuzz.py", "--jobs", "2", "--examples", "8", "--seed", "1",
                                    "--out", str(out), "--corpus", str(tmp_path / "repro")])
  fuzz.main()
  summary = json.loads(out.read_text())
  assert summary["examples"] >= 8 and summary["outcomes"] == {"ok": summary["examples"]}
  crashes = summary["crashes" if stage == "pallas-prof" else "reference_crashes"]
  assert not summary["reference_crashes" if stage == "pallas-prof" else "crashes"]
  assert len(crashes) >= 2 and all(c["returncode"] == -6 for c in crashes), crashes
  for crash in crashes:
    text = open(crash["reproducer"]).read()
    assert "exit status -6" in text and f"(in: {stage})" in text and "def fn(x0)" in text, text
  per_job = summary["per_job"]
  assert all(j["child_processes"] >= 2 and j["crashes"] >= 1 for j in per_job), per_job
  seeds = [s for j in per_job for s in j["seeds"]]
  assert len(seeds) == len(set(seeds))


def test_a_difference_is_kept_before_shrinking_and_after(tmp_path, monkeypatch):
  """The first program that differs is saved at once (a run cut off while
  hypothesis shrinks still has it), and the shrunk one when shrinking ends."""
  import argparse
  from tests.fuzz import check as check_module

  def always_differs(program, device=None, on_stage=None):
    raise check_module.Difference(f"made up for the test: {program.seed}")

  monkeypatch.setattr(check_module, "check", always_differs)
  log = tmp_path / "fuzz.jsonl"
  args = argparse.Namespace(device="cpu", kind="values", log=str(log), seed=3, batch=4,
                            examples=100, seconds=None,
                            shrink=True, once=True, corpus=str(tmp_path / "repro"))
  fuzz.worker(args)
  records = [json.loads(line) for line in log.read_text().splitlines()]
  first = [r for r in records if r["status"] == "difference_candidate" and "reproducer" in r]
  assert len(first) == 1 and "/unshrunk/" in first[0]["reproducer"], records[:3]
  assert "made up for the test" in open(first[0]["reproducer"]).read()
  [final] = [r for r in records if r["status"] == "difference"]
  assert os.path.exists(final["reproducer"]) and "unshrunk" not in final["reproducer"]
  summary = fuzz._summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu",
                                               seed=3), 0.0, [fuzz.Job(0, str(log), [3])],
                            final=True)
  assert summary["differences_found"] == 1 and len(summary["differences_unshrunk"]) == 1
