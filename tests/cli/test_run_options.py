"""`pallas-prof run` and `advise` build one frozen RunOptions from argparse's Namespace at
the CLI's edge (cli/script_args.py); nothing downstream sets attributes on the Namespace,
as main() (args.argv), run (args.samples_dir) and advise (its fixed choices, progress,
argv) did before (issue 42 item 2). The script is never run here: the run's work is
stopped where it would begin."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from pallas_prof.cli import advise as advice_cli
from pallas_prof.cli import main as cli_main
from pallas_prof.cli import run as run_cli
from pallas_prof.cli.script_args import RunOptions


def _subparser(name: str) -> argparse.ArgumentParser:
  parser = cli_main._parser()
  sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
  return sub.choices[name]


@pytest.mark.parametrize("command", ["run", "advise"])
def test_every_option_of_the_command_is_a_field(command):
  # a new flag (a new dest) without its field would be dropped on the way to the run
  fields = {f.name for f in dataclasses.fields(RunOptions)}
  dests = {a.dest for a in _subparser(command)._actions if a.dest != "help"}
  assert dests - fields == set()


class _Stop(Exception):
  """Raised where the run's work would begin: what it was handed is all the test needs."""


def _parsed(monkeypatch):
  """The Namespaces main() parses, as they were right after parsing."""
  parsed = []
  real = cli_main.parse

  def keep(argv, parser=None):
    args = real(argv, parser)
    parsed.append((args, dict(vars(args))))
    return args
  monkeypatch.setattr(cli_main, "parse", keep)
  return parsed


def test_run_hands_the_run_one_options_object_and_leaves_the_namespace(monkeypatch, tmp_path):
  script = tmp_path / "s.py"
  script.write_text("")
  parsed, handed = _parsed(monkeypatch), []
  monkeypatch.setattr(run_cli, "run", lambda options: handed.append(options) or 0)
  argv = ["run", "--reps", "7", "--no-trace", "--device", "1", "--probes", str(script), "a", "b"]
  assert cli_main._main(argv) == 0
  (options,) = handed
  assert isinstance(options, RunOptions)
  assert (options.reps, options.no_trace, options.device, options.probes) == (7, True, "1", True)
  assert options.script_args == ("a", "b") and options.command == argv
  assert options.advise is False and options.progress is None
  (args, as_parsed), = parsed
  assert vars(args) == as_parsed


def test_advise_sets_its_own_choices_on_the_options_not_the_namespace(monkeypatch, tmp_path):
  script = tmp_path / "s.py"
  script.write_text("")
  parsed, handed = _parsed(monkeypatch), []

  def stop(options):
    handed.append(options)
    raise _Stop
  monkeypatch.setattr(run_cli, "run_and_report", stop)
  argv = ["advise", "--budget-s", "5", "--try-tma", str(script), "x"]
  with pytest.raises(_Stop):
    cli_main._main(argv)
  (options,) = handed
  assert options.advise is True and options.progress is advice_cli._say
  assert (options.budget_s, options.try_tma, options.script_args) == (5.0, True, ("x",))
  # run's defaults: advise profiles as run does, with no ncu, probes or skipped phases
  assert (options.no_profile, options.no_analysis, options.no_trace, options.no_insitu,
          options.reps, options.ncu, options.probes) == (False, False, False, False, 100,
                                                         False, False)
  assert options.command == argv
  (args, as_parsed), = parsed
  assert vars(args) == as_parsed


def test_the_recorded_command_masks_secrets_and_is_made_without_argv():
  typed = RunOptions(script="s.py", script_args=("--token", "abc"),
                     argv=("run", "s.py", "--token", "abc"))
  assert run_cli._command(typed)[-1] != "abc"
  assert run_cli._command(dataclasses.replace(typed, no_redact=True))[-1] == "abc"
  assert RunOptions(script="s.py", script_args=("1",)).command == ["run", "s.py", "1"]
  assert RunOptions(script="s.py", advise=True).command == ["advise", "s.py"]


def test_the_options_are_frozen():
  with pytest.raises(dataclasses.FrozenInstanceError):
    RunOptions(script="s.py").reps = 3
