"""`pallas-prof run [options] script.py [script args]`: whose is an option after the script.

argparse hands everything after the script to the script, so `pallas-prof run
script.py --out runs/a` used to run the script with `--out runs/a` and write the run
somewhere else. Here an option of the command's own that comes after the script is the
command's, unless the script's source names it (then it is the script's, as before);
`--` ends the command's options: everything after it is the script's. Each option taken
this way is said on stderr, with how to hand it to the script instead.

RunOptions: what `pallas-prof run` (and `advise`, which runs the script as run does) was
asked, in one frozen object built once from argparse's Namespace at the CLI's edge.
Nothing downstream sets an attribute on the Namespace: advise's fixed choices (the
trials on, its progress) are fields here, as is the command line as typed (what
report.json records). A new option of `run` or `advise` is a field of the same name (its
dest); tests/cli/test_run_options.py holds every option of both parsers to one.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from typing import Callable

from ..profiler import driver


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


def device_refusal(spec: str) -> str | None:
  """Why --device `spec` (an index, a comma list, or all) names no GPU this machine has, or
  None: said before the script runs, since a bad index found after it would lose the run.
  Without a GPU only the default, 0, is taken (the kernels run under Triton's interpreter,
  on no device)."""
  if spec == "all":
    return None
  indices = [int(x) for x in spec.split(",") if x.strip()]
  present, reason = driver.gpu_status()
  if not present:
    if indices == [0]:
      return None
    # the reason may say "this machine has none (...)" itself (driver.NoGpu's words)
    none = reason.rstrip(".") if reason.startswith("this machine has none") else \
        f"this machine has none ({reason.rstrip('.')})"
    return (f"--device {spec} names a GPU, and {none}: "
            "the kernels run under Triton's interpreter on the CPU; leave --device out")
  count = driver.device_count()
  bad = [i for i in indices if i >= count]
  if not bad:
    return None
  visible = os.environ.get("CUDA_VISIBLE_DEVICES")
  seen = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
  return (f"--device {spec}: this process sees {count} GPU(s){seen}, indices 0..{count - 1}; "
          f"{', '.join(map(str, bad))} is not one of them")


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


# --- what the command was asked ------------------------------------------------------------

SAMPLES_FOLDER = "samples"      # in the run directory: raw PC samples, one file a kernel


@dataclasses.dataclass(frozen=True)
class RunOptions:
  script: str | None
  script_args: tuple[str, ...] = ()
  out: str | None = None
  force: bool = False
  no_profile: bool = False
  no_analysis: bool = False
  no_trace: bool = False
  no_insitu: bool = False
  reps: int = 100
  device: str = "0"
  kernel: str | None = None
  otlp_endpoint: str | None = None
  no_redact: bool = False
  ncu: bool = False
  no_sampling: bool = False
  probes: bool = False
  json: bool = False
  traceback: bool = False
  xprof: str | None = None                # a jax.profiler log folder, for XProf (docs/xprof.md)
  argv: tuple[str, ...] | None = None     # the command line as typed, after `pallas-prof`
  # `advise`'s: its trials on the GPU (cli/advise.py)
  advise: bool = False
  budget_s: float = 60.0
  try_tma: bool = False
  tuning_file: str | None = None
  progress: Callable[[str], None] | None = dataclasses.field(default=None, compare=False)

  @classmethod
  def of(cls, args, argv=None, **fixed) -> "RunOptions":
    """The options of a parsed command line: each field the Namespace has, then `fixed`
    (what the command decides itself); argv as the user typed it."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
             if hasattr(args, f.name)}
    given.update(fixed)
    given["script_args"] = tuple(given.get("script_args") or ())
    given["argv"] = tuple(argv) if argv is not None else None
    return cls(**given)

  @property
  def command(self) -> list[str]:
    """The command line (without `pallas-prof`): as typed, or made from the script's."""
    if self.argv is not None:
      return list(self.argv)
    return ["advise" if self.advise else "run", self.script, *self.script_args]
