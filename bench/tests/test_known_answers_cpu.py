"""bench/advice/advice_known_answers.py on a CPU: each known-answer kernel lowered at its full size
and compiled for sm_90, the advice from those static facts, nothing timed (the GPU run is
the lead's); its JSON and text record, its budget and its errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLANTED = {"no_pipelining", "too_few_warps", "spills", "tiny_blocks", "uncoalesced",
           "transcendental", "narrow_reduction", "loop_step"}

pytestmark = pytest.mark.no_gpu     # asserts what a machine without a GPU says


def _script(*args, timeout=1500):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  return subprocess.run([sys.executable, "bench/advice/advice_known_answers.py", *args],
                        capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  out = tmp_path_factory.mktemp("known_answers")
  result = _script("--out", str(out))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(out / "known_answers.json") as f:
    data = json.load(f)
  return result, data, (out / "known_answers.txt").read_text()


def test_every_planted_defect_is_named_first_at_its_line(run):
  result, data, _ = run
  assert "no NVIDIA GPU" in result.stderr.splitlines()[0]
  assert data["gpu"] is False and data["device"] is None and not data["skipped"], data["skipped"]
  cases = {c["case"]: c for c in data["cases"]}
  assert set(cases) == PLANTED | {"at_roof"}
  for name in PLANTED:
    c = cases[name]["checks"]
    # the narrow reduction's loop also loads 1 KiB a step (small_loop_steps, first), as the
    # norms' dw/db kernels do: both are so, and the split is the fix that pays
    # the attention's loop loads could go through TMA (an opt-in, named first where nothing
    # is measured to order them)
    first = 2 if name in ("narrow_reduction", "loop_step") else 1
    assert c["cause_named"] and c["cause_rank"] == first, (name, c)
    assert c["cause_line"].startswith("advice_cases.py:"), (name, c)


def test_nothing_is_timed_and_every_variant_is_compiled(run):
  _, data, _ = run
  for c in data["cases"]:
    assert c["hand_fix"] is None and c["planted"]["median_s"] is None, c["case"]
    assert c["checks"].get("within_points") is None and c["checks"].get("best_measured") is None
    for a in c["advice"]["actions"]:
      if a["kind"] == "c":     # a block shape, a loop step: too large for the interpreter
        assert a["status"].startswith("not measured: no GPU; built and lowered, not run: the "
                                      "interpreter would run"), (c["case"], a)
        assert a["trial"] is None and a["compiled"].endswith("B shared"), (c["case"], a)
      elif a["kind"] == "a":
        assert a["status"] == "not measured: no GPU" and a["trial"] is None, (c["case"], a)
        assert a["compiled"].endswith("B shared"), (c["case"], a)    # compiled for sm_90
      elif a["kind"] == "e":        # a split reduction: built and lowered (or checked), not timed
        assert a["status"].startswith("not measured: no GPU") and a["trial"] is None, \
            (c["case"], a)
      else:
        assert a["status"] == "not measured: it changes your code (the saving is an estimate)"


def test_each_case_offers_its_hand_fix(run):
  _, data, _ = run
  actions = {c["case"]: c["advice"]["actions"] for c in data["cases"]}
  titles = {k: [a["title"] for a in v] for k, v in actions.items()}
  assert "num_stages 1 -> 3" in titles["no_pipelining"]
  assert titles["too_few_warps"][0] == "num_warps 1 -> 4"
  assert titles["tiny_blocks"][0].startswith("block 64 -> 4096 along grid axis 0")
  assert any(t.startswith("block 1 -> 32 along grid axis 1") for t in titles["uncoalesced"])
  # the spilling kernel's hand fix, (2, 8192) blocks, as a variant: compiled without spills
  rows = next(a for a in actions["spills"] if a["title"].startswith("block 16 -> 2 along"))
  assert rows["kind"] == "c" and "no spills" in rows["compiled"], rows
  assert "spills" in rows["rule"].split(" and ")
  top = actions["transcendental"][0]
  assert top["kind"] == "d" and top["title"].startswith("hoist") and top["estimate_pct"] > 50
  checks = next(c["checks"] for c in data["cases"] if c["case"] == "transcendental")
  assert checks["d_first"] is True
  # the narrow reduction: the split, and the split with the hand fix's 128-column strips
  splits = [a for a in actions["narrow_reduction"] if a["kind"] == "e"]
  assert any("over 5 programs per block: grid 128 -> 128x5" in a["title"] for a in splits)
  wide = [a for a in splits if "with block_n=16 -> 128" in a["title"]]
  assert wide and all("interpreter would run" in a["status"] for a in wide), wide
  # the causal attention: its hand fix, block_k 16 -> 64, as a loop step whose iterations
  # are counted in the program that runs the most (the bound grows with the program id);
  # an iteration loads 4 KiB, so steps up to four times are tried (16 KiB), not eight
  steps = [a["title"].split(" (")[0] for a in actions["loop_step"] if a["rule"] == "loop_step"]
  assert steps == ["block_k=16 -> 8", "block_k=16 -> 32", "block_k=16 -> 64"], steps
  step = next(a for a in actions["loop_step"] if a["title"].startswith("block_k=16 -> 64"))
  assert step["kind"] == "c", step
  assert "256 -> 64 iterations in the program that runs the most" in step["title"]


def test_the_kernel_with_nothing_planted_gets_no_advice(run):
  """On a CPU nothing says it is at its roof (that takes a timing), nor anything wrong."""
  _, data, _ = run
  (c,) = [c for c in data["cases"] if c["case"] == "at_roof"]
  assert c["hand_fix_kind"] is None and c["checks"]["at_roof"] is None
  assert c["checks"]["no_actions"] and c["advice"]["diagnoses"] == []


def test_the_norm_ops_kernels_are_lowered_and_diagnosed(run):
  _, data, _ = run
  assert [n["op"] for n in data["norms"]] == ["layer_norm fwd+bwd", "rms_norm fwd+bwd"]
  for n in data["norms"]:
    assert len(n["kernels"]) == 3 and n["checks"]["explained"] is None     # not timed
    assert "pallas_wall_s" not in n and n["kernels_total_s"] is None
    dw = next(k for k in n["kernels"] if "dw_db" in k["label"])
    rules = {d["rule"] for d in dw["advice"]["diagnoses"]}
    assert {"underfilled", "small_loop_steps"} <= rules, rules
    assert all(d["evidence"] for d in dw["advice"]["diagnoses"])
    assert n["checks"]["kernels_explained"][dw["label"]] is True


def test_the_text_record_ends_with_the_proof_list(run):
  _, data, text = run
  lines = text.splitlines()
  assert lines[0].startswith("bench/advice/advice_known_answers.py --out ")
  assert "no GPU" in lines[1]
  proof = lines[lines.index("Proof (issue 29), item by item: a CPU run, nothing measured: no GPU"):]
  assert proof[1:] == data["proof"][1:]
  assert proof[1].startswith("- cause and line named: 8/8: no_pipelining yes (advice_cases.py:")
  assert proof[2].startswith("- measured fix of kinds a-c within 10 points of the hand fix: "
                             "n/a/6")
  assert proof[3] == ("- measured fix of kind e (structural, whole calls) within 10 points of "
                      "the hand fix: n/a/1: narrow_reduction n/a")
  assert proof[4].startswith("- kind-d fix ranked first (transcendental): yes: hoist")
  assert proof[5].startswith("- at its roof, no advice (at_roof): n/a, no actions")
  assert any(ln.startswith("== spills: ") for ln in lines)


def test_a_spent_budget_skips_the_cases_and_still_writes_the_record(tmp_path):
  result = _script("--out", str(tmp_path), "--budget-s", "1", "--only", "at_roof,rms_norm",
                   timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  data = json.loads((tmp_path / "known_answers.json").read_text())
  assert data["cases"] == [] and data["norms"] == []
  assert data["skipped"] == ["at_roof: the 1 s budget was spent",
                             "rms_norm: the 1 s budget was spent"]
  assert "- not run: rms_norm: the 1 s budget was spent" in \
      (tmp_path / "known_answers.txt").read_text()


def test_an_unknown_case_is_refused_with_the_names(tmp_path):
  result = _script("--out", str(tmp_path), "--only", "spils", timeout=120)
  assert result.returncode == 2
  assert "--only: no case spils (the cases: no_pipelining, too_few_warps, spills" in result.stderr


def test_the_job_running_at_the_deadline_is_cut_and_the_record_kept(tmp_path):
  """The first job never ends on its own (it sleeps), so the deadline, 10 s from the start,
  must cut it: the next is not started, and both files are written. (It once bet on a
  full-size compile taking longer than 10 s; a fast machine with a warm cache won.)"""
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  stalled = ("import sys, time; sys.argv[0] = 'bench/advice/advice_known_answers.py'\n"
             "import bench.advice.advice_known_answers as m\n"
             "m.run_case = lambda *a: time.sleep(3600)\n"
             "raise SystemExit(m.main(sys.argv[1:]))")
  result = subprocess.run([sys.executable, "-c", stalled, "--out", str(tmp_path),
                           "--budget-s", "600", "--deadline-s", "10",
                           "--only", "transcendental,rms_norm"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  data = json.loads((tmp_path / "known_answers.json").read_text())
  assert data["cases"] == [] and data["norms"] == []
  assert data["skipped"] == ["transcendental: cut at the deadline (10 s)",
                             "rms_norm: not started (the deadline)"]
  assert 10 <= data["elapsed_s"] < 120      # cut near the deadline, not after the sleep
  assert "- not run: transcendental: cut at the deadline (10 s)" in \
      (tmp_path / "known_answers.txt").read_text()
