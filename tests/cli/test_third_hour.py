"""A newcomer's third hour (issue 48, items 13-20): what they tried and what it should say."""
from __future__ import annotations

import os
import re

import pytest

from pallas_prof.cli import main as cli_main
from tests.cli.test_cli import pallas_prof

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _refused(argv, capsys) -> str:
  with pytest.raises(SystemExit) as stop:
    cli_main.parse(argv)
  assert stop.value.code == 2
  return " ".join(capsys.readouterr().err.split())


# --- item 14: `pallas-prof eject` ---------------------------------------------------------

def test_eject_points_to_show_eject_with_the_users_own_words(capsys):
  err = _refused(["eject", "softmax_kernel", "k.py"], capsys)
  assert "there is no command `eject`: did you mean `pallas-prof show softmax_kernel " \
         "--eject k.py`?" in err, err
  assert "invalid choice" not in err


@pytest.mark.parametrize("argv, said", [
    (["eject", "softmax_kernel", "--dir", "runs/a"],
     "show softmax_kernel --dir runs/a --eject FILE"),
    (["eject", "softmax_kernel", "--dir", "runs/a", "k.py"],
     "show softmax_kernel --dir runs/a --eject k.py"),
    (["eject", "softmax_kernel", "-o", "k.py"], "show softmax_kernel --eject k.py"),
    (["eject", "softmax_kernel"], "show softmax_kernel --eject FILE"),
])
def test_eject_never_takes_an_option_s_value_for_the_file(argv, said, capsys):
  """`eject K --dir RUN` pointed to `show K --eject RUN`: the run's folder taken for the
  file to write."""
  err = _refused(argv, capsys)
  assert f"did you mean `pallas-prof {said}`?" in err, err


def test_eject_alone_gives_the_commands_form(capsys):
  err = _refused(["eject"], capsys)
  assert "`pallas-prof show KERNEL --eject FILE`" in err and "standalone Triton program" in err


def test_a_misspelt_command_gets_a_guess_and_the_list(capsys):
  err = _refused(["reprot", "runs/a"], capsys)
  assert "there is no command `reprot`: did you mean `report`?" in err, err
  assert "run, tune, advise, show, report, diff, rules" in err


def test_no_page_names_a_command_the_cli_does_not_have():
  commands = set(cli_main._parser().get_default("command_parsers"))
  pages = [os.path.join(ROOT, "README.md")] + [
      os.path.join(ROOT, "docs", f) for f in sorted(os.listdir(os.path.join(ROOT, "docs")))
      if f.endswith(".md")]
  for page in pages:
    with open(page, encoding="utf-8") as f:
      text = f.read()
    # a command line in a code block or in backticks (not a script's name)
    used = set(re.findall(r"(?:^    |`)pallas-prof ([a-z]\w*)(?![.\w])", text, re.M))
    assert used <= commands, (os.path.relpath(page, ROOT), used - commands)
    assert "`eject`" not in text, os.path.relpath(page, ROOT)     # show's --eject, no command


# --- item 15: --device on a machine without a GPU -------------------------------------------

@pytest.mark.no_gpu
@pytest.mark.parametrize("command", ["run", "advise"])
def test_a_device_on_a_cpu_is_refused_before_the_script_runs(command, tmp_path):
  ran = tmp_path / "ran"
  script = tmp_path / "script.py"
  script.write_text(f"open({str(ran)!r}, 'w').close()\n")
  out = tmp_path / "out"
  done = pallas_prof(command, "--out", str(out), "--device", "3", str(script), cwd=tmp_path)
  said = " ".join(done.stderr.split())
  assert done.returncode == 2, done.stdout + done.stderr
  assert "--device 3 names a GPU, and this machine has none" in said, said
  assert "leave --device out" in said
  assert said.count("this machine has none") == 1, said      # once, not nested in itself
  assert not ran.exists() and not out.exists()


@pytest.mark.no_gpu
def test_the_default_device_and_all_are_taken_on_a_cpu():
  from pallas_prof.cli.script_args import device_refusal
  assert device_refusal("0") is None and device_refusal("all") is None
  assert "names a GPU" in device_refusal("0,1")
