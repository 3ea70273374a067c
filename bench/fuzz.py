"""The differential fuzzer, for as long as you like (tests/fuzz runs a fixed 304).

    python3 bench/fuzz.py --examples 20000                       # CPU, Triton's interpreter
    python3 bench/fuzz.py --device gpu --seconds 240 --jobs 14    # H200: compiled kernels
    python3 bench/fuzz.py --device gpu --examples 60 --seed 1 --no-isolate   # under compute-sanitizer

Random Pallas programs (tests/fuzz/programs.py) run through pallas-prof and
through a reference that shares no code with it (XLA on the CPU, or JAX's
Pallas interpreter); see tests/fuzz/check.py. A difference is shrunk by
hypothesis to a minimal program and saved as a reproducer script under
--corpus. The programs run in child processes: one that dies (an LLVM abort,
a segfault in the interpreter) is recorded as a crash with the program that
killed it, and the run goes on in a fresh child. `--jobs N` keeps N children
running at once, each with its own seeds and log (compiling a kernel is
CPU-bound, so one child keeps one core busy); the summary merges them.

Writes --out (JSON): examples run, outcomes, differences and crashes with
their reproducers, the limitations pallas-prof reported, each job's seeds and
counts, the command and the commit.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def _commit() -> str:
  try:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
  except Exception:  # noqa: BLE001 - a copy without .git
    return "unknown"


# --- the child: runs hypothesis batches, one line of JSON per program -------------

class _Enough(BaseException):
  """Ends an in-process run at its limit (not an Exception: hypothesis passes it on)."""


def worker(args) -> None:
  from hypothesis import HealthCheck, Phase, given, seed, settings
  import jax
  from tests.fuzz.check import Difference, check, save_reproducer
  from hypothesis import strategies as st
  from tests.fuzz.programs import kernel_programs, programs, tma_kernel_programs, value_programs
  device = jax.devices(args.device)[0] if args.device != "cpu" else jax.devices("cpu")[0]
  strategy = {"all": programs(), "values": value_programs(), "kernels": kernel_programs()}[args.kind]
  if os.environ.get("PALLAS_PROF_FUZZ_TMA") == "1":   # --tma: also kernels in TMA's shapes
    strategy = st.one_of(strategy, tma_kernel_programs())
  log = open(args.log, "a", buffering=1)
  current = args.log + ".current"

  from pallas_prof.backend.bounds import check_bounds_enabled
  checking = check_bounds_enabled()

  def emit(**record):
    if checking:
      record["check_bounds"] = True
    log.write(json.dumps(record) + "\n")
    if record["status"] != "difference_candidate":
      done[0] += 1

  # in process (--no-isolate, under compute-sanitizer): stop after --examples
  # programs or --seconds, whichever comes first (hypothesis may run more than
  # max_examples: it counted 218 of 40 on the GPU machine)
  done = [0]
  limit = args.examples if args.once else None
  stop_at = time.time() + args.seconds if args.once and args.seconds else None

  def enough() -> bool:
    return bool((limit and done[0] >= limit) or (stop_at and time.time() >= stop_at))

  batch = 0
  while True:
    batch_seed = args.seed * 100003 + batch
    batch += 1
    failure = {}

    @seed(batch_seed)
    @settings(max_examples=args.batch, database=None, deadline=None, print_blob=False,
              derandomize=False, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate, Phase.shrink] if args.shrink else [Phase.generate])
    @given(strategy)
    def one(program):
      if enough():
        raise _Enough()
      about = {"source": program.source, "describe": program.describe(),
               "seed": program.seed, "kind": program.kind}

      def on_stage(stage):       # a child that dies leaves which of the two it was in
        with open(current, "w") as f:
          json.dump({**about, "stage": stage}, f)

      on_stage(None)
      t0 = time.perf_counter()
      try:
        outcome = check(program, device, on_stage=on_stage)
      except Difference as e:
        first = not failure
        failure["program"], failure["message"] = program, str(e)
        record = {}
        if first:   # kept at once: a run cut off while shrinking still has it
          record = {"reproducer": save_reproducer(program, str(e),
                                                  os.path.join(args.corpus, "unshrunk")),
                    "source": program.source, "message": str(e)[:2000]}
        emit(status="difference_candidate", seconds=time.perf_counter() - t0,
             features=list(program.features), **record)
        raise
      except AssertionError as e:   # the generator made an invalid program
        emit(status="generator_error", message=str(e)[:2000])
        return
      extra = {"source": program.source} if outcome.status.startswith("xla_") else {}
      if os.environ.get("PALLAS_PROF_FUZZ_TMA") == "1":   # --tma: did this kernel use TMA?
        from pallas_prof.backend import registry
        lowered = registry.find(f"fuzz_{program.seed}")
        extra["tma"] = bool(lowered and lowered[-1].generated.tma)
      emit(status=outcome.status, detail=outcome.detail[:300], kind=program.kind,
           features=list(program.features), seconds=time.perf_counter() - t0, **extra)

    try:
      one()
    except _Enough:
      return
    except Difference:
      program, message = failure["program"], failure["message"]
      path = save_reproducer(program, message, args.corpus)
      emit(status="difference", message=message[:2000], reproducer=path,
           source=program.source, describe=program.describe())
    except Exception as e:  # noqa: BLE001 - hypothesis itself, or the generator: say which
      import traceback
      emit(status="worker_error", message=f"{type(e).__name__}: {e}"[:3000],
           traceback=traceback.format_exc()[-4000:])
    if args.once:
      return


# --- the parent: keeps a child running, reads its log, writes the summary -----------

def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--examples", type=int, default=2000, help="stop after this many programs")
  parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
  parser.add_argument("--device", default="cpu", help="cpu or gpu: where pallas-prof runs")
  parser.add_argument("--kind", default="all", choices=["all", "values", "kernels"])
  parser.add_argument("--seed", type=int, default=None)
  parser.add_argument("--batch", type=int, default=200, help="programs per hypothesis run")
  parser.add_argument("--jobs", type=int, default=1,
                      help="worker processes at once, each with its own seeds (compiling "
                           "kernels is CPU-bound: about one per core)")
  parser.add_argument("--check-jobs", type=int, default=0,
                      help="this many of the jobs run in the bounds-checked mode "
                           "(PALLAS_PROF_CHECK=bounds): valid programs must raise nothing "
                           "and compute the same")
  parser.add_argument("--tma", action="store_true",
                      help="pallas-prof's kernels with CompilerParams(tma=True) (TMA loads and "
                           "stores where legal, tests/fuzz/check.py; PALLAS_PROF_FUZZ_TMA=1 "
                           "in the workers)")
  parser.add_argument("--no-shrink", dest="shrink", action="store_false")
  parser.add_argument("--no-isolate", dest="isolate", action="store_false",
                      help="run in this process (for compute-sanitizer); a crash ends the run")
  parser.add_argument("--out", default=None, help="summary JSON (default bench/results/...)")
  parser.add_argument("--corpus", default=None, help="where reproducers go")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--log", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.seed is None:
    args.seed = int.from_bytes(os.urandom(3), "little")
  tag = f"{args.device}_{_commit()}_seed{args.seed}" + ("_tma" if args.tma else "")
  if args.tma:
    os.environ["PALLAS_PROF_FUZZ_TMA"] = "1"     # tests/fuzz/check.py reads it; workers inherit it
  args.out = args.out or os.path.join(ROOT, "bench", "results", f"fuzz_{tag}.json")
  args.corpus = args.corpus or os.path.join(ROOT, "bench", "results", f"fuzz_{tag}_repro")
  args.log = args.log or args.out.replace(".json", "") + ".jsonl"
  if args.worker:
    worker(args)
    return
  os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
  started = time.time()
  if not args.isolate:
    open(args.log, "w").close()
    args.once = True
    args.batch = args.examples
    worker(args)
    jobs = [Job(0, args.log, [args.seed])]
  else:
    jobs = _run_jobs(args, started)
  summary = _summarize(args, started, jobs, final=True)
  print(json.dumps({k: summary[k] for k in ("examples", "outcomes", "differences_found",
                                            "crashes", "seconds")}, indent=1))


class Job:
  """One of --jobs workers in parallel: its own log, seeds, children and crashes."""

  def __init__(self, index: int, log: str, seeds=None, check_bounds: bool = False):
    self.index, self.log, self.check_bounds = index, log, check_bounds
    self.seeds: list[int] = list(seeds or [])
    self.crashes: list[dict] = []
    self.child: subprocess.Popen | None = None

  def to_dict(self) -> dict:
    return {"job": self.index, "seeds": self.seeds, "examples": _count(self.log),
            "check_bounds": self.check_bounds,
            "child_processes": len(self.seeds), "crashes": len(self.crashes),
            "log": os.path.basename(self.log)}


def _worker_command(args, log: str, seed: int) -> list[str]:
  return [sys.executable, os.path.abspath(__file__), "--worker", "--device", args.device,
          "--kind", args.kind, "--seed", str(seed), "--batch", str(args.batch), "--log", log,
          "--corpus", args.corpus, "--out", args.out] + ([] if args.shrink else ["--no-shrink"])


def _job_log(args, index: int) -> str:
  return args.log if args.jobs == 1 else args.log.replace(".jsonl", "") + f".job{index}.jsonl"


def _run_jobs(args, started: float) -> list[Job]:
  """Keeps --jobs children running (a dead one is replaced by a fresh one with
  the next seed) until --examples programs ran in all, or --seconds passed.
  Job k's r-th child runs seed + 1000003 k + 7919 r: distinct programs."""
  deadline = started + args.seconds if args.seconds else None
  jobs = [Job(k, _job_log(args, k), check_bounds=k < args.check_jobs) for k in range(args.jobs)]
  for job in jobs:
    open(job.log, "w").close()

  def finished() -> bool:
    return (sum(_count(j.log) for j in jobs) >= args.examples
            or bool(deadline and time.time() >= deadline))

  last_summary = 0.0
  while not finished():
    for job in jobs:
      if job.child is not None and job.child.poll() is not None:
        if job.child.returncode not in (0, -15):
          job.crashes.append(_record_crash(args, job.log, job.child.returncode))
        job.child = None
      if job.child is None:
        seed = args.seed + 1000003 * job.index + 7919 * (len(job.seeds) + 1)
        job.seeds.append(seed)
        env = dict(os.environ)
        if job.check_bounds:
          env["PALLAS_PROF_CHECK"] = "bounds"
        job.child = subprocess.Popen(_worker_command(args, job.log, seed), cwd=ROOT, env=env)
    time.sleep(1)
    if time.time() - last_summary > 30:     # a cut-off run still leaves a summary
      _summarize(args, started, jobs, final=False)
      last_summary = time.time()
  for job in jobs:
    if job.child is None:
      continue
    if job.child.poll() is None:
      job.child.terminate()
      job.child.wait()
    elif job.child.returncode not in (0, -15):     # died on its own in the last second
      job.crashes.append(_record_crash(args, job.log, job.child.returncode))
  return jobs


def _count(log: str) -> int:
  try:
    with open(log) as f:
      return sum(1 for line in f if '"status": "difference_candidate"' not in line
                 and '"status": "worker_error"' not in line)
  except FileNotFoundError:
    return 0


def _record_crash(args, log: str, returncode: int) -> dict:
  current = log + ".current"
  program = {}
  if os.path.exists(current):
    with open(current) as f:
      program = json.load(f)
  os.makedirs(args.corpus, exist_ok=True)
  path = os.path.join(args.corpus, f"crash_{program.get('seed', 'unknown')}.py")
  with open(path, "w") as f:
    f.write(f"# the fuzz worker died (exit status {returncode}) running this program "
            f"(in: {program.get('stage') or 'unknown'})\n"
            f"# {program.get('describe', '')}\n{program.get('source', '')}")
  return {"returncode": returncode, "reproducer": path, "describe": program.get("describe"),
          "stage": program.get("stage")}


def _records(jobs):
  for job in jobs:
    try:
      with open(job.log) as f:
        lines = f.readlines()
    except FileNotFoundError:
      continue
    for line in lines:
      try:
        yield json.loads(line)
      except json.JSONDecodeError:    # a line half written when the child was stopped
        continue


def _summarize(args, started, jobs, final: bool) -> dict:
  outcomes, unsupported, features = collections.Counter(), collections.Counter(), collections.Counter()
  differences, tolerated, generator_errors, seconds = [], [], [], 0.0
  unshrunk, checked, platforms = [], 0, []
  # a child killed while the reference (XLA, JAX's interpreter) ran is not
  # pallas-prof's crash: jaxlib 0.10.2's constant folder dies of SIGFPE on x % 0
  crashes = [c for job in jobs for c in job.crashes if c.get("stage") != "reference"]
  reference_crashes = [c for job in jobs for c in job.crashes if c.get("stage") == "reference"]
  for rec in _records(jobs):
    status = rec["status"]
    if status == "difference_candidate":
      outcomes["shrink steps that still differed"] += 1
      if "reproducer" in rec:      # the first of a difference, before shrinking
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
  summary = {
      "command": "python3 bench/fuzz.py " + " ".join(sys.argv[1:]),
      "commit": _commit(), "device": args.device, "seed": args.seed, "jobs": len(jobs),
      "examples": sum(v for k, v in outcomes.items()
                      if k not in ("shrink steps that still differed", "worker_error")),
      "examples_in_check_mode": checked,
      "outcomes": dict(outcomes), "differences_found": max(len(unshrunk), len(differences)),
      "differences": differences, "differences_unshrunk": unshrunk, "crashes": crashes,
      "reference_crashes": reference_crashes,
      "unsupported_reasons": dict(unsupported.most_common()),
      "tolerated_examples": tolerated[:20], "generator_errors": generator_errors[:20],
      # pallas-prof equal to XLA on the GPU, or to XLA op by op, where the jitted
      # XLA-on-CPU reference differs (tests/fuzz/check.py)
      "xla_disagrees_with_itself": platforms[:20],
      "features": dict(features.most_common()),
      "child_processes": sum(len(j.seeds) for j in jobs), "per_job": [j.to_dict() for j in jobs],
      "seconds": round(time.time() - started, 1), "seconds_in_checks": round(seconds, 1),
      "final": final,
  }
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(summary, f, indent=1)
  return summary


if __name__ == "__main__":
  main()
