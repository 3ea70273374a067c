"""bench/fuzz/fuzz.py, the long runner: --jobs N children at once with distinct
seeds, one merged summary; a child that dies is recorded as a crash with the
program it was running, and a fresh child takes its place."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from bench.fuzz import fuzz

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_two_jobs_run_distinct_seeds_into_one_summary(tmp_path):
  """Job 0 in the bounds-checked mode (--check-jobs 1), job 1 without."""
  out = tmp_path / "fuzz.json"
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  done = subprocess.run(
      [sys.executable, os.path.join(ROOT, "bench", "fuzz", "fuzz.py"), "--jobs", "2", "--examples", "6",
       "--seed", "5", "--kind", "kernels", "--no-shrink", "--check-jobs", "1", "--out", str(out),
       "--corpus", str(tmp_path / "repro")],
      capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
  summary = json.loads(out.read_text())
  assert summary["final"] and summary["jobs"] == 2 and summary["crashes"] == []
  # the releases it checked, as the interpreter running the test has them
  import importlib.metadata as metadata
  assert summary["versions"]["jax"] == metadata.version("jax")
  assert summary["versions"]["triton"] == metadata.version("triton")
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
  from testkit.fuzz import check as check_module

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


def test_a_candidate_whose_shrinking_ends_tolerated_is_no_difference_found(tmp_path):
  """A candidate's first record (with its reproducer), its shrink steps, then its program's
  verdict "tolerated" (a rounding flip of a discontinuous op): no difference was found. A
  child stopped while shrinking leaves its candidate counted."""
  def summary(lines):
    log = tmp_path / f"fuzz{len(lines)}.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return fuzz._summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu",
                                              seed=3), 0.0, [fuzz.Job(0, str(log), [3])],
                           final=True)
  first = {"status": "difference_candidate", "reproducer": "/r/unshrunk/a.py", "source": "s",
           "message": "m", "seconds": 1.0}
  step = {"status": "difference_candidate", "seconds": 0.5}
  tolerated = {"status": "tolerated", "detail": "tolerated (a rounding difference flips a "
               "discontinuous op)", "seconds": 0.4}
  ok = {"status": "ok", "seconds": 0.1}
  assert summary([ok, first, step, step, tolerated, ok])["differences_found"] == 0
  assert summary([ok, first, step])["differences_found"] == 1           # cut off shrinking
  # a tolerated program of its own, with no candidate before it, changes nothing
  assert summary([tolerated, first, step, ok, step])["differences_found"] == 1


# --- the commit it ran at, a run cut off, a run split in two ---------------------------

def _git(cwd, *argv):
  return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True,
                        env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                                 GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")).stdout.strip()


def test_the_commit_is_the_trees_own_never_an_enclosing_repositorys(tmp_path, monkeypatch):
  """A copy of the tree without .git inside another repository (the device's copy, a
  folder in someone's checkout) used to report that repository's HEAD. git counts only
  where the tree is its own top; PALLAS_PROF_COMMIT before it, .pallas-prof-commit after."""
  from bench.fuzz.fuzz_summary import COMMIT_ENV, STAMP_FILE, commit
  outer = tmp_path / "outer"
  copy = outer / "copy"
  copy.mkdir(parents=True)
  _git(outer, "init", "-q")
  (outer / "f").write_text("x")
  _git(outer, "add", "f")
  _git(outer, "commit", "-q", "-m", "outer")
  outer_head = _git(outer, "rev-parse", "--short", "HEAD")
  monkeypatch.delenv(COMMIT_ENV, raising=False)
  assert commit(str(copy)) == ("unknown", "none")          # not outer_head
  (copy / STAMP_FILE).write_text("abc1234\n")
  assert commit(str(copy)) == ("abc1234", STAMP_FILE)
  monkeypatch.setenv(COMMIT_ENV, "def5678")
  assert commit(str(copy)) == ("def5678", COMMIT_ENV)       # the variable before the file
  # the variable before git too: the device's copy carried a .git older than its files
  assert commit(str(outer)) == ("def5678", COMMIT_ENV)
  monkeypatch.delenv(COMMIT_ENV)
  assert commit(str(outer)) == (outer_head, "git")          # a tree at its own top: git
  _git(copy, "init", "-q")
  (copy / "g").write_text("y")
  _git(copy, "add", "g")
  _git(copy, "commit", "-q", "-m", "own")
  own = _git(copy, "rev-parse", "--short", "HEAD")
  assert own != outer_head and commit(str(copy)) == (own, "git")   # git over the stamp file


def test_this_checkout_stamps_its_own_head(monkeypatch):
  from bench.fuzz.fuzz_summary import COMMIT_ENV, commit
  monkeypatch.delenv(COMMIT_ENV, raising=False)
  try:
    top = _git(ROOT, "rev-parse", "--show-toplevel")
  except subprocess.CalledProcessError:
    pytest.skip("this tree is not a git checkout")
  if os.path.realpath(top) != os.path.realpath(ROOT):
    pytest.skip("this tree sits inside another repository")
  assert fuzz._commit() == commit(ROOT)[0] == _git(ROOT, "rev-parse", "--short", "HEAD")


def _slow_worker(tmp_path) -> list[str]:
  """A worker that logs a program every 0.2 s, for a minute at most."""
  script = tmp_path / "slow_worker.py"
  script.write_text(
      "import json, sys, time\n"
      "log = sys.argv[1]\n"
      "for k in range(300):\n"
      "  with open(log, 'a') as f:\n"
      "    f.write(json.dumps({'status': 'ok', 'detail': '', 'kind': 'values',\n"
      "                        'features': ['unary'], 'seconds': 0.2}) + '\\n')\n"
      "  time.sleep(0.2)\n")
  return [sys.executable, str(script)]


def test_a_wall_clock_limit_ends_the_run_with_a_final_summary(tmp_path, monkeypatch):
  command = _slow_worker(tmp_path)
  monkeypatch.setattr(fuzz, "_worker_command", lambda args, log, seed, kind=None: command + [log])
  out = tmp_path / "fuzz.json"
  monkeypatch.setattr(sys, "argv", ["fuzz.py", "--jobs", "2", "--examples", "100000",
                                    "--seconds", "3", "--seed", "1", "--out", str(out),
                                    "--log-gz", str(tmp_path / "all.jsonl.gz")])
  fuzz.main()
  summary = json.loads(out.read_text())
  assert summary["final"] and "cut_off" not in summary and summary["examples"] >= 4, summary
  assert 3 <= summary["seconds"] < 30
  import gzip
  lines = gzip.open(tmp_path / "all.jsonl.gz", "rt").read().splitlines()
  assert {json.loads(line)["job"] for line in lines} == {0, 1}
  assert len(lines) >= summary["examples"]


def test_a_run_stopped_by_sigterm_keeps_its_summary(tmp_path, monkeypatch):
  """A timeout's SIGTERM: the children are stopped and the summary written, saying so;
  before it, the summary was already there every SUMMARY_EVERY_S (a SIGKILL keeps that)."""
  import signal
  import threading
  import time
  command = _slow_worker(tmp_path)
  monkeypatch.setattr(fuzz, "_worker_command", lambda args, log, seed, kind=None: command + [log])
  monkeypatch.setattr(fuzz, "SUMMARY_EVERY_S", 1)
  out = tmp_path / "fuzz.json"
  monkeypatch.setattr(sys, "argv", ["fuzz.py", "--jobs", "2", "--examples", "100000",
                                    "--seed", "1", "--out", str(out)])
  seen = {}

  def stop_when_a_partial_summary_is_there():
    for _ in range(600):
      try:
        partial = json.loads(out.read_text())
      except (OSError, ValueError):
        time.sleep(0.1)
        continue
      seen.update(partial)
      os.kill(os.getpid(), signal.SIGTERM)
      return

  stopper = threading.Thread(target=stop_when_a_partial_summary_is_there, daemon=True)
  stopper.start()
  fuzz.main()
  stopper.join(5)
  assert seen and seen["final"] is False and seen["examples"] >= 1, seen
  summary = json.loads(out.read_text())
  assert summary["final"] and summary["cut_off"].startswith("stopped by SIGTERM"), summary
  assert summary["examples"] >= seen["examples"]
  assert signal.getsignal(signal.SIGTERM) is not fuzz._stop     # handlers put back


def test_two_calls_summaries_merge_into_one(tmp_path, monkeypatch):
  from bench.fuzz import fuzz_summary
  a = {"command": "a", "commit": "abc1234", "device": "gpu", "seed": 1, "jobs": 14,
       "examples": 100, "examples_in_check_mode": 10, "differences_found": 1,
       "outcomes": {"ok": 97, "unsupported": 2, "difference": 1},
       "unsupported_reasons": {"r": 2}, "features": {"unary": 50}, "differences": [{"m": 1}],
       "crashes": [], "child_processes": 14, "seconds": 480.2, "seconds_in_checks": 5000.0,
       "per_job": [{"job": 0, "examples": 100}], "final": True,
       "sm90": {"programs": 3, "stage_failure_signatures": {"llir: x": 2}, "hazard_selects": 1,
                "strong_hazard_leads": [{"reproducer": "r1"}]}}
  b = {"command": "b", "commit": "abc1234", "device": "gpu", "seed": 2, "jobs": 14,
       "examples": 50, "examples_in_check_mode": 5, "differences_found": 0,
       "outcomes": {"ok": 50}, "features": {"unary": 20, "dot": 3}, "crashes": [{"c": 1}],
       "child_processes": 15, "seconds": 300.0, "per_job": [{"job": 0, "examples": 50}],
       "final": False, "cut_off": "stopped by SIGTERM after 300 s",
       "sm90": {"programs": 2, "stage_failure_signatures": {"llir: x": 1, "ptx: y": 1},
                "hazard_selects": 2, "strong_hazard_leads": []}}
  paths = []
  for name, data in (("a", a), ("b", b)):
    paths.append(str(tmp_path / f"{name}.json"))
    fuzz_summary.write_json(paths[-1], data)
  out = tmp_path / "merged.json"
  monkeypatch.setattr(sys, "argv", ["fuzz_summary.py", "--merge", *paths, "--out", str(out)])
  fuzz_summary.main()
  merged = json.loads(out.read_text())
  assert merged["commit"] == "abc1234" and merged["examples"] == 150 and merged["jobs"] == 28
  assert merged["outcomes"] == {"ok": 147, "unsupported": 2, "difference": 1}
  assert merged["differences_found"] == 1 and merged["crashes"] == [{"c": 1}]
  assert merged["features"] == {"unary": 70, "dot": 3} and merged["seconds"] == 780.2
  assert merged["final"] is False and [m["seed"] for m in merged["merged_from"]] == [1, 2]
  assert merged["merged_from"][1]["cut_off"].startswith("stopped by SIGTERM")
  assert merged["sm90"]["stage_failure_signatures"] == {"llir: x": 3, "ptx: y": 1}
  assert merged["sm90"]["stage_failures_found"] == 2 and merged["sm90"]["hazard_selects"] == 3
  assert [p["run"] for p in merged["per_job"]] == [0, 1]
