"""Known answers for the advice (issue 29): kernels with one planted defect each and one at
its roof (bench/advice/advice_cases.py), and JAX's own layer_norm / rms_norm fwd+bwd against XLA.

    PYTHONPATH=$PWD python3 bench/advice/advice_known_answers.py --out $OUT/advice    # the H200
    PYTHONPATH=$PWD python3 bench/advice/advice_known_answers.py --out /tmp/advice    # a CPU

writes known_answers.json (everything) and known_answers.txt (what it printed, then the
Proof list item by item: bench/advice/advice_checks.py) into the --out folder.

For each planted kernel, on a GPU: the advice (profile with PC samples, diagnoses, every
action of kinds a-c tried on the replay with outputs compared), and the hand-applied fix
replayed the same way (the planted kernel timed before and after it: its noise); then
the checks the issue asks for: the defect's cause named (the expected rule) at a line,
the best measured saving of kinds a-c against the hand fix's (within 10 points; for the
narrow reduction, whose hand fix is a split, advise's kind-e variants against the hand
fix, both timed as whole calls: issue 49), a kind-d
fix ranked first where the hand fix is an edit; the kernel with nothing planted must be
"at its roof" with no actions. For each norm op: both the Pallas and the XLA version
timed by the wall clock per call here, each Pallas kernel's replayed time and share, its
advice with evidence, and what the trials saved.

On a CPU nothing runs or is timed: each kernel is lowered at its full size and compiled
for sm_90, and the advice comes from those static facts, each action "not measured: no
GPU" (the variants compiled too). The whole run keeps to --budget-s (default 450 s:
one device call of under 9 minutes, Python and JAX's start included): each job's trials
get a share of what is left, no job starts with less than 20 s left, and at
--deadline-s (default: the budget and 50 s) the job running is cut. Both files are
written after every job, so a run cut short keeps what it did.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.advice.wall import wall_median  # noqa: E402

START = time.perf_counter()
TEXT: list[str] = []        # what the run printed, for known_answers.txt


class Deadline(BaseException):
  """The deadline has come (a BaseException: no `except Exception` of the
  library swallows it)."""


def say(text: str) -> None:
  print(f"[{time.perf_counter() - START:6.1f}s] {text}", file=sys.stderr, flush=True)


def show(lines: list[str]) -> None:
  TEXT.extend(lines)
  print("\n".join(lines), flush=True)


def _new_records(before: set) -> list:
  from pallas_prof.backend import kernel_registry
  return [r for r in kernel_registry.kernels() if id(r) not in before]


def _inputs(specs, seed: int = 0) -> list:
  import jax
  import jax.numpy as jnp
  keys = jax.random.split(jax.random.PRNGKey(seed), len(specs))
  return [jax.random.normal(k, s.shape, jnp.float32).astype(s.dtype) for k, s in zip(keys, specs)]


def _lower_and_run(fn, specs, args) -> tuple[list, object]:
  """The kernels `fn` lowers, compiled with their cubin; run on `args` (a GPU), or only
  lowered at the shapes of `specs` (a CPU: None for the outputs)."""
  import jax
  from pallas_prof.backend import kernel_registry
  from pallas_prof.cli.run_steps.kernels import ensure_compiled
  before = {id(r) for r in kernel_registry.kernels()}
  out = None
  if args is not None:
    out = jax.block_until_ready(fn(*args))
  else:
    fn.lower(*specs)
  recs = _new_records(before)
  errors: list = []
  for r in recs:
    ensure_compiled(r, errors)
  if errors:
    raise RuntimeError(f"compile failed: {errors[0]['reason']}")
  return recs, out


def _advice_dict(a) -> dict:
  from pallas_prof.advice.rank import saving_text
  return {"summary": a.summary, "measured": a.measured, "at_roof": a.at_roof,
          "kept": a.kept, "notes": a.notes,
          "diagnoses": [{"rule": d.rule, "text": d.text, "location": d.location,
                         "evidence": [{"what": e.what, "text": e.text, "measured": e.measured}
                                      for e in d.evidence]} for d in a.diagnoses],
          "actions": [{"kind": x.kind, "title": x.title, "rule": x.rule, "status": x.status,
                       "saving": saving_text(x), "estimate_pct": x.estimate_pct,
                       "compiled": x.compiled, "apply": x.apply,
                       "trial": None if x.trial is None else dict(x.trial.to_dict(),
                                                                  held=x.trial.held)}
                      for x in a.actions]}


def _hand_fix(planted, fixed) -> dict:
  """The hand fix replayed as the trials are: same seeded inputs, outputs compared, cold
  timing; the planted kernel timed before and after it. Outputs that differ (an edit may
  round otherwise) are said, and the fix timed all the same."""
  from pallas_prof.advice.trials import _spread
  from pallas_prof.tune.params import replay_candidate
  first_out, first, _ = replay_candidate(planted.compiled, None, (), (), 0, 30, 0.05)
  _, times, differs = replay_candidate(fixed.compiled, first_out, (), (), 0, 30, 0.05)
  if differs:
    _, times, _ = replay_candidate(fixed.compiled, None, (), (), 0, 30, 0.05)
  _, last, _ = replay_candidate(planted.compiled, None, (), (), 0, 30, 0.05)
  before = statistics.median(first + last)
  after = statistics.median(times)
  drift = abs(statistics.median(first) - statistics.median(last)) / before
  return {"outputs_equal": not differs, "outputs_differ": differs or None,
          "before_s": before, "after_s": after,
          "saving_pct": 100 * (before - after) / before,
          "noise_pct": 100 * max(drift, _spread(first), _spread(last), _spread(times))}


def _hand_fix_calls(planted_fn, fixed_fn, args) -> dict:
  """A structural hand fix (kind e: a split reduction, its second pass in XLA) timed as
  advise times its own structural variants: whole calls, the planted one before and after
  it; outputs compared by the caller (`agree`)."""
  from pallas_prof.advice.trials import _spread
  samples = {"first": [], "fixed": [], "last": []}
  for key, fn in (("first", planted_fn), ("fixed", fixed_fn), ("last", planted_fn)):
    for _ in range(3):
      samples[key].append(wall_median(fn, args, n=10))
  before = statistics.median(samples["first"] + samples["last"])
  after = statistics.median(samples["fixed"])
  drift = abs(statistics.median(samples["first"]) - statistics.median(samples["last"])) / before
  return {"before_s": before, "after_s": after, "saving_pct": 100 * (before - after) / before,
          "noise_pct": 100 * max(drift, *(_spread(v) for v in samples.values())),
          "timed": "whole calls (wall clock)"}


def run_case(case, gpu, budget_s) -> dict:
  import numpy as np
  from bench.advice.advice_checks import case_checks
  from pallas_prof.advice import api, recipes
  from pallas_prof.profiler import profile
  began = time.perf_counter()
  say(f"{case.name}: {case.defect}")
  planted_fn, fixed_fn, specs = case.build()
  args = _inputs(specs) if gpu else None
  recipes.clear()
  fixed, got = [], None
  with recipes.capture():
    planted, want = _lower_and_run(planted_fn, specs, args)
    if fixed_fn is not None:
      fixed, got = _lower_and_run(fixed_fn, specs, args)
  agree = None if want is None or got is None else bool(np.allclose(
      np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=2e-2, atol=1e-3))
  report = profile(planted, sample=gpu, mode="cold", min_launches=30, min_seconds=0.05)
  (advice,) = api.for_report(planted[:1], report, trials=True, budget_s=budget_s,
                             progress=say, static=True)
  hand = None
  if gpu and fixed:
    try:
      if case.fix_kind == "e":
        hand = dict(_hand_fix_calls(planted_fn, fixed_fn, args), outputs_equal=agree,
                    outputs_differ=None if agree else "the program's outputs differ")
      else:
        hand = _hand_fix(planted[0], fixed[0])
    except Exception as e:  # noqa: BLE001 - the case's other results stand
      hand = {"error": f"{type(e).__name__}: {e}"}
  kp = report.kernels[0]
  result = {"case": case.name, "defect": case.defect, "expected_rule": case.rule,
            "hand_fix_kind": case.fix_kind, "kernel": planted[0].label,
            "hand_fix_agrees_in_the_program": agree,
            "planted": {"median_s": kp.runtime.median_s if kp.runtime else None,
                        "verdict": kp.verdict,
                        "resources": kp.static.resources if kp.static else None},
            "advice": _advice_dict(advice), "hand_fix": hand,
            "checks": case_checks(case, advice, hand, gpu),
            "seconds": time.perf_counter() - began}
  _print_case(result)
  return result


def _print_case(r: dict) -> None:
  a, c = r["advice"], r["checks"]
  lines = [f"== {r['case']}: {r['defect']}", f"   advice: {a['summary']}"]
  lines += [f"   - {d['text']} ({d['location']})" for d in a["diagnoses"][:3]]
  lines += [f"   {i}. [{x['kind']}] {x['title']}: {x['saving']}"
            for i, x in enumerate(a["actions"][:4], 1)]
  h = r["hand_fix"]
  if h and h.get("saving_pct") is not None:
    lines.append(f"   hand fix: {-h['saving_pct']:+.0f} % ({h['before_s'] * 1e6:.1f} -> "
                 f"{h['after_s'] * 1e6:.1f} us, noise {h['noise_pct']:.1f} %), outputs "
                 + ("equal" if h["outputs_equal"] else f"differ: {h['outputs_differ']}"))
  elif h:
    lines.append(f"   hand fix: {h.get('error')}")
  lines.append(f"   checks: {json.dumps(c)}")
  show(lines)


def run_norm(kind, gpu, budget_s) -> dict:
  import importlib
  import jax
  import jax.numpy as jnp
  from bench.advice.advice_checks import norm_checks
  from bench.suite.suite_cases import _vjp_fn
  from pallas_prof.advice import api, recipes
  from pallas_prof.profiler import profile
  began = time.perf_counter()
  shape = (1, 8192, 8192)
  say(f"{kind} fwd+bwd {'x'.join(map(str, shape))} bfloat16")
  mod = importlib.import_module(f"jax.experimental.pallas.ops.gpu.{kind}")
  pallas = jax.jit(_vjp_fn(getattr(mod, kind), 3))           # as bench/suite_cases.norm
  xla = jax.jit(_vjp_fn(getattr(mod, f"{kind}_reference"), 3))
  bf16 = jnp.bfloat16
  specs = [jax.ShapeDtypeStruct(shape, bf16), jax.ShapeDtypeStruct(shape[-1:], bf16),
           jax.ShapeDtypeStruct(shape[-1:], bf16), jax.ShapeDtypeStruct(shape, bf16)]
  args = _inputs(specs, 7) if gpu else None
  recipes.clear()
  with recipes.capture():
    recs, _ = _lower_and_run(pallas, specs, args)
  report = profile(recs, sample=gpu, mode="cold", min_launches=30, min_seconds=0.05)
  advice = api.for_report(recs, report, trials=True, budget_s=budget_s / max(len(recs), 1),
                          progress=say, static=True)
  times = {k.label: (k.runtime.median_s if k.runtime else None) for k in report.kernels}
  total = sum(t for t in times.values() if t) or None
  out = {"op": f"{kind} fwd+bwd", "shape": list(shape), "dtype": "bfloat16",
         "kernels": [{"label": a.label, "replay_median_s": times.get(a.label),
                      "share_of_kernels": times.get(a.label) / total if total and
                      times.get(a.label) else None,
                      "verdict": next(k.verdict for k in report.kernels if k.label == a.label),
                      "advice": _advice_dict(a)} for a in advice],
         "kernels_total_s": total, "seconds": 0.0}
  if gpu:
    out["pallas_wall_s"] = wall_median(pallas, args, n=20)
    out["xla_wall_s"] = wall_median(xla, args, n=20)
  out["checks"] = norm_checks(out, gpu)
  out["seconds"] = time.perf_counter() - began
  ms = lambda t: "not timed" if t is None else f"{t * 1e3:.3f} ms"
  lines = [f"== {out['op']}: pallas {ms(out.get('pallas_wall_s'))}, XLA "
           f"{ms(out.get('xla_wall_s'))} a call; its kernels {ms(total)} replayed"]
  for k in out["kernels"]:
    share = "" if k["share_of_kernels"] is None else f", {100 * k['share_of_kernels']:.0f} %"
    lines.append(f"   {k['label']} ({ms(k['replay_median_s'])}{share}): "
                 f"{k['advice']['summary']}")
    for d in k["advice"]["diagnoses"][:3]:
      lines += [f"     - {d['text']} ({d['location']})"]
      lines += [f"       {'measured' if e['measured'] else 'static'}: {e['text']}"
                for e in d["evidence"][:3]]
  lines.append(f"   checks: {json.dumps(out['checks'])}")
  show(lines)
  return out


def _commit() -> str | None:
  try:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, timeout=10).stdout.strip() or None
  except (OSError, subprocess.SubprocessError):
    return None


def _run_jobs(jobs, result, gpu, deadline, budget_s, write) -> None:
  for i, (what, job, weight) in enumerate(jobs):
    left = budget_s - (time.perf_counter() - START)
    name = job.name if what == "case" else job
    if left < 20:
      result["skipped"].append(f"{name}: the {budget_s:.0f} s budget was spent")
      continue
    rest = jobs[i:]
    # less what each job takes besides its trials (lowering, profiling, the hand fix)
    trials_s = max(5.0, (left - 25 * len(rest)) * weight / sum(w for *_, w in rest))
    try:
      if what == "case":
        result["cases"].append(run_case(job, gpu, trials_s))
      else:
        result["norms"].append(run_norm(job, gpu, trials_s))
    except Deadline:
      result["skipped"].append(f"{name}: cut at the deadline ({deadline:.0f} s)")
      say(f"{name}: cut at the deadline")
      result["skipped"] += [f"{j.name if w == 'case' else j}: not started (the deadline)"
                            for w, j, _ in jobs[i + 1:]]
      return
    except Exception as e:  # noqa: BLE001 - one failed case must not cost the others
      import traceback
      traceback.print_exc()
      result["skipped"].append(f"{name}: failed: {type(e).__name__}: {str(e)[:500]}")
    write()


def _on_deadline(signum, frame):
  raise Deadline()


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help="the folder to write known_answers.json and "
                  "known_answers.txt into")
  ap.add_argument("--budget-s", type=float, default=450.0,
                  help="seconds for the whole run, from the start of Python (default 450)")
  ap.add_argument("--deadline-s", type=float, default=None,
                  help="the job running then is cut, from the start of Python (default: the "
                  "budget and 50 s)")
  ap.add_argument("--only", default="", help="comma-separated case names (and layer_norm, "
                  "rms_norm)")
  ap.add_argument("--commit", default=None, help="the commit to record (default: git's HEAD, "
                  "where there is a .git)")
  args = ap.parse_args(argv)
  from bench.advice.advice_cases import CASES
  from bench.advice.advice_checks import proof_lines
  names = [c.name for c in CASES] + ["layer_norm", "rms_norm"]
  only = {x for x in args.only.split(",") if x}
  if only - set(names):
    ap.error(f"--only: no case {', '.join(sorted(only - set(names)))} (the cases: "
             f"{', '.join(names)})")
  deadline = args.budget_s + 50 if args.deadline_s is None else args.deadline_s
  import jax
  import triton
  import pallas_prof
  from pallas_prof.profiler.driver import gpu_status
  pallas_prof.install()
  gpu = gpu_status()[0]
  if not gpu:
    say("no NVIDIA GPU: each kernel lowered and compiled for sm_90, not run; the advice "
        "comes from static facts, nothing is timed")
  todo = [c for c in CASES if not only or c.name in only]
  norms = [k for k in ("layer_norm", "rms_norm") if not only or k in only]
  result = {"command": " ".join(sys.argv), "commit": args.commit or _commit(),
            "jax": jax.__version__, "triton": triton.__version__, "gpu": gpu, "device": None,
            "budget_s": args.budget_s, "deadline_s": deadline, "cases": [], "norms": [],
            "skipped": []}
  if gpu:
    result["device"] = jax.devices()[0].device_kind
  os.makedirs(args.out, exist_ok=True)
  json_path = os.path.join(args.out, "known_answers.json")
  text_path = os.path.join(args.out, "known_answers.txt")

  def write():
    result["elapsed_s"] = time.perf_counter() - START
    try:
      result["proof"] = proof_lines(result)
    except Exception as e:  # noqa: BLE001 - the record is written whatever the summary does
      result["proof"] = [f"Proof: the summary failed: {type(e).__name__}: {e}"]
    with open(json_path, "w") as f:
      json.dump(result, f, indent=1, default=str)
    head = [f"{result['command']}", f"commit {result['commit']}, jax {result['jax']}, triton "
            f"{result['triton']}, {result['device'] or 'no GPU'}, "
            f"{result['elapsed_s']:.0f} s of a {args.budget_s:.0f} s budget", ""]
    with open(text_path, "w") as f:
      f.write("\n".join(head + TEXT + [""] + result["proof"]) + "\n")

  # each case's trials get one share of what is left, a norm op (three kernels) two
  jobs = [("case", c, 1.0) for c in todo] + [("norm", k, 2.0) for k in norms]
  signal.signal(signal.SIGALRM, _on_deadline)
  signal.setitimer(signal.ITIMER_REAL, max(0.1, deadline - (time.perf_counter() - START)))
  try:
    _run_jobs(jobs, result, gpu, deadline, args.budget_s, write)
  except Deadline:              # between two jobs
    result["skipped"].append(f"the rest: cut at the deadline ({deadline:.0f} s)")
  signal.setitimer(signal.ITIMER_REAL, 0)
  write()
  print("\n" + "\n".join(result["proof"]), flush=True)
  say(f"wrote {json_path} and {text_path}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
