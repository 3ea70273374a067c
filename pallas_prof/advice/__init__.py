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


def __getattr__(name: str):
  # loaded on first use (PEP 562): the engine and api.py import the profiler and the rules,
  # which reading a saved advice (schema.py) does not need; given as they are, so help()
  # shows their parameters
  if name == "diagnose":
    # lazy: breaks the circle: advice.engine imports this module
    from .engine import diagnose
    return diagnose
  if name == "advise":
    # lazy: breaks the circle: advice.api imports this module
    from .api import advise
    return advise
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
