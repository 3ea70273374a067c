"""What the run-directory and secrets fault tests share: `pallas-prof` as a user runs
it (a subprocess, with a timeout: a command that blocks fails the test instead of
hanging it), the same in this process (main(), far quicker for many cases), and the
checks every fault case makes of an outcome."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
from unittest import mock

from pallas_prof.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOFTMAX = os.path.join(ROOT, "examples", "softmax.py")
COMMAND_SECONDS = 300       # far more than the read-back commands need: only a hang reaches it


def pallas_prof(*args, cache_dir, cwd=None, timeout=600, env=None):
  """`python -m pallas_prof ARGS` with this worktree first on the path."""
  env = dict(os.environ if env is None else env)
  env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  env["PALLAS_PROF_CACHE_DIR"] = str(cache_dir)
  env.pop("PALLAS_PROF_TRACE", None)
  return subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                        text=True, env=env, cwd=cwd or ROOT, timeout=timeout)


_CHILD = """
import json, sys, traceback
from tests.faults.cli_runs import in_process
results = []
for args in json.loads(sys.argv[1]):
  try:
    code, out, message = in_process(*args)
    results.append({"code": code, "stdout": out, "message": message, "error": None})
  except BaseException:
    results.append({"code": None, "stdout": "", "message": "", "error": traceback.format_exc()})
print(json.dumps(results))
"""


def in_child(commands: dict[str, list[str]], cache_dir, timeout=COMMAND_SECONDS) -> dict:
  """{name: {"code", "stdout", "message", "error"}}: each of `commands` run by main() in
  one child process (one start-up for them all) that must end within `timeout`; "error"
  is the traceback of an exception other than SystemExit, which a test fails on."""
  env = dict(os.environ, PALLAS_PROF_CACHE_DIR=str(cache_dir))
  env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(list(commands.values()))],
                        capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
  assert done.returncode == 0, done.stderr
  return dict(zip(commands, json.loads(done.stdout.splitlines()[-1])))


def in_process(*args) -> tuple[int, str, str]:
  """(exit code, stdout, message) of `pallas-prof ARGS` run by main() here; an exception
  other than SystemExit propagates (as a traceback would end the command)."""
  out, err = io.StringIO(), io.StringIO()
  # one width for every call: the tables and listings are cut to it
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
      mock.patch.dict(os.environ, {"COLUMNS": "160"}):
    try:
      code, message = main(list(args)), ""
    except SystemExit as e:
      code, message = (1, e.code) if isinstance(e.code, str) else (e.code, "")
  return code, out.getvalue(), message or err.getvalue()


def assert_clear(message: str, *names: str) -> None:
  """One line that says it is pallas-prof's, names the file (one of `names`) and says
  what to do next."""
  assert isinstance(message, str) and message.startswith("pallas-prof:"), message
  assert "\n" not in message.strip() and "Traceback" not in message, message
  assert any(n in message for n in names), (names, message)
  assert "pallas-prof run" in message or "run the script again" in message, message


def snapshot(folder) -> dict[str, str]:
  """Every file under `folder` (links as their targets' names), by content."""
  out = {}
  for here, dirs, files in os.walk(folder):
    for name in files:
      path = os.path.join(here, name)
      rel = os.path.relpath(path, folder)
      if os.path.islink(path):
        out[rel] = "link -> " + os.readlink(path)
      elif not os.path.isfile(path):
        out[rel] = "special"
      else:
        with open(path, "rb") as f:
          out[rel] = hashlib.sha256(f.read()).hexdigest()
  return out


def raw_controls(text: str) -> list[str]:
  """The characters of `text` a terminal would act on rather than show."""
  bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
  return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
          or c in bidi]
