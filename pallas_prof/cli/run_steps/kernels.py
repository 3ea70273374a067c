"""What the run does with the script's kernels once the script has ended: the kernels
selected (--kernel), compiled where they were not (a CPU run compiles for the static
figures), profiled on each device asked for, advised on; and the notes on what the
script did with them that the report would not show otherwise (failures it caught,
kernels JAX's own interpreter ran)."""
from __future__ import annotations

import re

from ...advice.api import for_report
from ...backend import LoweringError, kernel_registry
from ...backend.artifacts import DEFAULT_TARGET
from ...backend.compiling.compile import assemble_cubin
from ...backend.compiling.failures.workarounds import compile_working_around
from ...backend.running import runtime_errors
from ...profiler import driver
from ...profiler.api import profile
from ..report import ErrorEntry
from ..script_args import RunOptions
from .entries import error_entry


def selected_kernels(pattern: str | None):
  recs = kernel_registry.kernels()
  if pattern:
    rx = re.compile(pattern)
    recs = [r for r in recs if rx.search(r.label) or rx.search(r.name)]
  return recs


def ensure_compiled(rec, errors: list[ErrorEntry]) -> None:
  """CPU runs never compiled: compile for sm_90 for the static figures. The GPU
  path compiled to PTX only: assemble the cubin (registers, spills, SASS)."""
  try:
    if rec.compiled is None:   # (Triton failing on it: another lowering of it, said so)
      rec.compiled = compile_working_around(rec.generated, DEFAULT_TARGET, rec.relower)
    else:
      rec.compiled = assemble_cubin(rec.compiled)
  except LoweringError as e:
    errors.append(error_entry(e, rec.label))


def caught_failures(before: int, final) -> list[str]:
  """Notes on the kernels' failures at run time that the script caught and went on from
  (the one that ended it, if one did, is the run's error)."""
  failures = [e for e in runtime_errors.recent(since=before) if e is not final]
  if not failures:
    return []
  first = failures[0]
  where = f" at {first.location}" if first.location else ""
  return [f"the script caught {len(failures)} failure(s) of its kernels at run time and went "
          f"on; the first: {type(first).__name__} in kernel `{first.kernel}`{where}: "
          f"{first.reason.splitlines()[0]}"]


def interpreted_by_jax() -> list[str]:
  """A note on the pallas_calls with interpret=True: JAX's own interpreter ran them, so the
  run has nothing of them to show, and said nothing of why."""
  calls = kernel_registry.interpreted_by_jax()
  if not calls:
    return []
  which = ", ".join(f"`{name}` at {where}" for name, where in calls)
  return [f"pl.pallas_call(..., interpret=True) ran {len(calls)} kernel(s) under JAX's own "
          f"Pallas interpreter, which pallas-prof does not see, so they are not in this report: "
          f"{which}. Drop interpret=True to see them: on a CPU pallas-prof already runs "
          "kernels under Triton's interpreter"]


def advice_for(records, reports, args: RunOptions, notes: list[str]) -> tuple:
  """Each kernel's advice from the first device's profile; `pallas-prof advise` (args.advise)
  also tries the actions on the GPU."""
  if not records or not reports:
    return ()
  try:
    return tuple(for_report(records, reports[0], trials=args.advise,
                            device=reports[0].device.index if reports[0].device else 0,
                            budget_s=args.budget_s, progress=args.progress,
                            try_tma=args.try_tma, static=args.advise))
  except Exception as e:  # noqa: BLE001 - the report stands without its advice
    notes.append(f"advice failed: {type(e).__name__}: {e}")
    return ()


def devices(spec: str, notes: list[str]) -> list[int]:
  """--device: an index, a comma list, or "all" (every GPU of the host)."""
  if spec == "all":
    present, reason = driver.gpu_status()
    return list(range(driver.device_count())) if present else [0]
  try:
    return [int(x) for x in spec.split(",") if x.strip()]
  except ValueError:
    raise SystemExit(f"pallas-prof: --device takes an index, a list like 0,1, or all; "
                     f"got {spec!r}") from None


def profile_on(records, args: RunOptions, device, cap, notes, samples_dir: str):
  """The kernels' profile on one device; where profiling fails part way, their static
  profile, and a note saying what failed."""
  insitu_result = cap.result if cap is not None else None
  try:
    return profile(records, device=device, replay=not args.no_profile,
                   min_launches=args.reps, ncu=args.ncu, insitu=insitu_result,
                   sample=not args.no_sampling, keep_samples=samples_dir, probes=args.probes)
  except driver.BadDevice:
    raise
  except Exception as e:  # noqa: BLE001 - report what we have, say what failed
    notes.append(f"profiling on device {device} failed: {type(e).__name__}: {e}")
    return profile(records, device=device, replay=False, nvml=False, ceilings=False)
