"""A variant of a recorded pallas_call, traced and lowered to its GeneratedKernel (for the
compile and the replay of trials.py's kind c, and of split/trial.py's kind e), a compiled
variant's resources in words, and whether a CPU may run one under the interpreter."""
from __future__ import annotations

import dataclasses
import math

from ..backend import kernel_registry
from .schema import Trial

# What a CPU check of a variant (a split, a loop step) runs under Triton's interpreter,
# twice (the original and the variant), to stay a few seconds: loop iterations of all
# programs, and the arguments' elements (the interpreter's loads slow with the size of the
# array they index: a full-size bf16 column sum, 32768 x 2048, took it minutes for a few
# thousand iterations)
INTERPRETED_MOST = 20_000
INTERPRETED_MOST_ELEMENTS = 1 << 22


def not_interpreted(iterations: int, recipe) -> str | None:
  """Why a variant of `recipe` whose loops run `iterations` in all is not run under the
  interpreter on a CPU (its status), or None where it is small enough."""
  elements = sum(math.prod(shape) for shape, _ in recipe.arg_shapes)
  too_long = (f"{iterations:,} loop iterations twice (more than {INTERPRETED_MOST:,})"
              if iterations > INTERPRETED_MOST else
              f"loops over arguments of {elements:,} elements twice (more than "
              f"{INTERPRETED_MOST_ELEMENTS:,})" if elements > INTERPRETED_MOST_ELEMENTS else None)
  return None if too_long is None else (
      f"not measured: no GPU; built and lowered, not run: the interpreter would run "
      f"{too_long}; `pallas-prof advise` on a GPU checks and times it")


def trace_variant(fn, recipe, platform: str | None = None):
  """The GeneratedKernel of `fn` (a variant of the recipe's call, on its arguments' shapes),
  traced and lowered for the default backend, or for `platform` ("cpu": the lowering to
  Triton alone, which compiles nothing); its registry record discarded."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  structs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in recipe.arg_shapes]
  for attempt in range(2):
    before = {id(r): r.lowerings for r in kernel_registry.kernels()}
    if platform is None:
      jax.jit(fn).lower(*structs)
    else:
      jax.jit(fn).trace(*structs).lower(lowering_platforms=(platform,))
    new = [r for r in kernel_registry.kernels() if id(r) not in before]
    again = [r for r in kernel_registry.kernels() if before.get(id(r), r.lowerings) != r.lowerings]
    for r in new:
      kernel_registry.discard(r)       # a variant, not a kernel the program ran
    if len(new) + len(again) == 1:
      return (new or again)[0].generated
    if attempt == 0 and not new and not again:
      jax.clear_caches()        # JAX had lowered this very call before (the script did)
  raise ValueError(f"tracing the variant lowered {len(new) + len(again)} kernels, not one")


def resources(ck) -> str:
  spills = ck.spills
  return (f"{ck.registers} registers, " + ("no spills" if not spills else f"{spills} spills")
          + f", {ck.shared_bytes} B shared")


CPU_EQUAL = "not measured: no GPU; outputs equal under the interpreter"
# how a structural edit's diff is applied: `pallas-prof run` and `advise` save each one under
# the run folder's diffs/ (cli/run_directory.save_diffs)
PATCH = "`patch -p1 < FILE`; the run folder's diffs/ holds it"


def checked_on_cpu(a, recipe, variant, iterations: int, equal: str = CPU_EQUAL):
  """On a CPU, where the call is small enough for the interpreter: the action's variant
  (`variant()` makes its call) run beside the original on seeded inputs, outputs compared
  (a variant that computes something else says so, so that no one applies it untried);
  `equal`: the status where they are."""
  refused = not_interpreted(iterations, recipe)
  if refused:
    return dataclasses.replace(a, status=refused)
  from .split.variant import compare   # lazy: loads jax, as the variant's trace does
  try:
    differs = compare(recipe, variant())
  except Exception as e:  # noqa: BLE001 - a variant that fails to run is said so
    return dataclasses.replace(a, trial=Trial(None, None, None, None, None,
                                              f"failed to run: {type(e).__name__}: {str(e)[:200]}"))
  if differs:
    return dataclasses.replace(a, trial=Trial(None, None, None, None, False,
                                              f"outputs differ: {differs}"))
  return dataclasses.replace(a, status=equal)
