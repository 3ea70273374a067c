"""report.json's entries made from the run's records: a kernel's (KernelEntry, from its
KernelRecord), an error's (ErrorEntry, from a LoweringError or a KernelRuntimeError, with
a failed compile's diagnosis), the platform the run ran on, and the command lines as the
run records them (secrets masked)."""
from __future__ import annotations

import dataclasses
import sys
from importlib import metadata

from ...backend.artifacts import target_text
from ...backend.errors import CompileError
from ...instrument import error_text
from ...version import __version__
from ...redaction import Redactor, redact_argv
from ..report import CompileInfo, ErrorEntry, KernelEntry, Platform
from ..script_args import RunOptions


def error_entry(err, label: str | None = None) -> ErrorEntry:
  """report.json's entry for a LoweringError or a KernelRuntimeError (stage "run")."""
  return ErrorEntry(kernel=label or err.kernel, primitive=err.primitive, location=err.location,
                    reason=err.reason, hint=err.hint, stage=err.stage, report=error_text(err),
                    compile_failure=(compile_failure(err) if isinstance(err, CompileError)
                                     else None))


def compile_failure(err: CompileError) -> dict:
  """A CompileError's diagnosis for report.json: what failed, the equations, whose fault,
  the reproducer, the workaround."""
  d = err.diagnosis.to_dict() if err.diagnosis is not None else {}
  d["equations"] = [{"index": e.index, "primitive": e.primitive, "location": e.location}
                    for e in err.equations]
  return {**d, "reproducer": dict(err.reproducer), "workaround": err.details.get("workaround")}


def kernel_entry(rec, files: dict[str, str]) -> KernelEntry:
  gk, ck = rec.generated, rec.compiled
  # the kernel as compiled: where a workaround or a tuned choice lowered it otherwise
  # (another num_warps, say), its settings are the ones the GPU runs, not the call's
  used = ck.generated if ck is not None and ck.generated is not None else gk
  compiled = None
  if ck is not None:
    compiled = CompileInfo(target=target_text(ck.target), cache=ck.cache,
                           total_ms=ck.compile_seconds * 1e3,
                           stages_ms={k: v * 1e3 for k, v in ck.stage_seconds.items()},
                           worker_wait_ms=ck.worker_wait_seconds * 1e3)
  return KernelEntry(
      label=rec.label, name=rec.name, source_info=gk.source_info, platform=rec.platform,
      grid=tuple(gk.grid), launch_grid=tuple(gk.launch_grid),
      num_warps=used.num_warps, num_stages=used.num_stages,
      in_avals=tuple(rec.in_avals), out_avals=tuple(rec.out_avals),
      lowering_ms=gk.lowering_seconds * 1e3, equations=len(gk.eqns),
      lowering_gc_ms=gk.gc_seconds * 1e3, cpu_launches=rec.launches, files=dict(files),
      compile=compiled, resources=ck.resources() if ck is not None else None,
      warnings=tuple([u.describe() for u in rec.uncovered_outputs]
                     + [r.describe() for r in rec.revisited_outputs]
                     + [f"TMA not used for {note}" for note in gk.tma_notes]),
      # lowered otherwise where Triton failed on the plain lowering
      # (backend/compiling/failures/workarounds.py)
      workarounds=tuple(used.workarounds), bounds_checked=bool(gk.check_bounds))


def platform() -> Platform:
  """What the run ran on. Versions come from the modules the run imported or the installed
  packages' records, never from a new import: a run stopped while the script imported triton (a Ctrl-C at the start)
  leaves half-made modules behind, and a second `import triton` fails on them."""
  try:
    # lazy, in the try: a run stopped mid-import leaves jax half made, and its import fails
    import jax
    devices = tuple(d.device_kind for d in jax.devices())
    backend = jax.default_backend()
  except Exception:    # no backend would start (or jax itself is half made): said as unknown
    devices, backend = (), "unknown"
  return Platform(jax=installed_version("jax"), triton=installed_version("triton"),
                  pallas_prof=__version__, python=sys.version.split()[0], backend=backend,
                  devices=devices)


def installed_version(package: str) -> str:
  """The version of the module the run used where it imported whole (a failed import
  takes the package out of sys.modules); else the installed package's record."""
  version = getattr(sys.modules.get(package), "__version__", None)
  if version is not None:
    return str(version)
  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return "unknown"


def redactor(args: RunOptions):
  """What masks the secrets in everything the run records and prints (a Redactor, with the
  environment as it is now: a script may have loaded its secrets into it), or nothing
  with --no-redact. One callable for a text and for a whole report."""
  return _as_given if args.no_redact else Redactor()


def _as_given(obj):
  return obj


MASKED_DIFF = ("# pallas-prof masked what looked like a secret in this diff (***): the patch "
               "will not apply as it is. Run again with --no-redact to have it whole.\n")


def redacted_report(redact, report):
  """`redact(report)`, each advice diff the redaction changed marked so at its top (a
  patch ignores the lines before its first `---`): a masked line is not the user's line,
  and the user should hear why the patch fails before they apply it."""
  masked = redact(report)
  if masked is report:
    return masked
  advice = []
  for raw, kept in zip(report.advice, masked.advice, strict=True):
    actions = [dataclasses.replace(a, diff=MASKED_DIFF + a.diff)
               if a.diff is not None and a.diff != r.diff else a
               for r, a in zip(raw.actions, kept.actions, strict=True)]
    changed = any(a is not b for a, b in zip(actions, kept.actions, strict=True))
    advice.append(dataclasses.replace(kept, actions=actions) if changed else kept)
  return dataclasses.replace(masked, advice=tuple(advice))


def recorded(args: RunOptions, argv) -> list[str]:
  """`argv` as the run records it: the values of arguments named like secrets masked
  (pallas_prof/redaction), unless --no-redact."""
  return list(argv) if args.no_redact else redact_argv(argv)
