"""A run's output directory: report.json, traces, and each kernel's artifacts (their
names: pallas_prof/run_layout.py, which every writer and reader of them imports).

    <out>/report.json                   everything `pallas-prof report` re-renders
    <out>/trace.otlp.jsonl              OTLP-JSON lines (the Collector's otlpjsonfile format;
                                        trace.otlp.json in runs before the rename)
    <out>/trace.perfetto.json           Chrome/Perfetto trace events (ui.perfetto.dev)
    <out>/kernels/<label>/kernel.json   generated-kernel metadata: line map, equations, params,
                                        the call's input/output aliases
    <out>/kernels/<label>/source.py     the generated Triton source
    <out>/kernels/<label>/compiled.json and kernel.{ttir,ttgir,ll,ptx,cubin}
                                        the CompiledKernel (CompiledKernel.save)
    <out>/kernels/<label>/spec.json     its LaunchSpec (LaunchSpec.save; shares kernel.cubin):
                                        `python -m pallas_prof.profiler.timing.runner DIR`
                                        replays it

`load_kernel` rebuilds the GeneratedKernel / CompiledKernel pair from those
files, so `pallas-prof show` works on a saved run without re-running it; runs
saved before compiled.json existed keep their compile in kernel.json.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

from ..backend import cache_files
from ..backend.artifacts import (BINARY_STAGES, STAGES, CompiledKernel, GeneratedKernel,
                                  SchemaMismatch, Writer)
from ..backend.running.launch_spec import LaunchSpec
from .. import run_layout
from ..run_layout import COMPILED, KERNEL, REPORT, SOURCE, SPEC, STAGE_FILES
from ..safe_files import private_dir, write_atomic
from .report import RunReport
from .saved_runs import files as run_files, kernel as saved_kernel
from .terminal.safe_text import printable

def default_out_dir(root: str = "pallas-prof-out") -> str:
  return os.path.join(root, time.strftime("%Y%m%d-%H%M%S"))


def kernel_dir_name(label: str) -> str:
  return re.sub(r"[^0-9A-Za-z_.-]", "_", label.replace("#", "-"))


def save_diffs(root: str, report, attempt, write) -> None:
  """Each action's unified diff (the advice's kinds c and e: a split, a loop's step), a file
  of its own under diffs/ for the user to review and apply with `patch -p1` (pallas-prof
  never applies one). From the report as written: its secrets are masked already.
  `attempt(path, action)` and `write(path, data)`: run_writes.RunFiles', which keep a file
  that could not be written as missing."""
  for advice in report.advice:
    label = kernel_dir_name(advice.label)
    for rank, action in enumerate(advice.actions, 1):
      if action.diff:
        path = os.path.join(root, run_layout.diff_file(label, rank, action.rule))
        attempt(path, lambda path=path, diff=action.diff: (
            os.makedirs(os.path.dirname(path), exist_ok=True), write(path, diff)))


def kernel_files(label: str, ck: CompiledKernel | None) -> dict[str, str]:
  """{what: path relative to the run directory} of the files save_kernel writes."""
  rel = run_layout.kernel_dir(kernel_dir_name(label))
  files = {"source": os.path.join(rel, SOURCE), "kernel": os.path.join(rel, KERNEL)}
  if ck is not None:
    files.update({stage: os.path.join(rel, STAGE_FILES[stage]) for stage in ck.asm})
    files["compiled"] = os.path.join(rel, COMPILED)
    if _launch_spec(ck, ()) is not None:
      files["launch"] = os.path.join(rel, SPEC)
  return files


def _launch_spec(ck: CompiledKernel, aliases) -> LaunchSpec | None:
  if ck.cubin_deferred:
    return None
  try:
    return LaunchSpec.from_compiled(ck, aliases)
  except ValueError:
    return None              # a launch the replay cannot do (cooperative grid): none to save


def save_kernel(out_dir: str, label: str, gk: GeneratedKernel, ck: CompiledKernel | None,
                aliases=(), write: Writer = write_atomic) -> dict:
  """Writes one kernel's source, artifacts and metadata, each file whole through `write`
  (a run's writer keeps a failed one as missing and goes on); returns kernel_files().

  aliases: the call's input_output_aliases, (input index, output index) pairs."""
  d = os.path.join(out_dir, run_layout.kernel_dir(kernel_dir_name(label)))
  os.makedirs(d, exist_ok=True)
  gk.save(d, write=write, label=label, input_output_aliases=[list(a) for a in aliases])
  if ck is not None:
    ck.save(d, write)
    spec = _launch_spec(ck, aliases)
    if spec is not None:
      spec.save(d, write)
  return kernel_files(label, ck)


def load_kernel(kernel_dir: str, run_dir: str | None = None
                ) -> tuple[GeneratedKernel, CompiledKernel | None]:
  """The saved kernel in `kernel_dir` (inside `run_dir`, whose files alone it reads; the
  kernel directory itself when not given). RunFileError for a file that is not what a
  run writes, saved_kernel.Damaged or SchemaMismatch for values that are not."""
  root = run_dir if run_dir is not None else kernel_dir
  rel = os.path.relpath(kernel_dir, root)
  name = lambda file: os.path.normpath(os.path.join(rel, file))
  where = os.path.join(kernel_dir, KERNEL)
  meta = run_files.read_json(root, name(KERNEL))
  gk = saved_kernel.generated(meta, run_files.read_text(root, name(SOURCE)), where)
  if os.path.lexists(os.path.join(kernel_dir, COMPILED)):
    where = os.path.join(kernel_dir, COMPILED)
    meta = run_files.read_json(root, name(COMPILED))
    asm = {stage: _stage_text(root, name(STAGE_FILES[stage]), stage)
           for stage in saved_kernel.stages(meta, where)}
    return gk, saved_kernel.compiled(meta, asm, gk, where)
  c = meta.get("compiled")      # a run saved before compiled.json
  if c is None:
    return gk, None
  asm = {stage: _stage_text(root, name(STAGE_FILES[stage]), stage) for stage in STAGES
         if os.path.lexists(os.path.join(kernel_dir, STAGE_FILES[stage]))}
  return gk, saved_kernel.compiled(c, asm, gk, f"{where}.compiled")


def _stage_text(root: str, rel: str, stage: str) -> str | bytes:
  return run_files.read_bytes(root, rel) if stage in BINARY_STAGES else \
      run_files.read_text(root, rel)


def load_kernel_or_exit(kernel_dir: str, run_dir: str):
  """load_kernel, or a message naming what is missing or damaged and what to do."""
  what = os.path.relpath(kernel_dir, run_dir)
  if not os.path.lexists(os.path.join(kernel_dir, KERNEL)):
    raise run_files.RunFileError(
        f"pallas-prof: {run_dir}/{REPORT} lists this kernel, but its files ({what}/) are not "
        "in the run directory any more; run the script again with `pallas-prof run` to "
        "write them")
  try:
    return load_kernel(kernel_dir, run_dir)
  except (saved_kernel.Damaged, SchemaMismatch) as e:
    raise run_files.RunFileError(f"pallas-prof: the saved kernel in {kernel_dir} is damaged: "
                                 f"{e}; {run_files.AGAIN}") from None


def load_aliases(kernel_dir: str, run_dir: str | None = None) -> tuple[tuple[int, int], ...]:
  """The saved kernel's input_output_aliases: its LaunchSpec's, else kernel.json's
  (a kernel without a cubin); none in runs saved before either kept them."""
  root = run_dir if run_dir is not None else kernel_dir
  rel = os.path.relpath(kernel_dir, root)
  for file, key in ((SPEC, "aliases"), (KERNEL, "input_output_aliases")):
    if file == SPEC and not os.path.lexists(os.path.join(kernel_dir, file)):
      continue
    meta = run_files.read_json(root, os.path.normpath(os.path.join(rel, file)))
    try:
      return saved_kernel.aliases(meta.get(key), f"{os.path.join(kernel_dir, file)}.{key}")
    except saved_kernel.Damaged as e:
      raise run_files.RunFileError(f"pallas-prof: the saved kernel in {kernel_dir} is "
                                   f"damaged: {e}; {run_files.AGAIN}") from None
  return ()


def kernel_dir(run_dir: str, entry) -> str:
  """The directory of the report's kernel `entry` (a KernelEntry), inside `run_dir`;
  RunFileError when report.json names none there."""
  rel = (entry.files or {}).get("kernel")
  what = f"{os.path.join(run_dir, REPORT)} (kernel {entry.label})"
  if not rel:
    raise run_files.RunFileError(f"pallas-prof: {what} names no {KERNEL} for it; "
                                 f"{run_files.AGAIN}")
  folder = os.path.dirname(rel) or "."
  run_files.inside(run_dir, folder, what)
  return os.path.normpath(os.path.join(run_dir, folder))


def read_report(run_dir: str):
  """report.json as a RunReport (cli/report.py: the one reader and writer of report.json,
  which also says what an unreadable one is)."""
  return RunReport.load(run_dir)


RECENT_RUNS = 20     # runs `show` looks through for a kernel, newest first


def recent_runs(root: str = "pallas-prof-out", limit: int = RECENT_RUNS) -> list[str]:
  """Run directories with a report, newest first: those under `root`, and the last run
  made from this directory wherever its --out put it (`remember_run`)."""
  runs = []
  if os.path.isdir(root):
    # (a link out of the folder is not one of its runs: `report` refuses it, here it is passed by)
    runs = [os.path.join(root, d) for d in os.listdir(root)
            if os.path.exists(os.path.join(root, d, REPORT))
            and run_files.leads_out(root, d) is None]
  last = remembered_run()
  if last is not None and not any(os.path.samefile(last, d) for d in runs):
    runs.append(last)
  runs.sort(key=lambda d: (os.path.getmtime(os.path.join(d, REPORT)), d), reverse=True)
  return runs[:limit]


_LAST_RUNS = "last-runs.json"     # in the cache directory: working directory -> its last run
_LAST_RUNS_KEPT = 64


def _last_runs_path() -> str:
  # the configured cache folder (or the private one kept in it where others can write it:
  # a note planted there would point `show` at their run), not a temporary stand-in: a note
  # that dies with the process would point no later `show` anywhere
  return os.path.join(cache_files.home(), _LAST_RUNS)


def _last_runs() -> dict:
  """last-runs.json as a dict; {} where it is missing, damaged or not a regular file (a
  FIFO there must not block `show`: cache_files.read does not wait on one)."""
  raw = cache_files.read(_last_runs_path(), cache_files.MAX_RECORD_BYTES)
  try:
    known = json.loads(raw) if raw is not None else {}
  except (ValueError, RecursionError):
    known = {}
  return known if isinstance(known, dict) else {}


def remember_run(out_dir: str) -> None:
  """Notes `out_dir` as the last run made from the working directory, so that `show` and
  `report` without a directory find a run written with --out (best effort: a cache that
  cannot be written only costs that)."""
  known = _last_runs()
  known.pop(os.getcwd(), None)
  known[os.getcwd()] = os.path.abspath(out_dir)
  known = dict(list(known.items())[-_LAST_RUNS_KEPT:])
  path = _last_runs_path()
  try:
    private_dir(os.path.dirname(path))
    write_atomic(path, json.dumps(known))
  except OSError:
    pass


def remembered_run() -> str | None:
  """The last run made from the working directory, if it is still there."""
  run = _last_runs().get(os.getcwd())
  if isinstance(run, str) and os.path.exists(os.path.join(run, REPORT)):
    return os.path.relpath(run) if not os.path.relpath(run).startswith("..") else run
  return None


def latest_run(root: str = "pallas-prof-out") -> str | None:
  runs = recent_runs(root, 1)
  return runs[0] if runs else None


def _pick(kernels, name: str):
  """The KernelEntry whose label or name is (or else starts with) `name`; None if none is."""
  for pick in (lambda k: k.label == name, lambda k: k.name == name,
               lambda k: k.label.startswith(name) or k.name.startswith(name)):
    hits = [k for k in kernels if pick(k)]
    if len(hits) == 1:
      return hits[0]
    if len(hits) > 1:
      raise SystemExit(f"pallas-prof: {name!r} matches several kernels: "
                       + ", ".join(k.label for k in hits) + "; give a full label")
  return None


def find_kernel(run_dir: str, name: str) -> str:
  """The kernel directory in a run whose label or name matches `name`."""
  kernels = read_report(run_dir).kernels
  hit = _pick(kernels, name)
  if hit is None:
    known = ", ".join(k.label for k in kernels) or "none"
    raise SystemExit(f"pallas-prof: no kernel {name!r} in {run_dir} (kernels: {known})")
  return kernel_dir(run_dir, hit)


def locate_kernel(name: str, run_dir: str | None = None,
                  root: str = "pallas-prof-out") -> tuple[str, str]:
  """(run directory, kernel directory) of the kernel `name`: in `run_dir` when given, else
  in the newest of the recent runs under `root` that has it (a run without kernels, or
  with others, does not hide an earlier one); says on stderr when that is not the newest."""
  if run_dir is not None:
    return run_dir, find_kernel(run_dir, name)
  runs = recent_runs(root)
  if not runs:
    raise SystemExit("pallas-prof: no saved run found; run `pallas-prof run script.py` first "
                     "or pass --dir")
  seen: dict[str, None] = {}   # every kernel the runs have, newest first: to say which
  for i, candidate in enumerate(runs):
    try:
      kernels = read_report(candidate).kernels
    except run_files.SavedRunError:     # an unreadable or foreign report: look further back
      continue
    seen.update((k.label, None) for k in kernels)
    hit = _pick(kernels, name)
    if hit is not None:
      if i:
        print(printable(f"pallas-prof: no kernel {name!r} in the newest run ({runs[0]}); "
                        f"showing it from {candidate}, {i} run(s) back"), file=sys.stderr)
      return candidate, kernel_dir(candidate, hit)
  have = ", ".join(list(seen)[:12]) + (f" and {len(seen) - 12} more" if len(seen) > 12
                                       else "") if seen else "none"
  # the last --out run made here is among them: say so (the message said "under
  # pallas-prof-out/" and named a newest run that was not under it)
  elsewhere = [r for r in runs if os.path.dirname(os.path.normpath(r)) != os.path.normpath(root)]
  where = (f"under {root}/" if not elsewhere else
           f"(under {root}/ and the last run made here with --out, {elsewhere[0]})"
           if len(runs) > 1 else f"(the last run made here with --out, {elsewhere[0]})")
  raise SystemExit(f"pallas-prof: no kernel {name!r} in the {len(runs)} most recent run(s) "
                   f"{where}; the newest is {runs[0]} and they have: {have}. Give one of those "
                   "(a name or the start of a label), or --dir to look elsewhere")


# the opening of caught_failures' note (run_steps/kernels.py): failures the script caught
# and went on from
CAUGHT_NOTE = "the script caught "


def run_failures(report) -> list[str]:
  """What failed in a run, in words, one item each, from what its report.json records: the
  script's exit code, each kernel that failed to lower, compile or run, and the kernels'
  failures the script caught. Empty for a run that went through."""
  out = []
  if report.exit_code:
    out.append(f"the script exited with code {report.exit_code}")
  for err in report.errors:
    when = {"run": "at run time", None: "to lower", "lowering": "to lower"}.get(
        err.stage, f"to compile ({err.stage})")
    where = f" at {os.path.basename(err.location)}" if err.location else ""
    reason = (err.reason or "").splitlines()[0] if err.reason else ""
    out.append(f"kernel `{err.kernel}` failed {when}{where}" + (f": {reason}" if reason else ""))
  out += [n for n in report.notes if n.startswith(CAUGHT_NOTE)]
  return out
