"""What a script may do to the process it shares with pallas-prof, undone when it ends, so
that the run's own work after it (compiles, profiles, the run's folder, the report) happens
where and how the run started:

    kept_cwd()   the working folder: a script that changes it (Hydra and many launchers do)
                 split `run --out runs/a` in two, the traces and the marker in ./runs/a and
                 report.json and kernels/ in runs/a under the script's folder.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def kept_cwd() -> Iterator[str]:
  """The working folder as it was before the block, whatever the block did to it (one
  removed meanwhile stays left: the paths the run resolved at start still hold)."""
  where = os.getcwd()
  try:
    yield where
  finally:
    with contextlib.suppress(OSError):
      os.chdir(where)
