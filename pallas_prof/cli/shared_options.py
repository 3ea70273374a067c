"""The options `run`, `advise` and `tune` share, declared once: each command's parser adds
them from here, so a check one gains (a --kernel that is not a regex refused before the
script runs) the others have too, and their help cannot drift apart."""
from __future__ import annotations

import argparse
import re


def regex(text: str) -> str:
  """--kernel, checked before the script runs (a typo found after it would lose the run)."""
  try:
    re.compile(text)
  except re.error as e:
    raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {e}") from None
  return text


def device_spec(text: str) -> str:
  """--device of run: an index, a comma list of them, or all; checked before the script runs."""
  indices = [x.strip() for x in text.split(",") if x.strip()]
  if text != "all" and not (indices and all(x.isdigit() for x in indices)):
    raise argparse.ArgumentTypeError(f"takes an index, a list like 0,1, or all; got {text!r}")
  return text


def one_device(text: str) -> str:
  """--device of advise: one GPU index (its trials replay on one GPU)."""
  if not text.strip().isdigit():
    raise argparse.ArgumentTypeError(f"takes one GPU index, got {text!r}")
  return text.strip()


def add_out(p: argparse.ArgumentParser, force_help: str) -> None:
  p.add_argument("--out", help="output directory (default ./pallas-prof-out/<timestamp>/, "
                 "a new folder each run); refused if it holds files, unless --force")
  p.add_argument("--force", action="store_true", help=force_help)


def add_kernel(p: argparse.ArgumentParser) -> None:
  p.add_argument("--kernel", type=regex, help="only kernels whose name or label matches this regex")


def add_device(p: argparse.ArgumentParser, *, several: bool) -> None:
  if several:
    p.add_argument("--device", default="0", type=device_spec,
                   help="GPU(s) to profile on: an index, a list like 0,1, or all (default 0)")
  else:
    p.add_argument("--device", default="0", type=one_device,
                   help="the GPU to profile and try on (default 0)")


def add_no_sampling(p: argparse.ArgumentParser) -> None:
  p.add_argument("--no-sampling", action="store_true",
                 help="weigh equations by static instruction shares instead of CUPTI PC "
                 "samples of a replay")


def add_no_redact(p: argparse.ArgumentParser) -> None:
  p.add_argument("--no-redact", action="store_true",
                 help="record the script's arguments, the endpoint and the advice's diffs as "
                 "given: by default the values of arguments named like token, key, secret, "
                 "password or auth, and the credentials in URLs, are masked in the report, "
                 "the traces and the diffs")


def add_json(p: argparse.ArgumentParser, report_name: str) -> None:
  p.add_argument("--json", action="store_true", help=f"print {report_name} instead of tables")


def add_script(p: argparse.ArgumentParser, args_help: str = "its arguments") -> None:
  p.add_argument("script", nargs="?", help="the Python script to run")
  p.add_argument("script_args", nargs=argparse.REMAINDER, help=args_help)
