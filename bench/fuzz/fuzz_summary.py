"""bench/fuzz/fuzz.py's summary: what the jobs' logs (one line of JSON per program) add up to,
and the commit it ran at, stamped even in a copy of the tree without .git.

    python3 bench/fuzz/fuzz_summary.py --merge a.json b.json --out both.json

merges the summaries of runs split over several calls (the GPU run of issue 32,
in two calls under the device's time limit): counts add up, lists are joined.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# where a copy of the tree without .git learns its commit (bench/fuzz/fuzz.py's --help says how)
COMMIT_ENV = "PALLAS_PROF_COMMIT"
STAMP_FILE = ".pallas-prof-commit"


def commit(root: str = ROOT) -> tuple[str, str]:
  """(the project's commit, where it was read). git only where `root` is the top of
  its own repository: a copy of the tree inside another repository (the device's
  copy, a temporary folder in someone's checkout) would report that one's HEAD.
  $PALLAS_PROF_COMMIT before git, else the stamp file `root`/.pallas-prof-commit, else "unknown"."""
  def git(*argv) -> str:
    return subprocess.run(["git", *argv], cwd=root, capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()
  # the caller's word first: the device's copy of the tree can carry a .git whose HEAD
  # is older than the files beside it
  stamp = os.environ.get(COMMIT_ENV, "").strip()
  if stamp:
    return stamp, COMMIT_ENV
  try:
    if os.path.realpath(git("rev-parse", "--show-toplevel")) == os.path.realpath(root):
      return git("rev-parse", "--short", "HEAD"), "git"
  except Exception:  # noqa: BLE001 - no git, or not a repository
    pass
  try:
    with open(os.path.join(root, STAMP_FILE)) as f:
      stamp = f.read().strip().split()[0]
    if stamp:
      return stamp, STAMP_FILE
  except (OSError, IndexError):
    pass
  return "unknown", "none"


def records(logs):
  for log in logs:
    try:
      with open(log) as f:
        lines = f.readlines()
    except FileNotFoundError:
      continue
    for line in lines:
      try:
        yield json.loads(line)
      except json.JSONDecodeError:    # a line half written when the child was stopped
        continue


# statuses of lines that are not programs of their own: hypothesis's shrink steps
# (the first of each kept, with its reproducer), and a worker's own failure
NOT_PROGRAMS = ("difference_candidate", "sm90_candidate", "worker_error")


def _sm90_part(recs) -> dict:
  statuses, signatures, limitations = collections.Counter(), collections.Counter(), \
      collections.Counter()
  worked_around, faults = collections.Counter(), collections.Counter()
  found, unshrunk, leads = [], [], []
  kernels = selects = with_selects = strong = 0
  seconds = 0.0
  for rec in recs:
    status = rec["status"]
    if status == "sm90_candidate":
      if "reproducer" in rec:      # the first program of a failure (not a shrink step)
        unshrunk.append({k: rec.get(k) for k in ("signature", "message", "reproducer", "source",
                                                 "describe")})
        signatures[rec.get("signature", "?")] += 1
      continue
    if status == "sm90_failure":     # the same failure, shrunk
      found.append({k: rec.get(k) for k in ("signature", "message", "reproducer", "source",
                                            "describe")})
      continue
    sm90 = rec.get("sm90")
    if not sm90:
      continue
    statuses[sm90["status"]] += 1
    kernels += sm90.get("kernels", 0)
    selects += sm90.get("selects", 0)
    with_selects += bool(sm90.get("selects"))
    strong += sm90.get("strong", 0)
    seconds += sm90.get("seconds", 0.0)
    worked_around.update(sm90.get("workarounds", ()))
    if sm90.get("fault"):
      faults[sm90["fault"]] += 1
    if sm90["status"] == "stage_failure":
      signatures[sm90.get("signature", "?")] += 1
      if "reproducer" in sm90:     # the first of its kind in its job, not shrunk
        unshrunk.append({"signature": sm90.get("signature"), "message": sm90.get("detail"),
                         "reproducer": sm90["reproducer"], "source": rec.get("source"),
                         "describe": rec.get("describe")})
    elif sm90["status"] == "limitation":
      limitations[sm90.get("detail", "")[:200]] += 1
    if "hazard_lead" in rec:
      leads.append(rec["hazard_lead"])
  if not statuses and not found and not unshrunk:
    return {}
  return {"programs": sum(statuses.values()) + len(found), "outcomes": dict(statuses),
          "kernels_compiled": kernels, "seconds": round(seconds, 1),
          # distinct signatures: each a bug of Triton's or pallas-prof's, shrunk once per
          # job; with how many programs failed so
          "stage_failures_found": len(signatures),
          "stage_failure_signatures": dict(signatures.most_common()),
          "stage_failures": found, "stage_failures_unshrunk": unshrunk,
          "limitations": dict(limitations.most_common()),
          # kernels that compiled only through pallas-prof's workarounds, by what changed;
          # and the failures left, by whose fault the diagnosis says they are
          "workarounds_used": dict(worked_around.most_common()),
          "faults": dict(faults.most_common()),
          # testkit/fuzz/sass_hazards.py: in-place predicated selects (not failures), and the
          # strong ones (packed 16-bit math reads the register after), with reproducers
          "hazard_selects": selects, "programs_with_hazard_selects": with_selects,
          "strong_hazard_selects": strong, "strong_hazard_leads": leads[:50]}


# sm_90's answers (testkit/fuzz/sm90.py) in the terms of every target's: a kernel over the
# GPU's shared memory or registers is refused, as a second target refuses what it lacks
_SM90_AS_TARGET = {"compiled": "compiled", "limitation": "refused", "stage_failure": "failed"}
_TARGET_ANSWERS = ("compiled", "refused", "failed")


def _targets_part(recs) -> dict:
  """Per target (sm_90 and the second targets, testkit/fuzz/second_target.py): programs
  compiled, refused (by reason) and failed (by signature, with the reproducers kept)."""
  parts: dict = {}

  def part(target: str) -> dict:
    return parts.setdefault(target, {"programs": 0, **{a: 0 for a in _TARGET_ANSWERS},
                                     "refusal_reasons": {}, "failure_signatures": {},
                                     "failures": []})

  def count(target: str, answer: str, why: str = "") -> None:
    p = part(target)
    p["programs"] += 1
    p[answer] += 1
    if answer != "compiled":
      table = p["refusal_reasons" if answer == "refused" else "failure_signatures"]
      table[why] = table.get(why, 0) + 1

  for rec in recs:
    if rec["status"] == "sm90_failure":          # a shrunk sm_90 failure: its own record
      count("sm_90", "failed", rec.get("signature", "?"))
    sm90 = rec.get("sm90") or {}
    if sm90.get("status") in _SM90_AS_TARGET:
      answer = _SM90_AS_TARGET[sm90["status"]]
      count("sm_90", answer, sm90.get("signature") if answer == "failed" else
            (sm90.get("detail") or "")[:200])
    second = rec.get("second_target") or {}
    if second.get("status") in ("compiled", "refused", "stage_failure"):
      answer = "failed" if second["status"] == "stage_failure" else second["status"]
      count(second["target"], answer, second.get("signature") if answer == "failed" else
            second.get("reason", "")[:200])
      if "reproducer" in second:
        part(second["target"])["failures"].append(
            {"signature": second.get("signature"), "fault": second.get("fault"),
             "message": second.get("reason"), "reproducer": second["reproducer"],
             "source": rec.get("source"), "describe": rec.get("describe")})
  return parts if any(t != "sm_90" for t in parts) else {}


def _shrunk_to_tolerated(jobs) -> int:
  """Candidates whose shrinking ended "tolerated" (a rounding flip of a discontinuous op):
  in a child's log a candidate's first record (with its reproducer) is followed by its
  shrink steps and then its program's verdict; one that ends tolerated found no difference
  (a child stopped while shrinking leaves no verdict: its candidate still counts)."""
  ended = 0
  for job in jobs:
    pending = False
    for rec in records([job.log]):
      status = rec.get("status")
      if status == "difference_candidate":
        pending = pending or "reproducer" in rec
      elif status != "sm90_candidate":
        ended += pending and status == "tolerated"
        pending = False
  return ended


def summarize(args, started: float, jobs, final: bool, cut_off: str | None = None) -> dict:
  outcomes, unsupported, features = collections.Counter(), collections.Counter(), \
      collections.Counter()
  differences, tolerated, generator_errors, seconds = [], [], [], 0.0
  unshrunk, checked, platforms = [], 0, []
  # a child killed while the reference (XLA, JAX's interpreter) ran is not
  # pallas-prof's crash: jaxlib 0.10.2's constant folder dies of SIGFPE on x % 0
  crashes = [c for job in jobs for c in job.crashes if c.get("stage") != "reference"]
  reference_crashes = [c for job in jobs for c in job.crashes if c.get("stage") == "reference"]
  recs = list(records(job.log for job in jobs))
  for rec in recs:
    status = rec["status"]
    if status in ("difference_candidate", "sm90_candidate"):
      outcomes["shrink steps that still differed" if status == "difference_candidate"
               else "shrink steps that still failed to compile"] += 1
      if "reproducer" in rec and status == "difference_candidate":
        unshrunk.append({k: rec[k] for k in ("message", "reproducer", "source")})
      continue
    checked += bool(rec.get("check_bounds")) and status != "worker_error"
    outcomes[status] += 1
    seconds += rec.get("seconds", 0.0)
    features.update(rec.get("features", ()))
    if status == "unsupported":
      unsupported[rec["detail"]] += 1
    elif status == "tolerated":
      tolerated.append(rec["detail"])
    elif status.startswith("xla_"):
      platforms.append({"status": status, "detail": rec["detail"], "source": rec.get("source")})
    elif status == "difference":
      differences.append({k: rec[k] for k in ("message", "reproducer", "describe", "source")})
    elif status in ("generator_error", "worker_error"):
      generator_errors.append(rec["message"])
  # read once, when the run starts (bench/fuzz/fuzz.py main): HEAD may move while it runs
  stamp, stamp_from = getattr(args, "commit", None) or commit()
  summary = {
      "command": "python3 bench/fuzz/fuzz.py " + " ".join(sys.argv[1:]),
      "commit": stamp, "commit_from": stamp_from, "device": args.device, "seed": args.seed,
      "versions": versions(), "jobs": len(jobs),
      "examples": sum(v for k, v in outcomes.items()
                      if not k.startswith("shrink steps") and k != "worker_error"),
      "examples_in_check_mode": checked,
      "outcomes": dict(outcomes),
      "differences_found": max(len(unshrunk) - _shrunk_to_tolerated(jobs), len(differences)),
      "differences": differences, "differences_unshrunk": unshrunk, "crashes": crashes,
      "reference_crashes": reference_crashes,
      "unsupported_reasons": dict(unsupported.most_common()),
      "tolerated_examples": tolerated[:20], "generator_errors": generator_errors[:20],
      # pallas-prof equal to XLA on the GPU, or to XLA op by op, where the jitted
      # XLA-on-CPU reference differs (testkit/fuzz/check.py)
      "xla_disagrees_with_itself": platforms[:20],
      "features": dict(features.most_common()),
      # --persistent N: the examples whose kernel looped over its grid with N programs
      "examples_persistent": sum(1 for rec in recs if rec.get("persistent")),
      # --loop-stages S: the examples whose kernel had a loop pipelined (tl.range)
      "examples_loop_stages": sum(1 for rec in recs if rec.get("loop_stages")),
      "child_processes": sum(len(j.seeds) for j in jobs), "per_job": [j.to_dict() for j in jobs],
      "seconds": round(time.time() - started, 1), "seconds_in_checks": round(seconds, 1),
      "final": final,
  }
  sm90 = _sm90_part(recs)
  if sm90:
    summary["sm90"] = sm90
  targets = _targets_part(recs)
  if targets:
    summary["targets"] = targets
  if cut_off:
    summary["cut_off"] = cut_off
  write_json(args.out, summary)
  return summary


def versions() -> dict[str, str]:
  """The releases the run checked (the CPU legs differ: jax 0.10 and triton 3.6, or
  jax 0.12 and triton 3.9), read from the installed distributions."""
  import importlib.metadata as metadata
  import platform
  found = {"python": platform.python_version()}
  for name in ("jax", "jaxlib", "triton"):
    try:
      found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      found[name] = "not installed"
  return found


def write_json(path: str, data: dict) -> None:
  """Whole or not at all: a run killed while writing keeps its last summary."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w") as f:
    json.dump(data, f, indent=1)
  os.replace(tmp, path)


# --- merging the summaries of one run split over several calls ----------------------

_ADDED = ("examples", "examples_in_check_mode", "differences_found", "child_processes",
          "seconds", "seconds_in_checks")
_JOINED = ("differences", "differences_unshrunk", "crashes", "reference_crashes",
           "tolerated_examples", "generator_errors", "xla_disagrees_with_itself")
_COUNTED = ("outcomes", "unsupported_reasons", "features")


def _add_counts(into: dict, more: dict) -> None:
  for key, value in more.items():
    into[key] = into.get(key, 0) + value


def merge(summaries: list[dict]) -> dict:
  merged = {"merged_from": [{k: s.get(k) for k in ("command", "commit", "seed", "examples",
                                                   "seconds", "final", "cut_off")}
                            for s in summaries],
            "commit": sorted({s.get("commit", "unknown") for s in summaries}),
            "device": sorted({s.get("device", "?") for s in summaries}),
            "jobs": sum(s.get("jobs", 0) for s in summaries),
            "final": all(s.get("final") for s in summaries),
            "per_job": [dict(j, run=i) for i, s in enumerate(summaries)
                        for j in s.get("per_job", [])]}
  for key in _ADDED:
    merged[key] = round(sum(s.get(key, 0) for s in summaries), 1)
  for key in _JOINED:
    merged[key] = [x for s in summaries for x in s.get(key, [])]
  for key in _COUNTED:
    merged[key] = {}
    for s in summaries:
      _add_counts(merged[key], s.get(key, {}))
  parts = [s["sm90"] for s in summaries if s.get("sm90")]
  if parts:
    sm90 = {}
    for part in parts:
      for key, value in part.items():
        if isinstance(value, dict):
          _add_counts(sm90.setdefault(key, {}), value)
        elif isinstance(value, list):
          sm90[key] = sm90.get(key, []) + value
        else:
          sm90[key] = round(sm90.get(key, 0) + value, 1)
    sm90["stage_failures_found"] = len(sm90.get("stage_failure_signatures", {}))
    merged["sm90"] = sm90
  for s in summaries:
    for target, part in s.get("targets", {}).items():
      into = merged.setdefault("targets", {}).setdefault(target, {})
      for key, value in part.items():
        if isinstance(value, dict):
          _add_counts(into.setdefault(key, {}), value)
        elif isinstance(value, list):
          into[key] = into.get(key, []) + value
        else:
          into[key] = into.get(key, 0) + value
  if len(merged["commit"]) == 1:
    merged["commit"] = merged["commit"][0]
  return merged


def main() -> None:
  parser = argparse.ArgumentParser(description="Merges bench/fuzz/fuzz.py summaries.")
  parser.add_argument("--merge", nargs="+", required=True, help="summary JSON files")
  parser.add_argument("--out", required=True)
  args = parser.parse_args()
  summaries = []
  for path in args.merge:
    with open(path) as f:
      summaries.append(json.load(f))
  merged = merge(summaries)
  write_json(args.out, merged)
  print(json.dumps({k: merged[k] for k in ("commit", "examples", "outcomes", "differences_found",
                                           "seconds")}, indent=1))


if __name__ == "__main__":
  main()
