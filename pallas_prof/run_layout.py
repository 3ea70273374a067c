"""The names of a run directory's files, in one place: every module that writes or reads
one imports them from here (tests/structure/test_run_layout.py keeps it so).

    <out>/report.json                   REPORT: everything `pallas-prof report` re-renders
                                        (cli/report.py's RunReport)
    <out>/report.html                   HTML: the page (cli/html/)
    <out>/trace.otlp.jsonl              OTLP_JSON: OTLP-JSON lines (the Collector's
                                        otlpjsonfile format; trace.otlp.json in runs before
                                        the rename: report.json's "traces" names the file)
    <out>/trace.perfetto.json           PERFETTO: Chrome/Perfetto trace events
    <out>/kernels/<label>/              KERNELS, kernel_dir(): one kernel's files, which
                                        backend/artifacts.py also keeps in the disk cache:
      source.py, kernel.json            SOURCE, KERNEL: the GeneratedKernel
      compiled.json, kernel.{ttir,...}  COMPILED, STAGE_FILES: the CompiledKernel
      spec.json (beside kernel.cubin)   SPEC: its LaunchSpec
    <out>/diffs/<label>-<n>-<rule>.diff DIFFS, diff_file(): the unified diff of the kernel's
                                        n-th action (advice kinds c and e), for `patch -p1`

A leaf: it imports nothing of pallas_prof, so the backend (whose artifacts these files
are) and the CLI (whose run directory holds them) both use it.
"""
from __future__ import annotations

import os

REPORT = "report.json"
HTML = "report.html"
OTLP_JSON = "trace.otlp.jsonl"
PERFETTO = "trace.perfetto.json"
KERNELS = "kernels"             # the folder of the kernels' folders
DIFFS = "diffs"                 # the folder of the advice's diffs

SOURCE = "source.py"
KERNEL = "kernel.json"
COMPILED = "compiled.json"
SPEC = "spec.json"
# each stage's file in a saved CompiledKernel; amdgcn and hsaco: an AMD target's assembly
# and binary (targets.HIP_STAGES)
STAGE_FILES = {"ttir": "kernel.ttir", "ttgir": "kernel.ttgir", "llir": "kernel.ll",
               "ptx": "kernel.ptx", "cubin": "kernel.cubin", "amdgcn": "kernel.amdgcn",
               "hsaco": "kernel.hsaco"}
CUBIN = STAGE_FILES["cubin"]    # the LaunchSpec's binary, beside spec.json


def kernel_dir(label_dir: str) -> str:
  """A kernel's folder, relative to the run directory (`label_dir`: its folder's name,
  cli/run_directory.kernel_dir_name of its label)."""
  return os.path.join(KERNELS, label_dir)


def diff_file(label_dir: str, rank: int, rule: str) -> str:
  """The diff of a kernel's `rank`-th action (its rule: long_reduction, loop_step), relative
  to the run directory (`label_dir` as for kernel_dir)."""
  return os.path.join(DIFFS, f"{label_dir}-{rank}-{rule}.diff")
