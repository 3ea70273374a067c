"""`pallas-prof tune script.py [args]`: tune every kernel a script runs, write a tuning file.

The script runs in a child process with pallas-prof installed and
PALLAS_PROF_AUTOTUNE=1, so each kernel it lowers for the GPU is tuned
(pallas_prof/tune/params.py: num_warps x num_stages candidates and grouped
launch orders, replayed and timed cold, the fastest whose outputs equal the
default's). Then a table:
default against best with the speedup, the configs tried and the time spent;
and a tuning file the user can commit: `PALLAS_PROF_TUNED=file python script.py`
runs each kernel it names with its tuned config, without tuning.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from ..profiler import driver

_CHILD = """
import atexit, runpy, sys
import pallas_prof
from pallas_prof.tune import params
pallas_prof.install()
atexit.register(params.write_results, {results!r})
sys.argv = {argv!r}
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def add_parser(sub) -> argparse.ArgumentParser:
  tune = sub.add_parser("tune", help="tune every kernel a script runs (GPU); write a tuning file",
                        usage="pallas-prof tune [options] script.py [script args]",
                        allow_abbrev=False)    # as run's: pallas_prof/cli/main.py says why
  tune.add_argument("--out", default="pallas-prof-tuning.json",
                    help="the tuning file to write (default ./pallas-prof-tuning.json)")
  tune.add_argument("--budget-s", type=float, default=30.0, help="seconds of tuning per kernel")
  tune.add_argument("script", nargs="?", help="the Python script to run")
  tune.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
  return tune


def run(args) -> int:
  if not os.path.isfile(args.script):
    print(f"pallas-prof tune: no such file: {args.script}", file=sys.stderr)
    return 2
  present, reason = driver.gpu_status()
  if not present:
    # said before the script runs: on a CPU it would run to the end for nothing
    print(f"pallas-prof tune: tuning times kernels on an NVIDIA GPU: {reason}; the script was "
          "not run. On a CPU, `pallas-prof run` shows each kernel's registers, instructions "
          "and generated code.", file=sys.stderr)
    return 2
  from ..tune import params, validate    # here, not at the top: `pallas-prof --help` builds this parser
  with tempfile.TemporaryDirectory(prefix="pallas-prof-tune-") as tmp:
    results_path = os.path.join(tmp, "results.json")
    code = _CHILD.format(results=results_path, argv=[args.script, *args.script_args])
    env = dict(os.environ, **{params.ENV: "1", params.BUDGET_ENV: str(args.budget_s)})
    env.pop(params.TUNED_ENV, None)
    proc = subprocess.run([sys.executable, "-c", code], env=env)
    tunings = ()
    if os.path.exists(results_path):
      try:
        tunings = params.read_results(results_path)
      except validate.Refused as e:
        print(f"pallas-prof tune: the tuning results of {args.script} could not be read: "
              f"{e}", file=sys.stderr)
        return proc.returncode or 1
  if proc.returncode != 0:
    print(f"pallas-prof tune: {args.script} exited with status {proc.returncode}", file=sys.stderr)
  if not tunings:
    print("pallas-prof tune: no kernel was tuned. Tuning times kernels on an NVIDIA GPU: on "
          "a CPU they run through Triton's interpreter, and there is nothing to tune.",
          file=sys.stderr)
    return proc.returncode or 1
  print_table(tunings)
  write_tuning_file(args.out, tunings)
  print(f"tuning file: {args.out} (apply it with PALLAS_PROF_TUNED={args.out})")
  return proc.returncode


def print_table(tunings) -> None:
  """A row per params.KernelTuning of `tunings`."""
  # lazy: keeps rich and numpy out of this module's import (start-up time)
  from rich.console import Console
  from rich.table import Table
  from ..tune import params
  t = Table(title="pallas-prof tune: cold replay time per launch (median); w warps, s stages, "
                  "g launch group, tma: TMA loads")
  t.add_column("kernel", no_wrap=True)
  for c in ("default", "best", "speedup", "tried", "tuning s"):
    t.add_column(c, no_wrap=True)
  for k in tunings:
    times = {c.settings: c.median_s for c in k.candidates}
    d, b = k.default, k.best
    fmt = lambda w: f"{w.label} " + (f"{times[w] * 1e6:.1f}us" if times.get(w) else "-")
    speed = times.get(d) / times.get(b) if times.get(d) and times.get(b) else None
    tried = f"{sum(1 for v in times.values() if v)} of {len(times)}"
    t.add_row(k.kernel, fmt(d), fmt(b), f"{speed:.2f}x" if speed else "-", tried,
              "cached" if k.from_cache else f"{k.tuning_s:.1f}")
  Console().print(t)


def write_tuning_file(path: str, tunings) -> None:
  """The tuning file of these params.KernelTuning (their identity says for what)."""
  # lazy: `pallas-prof --help` imports this module; only the command needs this
  from ..tune.tuned_file import TuningEntry, TuningFile
  TuningFile.of(TuningEntry(k.kernel, k.identity["source"], tuple(k.identity["target"]),
                            k.identity["gpu"], k.best, k.default, code=k.code_key)
                for k in tunings).write(path)
