"""Stall reasons, from CUPTI's and Nsight Compute's names to words a kernel author
acts on.

A PC sample records the state of one warp: issuing ("selected") or the reason it
could not issue. CUPTI names each reason `smsp__pcsamp_warps_issue_stalled_<r>`
and counts it twice: all samples, and `<r>_not_issued` (the subset in which the
scheduler issued nothing at all). Totals count the first kind only. Nsight
Compute's source page calls the same reasons stall_long_sb, stall_math, ...
"""
from __future__ import annotations

CUPTI_PREFIX = "smsp__pcsamp_warps_issue_stalled_"

# reason -> what it means, in the terms of the kernel's code
WORDS = {
    "long_scoreboard": "waiting for global memory",
    "short_scoreboard": "waiting for shared memory or the special-function unit",
    "mio_throttle": "shared-memory / special-function queue full",
    "lg_throttle": "too many global loads/stores in flight (queue full)",
    "tex_throttle": "texture / L1 queue full",
    "math_pipe_throttle": "math pipe busy",
    "wait": "waiting for the previous arithmetic (fixed latency)",
    "barrier": "at a barrier",
    "membar": "at a memory fence",
    "branch_resolving": "branch",
    "no_instructions": "instruction fetch",
    "not_selected": "not selected (ready; another warp issued)",
    "selected": "issuing",
    "dispatch_stall": "dispatch stall",
    "drain": "draining stores at exit",
    "sleeping": "sleeping",
    "imc_miss": "constant-cache miss",
    "misc": "other",
    "gmma": "waiting for the tensor cores (wgmma)",
    "tmem": "waiting for tensor memory",
    "warpgroup_arrive": "waiting for the warpgroup (wgmma arrive)",
}

# Nsight Compute's source-page column -> the CUPTI name above
NCU_NAMES = {
    "stall_long_sb": "long_scoreboard", "stall_short_sb": "short_scoreboard",
    "stall_mio": "mio_throttle", "stall_lg": "lg_throttle", "stall_tex": "tex_throttle",
    "stall_math": "math_pipe_throttle", "stall_wait": "wait", "stall_barrier": "barrier",
    "stall_membar": "membar", "stall_branch_resolving": "branch_resolving",
    "stall_no_inst": "no_instructions", "stall_not_selected": "not_selected",
    "stall_selected": "selected", "stall_dispatch": "dispatch_stall", "stall_drain": "drain",
    "stall_sleep": "sleeping", "stall_sleeping": "sleeping", "stall_imc": "imc_miss",
    "stall_misc": "misc", "stall_gmma": "gmma",
}

# contention charged to the instructions that were issuing (contention.py): the
# reason it is shown under there
CHARGED = {"not_selected": "issue_contention"}
WORDS["issue_contention"] = "other warps ready and waiting for its issue slots"

# waits that a load's consumer sees, and the producers they can be charged to
MEMORY_WAITS = ("long_scoreboard", "short_scoreboard")


def canonical(name: str) -> tuple[str, bool]:
  """(reason, counted): a CUPTI or ncu stall name as a reason of WORDS (unknown
  names kept as they are), and False for the not-issued duplicates."""
  n = name.strip()
  not_issued = n.endswith("_not_issued") or n.endswith("(Not Issued)")
  n = n.replace("(Not Issued)", "").strip()
  if n.startswith("smsp__pcsamp_") and not n.startswith(CUPTI_PREFIX):
    return n[len("smsp__pcsamp_"):], False     # sample_count, samples_data_dropped: no reason
  if n.endswith("_not_issued"):
    n = n[:-len("_not_issued")]
  if n.startswith(CUPTI_PREFIX):
    n = n[len(CUPTI_PREFIX):]
  n = NCU_NAMES.get(n, n)
  if n == "no_instruction":
    n = "no_instructions"
  return n, not not_issued


def words(reason: str) -> str:
  return WORDS.get(reason, reason.replace("_", " "))
