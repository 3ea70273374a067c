"""pallas-prof: run a JAX script through pallas-prof, see and compare its kernels.

  pallas-prof run [options] script.py [script args]   run it, report on its kernels
  pallas-prof show KERNEL [--ptx|--sass|...]   a kernel's code annotated with your lines
  pallas-prof report [DIR]                     print a saved run again (--html: its page)
  pallas-prof diff DIR_A DIR_B                 compare two runs kernel by kernel
  pallas-prof rules                            the jaxpr primitives pallas-prof lowers
  pallas-prof tune [options] script.py [args]  tune every kernel it runs (GPU only)
  pallas-prof advise [options] script.py [args]  what to change, and (GPU) what it saves

An option of run, tune or advise after the script is theirs unless the script names it;
everything after `--` goes to the script.
"""
from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
import textwrap

from ..safe_files import UnsafeFile, refuse_special
from . import advise, shared_options, tune
from ..run_layout import REPORT
from .saved_runs.files import SavedRunError
from .script_args import RunOptions, split
from .terminal.safe_text import printable
from ..settings import absolute_paths, refusal


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="pallas-prof", description=__doc__.splitlines()[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog="\n".join(__doc__.splitlines()[2:]))
  sub = p.add_subparsers(dest="command", required=True)

  # allow_abbrev=False on run, tune and advise: argparse would otherwise read a script's own
  # option after the script (`--n 100`) as an abbreviation of theirs (`--no-profile`, ...)
  # before script_args.py decides whose it is, and refuse the run as ambiguous
  run = sub.add_parser("run", help="run a script through pallas-prof and report on its kernels",
                       usage="pallas-prof run [options] script.py [script args]",
                       allow_abbrev=False)
  shared_options.add_out(run, "let --out name a folder an earlier run wrote: this run is written "
                         "beside it and replaces it whole when it ends (the old one stays until "
                         "then, and stays if the swap fails)")
  run.add_argument("--no-profile", action="store_true", help="skip replay timing on the GPU")
  run.add_argument("--no-analysis", action="store_true",
                   help="skip profiling and static correlation altogether")
  run.add_argument("--no-trace", action="store_true", help="do not record OpenTelemetry spans")
  run.add_argument("--no-insitu", action="store_true", help="do not capture launches with CUPTI")
  run.add_argument("--xprof", metavar="DIR", default=None,
                   help="also profile the script with jax.profiler into DIR, with pallas-prof's "
                        "own plane added, for XProf or TensorBoard (docs/xprof.md)")
  run.add_argument("--reps", type=int, default=100, help="timed launches per kernel (default 100)")
  shared_options.add_device(run, several=True)
  shared_options.add_kernel(run)
  run.add_argument("--otlp-endpoint", help="also send spans to this OTLP collector (default: the "
                   "one OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT names)")
  shared_options.add_no_redact(run)
  run.add_argument("--ncu", action="store_true", help="also run Nsight Compute on each kernel")
  shared_options.add_no_sampling(run)
  run.add_argument("--probes", action="store_true",
                   help="also replay a probed variant of each kernel (timestamps around each "
                   "top-level equation): cycles per equation group, each CTA on its SM in "
                   "the trace, the probes' distortion (GPU only)")
  shared_options.add_json(run, REPORT)
  run.add_argument("--traceback", action="store_true",
                   help="when the script fails, also print its whole Python traceback (a "
                   "kernel's failure is otherwise one short report; PALLAS_PROF_TRACEBACK=1 "
                   "also keeps the frames inside the kernel's callback)")
  run.add_argument("script", nargs="?", help="the Python script to run")
  run.add_argument("script_args", nargs=argparse.REMAINDER,
                   help="its arguments (run's own options may come after the script unless "
                   "the script names them; after `--` everything is the script's)")

  show = sub.add_parser("show", help="print a kernel's source or compile stage, annotated")
  show.add_argument("kernel", help="kernel name or label (name#hash)")
  show.add_argument("--dir", help="a run directory (default: the latest under ./pallas-prof-out)")
  stages = show.add_mutually_exclusive_group()
  for stage in ("source", "ttir", "ttgir", "llir", "ptx", "sass"):
    stages.add_argument(f"--{stage}", action="store_true", help=f"show the {stage}")
  show.add_argument("--eject", metavar="FILE", help="write a standalone Triton program instead")
  show.add_argument("--wide", action="store_true",
                    help="print every line whole (by default lines are cut to the terminal, "
                    "COLUMNS, ending in …)")
  show.add_argument("--user", action="store_true",
                    help="your kernel's source, each line with its measured share and top "
                    "stall reason")
  show.add_argument("--target", action="append", metavar="GPU",
                    help="compile the kernel for another GPU (sm_80, gfx942, ...; repeat it "
                    "or give a comma list to compare several): compiled, refused or failed, "
                    "registers, spills, shared memory, occupancy; with --ptx/--sass its "
                    "assembly (amdgcn for AMD)")
  show.add_argument("--json", action="store_true", help="with --target: print the figures as JSON")

  report = sub.add_parser("report", help="re-render a saved run")
  report.add_argument("dir", nargs="?", help="run directory (default: the latest), or a "
                      "directory holding one run directory per process")
  report.add_argument("more", nargs="*", metavar="DIR",
                      help="more run directories (processes of one jax.distributed program): "
                           "merged into one report")
  report.add_argument("--json", action="store_true",
                      help=f"print the run's {REPORT} instead of tables")
  report.add_argument("--html", action="store_true",
                      help="write the run's self-contained report.html and print its path")
  report.add_argument("--html-out", metavar="FILE",
                      help="with --html: write the page here instead of DIR/report.html")

  diff = sub.add_parser("diff", help="compare two runs kernel by kernel")
  diff.add_argument("a", help="the first run directory (the baseline)")
  diff.add_argument("b", help="the second run directory, compared with the first")
  diff.add_argument("--fail-on-regression", type=float, metavar="PCT",
                    help="exit 1 if a kernel got slower, or its registers, shared memory or "
                         "instructions grew, by more than PCT percent, or it spills more")

  rules = sub.add_parser("rules", help="list the primitives pallas-prof can lower")
  commands = {"run": run, "tune": tune.add_parser(sub), "advise": advise.add_parser(sub),
              "show": show, "report": report, "diff": diff, "rules": rules}
  p.set_defaults(command_parsers=commands)
  return p


def _refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str]) -> None:
  """Exits with the command's own usage (not the top level's), naming each option it does
  not know and the one of its own that it is closest to."""
  own = [opt for action in parser._actions for opt in action.option_strings
         if opt.startswith("--")]
  said = []
  for token in unknown:
    name = token.split("=", 1)[0]
    close = difflib.get_close_matches(name, own, n=1, cutoff=0.6) if name.startswith("-") \
        else []
    said.append(f"{token} (did you mean {close[0]}?)" if close else token)
  parser.error(f"unrecognized arguments: {' '.join(said)}")


def _html_out_or_exit(path: str) -> None:
  """`report --html --html-out PATH`: a regular file, a new one in a folder that exists, or
  the null device. Its page is renamed over PATH: over a FIFO or a device (as root,
  /dev/zero) that replaced what the user made, and over a folder it was a traceback."""
  try:
    refuse_special(path, "--html-out")
  except UnsafeFile as e:
    raise SystemExit(f"pallas-prof: {e}") from None
  folder = os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(folder):
    raise SystemExit(f"pallas-prof: --html-out {path}: no folder {folder}; give a path in a "
                     "folder that exists")


# commands people look for that are an option of another: what they write instead
OPTION_OF_ANOTHER = {"eject": ("show KERNEL --eject FILE",
                               "it writes the kernel as a standalone Triton program")}


def _eject_as_show(args: list[str]) -> str:
  """`eject KERNEL [FILE] [--dir D] [-o FILE]` as the show command that does it: an option's
  value is never taken for the file (`eject K --dir RUN` pointed to `show K --eject RUN`)."""
  given, dirs, file, it = [], [], None, iter(args)
  for a in it:
    if a == "--dir":
      dirs += [a, next(it, "DIR")]
    elif a.startswith("--dir="):
      dirs.append(a)
    elif a in ("-o", "--out", "--output", "--eject"):
      file = next(it, None)
    elif a.startswith(("--out=", "--output=", "--eject=")):
      file = a.partition("=")[2]
    elif not a.startswith("-"):
      given.append(a)
  kernel = given[0] if given else "KERNEL"
  file = file or (given[1] if len(given) > 1 else "FILE")
  return " ".join(["show", kernel, *dirs, "--eject", file])


def _refuse_unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> None:
  """A command pallas-prof does not have: what does it (`eject` is `show --eject`), or the
  command it is closest to, instead of argparse's bare "invalid choice"."""
  word = argv[0]
  commands = parser.get_default("command_parsers")
  if word.startswith("-") or word in commands:
    return
  if word in OPTION_OF_ANOTHER:
    usage, does = OPTION_OF_ANOTHER[word]
    if word == "eject" and len(argv) > 1:      # the very command, in the user's own words
      usage = _eject_as_show(argv[1:])
    parser.error(f"there is no command `{word}`: did you mean `pallas-prof {usage}`? ({does})")
  close = difflib.get_close_matches(word, list(commands), n=1, cutoff=0.6)
  guess = f"did you mean `{close[0]}`? " if close else ""
  parser.error(f"there is no command `{word}`: {guess}the commands are {', '.join(commands)}")


def _with_script(args, argv: list[str]):
  """run and tune: the script is required (said so), and their own options after it
  are theirs (script_args.py)."""
  parser = args.command_parsers[args.command]
  if not args.script:
    parser.error(f"which script? pallas-prof {args.command} [options] script.py [script args]")
  at = argv.index(args.command)
  return split(parser, argv[at:], args)


def parse(argv: list[str], parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
  """The command line as its command reads it: an option it does not know refused with
  its own usage, and for run, tune and advise their own options after the script taken
  back from it (script_args.py). Exits as argparse does (2) on what it refuses."""
  parser = parser or _parser()
  if argv:
    _refuse_unknown_command(parser, argv)
  args, unknown = parser.parse_known_args(argv)
  if unknown:
    _refuse_unknown(args.command_parsers[args.command], unknown)
  if args.command in ("run", "tune", "advise"):
    args = _with_script(args, argv)
  return args


def main(argv=None) -> int:
  try:
    try:
      code = _main(argv)
    except SavedRunError as e:
      # a saved run that cannot be read (run_files.RunFileError, report.ReportError): its
      # one line on stderr and exit code 1, as a command ends on any message of its own
      raise SystemExit(str(e)) from None
    sys.stdout.flush()          # here, where a reader gone away is caught, not at exit
    return code
  except SystemExit as e:
    if e.code == 1 and isinstance(e.__context__, BrokenPipeError):
      # rich's console ends a write into a closed pipe so (stdout already put on /dev/null)
      return _reader_left()
    if not isinstance(e.code, str):
      raise
    # a message may quote a saved run's names and paths: no escape sequence of theirs
    # reaches the terminal
    raise SystemExit(printable(e.code)) from None
  except BrokenPipeError:
    return _reader_left()


def _reader_left() -> int:
  """`pallas-prof rules | head`: the reader left; say nothing more (stdout is gone) and end
  as a Unix tool a closed pipe ended (141; a run's directory is written before its output)."""
  # lazy: at the top it would load rich whenever this module is imported
  from .processes import stdout_to_nowhere
  return stdout_to_nowhere()


def _main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  parser = _parser()
  if not argv:               # a first try: the commands, not "arguments are required: command"
    parser.print_help(sys.stderr)
    return 2
  args = parse(argv, parser)
  if args.command in ("run", "tune", "advise"):
    # before the script runs: a bad value found after it would lose the run
    refused = refusal(f"pallas-prof {args.command}")
    if refused:
      print(refused, file=sys.stderr)
      return 2
    absolute_paths()        # a script that changes the working folder moves none of them
  if args.command == "run":
    # lazy: at the top it would load jax, numpy, opentelemetry, rich whenever this module is
    #   imported
    from .run import run
    # argv: stored in report.json as the command that made the run
    return run(RunOptions.of(args, argv))
  if args.command == "show":
    # lazy: at the top it would load numpy, rich whenever this module is imported
    from .show import show
    return show(args)
  if args.command == "report":
    # lazy: at the top it would load rich whenever this module is imported
    from .processes import find_runs, report_merged
    if args.html and args.html_out:
      _html_out_or_exit(args.html_out)
    found = find_runs([args.dir, *args.more]) if args.dir else []
    if len(found) > 1:
      return report_merged([args.dir, *args.more], html=args.html, html_out=args.html_out,
                           as_json=args.json)
    # lazy: `pallas-prof --help` imports this module; only `report` needs these (numpy, rich)
    from . import run_directory
    from .terminal.render import render_run
    from .report import RunReport
    # a folder holding one run is that run
    run_dir = found[0] if found else run_directory.latest_run()
    if run_dir is None:
      raise SystemExit("pallas-prof: no saved run found; pass a directory")
    report = RunReport.load(run_dir)
    if args.html:
      # lazy: at the top it would load markupsafe whenever this module is imported
      from .html import write_html
      print(write_html(run_dir, report, out=args.html_out))
      return 0
    if args.json:
      print(report.to_json(indent=1))
    else:
      render_run(report, run_dir, wrote=False)
    return 0
  if args.command == "diff":
    # lazy: at the top it would load numpy, rich whenever this module is imported
    from .compare.diff import diff
    return diff(args)
  if args.command == "tune":
    return tune.run(args)
  if args.command == "advise":
    return advise.run(args, argv)
  if args.command == "rules":
    # lazy: at the top it would load jax, numpy whenever this module is imported
    from ..backend.lowering.rules import rule_limits
    print(_rules_text(rule_limits()))
    return 0
  return 2


def _rules_text(limits: dict[str, str]) -> str:
  """Each primitive with what its rule refuses, wrapped to the terminal."""
  width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
  name_width = max(len(n) for n in limits) + 2
  out = [f"{len(limits)} primitives (after a name: what its rule refuses)"]
  for name, text in limits.items():
    lines = textwrap.wrap(text, width - name_width - 2) or [""]
    out.append(f"  {name:<{name_width}}{lines[0]}".rstrip())
    out += [f"  {'':<{name_width}}{line}" for line in lines[1:]]
  return "\n".join(out)


if __name__ == "__main__":
  sys.exit(main())
