"""The command line of `pallas-prof` (issue 39, items 1 and 5): a script's own option that
abbreviates one of run's, tune's or advise's reaches the script; a misspelt option of a
command is refused with that command's usage and the option it is closest to; every
argument says what it is in --help.
"""
from __future__ import annotations

import json

import pytest

from pallas_prof.cli import main as cli_main
from tests.cli.test_cli import pallas_prof

SCRIPT_COMMANDS = ("run", "tune", "advise")
PRINTS_ARGV = "import json, sys\nprint('ARGV ' + json.dumps(sys.argv[1:]))\n"


def _own_options(command: str) -> list[str]:
  parser = cli_main._parser().get_default("command_parsers")[command]
  return [opt for action in parser._actions for opt in action.option_strings
          if opt.startswith("--")]


def abbreviations(command: str) -> list[str]:
  """Every proper prefix (`--x` or longer) of the command's own long options that is not
  itself one of them: what argparse would have read as an abbreviation of theirs."""
  own = _own_options(command)
  return sorted({opt[:n] for opt in own for n in range(3, len(opt))} - set(own))


def _as_script_args(prefixes: list[str]) -> list[str]:
  out = []
  for i, prefix in enumerate(prefixes):
    out += [prefix, str(i)]
  return out


@pytest.mark.parametrize("command", SCRIPT_COMMANDS)
def test_abbreviations_of_the_commands_options_after_the_script_are_the_scripts(command,
                                                                                tmp_path):
  prefixes = abbreviations(command)
  assert "--n" in prefixes or command == "tune"        # `--n 100`: the issue's own case
  assert len(prefixes) > 10
  script = tmp_path / "argy.py"
  script.write_text(PRINTS_ARGV)
  given = _as_script_args(prefixes)
  args = cli_main.parse([command, str(script), *given])
  assert args.script == str(script) and args.script_args == given
  # none was read as the command's: its options keep their defaults
  defaults = cli_main.parse([command, str(script)])
  def options(ns):
    return {k: v for k, v in vars(ns).items() if k not in ("script_args", "command_parsers")}
  assert options(args) == options(defaults)


def test_run_hands_every_abbreviation_to_the_script_and_runs_it(tmp_path):
  script = tmp_path / "argy.py"
  script.write_text(PRINTS_ARGV)
  given = _as_script_args(abbreviations("run"))
  result = pallas_prof("run", "--no-analysis", "--out", str(tmp_path / "out"), str(script),
                       *given, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("ARGV ")]
  assert json.loads(line[len("ARGV "):]) == given
  assert "taken as run's own" not in result.stderr


def test_the_issues_script_with_its_own_n_runs(tmp_path):
  """`pallas-prof run argy.py --n 100`, the script declaring --n with argparse: it ran
  and read 100 (it stopped with `ambiguous option: --n could match --no-profile, ...`)."""
  script = tmp_path / "argy.py"
  script.write_text("import argparse\np = argparse.ArgumentParser()\n"
                    "p.add_argument('--n', type=int)\np.add_argument('--k', type=int)\n"
                    "a = p.parse_args()\nprint('N', a.n, 'K', a.k)\n")
  result = pallas_prof("run", "--no-analysis", "--out", str(tmp_path / "out"), str(script),
                       "--n", "100", "--k", "7", cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "N 100 K 7" in result.stdout
  assert "ambiguous" not in result.stderr


def test_advise_hands_the_abbreviations_to_the_script(tmp_path):
  script = tmp_path / "argy.py"
  script.write_text(PRINTS_ARGV)
  given = _as_script_args(abbreviations("advise"))
  result = pallas_prof("advise", "--out", str(tmp_path / "out"), "--tuning-file",
                       str(tmp_path / "tuning.json"), str(script), *given, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  [line] = [ln for ln in (result.stdout + result.stderr).splitlines()
            if ln.startswith("ARGV ")]
  assert json.loads(line[len("ARGV "):]) == given


@pytest.mark.parametrize("argv, meant", [
    (["run", "--repz", "5", "x.py"], "--reps"),
    (["run", "--no-profle", "x.py"], "--no-profile"),
    (["run", "--kernl=soft", "x.py"], "--kernel"),
    (["tune", "--budget", "3", "x.py"], "--budget-s"),
    (["advise", "--tuning", "t.json", "x.py"], "--tuning-file"),
    (["show", "--dri", "d", "k"], "--dir"),
])
def test_a_misspelt_option_is_refused_with_the_commands_usage_and_a_guess(argv, meant, capsys):
  with pytest.raises(SystemExit) as stop:
    cli_main.parse(argv)
  assert stop.value.code == 2
  err = capsys.readouterr().err
  command = argv[0]
  assert err.startswith(f"usage: pallas-prof {command} "), err
  misspelt = argv[1].split("=")[0]
  assert f"pallas-prof {command}: error: unrecognized arguments: {argv[1]} " \
         f"(did you mean {meant}?)" in err, (misspelt, err)


def test_an_option_like_none_of_the_commands_is_refused_without_a_guess(capsys):
  with pytest.raises(SystemExit):
    cli_main.parse(["run", "--zzzzzz", "x.py"])
  err = capsys.readouterr().err
  assert err.startswith("usage: pallas-prof run ")
  assert err.rstrip().endswith("unrecognized arguments: --zzzzzz") and "did you mean" not in err


def test_the_misspelt_option_through_the_command_line(tmp_path):
  result = pallas_prof("run", "--repz", "5", "x.py", cwd=tmp_path)
  assert result.returncode == 2
  assert "usage: pallas-prof run [options] script.py [script args]" in result.stderr
  assert "did you mean --reps?" in result.stderr
  assert "{run,show,report,diff,rules,tune,advise}" not in result.stderr
  assert list(tmp_path.iterdir()) == []


def test_every_argument_says_what_it_is():
  parsers = cli_main._parser().get_default("command_parsers")
  assert set(parsers) == {"run", "show", "report", "diff", "rules", "tune", "advise"}
  silent = [f"{name} {action.dest}" for name, parser in parsers.items()
            for action in parser._actions if not action.help]
  assert silent == []
  assert "print the run's report.json" in parsers["report"].format_help()


def test_the_parsers_do_not_abbreviate_where_scripts_take_options():
  """allow_abbrev reaches the subparsers on this Python (3.11 and 3.12 legs)."""
  parsers = cli_main._parser().get_default("command_parsers")
  assert [c for c in SCRIPT_COMMANDS if parsers[c].allow_abbrev] == []
