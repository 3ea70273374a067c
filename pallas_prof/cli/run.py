"""`pallas-prof run script.py [args]`: the user's unchanged script, seen through pallas-prof.

Runs the script as `python script.py args` would (runpy: __main__, sys.argv,
sys.path[0], exit code and exceptions preserved) with the backend installed
and tracing on; then compiles every kernel it lowered, profiles them on the
GPU (or correlates them statically on a CPU), prints the report and writes
the run's directory (see run_directory.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import time

from ..version import __version__
from ..backend import LoweringError, kernel_registry
from ..backend.artifacts import DEFAULT_TARGET, target_text
from ..backend.compiling.compile import assemble_cubin
from ..backend.errors import CompileError
from ..backend.compiling.failures.workarounds import compile_working_around
from ..instrument import xprof_run
from . import kernel_failures, processes, run_directory, run_writes
from .script_run import (ScriptOutcome, find_kernel_error, print_script_traceback, run_script,
                         script_error_note)
from .script_args import SAMPLES_FOLDER, RunOptions, missing_script
from .report import CompileInfo, ErrorEntry, KernelEntry, Platform, RunReport, Traces


# --- tracing ----------------------------------------------------------------------------

# JSON Lines (one ExportTraceServiceRequest a line), named as the Collector's
# otlpjsonfile receiver expects; runs before this name wrote trace.otlp.json
# and say so in their report's "traces"
OTLP_JSON_FILE = "trace.otlp.jsonl"
PERFETTO_FILE = "trace.perfetto.json"


def _tracing(args: RunOptions, out_dir: str):
  if args.no_trace:
    return contextlib.nullcontext(None)
  from ..instrument import conventions, tracing
  return tracing(otlp_json=os.path.join(out_dir, OTLP_JSON_FILE),
                 perfetto=os.path.join(out_dir, PERFETTO_FILE),
                 otlp_endpoint=args.otlp_endpoint or None,
                 root_span=conventions.root(os.path.basename(args.script)),
                 root_attributes={conventions.PALLAS_SCRIPT: os.path.abspath(args.script),
                                  conventions.PALLAS_ARGV: " ".join(recorded(args,
                                                                             args.script_args))})


XPROF_HOLDS_CUPTI = ("--xprof: JAX's profiler holds CUPTI while the script runs, so its kernel "
                     "launches were not captured in place (the replay still times each kernel; "
                     "XProf's timeline shows the launches)")


def _gpu_present() -> bool:
  from ..profiler.driver import gpu_status
  return gpu_status()[0]


def _start_insitu(enabled: bool, notes: list[str], xprof: bool = False):
  """Starts CUPTI capture of the script's kernel launches (GPU only); None if not. Under
  --xprof it does not start: two CUPTI subscribers in one process leave one of them empty."""
  if not enabled:
    return None
  try:
    from ..profiler.timing import insitu
    from ..profiler.driver import gpu_status
    if not gpu_status()[0]:
      return None
    if xprof:
      notes.append(XPROF_HOLDS_CUPTI)
      return None
    cap = insitu.capture()
    cap.__enter__()
    return cap
  except Exception as e:  # noqa: BLE001 - in-situ capture is optional; say why it is off
    notes.append(f"in-situ capture off: {e}")
    return None


def _stop_insitu(cap, notes: list[str]):
  if cap is None:
    return None
  try:
    cap.__exit__(None, None, None)
    return cap
  except Exception as e:  # noqa: BLE001
    notes.append(f"in-situ capture failed: {e}")
    return None


# --- after the script -------------------------------------------------------------------

def selected_kernels(pattern: str | None):
  recs = kernel_registry.kernels()
  if pattern:
    rx = re.compile(pattern)
    recs = [r for r in recs if rx.search(r.label) or rx.search(r.name)]
  return recs


def ensure_compiled(rec, errors: list[ErrorEntry]) -> None:
  """CPU runs never compiled: compile for sm_90 for the static figures. The GPU
  path compiled to PTX only: assemble the cubin (registers, spills, SASS)."""
  try:
    if rec.compiled is None:   # (Triton failing on it: another lowering of it, said so)
      rec.compiled = compile_working_around(rec.generated, DEFAULT_TARGET, rec.relower)
    else:
      rec.compiled = assemble_cubin(rec.compiled)
  except LoweringError as e:
    errors.append(error_entry(e, rec.label))


def error_entry(err, label: str | None = None) -> ErrorEntry:
  """report.json's entry for a LoweringError or a KernelRuntimeError (stage "run")."""
  from ..instrument import error_text
  return ErrorEntry(kernel=label or err.kernel, primitive=err.primitive, location=err.location,
                    reason=err.reason, hint=err.hint, stage=err.stage, report=error_text(err),
                    compile_failure=(compile_failure(err) if isinstance(err, CompileError)
                                     else None))


def compile_failure(err: CompileError) -> dict:
  """A CompileError's diagnosis for report.json: what failed, the equations, whose fault,
  the reproducer, the workaround."""
  d = err.diagnosis.to_dict() if err.diagnosis is not None else {}
  d["equations"] = [{"index": e.index, "primitive": e.primitive, "location": e.location}
                    for e in err.equations]
  return {**d, "reproducer": dict(err.reproducer), "workaround": err.details.get("workaround")}


def kernel_entry(rec, files: dict[str, str]) -> KernelEntry:
  gk, ck = rec.generated, rec.compiled
  # the kernel as compiled: where a workaround or a tuned choice lowered it otherwise
  # (another num_warps, say), its settings are the ones the GPU runs, not the call's
  used = ck.generated if ck is not None and ck.generated is not None else gk
  compiled = None
  if ck is not None:
    compiled = CompileInfo(target=target_text(ck.target), cache=ck.cache,
                           total_ms=ck.compile_seconds * 1e3,
                           stages_ms={k: v * 1e3 for k, v in ck.stage_seconds.items()},
                           worker_wait_ms=ck.worker_wait_seconds * 1e3)
  return KernelEntry(
      label=rec.label, name=rec.name, source_info=gk.source_info, platform=rec.platform,
      grid=tuple(gk.grid), launch_grid=tuple(gk.launch_grid),
      num_warps=used.num_warps, num_stages=used.num_stages,
      in_avals=tuple(map(str, rec.in_avals)), out_avals=tuple(map(str, rec.out_avals)),
      lowering_ms=gk.lowering_seconds * 1e3, equations=len(gk.eqns),
      lowering_gc_ms=gk.gc_seconds * 1e3, cpu_launches=rec.launches, files=dict(files),
      compile=compiled, resources=ck.resources() if ck is not None else None,
      warnings=tuple([u.describe() for u in rec.uncovered_outputs]
                     + [f"TMA not used for {note}" for note in gk.tma_notes]),
      # lowered otherwise where Triton failed on the plain lowering
      # (backend/compiling/failures/workarounds.py)
      workarounds=tuple(used.workarounds), bounds_checked=bool(gk.check_bounds))


def _platform() -> Platform:
  """What the run ran on. Versions come from the modules the run imported or the installed
  packages' records, never from a new import: a run stopped while the script imported triton (a Ctrl-C at the start)
  leaves half-made modules behind, and a second `import triton` fails on them."""
  try:
    import jax
    devices = tuple(d.device_kind for d in jax.devices())
    backend = jax.default_backend()
  except Exception:    # no backend would start (or jax itself is half made): said as unknown
    devices, backend = (), "unknown"
  return Platform(jax=_installed_version("jax"), triton=_installed_version("triton"),
                  pallas_prof=__version__, python=sys.version.split()[0], backend=backend,
                  devices=devices)


def _installed_version(package: str) -> str:
  """The version of the module the run used where it imported whole (a failed import
  takes the package out of sys.modules); else the installed package's record."""
  version = getattr(sys.modules.get(package), "__version__", None)
  if version is not None:
    return str(version)
  from importlib import metadata
  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return "unknown"


@contextlib.contextmanager
def stdout_to_stderr(enabled: bool):
  """While enabled, everything written to stdout (Python's and file descriptor 1,
  which child processes inherit) goes to stderr; yields a stream on the real stdout."""
  if not enabled:
    yield sys.stdout
    return
  sys.stdout.flush()
  saved_fd = os.dup(1)
  saved_stdout = sys.stdout
  os.dup2(2, 1)
  sys.stdout = sys.stderr
  real = os.fdopen(os.dup(saved_fd), "w", encoding="utf-8")
  try:
    yield real
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved_fd, 1)
    os.close(saved_fd)
    sys.stdout = saved_stdout
    real.close()


def run(args: RunOptions) -> int:
  problem = missing_script(args.script)
  if problem is not None:
    # before anything is written or imported: nothing to report on
    print(f"pallas-prof: {problem}", file=sys.stderr)
    return 2
  with processes.terminate_as_exception():
    with stdout_to_stderr(args.json) as stdout:
      result = run_and_report(args)
      if args.json:
        stdout.write(result.report.to_json(indent=1) + "\n")
        stdout.flush()
    try:
      if not args.json:
        from .terminal.render import render_run
        if result.kernel_error is not None:
          from ..instrument import render_error
          render_error(result.kernel_error)
        render_run(result.report, result.out_dir)
      result.tell()
    except (KeyboardInterrupt, processes.Terminated) as stop:   # the run is written already
      return 143 if isinstance(stop, processes.Terminated) else 130
  return result.exit_code


def _command(args: RunOptions) -> list[str]:
  """The command line as the user typed it (main() keeps the raw arguments), secrets
  masked (recorded)."""
  return ["pallas-prof", *recorded(args, args.command)]


def recorded(args: RunOptions, argv) -> list[str]:
  """`argv` as the run records it: the values of arguments named like secrets masked
  (redact.py), unless --no-redact."""
  from .redact import redact_argv
  return list(argv) if args.no_redact else redact_argv(argv)


class _Found:
  """What the run has found so far: a run stopped part way (Ctrl-C, SIGTERM) reports this."""

  def __init__(self):
    self.outcome: ScriptOutcome | None = None
    self.kernel_error = None
    self.records: list = []
    self.errors: list[ErrorEntry] = []
    self.notes: list[str] = []
    self.reports: list = []
    self.advice: tuple = ()
    self.failed: dict[str, str] = {}   # label or name -> how it failed (kernel_failures.py)
    self.doing = "starting"          # for the note of a run stopped part way
    self.tracer = None
    self.stopped_by: int | None = None

  def stopped(self, error: BaseException) -> None:
    import signal
    self.stopped_by = (signal.SIGTERM if isinstance(error, processes.Terminated)
                       else signal.SIGINT)
    if self.outcome is None:
      self.outcome = ScriptOutcome(processes.EXIT_CODES[self.stopped_by], None, 0.0)
    self.notes.append(f"pallas-prof was stopped by {processes.signal_name(self.stopped_by)} "
                      f"while {self.doing}; this report holds what it had done before")


def run_and_report(args: RunOptions) -> "run_writes.RunResult":
  """The run API every command that runs a script uses (run, advise): the script run,
  its kernels found, profiled and advised as `args` asks, the run directory written.
  Prints nothing of the report: the caller renders the result it returns."""
  with processes.signals_held() as claiming:      # a folder made is a folder marked
    folder = run_writes.claim(args.out, args.force)
  out_dir = folder.path
  files = run_writes.RunFiles(out_dir)
  found = _Found()
  with contextlib.ExitStack() as running:
    try:
      if claiming:
        raise processes.Terminated() if processes.was_terminated() else KeyboardInterrupt()
      _find(args, found, files, running)
    except (KeyboardInterrupt, processes.Terminated) as stop:
      found.stopped(stop)
    _dropped_interruption(found)
    with processes.signals_held() as held:
      run_report, report_state = run_writes.write_run(
          files, _report(args, found), lambda: run_writes.stop_tracing(found.tracer, running,
                                                                      files),
          lambda: run_writes.save_kernels(out_dir, found.records, files),
          lambda: _add_probe_tracks(args, out_dir, found.reports, files))
      where, problem = run_writes.finish(folder)
      if report_state != "none":
        run_directory.remember_run(where)     # show and report without a directory find it
  xprof_problem = xprof_run.add_plane(args.xprof, args.no_trace,
                                     os.path.join(where, PERFETTO_FILE))
  outcome = found.outcome
  if outcome.error is not None and (found.kernel_error is None or args.traceback):
    print_script_traceback(outcome.error, args.script, args.traceback)
  stopped_by = found.stopped_by or (held[0] if held else None)
  code = (processes.EXIT_CODES[stopped_by] if stopped_by is not None
          else 1 if found.kernel_error is not None and outcome.exit_code == 0
          else outcome.exit_code)
  return run_writes.RunResult(run_report, where, outcome, found.kernel_error, code,
                              [run_writes.closing_line(where, files, report_state), problem,
                               xprof_problem])


def _stop_if_signalled(outcome) -> None:
  """A run sent SIGINT or SIGTERM while its script ran stops here, before compiling and
  profiling, whatever the script made of the signal: one that landed in a kernel's host
  callback comes back as a JaxRuntimeError (the script then failed, exit 1, and the run
  went on to profile) rather than as the signal's own exception."""
  if not processes.received or isinstance(outcome.error, KeyboardInterrupt):
    return
  if outcome.error is not None:
    # the script's error is the signal's doing: said as a stop, not as a failure
    outcome.error = None
  raise processes.Terminated() if processes.was_terminated() else KeyboardInterrupt()


def _dropped_interruption(found: _Found) -> None:
  """A signal the run was sent whose exception Python dropped (raised in a finalizer or a
  callback, it is "ignored"): the run went on, but it was asked to stop, and ends so."""
  script_stopped = found.outcome is not None and isinstance(found.outcome.error,
                                                            KeyboardInterrupt)
  if found.stopped_by is None and processes.received and not script_stopped:
    found.stopped_by = processes.received[0]
    found.notes.append(f"pallas-prof was sent {processes.signal_name(found.stopped_by)}, whose "
                       "interruption Python dropped inside a library; the run went on to the end")


def _find(args: RunOptions, found: _Found, files: "run_writes.RunFiles", running) -> None:
  """Runs the script, then compiles, profiles and advises on its kernels, keeping in
  `found` what each step gives (an interruption leaves what came before)."""
  from .. import api
  api.install()
  kernel_registry.clear()
  from ..backend.running import runtime_errors
  failures_before = runtime_errors.raised()
  found.tracer = _start_tracing(args, files, running)
  running.enter_context(_recording_calls())
  notes = found.notes
  if args.xprof:
    said = xprof_run.without_command_buffers()
    if _gpu_present():
      notes.append(said)
  cap = _start_insitu(not args.no_insitu and not args.no_profile, notes, bool(args.xprof))
  found.doing = "the script ran"
  with xprof_run.jax_profile(args.xprof):
    found.outcome = outcome = run_script(args.script, args.script_args)
  cap = _stop_insitu(cap, notes)
  _stop_if_signalled(outcome)
  found.kernel_error = kernel_error = find_kernel_error(outcome.error)
  if kernel_error is not None:
    found.errors.append(error_entry(kernel_error))
  notes += caught_failures(failures_before, kernel_error) + interpreted_by_jax()
  if outcome.error is not None and kernel_error is None:
    notes.append(script_error_note(outcome.error))
  if outcome.reader_gone:
    notes.append("the reader of the script's output left (a pipe into `head`, say): the "
                 "script ended there, as a Unix tool does (exit 141, SIGPIPE's)")
  found.records = records = selected_kernels(args.kernel)
  if args.kernel and not records and kernel_registry.kernels():
    lowered = [r.label for r in kernel_registry.kernels()]
    notes.append(f"--kernel {args.kernel!r} matched none of the {len(lowered)} kernel(s) "
                 f"the script lowered: {', '.join(lowered)}")
  if processes.was_terminated():
    # a job's scheduler gives a stopped job seconds, not a profile's minutes
    notes.append("the script was stopped by SIGTERM: its kernels were not compiled, profiled "
                 "or advised on; run it again to see them")
    return
  found.doing = "its kernels were compiled"
  for rec in records:
    ensure_compiled(rec, found.errors)
  found.doing = "its kernels were profiled"
  if records and not args.no_analysis:
    for device in _devices(args.device, notes):
      found.reports.append(_profile(records, args, device, cap, notes,
                                    os.path.join(files.root, SAMPLES_FOLDER)))
  found.doing = "the advice was prepared"
  found.failed = kernel_failures.by_kernel(found.errors, runtime_errors.recent(failures_before))
  working = [r for r in records if not kernel_failures.of(r, found.failed)]
  found.advice = _advice(working, found.reports, args, notes)


def _start_tracing(args, files, running):
  """The run's tracing (None with --no-trace, or where its file cannot be opened: the run
  goes on without, and says so)."""
  try:
    return running.enter_context(_tracing(args, files.root))
  except OSError as e:
    for name in (OTLP_JSON_FILE, PERFETTO_FILE):
      files.lost(os.path.join(files.root, name), e)
    return None


def _report(args, found: _Found) -> RunReport:
  """The report of what was found; each kernel's files are those it will have (the
  writes that fail are taken off them afterwards)."""
  outcome = found.outcome
  kernels = [dataclasses.replace(kernel_entry(rec, run_directory.kernel_files(
      rec.label, rec.compiled)), failed=kernel_failures.of(rec, found.failed))
             for rec in found.records]
  return RunReport(
      created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=tuple(_command(args)),
      script=os.path.abspath(args.script), exit_code=outcome.exit_code,
      script_seconds=outcome.seconds, platform=_platform(), origin=processes.origin(),
      kernels=tuple(kernels), errors=tuple(found.errors), notes=tuple(found.notes),
      profiles=tuple(found.reports), advice=found.advice,
      traces=Traces() if args.no_trace else Traces(otlp_json=OTLP_JSON_FILE,
                                                   perfetto=PERFETTO_FILE))


def _add_probe_tracks(args, out_dir: str, reports, files) -> None:
  if not args.no_trace and PERFETTO_FILE not in files.missing:
    run_writes.add_probe_tracks(os.path.join(out_dir, PERFETTO_FILE), reports, files)


def caught_failures(before: int, final) -> list[str]:
  """Notes on the kernels' failures at run time that the script caught and went on from
  (the one that ended it, if one did, is the run's error)."""
  from ..backend.running import runtime_errors
  failures = [e for e in runtime_errors.recent(since=before) if e is not final]
  if not failures:
    return []
  first = failures[0]
  where = f" at {first.location}" if first.location else ""
  return [f"the script caught {len(failures)} failure(s) of its kernels at run time and went "
          f"on; the first: {type(first).__name__} in kernel `{first.kernel}`{where}: "
          f"{first.reason.splitlines()[0]}"]


def interpreted_by_jax() -> list[str]:
  """A note on the pallas_calls with interpret=True: JAX's own interpreter ran them, so the
  run has nothing of them to show, and said nothing of why."""
  calls = kernel_registry.interpreted_by_jax()
  if not calls:
    return []
  which = ", ".join(f"`{name}` at {where}" for name, where in calls)
  return [f"pl.pallas_call(..., interpret=True) ran {len(calls)} kernel(s) under JAX's own "
          f"Pallas interpreter, which pallas-prof does not see, so they are not in this report: "
          f"{which}. Drop interpret=True to see them: on a CPU pallas-prof already runs "
          "kernels under Triton's interpreter"]


# --- the advice (pallas_prof/advice): a hook, kept apart ----------------------------------

def _recording_calls():
  """While the script runs, its pallas_calls are recorded (advice/recipes.py), so that the
  advice can trace a kernel again at another block shape."""
  from ..advice import recipes
  recipes.clear()
  return recipes.capture()


def _advice(records, reports, args: RunOptions, notes: list[str]) -> tuple:
  """Each kernel's advice from the first device's profile; `pallas-prof advise` (args.advise)
  also tries the actions on the GPU."""
  if not records or not reports:
    return ()
  try:
    from ..advice.api import for_report
    return tuple(for_report(records, reports[0], trials=args.advise,
                            device=reports[0].device.index if reports[0].device else 0,
                            budget_s=args.budget_s, progress=args.progress,
                            try_tma=args.try_tma, static=args.advise))
  except Exception as e:  # noqa: BLE001 - the report stands without its advice
    notes.append(f"advice failed: {type(e).__name__}: {e}")
    return ()


def _devices(spec: str, notes: list[str]) -> list[int]:
  """--device: an index, a comma list, or "all" (every GPU of the host)."""
  from ..profiler import driver
  if spec == "all":
    present, reason = driver.gpu_status()
    return list(range(driver.device_count())) if present else [0]
  try:
    return [int(x) for x in spec.split(",") if x.strip()]
  except ValueError:
    raise SystemExit(f"pallas-prof: --device takes an index, a list like 0,1, or all; "
                     f"got {spec!r}") from None


def _profile(records, args: RunOptions, device, cap, notes, samples_dir: str):
  from ..profiler import profile
  from ..profiler.driver import BadDevice
  insitu_result = cap.result if cap is not None else None
  try:
    return profile(records, device=device, replay=not args.no_profile,
                   min_launches=args.reps, ncu=args.ncu, insitu=insitu_result,
                   sample=not args.no_sampling, keep_samples=samples_dir, probes=args.probes)
  except BadDevice:
    raise
  except Exception as e:  # noqa: BLE001 - report what we have, say what failed
    notes.append(f"profiling on device {device} failed: {type(e).__name__}: {e}")
    return profile(records, device=device, replay=False, nvml=False, ceilings=False)
