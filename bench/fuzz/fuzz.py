"""The differential fuzzer, for as long as you like (tests/fuzz runs a fixed set).

    python3 bench/fuzz/fuzz.py --examples 20000                       # CPU, Triton's interpreter
    python3 bench/fuzz/fuzz.py --device gpu --seconds 240 --jobs 14    # H200: compiled kernels
    python3 bench/fuzz/fuzz.py --device gpu --examples 60 --seed 1 --no-isolate   # under compute-sanitizer
    python3 bench/fuzz/fuzz.py --kind scans --compile-sm90 --examples 300   # CPU: also compile for sm_90
    python3 bench/fuzz/fuzz.py --second-target --examples 5000   # CPU: sm_90, and sm_80 or gfx942

Random Pallas programs (testkit/fuzz/programs.py; hazards.py: grown toward the GPU
fuzzer's first miss; scans.py: scans, issue 28) run through pallas-prof and
through a reference that shares no code with it (XLA on the CPU, or JAX's
Pallas interpreter); see testkit/fuzz/check.py. A difference is shrunk by
hypothesis to a minimal program and saved as a reproducer script under
--corpus. The programs run in child processes: one that dies (an LLVM abort,
a segfault in the interpreter) is recorded as a crash with the program that
killed it, and the run goes on in a fresh child. `--jobs N` keeps N children
running at once, each with its own seeds and log (compiling a kernel is
CPU-bound, so one child keeps one core busy); the summary merges them.
`--job-kinds` gives the jobs kinds of their own, `--check-jobs` the
bounds-checked mode to some.

--compile-sm90 (on the CPU) also compiles each program's kernels for sm_90
with Triton's own ptxas, as a GPU run would (through pallas-prof's workarounds
where Triton fails; PALLAS_PROF_WORKAROUNDS=0 for Triton's own failures), and
reads their SASS (testkit/fuzz/sm90.py): a stage failure is a finding (shrunk,
with a reproducer, once per distinct failure in a job), a workaround used is
counted, an in-place predicated select is a hazard lead (testkit/fuzz/sass_hazards.py).
--second-target (with --compile-sm90) also compiles each program's kernels for
sm_80 and gfx942 in turns (testkit/fuzz/second_target.py): compiled, refused (the
target lacks what the kernel uses, with the reason) or a stage failure, a finding
classified as sm_90's are, its first program per signature kept as a reproducer
(not shrunk). The summary's "targets" counts each target's answers. --no-sm90 leaves
the sm_90 compile and its SASS scan out of a --second-target run: the second target
alone, for a long run on the CPU (the sm_90 compile with its disassembly is the larger
part of a program's time there, and the GPU runs and earlier runs cover it).

Writes --out (JSON): examples run, outcomes, differences and crashes with
their reproducers, the limitations pallas-prof reported, each job's seeds and
counts, the command and the commit. The summary is rewritten every 15 s and on
SIGTERM/SIGINT, so a run cut off by a timeout keeps one (`"final": false`).
The commit: git's where this tree is its own repository's top, else
$PALLAS_PROF_COMMIT, else the file .pallas-prof-commit at the top (a copy of
the tree without .git: `PALLAS_PROF_COMMIT=$(git rev-parse --short HEAD)` where
you copy it from). bench/fuzz/fuzz_summary.py --merge adds up the summaries of a
run split over several calls.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from bench.fuzz.fuzz_summary import NOT_PROGRAMS, commit, records, summarize  # noqa: E402

_summarize = summarize      # the name the tests knew
KINDS = ("all", "values", "kernels", "hazards", "scans")
SUMMARY_EVERY_S = 15


def _commit() -> str:
  return commit(ROOT)[0]


def strategy_for(kind: str):
  """The programs of one kind: "all" draws the others' programs, values 3 : kernels 1
  : hazards 2 : scans 1."""
  from hypothesis import strategies as st
  from testkit.fuzz.hazards import hazard_programs
  from testkit.fuzz.programs import kernel_programs, value_programs
  from testkit.fuzz.scans import scan_programs
  if kind == "all":
    values, kernels, hazards = value_programs(), kernel_programs(), hazard_programs()
    return st.one_of(values, values, values, kernels, hazards, hazards, scan_programs())
  return {"values": value_programs(), "kernels": kernel_programs(), "hazards": hazard_programs(),
          "scans": scan_programs()}[kind]


# --- the child: runs hypothesis batches, one line of JSON per program -------------

class _Enough(BaseException):
  """Ends an in-process run at its limit (not an Exception: hypothesis passes it on)."""


def worker(args) -> None:
  from hypothesis import HealthCheck, Phase, given, seed, settings
  import jax
  from testkit.fuzz.check import Difference, check, save_reproducer
  from hypothesis import strategies as st
  from testkit.fuzz.programs import tma_kernel_programs
  from testkit.fuzz import second_target, sm90
  device = jax.devices(args.device)[0] if args.device != "cpu" else jax.devices("cpu")[0]
  strategy = strategy_for(args.kind)
  compile_sm90 = getattr(args, "compile_sm90", False)
  second = getattr(args, "second_target", False)
  programs_seen = [0]                 # this child's programs, shrink steps too: picks the target
  second_failures: dict[str, str] = {}   # second-target failures: signature -> target
  signatures_seen: set[str] = set()     # sm_90 stage failures this job already shrank
  if os.environ.get("PALLAS_PROF_FUZZ_TMA") == "1":   # --tma: also kernels in TMA's shapes
    strategy = st.one_of(strategy, tma_kernel_programs())
  log = open(args.log, "a", buffering=1)
  current = args.log + ".current"

  from pallas_prof.backend.lowering.features.bounds import check_bounds_enabled
  checking = check_bounds_enabled()

  def emit(**record):
    if checking:
      record["check_bounds"] = True
    log.write(json.dumps(record) + "\n")
    if record["status"] not in NOT_PROGRAMS:
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
      if compile_sm90:
        sm90.forget(program)
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
      # an outcome counted apart, or a fragile program's tolerated flips, keeps its program
      # whole (its inputs' specs and seed too), to be judged again (fuzz_rejudge.py --log)
      extra = {"source": program.source, "program": dataclasses.asdict(program)} \
          if outcome.status.startswith(("xla_", "gpu_", "interpreter_")) \
          or outcome.status == "tolerated" else {}
      extra.update(_settings_taken(program))
      if compile_sm90 and outcome.status != "unsupported":
        on_stage("sm90")
        _compile_for_sm90(args, program, extra, failure, signatures_seen, emit, t0)
      if second and outcome.status != "unsupported":
        on_stage("second target")
        _compile_for_second(args, program, second_target.second_target(programs_seen[0]),
                            extra, second_failures)
      programs_seen[0] += 1
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
    except sm90.CompileFailure:
      program, message = failure["program"], failure["message"]
      path = save_reproducer(program, message, os.path.join(args.corpus, "sm90"))
      emit(status="sm90_failure", message=message[:2000], reproducer=path,
           signature=failure["signature"], source=program.source, describe=program.describe())
    except Exception as e:  # noqa: BLE001 - hypothesis itself, or the generator: say which
      import traceback
      emit(status="worker_error", message=f"{type(e).__name__}: {e}"[:3000],
           traceback=traceback.format_exc()[-4000:])
    if args.once:
      return


def _compile_for_sm90(args, program, extra, failure, signatures_seen, emit, t0) -> None:
  """--compile-sm90: the program's kernels compiled for sm_90, their SASS read. A stage
  failure of a signature this job has not seen is raised (hypothesis shrinks it; the
  first program kept at once); one met while another shrinks is kept as it is; the
  outcome and any strong hazard lead go into the program's record (`extra`)."""
  from testkit.fuzz import sm90
  from testkit.fuzz.check import save_reproducer
  compiled = sm90.compile_sm90(program)
  extra["sm90"] = compiled.to_dict()
  if compiled.status != "compiled":
    extra["describe"] = program.describe()     # shapes, dtypes, num_warps
  if compiled.strong_leads:
    extra["hazard_lead"] = _hazard_lead(args, program, compiled)
  if compiled.status != "stage_failure":
    return
  unshrunk = os.path.join(args.corpus, "unshrunk")
  shrinking_it = compiled.signature == failure.get("signature")
  if shrinking_it or (not failure and compiled.signature not in signatures_seen):
    record = {"signature": compiled.signature}
    if not failure:
      record.update(reproducer=save_reproducer(program, compiled.detail, unshrunk),
                    source=program.source, message=compiled.detail[:2000],
                    describe=program.describe())
    signatures_seen.add(compiled.signature)
    failure.update(program=program, message=compiled.detail, signature=compiled.signature)
    emit(status="sm90_candidate", seconds=time.perf_counter() - t0,
         features=list(program.features), **record)
    raise sm90.CompileFailure(compiled.signature)
  if compiled.signature not in signatures_seen:     # met while another one shrinks
    signatures_seen.add(compiled.signature)
    extra["sm90"]["reproducer"] = save_reproducer(program, compiled.detail, unshrunk)
    extra["source"] = program.source


def _compile_for_second(args, program, target: str, extra: dict, seen: dict) -> None:
  """--second-target: the program's kernels compiled for `target` (sm_80 or gfx942); the
  first program of each stage failure's signature in this job kept as a reproducer."""
  from testkit.fuzz import second_target
  from testkit.fuzz.check import save_reproducer
  compiled = second_target.compile_for_target(program, target)
  extra["second_target"] = compiled.to_dict()
  if compiled.status != "stage_failure":
    return
  extra["describe"] = program.describe()
  if compiled.signature not in seen:
    seen[compiled.signature] = target
    extra["second_target"]["reproducer"] = save_reproducer(
        program, compiled.reason, os.path.join(args.corpus, "targets"))
    extra["source"] = program.source


def _hazard_lead(args, program, compiled) -> dict:
  """A program whose SASS has the ptxas hazard's signature with packed 16-bit math
  after it: its reproducer (run it on a GPU: `python3 REPRO gpu`) and the lines."""
  from testkit.fuzz.check import save_reproducer
  leads = [lead.to_dict() for lead in compiled.strong_leads]
  message = ("a hazard lead (not a failure): an in-place predicated select read by packed "
             "16-bit math after it in the sm_90 SASS; run it on a GPU:\n"
             + "\n".join(f"{lead['select']} -> {'; '.join(lead['readers'])}" for lead in leads))
  path = save_reproducer(program, message, os.path.join(args.corpus, "hazard_leads"))
  return {"reproducer": path, "describe": program.describe(), "leads": leads[:4],
          "program": dataclasses.asdict(program)}


def _settings_taken(program) -> dict:
  """What the run's lowering settings did to this program's kernel: with --tma, whether it
  used TMA; --persistent, whether its grid looped; --loop-stages, whether a loop was staged."""
  wanted = {"tma": os.environ.get("PALLAS_PROF_FUZZ_TMA") == "1",
            "persistent": bool(os.environ.get("PALLAS_PROF_FUZZ_PERSISTENT")),
            "loop_stages": bool(os.environ.get("PALLAS_PROF_FUZZ_LOOP_STAGES"))}
  if not any(wanted.values()):
    return {}
  from pallas_prof.backend import kernel_registry
  lowered = kernel_registry.find(f"fuzz_{program.seed}")
  gk = lowered[-1].generated if lowered else None
  out = {"tma": bool(gk and gk.tma), "persistent": int(gk.persistent) if gk else 0,
         "loop_stages": int(gk.loop_stages) if gk else 0}
  return {key: value for key, value in out.items() if wanted[key]}


# --- the parent: keeps a child running, reads its log, writes the summary -----------

def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--examples", type=int, default=2000, help="stop after this many programs")
  parser.add_argument("--seconds", type=float, default=None,
                      help="stop after this long (wall clock; the summary is final then)")
  parser.add_argument("--device", default="cpu", help="cpu or gpu: where pallas-prof runs")
  parser.add_argument("--kind", default="all", choices=KINDS,
                      help="which programs: all (values 3 : kernels 1 : hazards 2 : scans 1), "
                           "values, kernels, hazards (testkit/fuzz/hazards.py), scans")
  parser.add_argument("--job-kinds", default=None,
                      help="comma-separated kinds, one per job in turn (job k runs the "
                           "k-th modulo their number); overrides --kind")
  parser.add_argument("--seed", type=int, default=None)
  parser.add_argument("--batch", type=int, default=200, help="programs per hypothesis run")
  parser.add_argument("--jobs", type=int, default=1,
                      help="worker processes at once, each with its own seeds (compiling "
                           "kernels is CPU-bound: about one per core)")
  parser.add_argument("--check-jobs", type=int, default=0,
                      help="this many of the jobs run in the bounds-checked mode "
                           "(PALLAS_PROF_CHECK=bounds): valid programs must raise nothing "
                           "and compute the same")
  parser.add_argument("--compile-sm90", action="store_true",
                      help="also compile each program's kernels for sm_90 (on the CPU, "
                           "Triton's ptxas) and scan the SASS for the ptxas hazard")
  parser.add_argument("--second-target", action="store_true",
                      help="also compile each program's kernels for sm_80 and gfx942 in "
                           "turns (testkit/fuzz/second_target.py); turns --compile-sm90 on "
                           "unless --no-sm90")
  parser.add_argument("--no-sm90", action="store_true",
                      help="with --second-target: compile for the second target only, not "
                           "for sm_90 too (no SASS scan)")
  parser.add_argument("--tma", action="store_true",
                      help="pallas-prof's kernels with CompilerParams(tma=True) (TMA loads and "
                           "stores where legal, testkit/fuzz/check.py; PALLAS_PROF_FUZZ_TMA=1 "
                           "in the workers)")
  parser.add_argument("--persistent", type=int, default=0, metavar="N",
                      help="pallas-prof's kernels with CompilerParams(persistent=N): N programs "
                           "loop over each grid of more points (PALLAS_PROF_FUZZ_PERSISTENT=N "
                           "in the workers)")
  parser.add_argument("--loop-stages", type=int, default=0, metavar="S",
                      help="pallas-prof's kernels with CompilerParams(loop_stages=S): each "
                           "innermost loop that loads and has no dot pipelined by Triton "
                           "(PALLAS_PROF_FUZZ_LOOP_STAGES=S in the workers)")
  parser.add_argument("--no-shrink", dest="shrink", action="store_false")
  parser.add_argument("--no-isolate", dest="isolate", action="store_false",
                      help="run in this process (for compute-sanitizer); a crash ends the run")
  parser.add_argument("--out", default=None, help="summary JSON (default bench/results/...)")
  parser.add_argument("--corpus", default=None, help="where reproducers go")
  parser.add_argument("--log", default=None,
                      help="the programs' log, one JSON line each (default: beside --out; "
                           "with --jobs N, one file per job)")
  parser.add_argument("--log-gz", default=None,
                      help="also keep all jobs' logs in this one gzip file (rewritten with "
                           "the summary every minute and at the end)")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.no_sm90 and (args.compile_sm90 or not args.second_target):
    parser.error("--no-sm90 goes with --second-target, and not with --compile-sm90")
  args.compile_sm90 = args.compile_sm90 or (args.second_target and not args.no_sm90)
  if args.seed is None:
    args.seed = int.from_bytes(os.urandom(3), "little")
  args.commit = commit(ROOT)
  tag = f"{args.device}_{args.commit[0]}_seed{args.seed}" + ("_tma" if args.tma else "") + \
      (f"_persistent{args.persistent}" if args.persistent else "") + \
      (f"_loopstages{args.loop_stages}" if args.loop_stages else "")
  if args.tma:
    os.environ["PALLAS_PROF_FUZZ_TMA"] = "1"   # testkit/fuzz/check.py reads it; workers inherit it
  if args.persistent:
    os.environ["PALLAS_PROF_FUZZ_PERSISTENT"] = str(args.persistent)   # as --tma's
  if args.loop_stages:
    os.environ["PALLAS_PROF_FUZZ_LOOP_STAGES"] = str(args.loop_stages)   # as --tma's
  args.out = args.out or os.path.join(ROOT, "bench", "results", f"fuzz_{tag}.json")
  args.corpus = args.corpus or os.path.join(ROOT, "bench", "corpus", f"fuzz_{tag}_repro")
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
    jobs = [Job(0, args.log, [args.seed], kind=args.kind)]
  else:
    jobs = _run_jobs(args, started)
  summary = summarize(args, started, jobs, final=True, cut_off=getattr(args, "cut_off", None))
  _write_log_gz(args, jobs)
  print(json.dumps({k: summary[k] for k in ("examples", "outcomes", "differences_found",
                                            "crashes", "seconds")}, indent=1))
  if "sm90" in summary:
    print(json.dumps({k: summary["sm90"][k] for k in (
        "programs", "stage_failures_found", "stage_failure_signatures", "hazard_selects",
        "strong_hazard_selects")}, indent=1))
  if "targets" in summary:
    print(json.dumps({t: {k: v for k, v in part.items() if k != "failures"}
                      for t, part in summary["targets"].items()}, indent=1))


class Job:
  """One of --jobs workers in parallel: its own log, seeds, children and crashes."""

  def __init__(self, index: int, log: str, seeds=None, check_bounds: bool = False,
               kind: str = "all"):
    self.index, self.log, self.check_bounds, self.kind = index, log, check_bounds, kind
    self.seeds: list[int] = list(seeds or [])
    self.crashes: list[dict] = []
    self.child: subprocess.Popen | None = None

  def to_dict(self) -> dict:
    return {"job": self.index, "kind": self.kind, "seeds": self.seeds,
            "examples": _count(self.log), "check_bounds": self.check_bounds,
            "child_processes": len(self.seeds), "crashes": len(self.crashes),
            "log": os.path.basename(self.log)}


def _worker_command(args, log: str, seed: int, kind: str | None = None) -> list[str]:
  return ([sys.executable, os.path.abspath(__file__), "--worker", "--device", args.device,
           "--kind", kind or args.kind, "--seed", str(seed), "--batch", str(args.batch),
           "--log", log, "--corpus", args.corpus, "--out", args.out]
          + ([] if args.shrink else ["--no-shrink"])
          + (["--compile-sm90"] if getattr(args, "compile_sm90", False) else [])
          + (["--second-target"] if getattr(args, "second_target", False) else [])
          + (["--no-sm90"] if getattr(args, "no_sm90", False) else []))


def _job_log(args, index: int) -> str:
  return args.log if args.jobs == 1 else args.log.replace(".jsonl", "") + f".job{index}.jsonl"


def _job_kind(args, index: int) -> str:
  kinds = [k.strip() for k in (getattr(args, "job_kinds", None) or "").split(",") if k.strip()]
  unknown = [k for k in kinds if k not in KINDS]
  if unknown:
    raise SystemExit(f"--job-kinds: unknown kind(s) {unknown}; choose from {list(KINDS)}")
  return kinds[index % len(kinds)] if kinds else args.kind


class _Stopped(Exception):
  """SIGTERM or SIGINT reached the parent: stop the children, write the summary."""


def _stop(signum, frame):
  raise _Stopped(signal.Signals(signum).name)


def _run_jobs(args, started: float) -> list[Job]:
  """Keeps --jobs children running (a dead one is replaced by a fresh one with
  the next seed) until --examples programs ran in all, or --seconds passed.
  Job k's r-th child runs seed + 1000003 k + 7919 r: distinct programs."""
  deadline = started + args.seconds if args.seconds else None
  jobs = [Job(k, _job_log(args, k), check_bounds=k < args.check_jobs, kind=_job_kind(args, k))
          for k in range(args.jobs)]
  for job in jobs:
    open(job.log, "w").close()

  def finished() -> bool:
    return (sum(_count(j.log) for j in jobs) >= args.examples
            or bool(deadline and time.time() >= deadline))

  last_summary = last_gz = time.time()
  previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
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
          job.child = subprocess.Popen(_worker_command(args, job.log, seed, job.kind), cwd=ROOT,
                                       env=env)
      time.sleep(1)
      if time.time() - last_summary > SUMMARY_EVERY_S:     # a cut-off run still leaves one
        summarize(args, started, jobs, final=False)
        last_summary = time.time()
      if args.log_gz and time.time() - last_gz > 60:
        _write_log_gz(args, jobs)
        last_gz = time.time()
  except _Stopped as e:
    args.cut_off = f"stopped by {e} after {time.time() - started:.0f} s"
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
    _stop_children(args, jobs)
  return jobs


def _stop_children(args, jobs) -> None:
  for job in jobs:
    if job.child is None:
      continue
    if job.child.poll() is None:
      job.child.terminate()
      try:
        job.child.wait(timeout=20)
      except subprocess.TimeoutExpired:
        job.child.kill()
        job.child.wait()
    elif job.child.returncode not in (0, -15):     # died on its own in the last second
      job.crashes.append(_record_crash(args, job.log, job.child.returncode))


def _write_log_gz(args, jobs) -> None:
  if not args.log_gz:
    return
  tmp = f"{args.log_gz}.tmp{os.getpid()}"
  with gzip.open(tmp, "wt") as f:
    for job in jobs:
      for rec in records([job.log]):
        f.write(json.dumps(dict(rec, job=job.index)) + "\n")
  os.replace(tmp, args.log_gz)


def _count(log: str) -> int:
  try:
    with open(log) as f:
      return sum(1 for line in f
                 if not any(f'"status": "{s}"' in line for s in NOT_PROGRAMS))
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
          "stage": program.get("stage"), "source": program.get("source")}


if __name__ == "__main__":
  main()
