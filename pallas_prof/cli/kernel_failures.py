"""Which of a run's kernels failed, and how, in words: a kernel that failed to compile or
run gets no advice (its figures are of code that does not work; the advice would send the
user tuning it), and the report says it failed where the advice would be.

Errors name a kernel by label (a compile's) or by name (one raised while the script ran),
so both are keys; a kernel is looked up by its label first."""
from __future__ import annotations

import os


def _when(stage: str | None) -> str:
  return {"run": "at run time", None: "to lower", "lowering": "to lower"}.get(
      stage, f"to compile ({stage})")


def _words(when: str, location: str | None, reason: str | None) -> str:
  where = f" at {os.path.basename(location)}" if location else ""
  first = (reason or "").strip().splitlines()[0] if (reason or "").strip() else ""
  return f"{when}{where}" + (f": {first}" if first else "")


def by_kernel(errors=(), caught=()) -> dict[str, str]:
  """Label or name -> how that kernel failed, from the run's error entries (ErrorEntry) and
  the kernels' failures the script caught (KernelRuntimeError); the first of each kernel."""
  out: dict[str, str] = {}
  for err in errors:
    if err.kernel:
      out.setdefault(err.kernel, _words(_when(err.stage), err.location, err.reason))
  for err in caught:
    if err.kernel:
      out.setdefault(err.kernel, _words("at run time (the script caught it)", err.location,
                                        err.reason))
  return out


def of(kernel, failures: dict[str, str]) -> str | None:
  """How `kernel` (a registry record or a report's KernelEntry) failed; None if it did not."""
  return failures.get(kernel.label) or failures.get(kernel.name)


def no_advice_line(label: str, failed: str) -> str:
  return f"no advice for {label}: it failed {failed}; fix the failure first"
