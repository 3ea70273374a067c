"""Failures of the machine, not of Triton nor of the kernel: a compile worker ended
from outside (a signal Triton never sends itself: the out-of-memory killer's
SIGKILL, a SIGTERM), a disk that would not take a write (ENOSPC, EDQUOT, EROFS,
EACCES), memory that ran out, a cached compile that turned out damaged.

Such a failure says nothing about the kernel. compile.py retries it once on a
fresh worker with the cache bypassed, and so any crash (LLVM's SIGSEGV or SIGABRT
may be a bad memory bit as well as a bug); workarounds.py searches for no other
lowering, and saves no plan, for a failure that did not happen again. Only a
failure that reproduces is taken for what it says: a crash that reproduces is
Triton's; a failure of the machine that reproduces is raised as one, saying what
to do.
"""
from __future__ import annotations

import errno
import re
import tempfile
import warnings

from .compile_diagnostics import Diagnosis
from ..worker_output import OUTSIDE_SIGNALS
from ...errors import CompileError
from ...kernel_files import cache_dir

# what an operating-system error of a compile says of the machine
MACHINE_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "a file could not be written (permission denied)",
    errno.ENOMEM: "the machine ran out of memory",
}
# the same, in what a worker that died had written (Python's last words, C++'s)
_MACHINE_WORDS = re.compile(r"No space left on device|Disk quota exceeded|Read-only file system|"
                            r"\bMemoryError\b|Cannot allocate memory|std::bad_alloc")
RETRIED = "retried"          # the details key of an error that failed again on a retry

_warned: list[str] = []      # the one warning of a process about a failure a retry got past


def of_crash(crash) -> str | None:
  """What of the machine ended a worker that died (compile_worker.WorkerCrashed), or
  None: a crash of Triton's, until a retry shows it does not happen again."""
  if crash.from_outside:
    return _ended_from_outside(crash.how)
  said = _MACHINE_WORDS.search(crash.output_tail or "")
  if said:
    line = next(ln for ln in crash.output_tail.splitlines() if said.group(0) in ln)
    return f"the compile worker died ({crash.how}) saying {line.strip()[:200]!r}"
  return None


def _ended_from_outside(how: str) -> str:
  if how == "signal SIGKILL":
    return ("the compile worker was killed (SIGKILL) from outside Triton: by the system's "
            "out-of-memory killer, a user or a process manager")
  if how.startswith("signal "):
    return (f"the compile worker was ended ({how.removeprefix('signal ')}) from outside "
            "Triton: by a user or a process manager")
  return f"the compile worker {how}"


def names_machine_failure(text: str) -> bool:
  """Whether a failure's words (a saved plan's `because`) are a machine failure's: a
  worker ended by a signal from outside, a full disk, memory run out."""
  return bool(_MACHINE_WORDS.search(text) or _OUTSIDE.search(text))


_OUTSIDE = re.compile(r"\b(?:%s)\b|compile worker" % "|".join(OUTSIDE_SIGNALS))


def of_answer(error: dict) -> str | None:
  """What of the machine failed a compile that answered with an error (the worker's
  error data, triton_run), or None."""
  if error.get("type") == "MemoryError":
    return "the compile ran out of memory (MemoryError)"
  if error.get("type") == "KernelFileChanged":   # another writer in the cache: checked again
    return str(error.get("message", "the kernel's file changed while it was compiled"))[:300]
  words = MACHINE_ERRNOS.get(error.get("errno"))
  if words is None:
    return None
  return f"{words}: {error.get('type')}: {str(error.get('message', ''))[:300]}"


def machine_error(gk, cause: str, stage: str, first: str | None = None) -> CompileError:
  """A compile of `gk` that the machine failed (`cause`; `first`: the cause of the
  attempt before, when this was its retry), as a CompileError that says what to do."""
  diagnosis = Diagnosis(stage=stage, kind="machine", summary=cause, fault="machine",
                        fault_reason="the machine failed the compile (memory, disk, or a "
                                     "process ended from outside), not Triton nor the kernel")
  details = {}
  if first is not None:
    details[RETRIED] = (f"once, on a fresh compile worker with the cache bypassed, after "
                        f"{first}: it failed again")
  return CompileError(
      cause, diagnosis=diagnosis, kernel=gk.name, stage=stage, details=details,
      jaxpr_text=gk.jaxpr_text, ref_names=gk.ref_names,
      hint=("nothing was saved for this kernel (no workaround, no cache entry); if memory "
            "is short (`dmesg` shows the out-of-memory killer), free some; if a disk is "
            f"full, free space in {tempfile.gettempdir()} and {cache_dir()} (or set TMPDIR "
            "or PALLAS_PROF_CACHE_DIR to another folder); then run again"))


def worth_a_retry(error: CompileError) -> bool:
  """Whether a failed compile may be the machine's, so that a retry could get past it:
  the machine's own, or a worker's crash (not yet shown to reproduce)."""
  d = error.diagnosis
  return d is not None and RETRIED not in error.details and (
      d.fault == "machine" or d.kind == "crash")


def after_retry(gk, first: CompileError, again: CompileError) -> CompileError:
  """The error to raise when a retry failed too: the machine's, said as such with both
  causes; or the retry's own, noting that it reproduced (a crash now Triton's)."""
  if again.fault == "machine":
    return machine_error(gk, again.reason, again.stage or "ttir", first=first.reason)
  return again.with_details({RETRIED: f"once, on a fresh compile worker with the cache "
                                      f"bypassed, after {first.reason}: it failed again, so "
                                      "it is not the machine's"})


def recovered(gk, cause: str) -> None:
  """Says, once per process, that a failure a retry got past was the machine's (no
  workaround planned for it): the next one may not be so lucky."""
  if _warned:
    return
  _warned.append(gk.name)
  warnings.warn(f"pallas-prof: compiling kernel `{gk.name}`, {cause}; compiled again on a "
                "fresh worker with the cache bypassed, it compiled, so no workaround was "
                "planned for it. If this happens often, look at the machine's memory and "
                "disk (said once per process)", RuntimeWarning, stacklevel=2)
