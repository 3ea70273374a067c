"""`pallas-prof run script.py [args]`: the user's unchanged script, seen through pallas-prof.

Runs the script as `python script.py args` would (runpy: __main__, sys.argv,
sys.path[0], exit code and exceptions preserved) with the backend installed
and tracing on; then compiles every kernel it lowered, profiles them on the
GPU (or correlates them statically on a CPU), prints the report and writes
the run's directory (see run_directory.py).

Here: the `run` command (the report rendered, or --json on stdout), the run API every
command that runs a script uses (run_and_report: the run directory claimed, written and
finished, whatever stops it), and the order of the run's steps (_find); the steps
themselves are run_steps/'s.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time

from .. import api, safe_files
from ..backend import kernel_registry
from ..backend.running import runtime_errors
from ..instrument import render_error, xprof_run
from . import kernel_failures, processes, run_directory, run_writes
from .report import ErrorEntry, RunReport, Traces
from .run_steps import capture, kernels
from .run_steps.capture import OTLP_JSON_FILE, PERFETTO_FILE
from .run_steps.entries import error_entry, kernel_entry, platform, recorded, redacted_report, \
    redactor
from .script_args import SAMPLES_FOLDER, RunOptions, device_refusal, missing_script
from .script_run import (ScriptOutcome, find_kernel_error, print_script_traceback, run_script,
                         script_error_note)
from .terminal.render import render_run


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
  problem = missing_script(args.script) or device_refusal(args.device)
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
        if result.kernel_error is not None:
          render_error(result.kernel_error, redact=result.redact)
        render_run(result.report, result.out_dir)
      result.tell()
    except (KeyboardInterrupt, processes.Terminated) as stop:   # the run is written already
      return stop.code if isinstance(stop, processes.Terminated) else 130
  return result.exit_code


def _command(args: RunOptions) -> list[str]:
  """The command line as the user typed it (main() keeps the raw arguments), secrets
  masked (recorded)."""
  return ["pallas-prof", *recorded(args, args.command)]


class _Found:
  """What the run has found so far: a run stopped part way (Ctrl-C, SIGTERM, SIGHUP)
  reports this."""

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
    self.script_started = False

  def stopped(self, error: BaseException) -> None:
    self.stopped_by = (error.signum if isinstance(error, processes.Terminated)
                       else signal.SIGINT)
    if self.outcome is None:
      self.outcome = ScriptOutcome(processes.exit_code(self.stopped_by), None, 0.0)
    self.notes.append(f"pallas-prof was stopped by {processes.signal_name(self.stopped_by)} "
                      f"while {self.doing}; this report holds what it had done before")


def run_and_report(args: RunOptions) -> "run_writes.RunResult":
  """The run API every command that runs a script uses (run, advise): the script run,
  its kernels found, profiled and advised as `args` asks, the run directory written.
  Prints nothing of the report: the caller renders the result it returns."""
  if args.xprof:        # jax.profiler writes it as the script ends, in whatever folder it left
    args = dataclasses.replace(args, xprof=os.path.abspath(args.xprof))
    # a file there (a FIFO, /dev/null) failed jax.profiler's export after the script ran,
    # in a traceback that lost the run: said now, before the script runs
    head = args.xprof           # the folder, or the nearest path above it that exists
    while not os.path.lexists(head) and os.path.dirname(head) != head:
      head = os.path.dirname(head)
    if not os.path.isdir(head):
      kind = safe_files.special_kind(head) or "a file"
      where = "" if head == args.xprof else f": {head}, above it,"
      run_writes.refuse(f"--xprof {args.xprof}{where} is {kind}, not a folder: JAX's profiler "
                        "writes a folder of files there; give a folder (made if missing); "
                        "the script was not run")
  with processes.signals_held() as claiming:      # a folder made is a folder marked
    folder = run_writes.claim(args.out, args.force)
  out_dir = folder.path
  files = run_writes.RunFiles(out_dir)
  found = _Found()
  with contextlib.ExitStack() as running:
    try:
      if claiming:
        raise processes.stop_exception()
      _find(args, found, files, running)
    except (KeyboardInterrupt, processes.Terminated) as stop:
      found.stopped(stop)
      if found.script_started and not found.records:
        # the kernels the script ran before the stop, as they were lowered: reported, not lost
        found.records = kernels.selected_kernels(args.kernel)
    _dropped_interruption(found)
    with processes.signals_held() as held:
      run_report, report_state = run_writes.write_run(
          files, _report(args, found), lambda: run_writes.stop_tracing(found.tracer, running,
                                                                      files),
          lambda: run_writes.save_kernels(out_dir, found.records, files, redactor(args)),
          lambda: _add_probe_tracks(args, out_dir, found.reports, files))
      where, problem = run_writes.finish(folder)
      if report_state != "none":
        run_directory.remember_run(where)     # show and report without a directory find it
  xprof_problem = xprof_run.add_plane(args.xprof, args.no_trace,
                                     os.path.join(where, PERFETTO_FILE))
  outcome = found.outcome
  if outcome.error is not None and (found.kernel_error is None or args.traceback):
    print_script_traceback(outcome.error, args.script, args.traceback, redactor(args))
  if outcome.message is not None:
    print(redactor(args)(outcome.message), file=sys.stderr)
  stopped_by = found.stopped_by or (held[0] if held else None)
  code = (processes.exit_code(stopped_by) if stopped_by is not None
          else 1 if found.kernel_error is not None and outcome.exit_code == 0
          else outcome.exit_code)
  undelivered = found.tracer.undelivered() if found.tracer is not None else []
  return run_writes.RunResult(run_report, where, outcome, found.kernel_error, code,
                              [run_writes.closing_line(where, files, report_state), problem,
                               xprof_problem, *undelivered], redact=redactor(args))


def _stop_if_signalled(outcome) -> None:
  """A run sent SIGINT, SIGTERM or another of the signals it handles (processes.py) while
  its script ran stops here, before compiling and profiling, whatever the script made of
  the signal: one that landed in a kernel's host
  callback comes back as a JaxRuntimeError (the script then failed, exit 1, and the run
  went on to profile) rather than as the signal's own exception."""
  if not processes.received or isinstance(outcome.error, KeyboardInterrupt):
    return
  stop = processes.stop_exception()
  if outcome.error is not None:
    # the script's error is the signal's doing: said as a stop, not as a failure, and its
    # exit code is the signal's (the report's header said "exit 1" where the process's 143)
    outcome.error = None
    outcome.exit_code = processes.exit_code(getattr(stop, "signum", signal.SIGINT))
  raise stop


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
  api.install()
  kernel_registry.clear()
  failures_before = runtime_errors.raised()
  found.tracer = capture.start_tracing(args, files, running)
  if (said := capture.file_variables_note(args)) is not None:
    found.notes.append(said)
  running.enter_context(capture.recording_calls())
  notes = found.notes
  if args.xprof:
    said = xprof_run.without_command_buffers()
    if capture.gpu_present():
      notes.append(said)
  cap = capture.start_insitu(not args.no_insitu and not args.no_profile, notes, bool(args.xprof))
  found.doing = "the script ran"
  found.script_started = True
  with xprof_run.jax_profile(args.xprof):
    found.outcome = outcome = run_script(args.script, args.script_args)
  cap = capture.stop_insitu(cap, notes)
  _stop_if_signalled(outcome)
  found.kernel_error = kernel_error = find_kernel_error(outcome.error)
  if kernel_error is not None:
    found.errors.append(error_entry(kernel_error))
  notes += kernels.caught_failures(failures_before, kernel_error) + kernels.interpreted_by_jax()
  if outcome.error is not None and kernel_error is None:
    notes.append(script_error_note(outcome.error))
  if outcome.reader_gone:
    notes.append("the reader of the script's output left (a pipe into `head`, say): the "
                 "script ended there, as a Unix tool does (exit 141, SIGPIPE's)")
  found.records = records = kernels.selected_kernels(args.kernel)
  if args.kernel and not records and kernel_registry.kernels():
    lowered = [r.label for r in kernel_registry.kernels()]
    notes.append(f"--kernel {args.kernel!r} matched none of the {len(lowered)} kernel(s) "
                 f"the script lowered: {', '.join(lowered)}")
  if processes.was_terminated():
    # a job's scheduler gives a stopped job seconds, not a profile's minutes
    notes.append(f"the script was stopped by {processes.signal_name(processes.stop_signal())}: "
                 "its kernels were not compiled, profiled or advised on; run it again to see "
                 "them")
    return
  found.doing = "its kernels were compiled"
  for rec in records:
    kernels.ensure_compiled(rec, found.errors)
  found.doing = "its kernels were profiled"
  if records and not args.no_analysis:
    for device in kernels.devices(args.device, notes):
      found.reports.append(kernels.profile_on(records, args, device, cap, notes,
                                              os.path.join(files.root, SAMPLES_FOLDER)))
  found.doing = "the advice was prepared"
  found.failed = kernel_failures.by_kernel(found.errors, runtime_errors.recent(failures_before))
  working = [r for r in records if not kernel_failures.of(r, found.failed)]
  found.advice = kernels.advice_for(working, found.reports, args, notes)


def _report(args, found: _Found) -> RunReport:
  """The report of what was found, its secrets masked (entries.redactor: report.json, the
  page and the terminal all show this report); each kernel's files are those it will have
  (the writes that fail are taken off them afterwards)."""
  outcome = found.outcome
  entries = [dataclasses.replace(kernel_entry(rec, run_directory.kernel_files(
      rec.label, rec.compiled)), failed=kernel_failures.of(rec, found.failed))
             for rec in found.records]
  return redacted_report(redactor(args), RunReport(
      created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command=tuple(_command(args)),
      script=os.path.abspath(args.script), exit_code=outcome.exit_code,
      script_seconds=outcome.seconds, platform=platform(), origin=processes.origin(),
      kernels=tuple(entries), errors=tuple(found.errors), notes=tuple(found.notes),
      profiles=tuple(found.reports), advice=found.advice,
      traces=Traces() if args.no_trace else Traces(otlp_json=OTLP_JSON_FILE,
                                                   perfetto=PERFETTO_FILE)))


def _add_probe_tracks(args, out_dir: str, reports, files) -> None:
  if not args.no_trace and PERFETTO_FILE not in files.missing:
    run_writes.add_probe_tracks(os.path.join(out_dir, PERFETTO_FILE), reports, files)
