"""The tuned column of an op with no parameters of its own (the norms, the vector add):
pallas-prof's kernel tuner, as a user turns it on with PALLAS_PROF_AUTOTUNE=1. When each of
the op's kernels is compiled for the GPU, its warps, stages and launch order are tried
(pallas_prof/tune/params.py: DEFAULT_CONFIGS), each candidate's outputs checked against
the default's on seeded inputs, timed by the replay runner (cold L2), the fastest kept
where it beats the default by the tuner's margin. Nothing in the op's code changes: what
the tuner kept is in the record per kernel, with every candidate's time.

Only on a GPU: on a CPU the interpreter runs the kernels and nothing is tuned, so the
column stays the default's there.
"""
from __future__ import annotations

import contextlib
import os
from unittest import mock

from pallas_prof.tune import params

# seconds of tuning per kernel: eight candidates, compiled in parallel, each timed over
# at least 20 launches (the tuner's floor), took 4-11 s a kernel at 1f1ae7b; a kernel with a
# loop without a dot has four more (loop_stages)
BUDGET_S = 12.0


@contextlib.contextmanager
def kernel_autotune(budget_s: float = BUDGET_S):
  """PALLAS_PROF_AUTOTUNE=1 (and its budget) while entered, as the user sets them; the
  tuner's results from before are cleared, the environment given back after."""
  params.clear_results()
  with mock.patch.dict(os.environ, {params.ENV: "1", params.BUDGET_ENV: str(budget_s)}):
    yield


def entry() -> dict:
  """What the tuner did, for the column's record: "config" {} where every kernel kept its
  default (the suite then reads the default column's figures), else each kernel's choice;
  per kernel, every candidate's median."""
  tunings = params.results()
  chosen = {t.kernel: t.best.label for t in tunings if t.best != t.default}
  return {"tuner": "kernel (PALLAS_PROF_AUTOTUNE=1)", "config": chosen,
          "kernel_tuning": [{"kernel": t.kernel, "default": t.default.label,
                             "best": t.best.label, "speedup": t.speedup,
                             "tuning_s": t.tuning_s, "from_cache": t.from_cache,
                             "candidates": [{"config": c.label, "median_s": c.median_s,
                                             "error": c.error} for c in t.candidates]}
                            for t in tunings]}
