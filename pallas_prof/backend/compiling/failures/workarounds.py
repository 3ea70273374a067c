"""Getting around Triton's bugs: when a compile fails with a fault of Triton's,
lower the kernel again in forms that keep Triton off the failing path and
compile that, saying so everywhere (never silently).

    compile_working_around(gk, target, relower)   # a CompiledKernel, or the CompileError

`relower(options)` lowers the same pallas_call again with other LoweringOptions
(options.py; pallas_call_rule.py's, a kernel_registry record's `relower`).
What is tried depends on the kind of op that failed (compile_diagnostics.py):

  tt.scan   each scan the failure points at in another form (lowering/features/scan_forms.py):
            squeeze, then transpose, then triangular; a form that compiles is
            then kept only for the lines whose scans need it
  any       another num_warps, as a last resort (the whole kernel's layouts
            change; float reductions may round otherwise on a GPU)

A compile that succeeds into code a known Triton bug computes wrongly
(silent_faults.py: Triton 3.6's scans over a layout that replicates a
non-scanned dimension) counts as a failure of Triton's here: it is worked
around the same way, and with the workarounds off it is raised, never run.

Every form computes what the plain lowering computes (tests/backend/
test_triton_bugs.py checks each under Triton's interpreter across shapes and
dtypes). The kernel that compiles carries what changed in its source's header
and in GeneratedKernel.workarounds (report.json, the compile span). The plan
that worked is remembered per compile key (in memory and on disk), so later
compiles of the same kernel go straight to it.

Only a failure that reproduces gets a plan: the plain compile's failure is
compiled once more on a fresh worker with the cache bypassed first (unless
compile.py's retry did that already), and a failure of the machine's
(machine_faults.py: a worker killed from outside, a full disk) gets none. A
saved plan is data an earlier run left: checked when read (it must be of this
format, name a failure of Triton's and settings this kernel can take), and a
bad one is moved aside with one warning, never applied.

PALLAS_PROF_WORKAROUNDS=0 turns this off: the failure is raised, explained,
with what pallas-prof would have tried.

`classify_failure(error)` says what a failure was, as plain data (the fuzzer's).
"""
from __future__ import annotations

import json
import os
import warnings

from .... import settings
from . import machine_faults, silent_faults
from ...artifacts import DEFAULT_TARGET
from .. import compile_worker
from ..compile import compile_kernel
from ..compile_cache import compile_key, forget
from .compile_errors import silent_fault_error
from ...errors import CompileError, LoweringError
from ... import cache_files
from ...kernel_files import cache_dir
from ...lowering.features.scan_forms import WORDS as FORM_WORDS
from .triton_faults import PRIMITIVES_OF_OP
from ...options import WorkaroundPlan
from ....safe_files import UnsafeFile, private_dir, read_regular, write_atomic

ENV = "PALLAS_PROF_WORKAROUNDS"
LADDERS = {"tt.scan": ("squeeze", "transpose", "triangular")}    # op kind -> forms, cheapest first
OTHER_NUM_WARPS = {1: (2, 4), 2: (4, 1), 4: (8, 2), 8: (4, 16), 16: (8, 32), 32: (16, 8)}
NARROW_AT_MOST = 4          # a form kept for more lines than this is not narrowed down
# 2: saved only for a failure that reproduced on a fresh worker, never for the machine's;
# the plans of format 1 include ones saved for a worker killed from outside
PLAN_FORMAT = 2
PLAN_FIELDS = ("format", "fault", "scan_forms", "num_warps", "notes", "because")
MAX_PLAN_BYTES = 1 << 16

_memory: dict[str, WorkaroundPlan] = {}


def enabled() -> bool:
  return settings.value(ENV)


def compile_working_around(gk, target, relower, *, need_cubin: bool = True,
                           use_disk_cache: bool = True):
  """compile_kernel(gk, target), or where it fails with a fault of Triton's, the
  first variant of the kernel (lowered again by `relower`) that compiles."""
  def compile_(variant):
    # a compile that succeeds into code a Triton bug computes wrongly (silent_faults.py)
    # fails here like one that asserts, so the same workarounds get around it
    ck = compile_kernel(variant, target, need_cubin=need_cubin, use_disk_cache=use_disk_cache)
    silent = silent_faults.find(ck)
    if silent is not None:
      raise silent_fault_error(variant, silent)
    return ck

  key = compile_key(gk, target)
  known = _remembered(key, gk) if relower is not None and enabled() else None
  if known is not None:
    try:
      return compile_(_lower(relower, gk, known))
    except CompileError as e:
      if e.fault == "machine":      # says nothing of the plan
        raise
      _forget(key)
  try:
    return compile_(gk)
  except CompileError as first:
    if first.fault != "triton":
      raise
    error = first
  if _worth_a_retry(error):
    ck, error = _retried(gk, key, error, lambda variant: compile_kernel(
        variant, target, need_cubin=need_cubin, use_disk_cache=False))
    if ck is not None:
      return ck
  if error.fault != "triton":
    raise error
  return _worked_around(gk, key, relower, error, compile_)


def _worth_a_retry(error: CompileError) -> bool:
  """A failure not yet compiled again (compile.py retries crashes itself), and not one
  read off code that compiled (silent_faults.py: the same code every time)."""
  return (machine_faults.RETRIED not in error.details
          and error.diagnosis is not None and error.diagnosis.kind != "silent miscompile")


def _retried(gk, key, first: CompileError, compile_fresh):
  """(the CompiledKernel, None) when a fresh worker with the cache bypassed compiles gk
  after all (the first failure was not Triton's: no plan), else (None, the error to go on
  with: machine_faults.after_retry's)."""
  compile_worker.replace()
  forget(key)
  try:
    ck = compile_fresh(gk)
  except CompileError as again:
    return None, machine_faults.after_retry(gk, first, again)
  silent = silent_faults.find(ck)
  if silent is not None:
    return None, silent_fault_error(gk, silent)
  machine_faults.recovered(gk, first.reason)
  return ck, None


def _worked_around(gk, key, relower, error: CompileError, compile_):
  """The search for a lowering that compiles, after a failure of Triton's that reproduced;
  the plan that worked is remembered."""
  if relower is None:
    raise error.with_details({"workaround": "none: this kernel was not lowered by this "
                                            "process, so it cannot be lowered otherwise"})
  if not enabled():
    raise error.with_details(
        {"workaround": f"off ({ENV}=0); left on, pallas-prof would retry with "
                       f"{_would_try(error, gk)}"},
        workaround="off") from None
  ck, tried = _search(gk, relower, error, compile_)
  if ck is None:
    raise error.with_details({"workaround": "tried, none compiled:\n" + "\n".join(tried)},
                             workaround="failed") from None
  _remember(key, ck.generated.options.workarounds)
  return ck


def _lower(relower, gk, plan: WorkaroundPlan):
  """The kernel lowered again with `plan`, in the same build (the bounds-checked one
  stays checked): the GPU launches it in the kernel's place, with the kernel's operands."""
  variant = relower(gk.options.replace(num_warps=plan.num_warps or gk.options.num_warps,
                                       workarounds=plan), same_build=True)
  if _operands(variant) != _operands(gk):
    # launched with the kernel's operands, a variant of other operands would fail deep in
    # the launch (or write the wrong buffers): say so here, with both lists
    # (a LoweringError: the search tries the next form, the CLI reports it per kernel)
    raise LoweringError(
        f"pallas-prof internal error: the workaround variant of {gk.name} has operands "
        f"{_operands(variant)}, the kernel {_operands(gk)}",
        hint="please report it; PALLAS_PROF_WORKAROUNDS=0 runs without workarounds",
        kernel=gk.name)
  return variant


def _operands(gk) -> list[tuple]:
  return [(p.name, p.dtype, tuple(p.shape), p.role) for p in gk.params]


def _search(gk, relower, error: CompileError, compile_):
  """(the first variant's CompiledKernel that compiles or None, what was tried)."""
  d = error.diagnosis
  tried: list[str] = []
  # the equations the failure names first, then the kernel's other ops of that kind
  # (Triton may fold their locations into one): _narrowed drops what turns out unneeded
  prims = PRIMITIVES_OF_OP.get(d.op_kind or "", ())
  equations = tuple(dict.fromkeys(tuple(d.equations) + tuple(
      e.index for e in gk.eqns if e.primitive in prims)))
  for form in LADDERS.get(d.op_kind or "", ()):
    plan = WorkaroundPlan(scan_forms=tuple((i, form) for i in equations), because=d.summary)
    try:
      variant = _lower(relower, gk, plan)
    except LoweringError as e:          # (a form is plain code; this would be a bug of its)
      tried.append(f"{form}: its lowering failed: {e.reason[:300]}")
      continue
    if not variant.workarounds:
      continue                          # the form fits none of those equations
    try:
      ck = compile_(variant)
    except CompileError as e:
      tried.append(f"{form}: {_short(e)}")
      continue
    return _narrowed(ck, gk, relower, compile_), tried
  for warps in OTHER_NUM_WARPS.get(gk.num_warps, ()):
    plan = WorkaroundPlan(num_warps=warps, because=d.summary, notes=(
        f"num_warps={warps} instead of {gk.num_warps} (a last resort: every op's layout "
        "changes, and float reductions may round otherwise on a GPU)",))
    try:
      return compile_(_lower(relower, gk, plan)), tried
    except CompileError as e:
      tried.append(f"num_warps={warps}: {_short(e)}")
  return None, tried


def _narrowed(ck, gk, relower, compile_):
  """ck, or a variant with the form kept only for the scans that need it (the plain
  scan is the cheaper one): each of the user's lines (the equations an unrolled loop
  makes of one line go together) is tried back in its plain form."""
  plan = ck.generated.options.workarounds
  lines: dict[tuple, list[int]] = {}
  for index, _ in plan.scan_forms:
    e = gk.eqns[index]
    lines.setdefault((e.file, e.line, e.primitive), []).append(index)
  if not 1 < len(lines) <= NARROW_AT_MOST:
    return ck
  for group in lines.values():
    smaller = plan.only(i for i, _ in plan.scan_forms if i not in group)
    try:
      ck = compile_(_lower(relower, gk, smaller))
      plan = smaller
    except CompileError:
      pass                              # this line needs it
  return ck


def _short(error: CompileError) -> str:
  d = error.diagnosis
  return (d.summary if d is not None else error.reason)[:300]


def _would_try(error: CompileError, gk) -> str:
  forms = LADDERS.get(error.diagnosis.op_kind or "", ())
  steps = [f"{form} ({FORM_WORDS[form]})" for form in forms]
  warps = OTHER_NUM_WARPS.get(gk.num_warps, ())
  if warps:
    steps.append(f"num_warps {' or '.join(map(str, warps))} as a last resort")
  return "; ".join(steps) if steps else "nothing (no other lowering is known for this failure)"


# --- what worked, remembered per compile key ---------------------------------------------

def _plan_file(key: str) -> str:
  return os.path.join(cache_dir(), "workarounds", f"{key}.json")


def _remembered(key: str, gk) -> WorkaroundPlan | None:
  """The plan that worked for `key`: this process's, else the disk's once it passed
  _checked_plan (a bad one is moved aside, with one warning, and not applied)."""
  plan = _memory.get(key)
  if plan is not None:
    return plan
  path = _plan_file(key)
  try:
    plan, problem = _checked_plan(read_regular(path, MAX_PLAN_BYTES), gk)
  except FileNotFoundError:
    return None
  except (UnsafeFile, OSError) as e:
    plan, problem = None, f"it cannot be read ({e.strerror or e})"
  if problem is not None:
    _set_aside(path, problem)
    return None
  _memory[key] = plan
  return plan


def _checked_plan(data: bytes, gk) -> tuple[WorkaroundPlan | None, str | None]:
  """(the plan, None) when `data` is a plan of this format, for a failure of Triton's, with
  settings `gk` can take (its scan equations, forms that exist, a num_warps the search
  offers for the kernel's); else (None, what is wrong with it)."""
  try:
    d = json.loads(data.decode())
  except (UnicodeDecodeError, ValueError):
    return None, "it is not JSON"
  if not isinstance(d, dict):
    return None, "it is not a JSON object"
  unknown = sorted(set(d) - set(PLAN_FIELDS))
  if unknown:
    return None, f"it has fields a plan does not have: {', '.join(map(str, unknown))[:200]}"
  if d.get("format") != PLAN_FORMAT:
    return None, (f"its format is {d.get('format')!r}, not {PLAN_FORMAT} (plans of earlier "
                  "formats were saved for failures that may not have reproduced)")
  because = d.get("because")
  if d.get("fault") != "triton" or not isinstance(because, str) or not because.strip():
    return None, "it names no failure of Triton's (fault and because)"
  if machine_faults.names_machine_failure(because):
    return None, f"the failure it names is the machine's, not Triton's: {because[:200]!r}"
  problem = _bad_settings(d, gk)
  if problem is not None:
    return None, problem
  return WorkaroundPlan.from_dict(d), None


def _bad_settings(d: dict, gk) -> str | None:
  """What is wrong with a plan's settings for `gk`, or None."""
  warps, forms, notes = d.get("num_warps"), d.get("scan_forms", []), d.get("notes", [])
  if warps is not None and (type(warps) is not int
                            or warps not in OTHER_NUM_WARPS.get(gk.num_warps, ())):
    return (f"num_warps {warps!r} is not one the search tries for a kernel of num_warps "
            f"{gk.num_warps} ({', '.join(map(str, OTHER_NUM_WARPS.get(gk.num_warps, ())))})")
  if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
    return "its notes are not a list of texts"
  if not isinstance(forms, list) or not (forms or warps is not None):
    return "it changes nothing (no scan forms, no num_warps)"
  scans = {e.index for e in gk.eqns if e.primitive in PRIMITIVES_OF_OP["tt.scan"]}
  for pair in forms:
    if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int
            and pair[0] in scans and pair[1] in LADDERS["tt.scan"]):
      return (f"scan form {pair!r} is not [a scan equation of this kernel, one of "
              f"{', '.join(LADDERS['tt.scan'])}]")
  return None


_warned: list[str] = []      # the plan files set aside without a warning of their own


def _set_aside(path: str, problem: str) -> None:
  """Moves a bad plan file aside (to .bad); one warning per process, naming it."""
  aside = f"{path}.bad"
  try:
    os.replace(path, aside)
  except OSError:
    aside = None
    try:
      os.unlink(path)
    except OSError:
      pass
  if _warned:
    _warned.append(path)
    return
  _warned.append(path)
  where = f"moved to {aside}" if aside else "removed"
  warnings.warn(f"pallas-prof: ignored the saved workaround plan {path}: {problem}. It was "
                f"{where}, and the kernel is compiled as it is (a failure of Triton's that "
                "reproduces gets a new plan). Later bad plans of this process are set aside "
                "without a warning", RuntimeWarning, stacklevel=3)


def _remember(key: str, plan: WorkaroundPlan | None) -> None:
  if plan is None:
    return
  _memory[key] = plan
  try:
    cache_files.write(_plan_file(key), json.dumps({"format": PLAN_FORMAT, "fault": "triton",
                                                   **plan.to_dict()}))
  except OSError:      # neither the cache nor a temporary folder: this process remembers it
    pass


def _forget(key: str) -> None:
  _memory.pop(key, None)
  try:
    os.unlink(_plan_file(key))
  except OSError:
    pass


def forget_all() -> None:
  """Forgets every remembered plan in this process (tests)."""
  _memory.clear()


# --- for the fuzzer ------------------------------------------------------------------------

def classify_failure(error: BaseException) -> dict:
  """A compile failure as plain data: {"stage", "kind", "fault", "failing_pass",
  "assertion", "op_kind", "equations": [(index, primitive, "file:line")], "summary",
  "workaround", "reproducer"}; for an error that is not a CompileError, {"kind":
  "not a compile failure", "fault": None, "summary": str(error)}."""
  if not isinstance(error, CompileError) or error.diagnosis is None:
    return {"kind": "not a compile failure", "fault": None, "stage": getattr(error, "stage", None),
            "summary": str(error).splitlines()[0][:300] if str(error) else type(error).__name__}
  d = error.diagnosis
  return {"stage": d.stage, "kind": d.kind, "fault": d.fault, "failing_pass": d.failing_pass,
          "assertion": d.assertion, "op_kind": d.op_kind, "summary": d.summary,
          "equations": [(e.index, e.primitive, e.location) for e in error.equations],
          "workaround": error.workaround, "reproducer": dict(error.reproducer)}


def check_compile(gk, relower=None, target=DEFAULT_TARGET) -> dict:
  """Compiles `gk` for `target` as a finder of Triton bugs would: {"failure": None, or
  classify_failure of the plain compile's error; "compiled": whether the kernel, or with
  `relower` a workaround of it, compiled; "workarounds": what the one that compiled was
  lowered otherwise for; "still_failing": classify_failure of the last error, if none did}."""
  out = {"failure": None, "compiled": False, "workarounds": [], "still_failing": None}
  try:
    compile_kernel(gk, target, use_disk_cache=False)
    out["compiled"] = True
    return out
  except CompileError as e:
    out["failure"] = classify_failure(e)
    if relower is None or e.fault != "triton":
      out["still_failing"] = out["failure"]
      return out
  try:
    ck = compile_working_around(gk, target, relower, use_disk_cache=False)
    out["compiled"], out["workarounds"] = True, list(ck.generated.workarounds)
  except CompileError as e:
    out["still_failing"] = classify_failure(e)
  return out
