"""The run's saved kernels that the page's listings show (the generated source, PTX and
SASS), read before the page is made: the listings render from these records and read no
file. A kernel whose files cannot be read gets the sentence the page says instead."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .. import run_directory
from ..saved_runs.files import SavedRunError
from ..saved_runs.kernel import Damaged, SchemaMismatch

NOT_SAVED = "this run directory holds no saved kernel (kernels/ was not saved with it)"


@dataclasses.dataclass(frozen=True)
class SavedKernel:
  generated: Any = None           # GeneratedKernel, None where it was not read
  compiled: Any = None            # CompiledKernel, None where the kernel was not compiled
  missing: str = ""               # why there is no generated kernel, for the page


def read_saved_kernels(run, run_dir: str | None) -> Mapping[str, SavedKernel]:
  """Each kernel of `run` (a RunReport) saved in `run_dir`, by label."""
  return {k.label: read_saved_kernel(run_dir, k) for k in run.kernels}


def read_saved_kernel(run_dir: str | None, k) -> SavedKernel:
  """The run's kernel `k` (a KernelEntry), read as `show` reads it (run_directory.py: its own
  files only, decoded by type)."""
  if run_dir is None or not (k.files or {}).get("kernel"):
    return SavedKernel(missing=NOT_SAVED)
  try:
    gk, ck = run_directory.load_kernel(run_directory.kernel_dir(run_dir, k), run_dir)
  except SavedRunError as e:       # RunFileError: names the file and the fault
    return SavedKernel(missing=str(e))
  except (Damaged, SchemaMismatch) as e:
    return SavedKernel(missing=f"the saved kernel does not load: {e}")
  return SavedKernel(gk, ck)
