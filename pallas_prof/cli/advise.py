"""`pallas-prof advise script.py [args]`: what to change in each kernel, and what it saves.

Runs the script as `pallas-prof run` does (its pallas_calls recorded, its kernels
profiled), diagnoses every kernel and, on a GPU, tries each action pallas-prof can apply
(compiler parameters, block shapes it can re-trace) on the replay, outputs compared with
the original's, within a budget per kernel, with progress on stderr. Then the report
with its advice section, the run directory (report.json, report.html), and what to keep:
the CompilerParams line to paste, and a tuning file for the kernels whose best measured
action is a compiler parameter (`PALLAS_PROF_TUNED=file python script.py` applies it).

Without a GPU it says so first, before the script runs: the advice then comes from the
kernels' static facts, every action marked "not measured: no GPU".
"""
from __future__ import annotations

import argparse
import sys

from . import shared_options
from .script_args import RunOptions, device_refusal, missing_script
from ..profiler import driver
from ..run_layout import REPORT


def add_parser(sub):
  p = sub.add_parser("advise", help="diagnose each kernel a script runs and, on a GPU, measure "
                     "what each fix saves",
                     usage="pallas-prof advise [options] script.py [script args]",
                     allow_abbrev=False)    # as run's: pallas_prof/cli/main.py says why
  shared_options.add_out(p, "let --out name a folder an earlier run wrote: this run replaces it")
  p.add_argument("--budget-s", type=float, default=60.0,
                 help="seconds of trials per kernel on the GPU (default 60)")
  shared_options.add_kernel(p)
  shared_options.add_device(p, several=False)
  p.add_argument("--try-tma", action="store_true",
                 help="also try CompilerParams(tma=True) (TMA has not yet run on a GPU)")
  p.add_argument("--tuning-file", default="pallas-prof-advice-tuning.json",
                 help="where to write the kept compiler parameters (a tuning file)")
  shared_options.add_no_sampling(p)
  shared_options.add_no_redact(p)
  shared_options.add_json(p, REPORT)
  shared_options.add_script(p)
  return p


def _say(text: str) -> None:
  # lazy: at the top it would load numpy, rich whenever this module is imported
  from .terminal.render import say
  say(f"pallas-prof advise: {text}")


def run(args, argv=None) -> int:
  """The advise command on its parsed arguments; argv: the command line as typed (what the
  run's report records)."""
  problem = missing_script(args.script)
  if problem is not None:
    print(f"pallas-prof advise: {problem}", file=sys.stderr)
    return 2
  if not args.device.isdigit():
    print(f"pallas-prof advise: --device takes one GPU index, got {args.device!r}",
          file=sys.stderr)
    return 2
  problem = device_refusal(args.device)
  if problem is not None:
    print(f"pallas-prof advise: {problem}", file=sys.stderr)
    return 2
  present, reason = driver.gpu_status()
  if not present:
    _say(f"no NVIDIA GPU: {reason.rstrip('.')}; nothing can be tried or timed here. The "
         "advice comes from the kernels' static facts (compiled for sm_90), each action "
         "marked \"not measured: no GPU\". Running the script now.")
  from . import run as run_cli     # after the word on the GPU: it imports JAX
  # advise profiles as run does by default, then tries the actions: run's other options
  # are not advise's
  options = RunOptions.of(args, argv, advise=True, progress=_say)
  # lazy: at the top it would load rich whenever this module is imported
  from .processes import terminate_as_exception
  with terminate_as_exception():
    with run_cli.stdout_to_stderr(options.json) as stdout:
      result = run_cli.run_and_report(options)
      if options.json:
        stdout.write(result.report.to_json(indent=1) + "\n")
    if not args.json:
      # lazy: at the top it would load numpy, rich whenever this module is imported
      from .terminal.render import render_run
      if result.kernel_error is not None:
        # lazy: at the top it would load jax, numpy, opentelemetry whenever this module is imported
        from ..instrument import render_error
        render_error(result.kernel_error, redact=result.redact)
      render_run(result.report, result.out_dir)
    _keep(result.report, args)
    result.tell()
  return result.exit_code


def _keep(report, args) -> None:
  """What to keep: each kernel's best held action, and the tuning file of the kind-a ones."""
  # lazy: `pallas-prof --help` imports this module; only the command needs this
  from ..backend import kernel_registry
  from ..advice.api import tuning_entries, write_tuning_file
  for a in report.advice:
    if a.kept:
      _say(f"keep for {a.label}: {a.kept}")
  if report.profile is None or not report.profile.gpu_present:
    return
  entries = tuning_entries(list(report.advice), kernel_registry.kernels(), report.profile)
  if entries:
    write_tuning_file(args.tuning_file, entries)
    _say(f"tuning file: {args.tuning_file} (apply it with PALLAS_PROF_TUNED={args.tuning_file})")
