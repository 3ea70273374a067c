"""`pallas-prof run [options] script.py [script args]`: whose is an option after the script.

argparse hands everything after the script to the script, so `pallas-prof run
script.py --out runs/a` used to run the script with `--out runs/a` and write the run
somewhere else. Here an option of the command's own that comes after the script is the
command's, unless the script's source names it (then it is the script's, as before);
`--` ends the command's options: everything after it is the script's. Each option taken
this way is said on stderr, with how to hand it to the script instead.
"""
from __future__ import annotations

import argparse
import os
import re
import sys


def script_text(path: str) -> str:
  """The script's source (a directory's __main__.py), or "" when it cannot be read."""
  if os.path.isdir(path):
    path = os.path.join(path, "__main__.py")
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      return f.read()
  except OSError:
    return ""


def missing_script(path: str) -> str | None:
  """Why `path` cannot be run as a script (as `python path` would refuse it), or None."""
  if os.path.isdir(path):
    if os.path.exists(os.path.join(path, "__main__.py")):
      return None
    return f"{path} is a directory without a __main__.py"
  if not os.path.exists(path):
    return f"no such file: {path}"
  return None


def mentions(source: str, option: str) -> bool:
  """Whether the script names `option` (`--out`, not `--output`)."""
  return re.search(re.escape(option) + r"(?![\w-])", source) is not None


def _script_index(argv: list[str], script: str, script_args: list[str]) -> int:
  """Where the script is in argv: the last position whose tail can be its arguments."""
  for i in range(len(argv) - 1, -1, -1):
    if argv[i] == script and len(argv) - i - 1 >= len(script_args):
      return i
  return argv.index(script)


def split(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace,
          first: int = 1) -> argparse.Namespace:
  """`args` with the command's own options after the script taken back from the script.

  parser: the command's (sub)parser; argv: the command line from the command's name on
  (argv[0] is "run"), as parsed into `args`; `first`: where its options begin."""
  at = _script_index(argv, args.script, args.script_args)
  tail = argv[at + 1:]
  end = tail.index("--") if "--" in tail else len(tail)
  own = {opt: action for action in parser._actions for opt in action.option_strings
         if opt.startswith("--") and opt != "--help"}
  source = script_text(args.script)
  taken, kept, i = [], [], 0
  while i < end:
    token = tail[i]
    name = token.split("=", 1)[0]
    action = own.get(name)
    if action is None or mentions(source, name):
      kept.append(token)
      i += 1
      continue
    width = 1 if action.nargs == 0 or "=" in token else 2
    taken += tail[i:i + width]
    i += width
  if end < len(tail):
    kept += tail[end + 1:]          # after `--`: the script's, whatever they look like
  if not taken:
    args.script_args = kept
    return args
  print(f"pallas-prof: {' '.join(taken)} after the script taken as {argv[0]}'s own "
        f"(the script does not mention {', '.join(t.split('=')[0] for t in taken if t.startswith('--'))}); "
        f"to hand an option to the script instead, put `--` before it", file=sys.stderr)
  options = parser.parse_args(argv[first:at] + taken)
  for key, value in vars(options).items():
    setattr(args, key, value)
  args.script = argv[at]
  args.script_args = kept
  return args
