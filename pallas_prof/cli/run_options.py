"""RunOptions: what `pallas-prof run` (and `advise`, which runs the script as run does)
was asked, in one frozen object built once from argparse's Namespace at the CLI's edge.

Nothing downstream sets an attribute on the Namespace: advise's fixed choices (no
ncu, no probes, the trials on) are fields here, as is the command line as typed (what
report.json records). A new option of `run` is a field of the same name (its dest);
tests/cli/test_run_options.py holds every option of the run parser to one.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

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
  argv: tuple[str, ...] | None = None     # the command line as typed, after `pallas-prof`
  # `advise`'s: its trials on the GPU (advice/cli.py)
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
