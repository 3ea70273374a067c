"""`pallas-prof show KERNEL --target sm_80,gfx942`: a saved kernel compiled for the GPUs it
will be deployed on, side by side, from any machine.

The run saved the generated kernel (kernel.json, source.py); a run directory is data
someone may have sent, and compiling runs the kernel's module, so source.py is compiled only
if it is what pallas-prof generates and holds the digest kernel.json records
(check_saved_source: saved_runs/source_check.py). Each target compiles it through backend/compiling/for_targets.py, the compile a run takes, and answers
compiled (registers, spills, shared memory or LDS, the occupancy they allow on that
GPU, and the static advice where its rules read the target's code: NVIDIA's SASS),
refused (the kernel uses what the target lacks, said at the user's line as the run
says it) or failed. A saved run has no registry record to re-lower the kernel from,
so Triton's bug workarounds a run may take are not tried here.
"""
from __future__ import annotations

import json
import os
import sys

from rich.table import Table
from rich.text import Text

from ...advice import hardware
from ...backend.targets import UnknownTarget, parse_target
from ...profiler.schema import KernelProfile
from ...profiler.static.correlate import correlate
from ...run_layout import SOURCE
from ..saved_runs import source_check
from ..saved_runs.files import RunFileError
from ..terminal.safe_text import printable


def parse_targets(values) -> list:
  """--target's values (each repeatable, each a comma list: "sm_80,gfx942") as Targets,
  each once, in order; UnknownTarget names a value that is no known GPU."""
  names = [n.strip() for v in values or () for n in str(v).split(",") if n.strip()]
  if not names:
    raise UnknownTarget("--target names no GPU; give one or more, e.g. --target sm_80,gfx942")
  return list(dict.fromkeys(parse_target(n) for n in names))


def targets_or_exit(args) -> list:
  """The targets args asks for ([] without --target); a typo exits 2 with
  UnknownTarget's message, before any run is read."""
  if getattr(args, "json", False) and not getattr(args, "target", None):
    print("pallas-prof: show --json prints the figures of --target's compiles; add "
          "--target GPU (e.g. --target sm_80)", file=sys.stderr)
    raise SystemExit(2)
  if not getattr(args, "target", None):
    return []
  try:
    return parse_targets(args.target)
  except UnknownTarget as e:
    print(printable(f"pallas-prof: --target: {e}"), file=sys.stderr)
    raise SystemExit(2) from None


def check_saved_source(gk, kernel_dir: str,
                       why: str = "--target compiles it, which runs its source") -> None:
  """RunFileError (the command ends), before anything of it runs, unless the run's
  source.py is what pallas-prof generated and holds the digest kernel.json records
  (saved_runs/source_check.py): compiling a kernel runs its module, and a run directory may
  come from anyone."""
  try:
    source_check.check(gk.source, gk.name, gk.key)
  except source_check.NotGenerated as e:
    raise RunFileError(printable(
        f"pallas-prof: {os.path.join(kernel_dir, SOURCE)} is not a kernel pallas-prof "
        f"generated: {e}. show {why}, so it takes only what pallas-prof writes; if you "
        "trust the script, run it again with `pallas-prof run` and show that run's "
        "kernel")) from None


def compile_each(gk, targets) -> list:
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ...backend.compiling.for_targets import compile_for
  return [compile_for(gk, t) for t in targets]


def occupancy_of(outcome):
  """hardware.Occupancy of a compiled outcome on its target (None: not compiled, or
  the compile reported no registers)."""
  ck, target = outcome.compiled, outcome.target
  if ck is None or ck.registers is None:
    return None
  if target.backend == "cuda":
    return hardware.occupancy(ck.num_warps, ck.registers, ck.shared_bytes,
                              hardware.limits(target.arch))
  lim = hardware.CU_LIMITS.get(target.arch)
  res = ck.target_resources
  return None if lim is None else hardware.amd_occupancy(
      ck.num_warps, res.get("occupancy_waves"), res.get("lds_bytes"), lim)


def occupancy_text(outcome, occ) -> str:
  if occ is None:
    return ""
  unit = "SM" if outcome.target.backend == "cuda" else "CU"
  groups = "CTA" if unit == "SM" else "workgroup"
  return (f"{occ.ctas_per_sm} {groups}{'s' if occ.ctas_per_sm != 1 else ''}/{unit}, "
          f"{occ.pct:.0f}% of its {'warps' if unit == 'SM' else 'waves'}, by {occ.limiter}")


def advice_of(outcome, gk) -> list[str]:
  """The static advice's diagnoses for the target's compile: its rules read NVIDIA's
  SASS, so AMD targets get none (their figures are in the table)."""
  if outcome.compiled is None or outcome.target.backend != "cuda":
    return []
  # lazy: only --target's table reads the advice rules (show imports this view)
  from ...advice.engine import diagnose
  kp = KernelProfile(label=gk.name, name=gk.name, in_avals=[], out_avals=[],
                     static=correlate(outcome.compiled).profile, work=None)
  advice = diagnose(kp, gk, device=None, gpu=False)
  return [d.text + (f" (at {d.location})" if d.location else "") for d in advice.diagnoses]


def summary(outcome, gk) -> dict:
  """One target's answer as plain data (what --json prints, what the table shows)."""
  occ = occupancy_of(outcome)
  return {"target": outcome.target.name, "status": outcome.status,
          "reason": outcome.reason, "error": str(outcome.error) if outcome.error else None,
          "figures": outcome.figures(),
          "occupancy": None if occ is None else {
              "groups_per_unit": occ.ctas_per_sm, "warps_per_unit": occ.warps_per_sm,
              "percent": round(occ.pct, 1), "limited_by": occ.limiter,
              "text": occupancy_text(outcome, occ)},
          "advice": advice_of(outcome, gk)}


def _kib(n) -> str:
  return "" if n is None else f"{n / 1024:.1f} KiB"


def _spills(figures: dict) -> str:
  if figures.get("spills") is None:
    return ""
  return f"{figures['spills']} {figures['spill_unit']}" if figures["spills"] else "none"


def show_table(con, gk, run_dir: str, targets, as_json: bool) -> int:
  """The targets side by side; 1 when one of them did not compile (a script can check
  that a kernel compiles for each GPU it is deployed on), else 0."""
  rows = [summary(o, gk) for o in compile_each(gk, targets)]
  code = 0 if all(r["status"] == "compiled" for r in rows) else 1
  if as_json:
    print(json.dumps({"kernel": gk.name, "run": run_dir, "targets": rows}, indent=2))
    return code
  table = Table(title=printable(f"{gk.name} ({gk.source_info}) compiled for other GPUs"),
                title_justify="left")
  for column in ("target", "status", "registers", "spills", "shared / LDS", "occupancy"):
    table.add_column(column, overflow="fold")
  for r in rows:
    f = r["figures"]
    style = {"compiled": "green", "refused": "yellow"}.get(r["status"], "red")
    table.add_row(r["target"], Text(r["status"], style=style),
                  "" if f.get("registers") is None else str(f["registers"]), _spills(f),
                  _kib(f.get("shared_bytes")),
                  (r["occupancy"] or {}).get("text", "") or r["reason"])
  con.print(table)
  for r in rows:
    if r["error"]:
      con.print(Text(f"{r['target']} {r['status']}:", style="bold"))
      con.print(Text(printable(r["error"])))
    for line in r["advice"]:
      con.print(Text(printable(f"{r['target']}: {line}"), style="dim"))
  con.print(Text("registers: per thread (VGPRs on AMD); occupancy from each GPU's limits "
                 "(CUDA's and AMD's per-target figures; on AMD, LLVM's waves per SIMD)",
                 style="dim"))
  return code


def amd_listing(con, outcome, stage: str, fit) -> None:
  """An AMD compile's stage as text: --ptx and --sass show its amdgcn."""
  ck = outcome.compiled
  name = ck.target.assembly_stage if stage in ("ptx", "sass") else stage
  con.print(Text(fit(f"{name} of {ck.name} compiled for {outcome.target.name}")))
  for n, line in enumerate(str(ck.asm.get(name, "")).splitlines(), start=1):
    con.print(Text(fit(printable(f"{n:5d}  {line.expandtabs(4).rstrip()}"))))
