"""Advice: what to change in a kernel, and what it saves, measured where pallas-prof can try it.

In: a kernel's profile (profiler.schema.KernelProfile) and the lowering's facts (GeneratedKernel).
Out: KernelAdvice (schema.py): diagnoses in words with their evidence, and ranked actions.

    facts.py       KernelFacts: what the rules read (work per program, occupancy, loops, stalls)
    rules/         the diagnosis rules, one small function each, in a table (rules/table.py)
    blockshape.py  block-shape actions made concrete: a re-traced variant (kind c) or an edit (d)
    engine.py      diagnose(): facts -> rules -> actions ranked (rank.py)
    trials.py      the GPU's what-ifs: each action of kinds a-c compiled, replayed, compared
    api.py         advise() and the hooks `pallas-prof run` / `advise` call
"""
from .schema import Action, Diagnosis, Evidence, KernelAdvice, Trial

__all__ = ["Action", "Diagnosis", "Evidence", "KernelAdvice", "Trial", "advise", "diagnose"]


def diagnose(*args, **kwargs):
  """The advice for one kernel from its profile (engine.diagnose)."""
  from .engine import diagnose as _diagnose
  return _diagnose(*args, **kwargs)


def advise(*args, **kwargs):
  """Profiles this process's kernels, diagnoses them and, on a GPU, measures the actions
  pallas-prof can apply (api.advise)."""
  from .api import advise as _advise
  return _advise(*args, **kwargs)
