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
  too_long = (f"{iterations:,} loop iterations twice, its loads counted as iterations (more "
              f"than {INTERPRETED_MOST:,})"
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


def kernel_trips(gk) -> int:
  """The loop iterations one program of a GeneratedKernel runs, as the lowering counted
  them (its deepest loop's trips times those of the loops around it; a dynamic count as
  one). A grid of 2,048 programs of a 64-iteration loop is 131,072 iterations, not 2,048."""
  eqns = {e.index: e for e in gk.eqns} if gk is not None else {}

  def nested(e) -> int:
    own = e.trips if isinstance(e.trips, int) and e.trips > 0 else 1
    return own * (nested(eqns[e.parent]) if e.parent in eqns else 1)
  return max((nested(e) for e in eqns.values() if e.trips is not None), default=1)


# bytes a program loads that cost the interpreter about one loop iteration's overhead: its
# loads gather with numpy, so an iteration loading a dot's 128x32 and 32x64 float32 tiles
# costs many times one loading a few rows (a 16,384-iteration matmul check ran minutes)
INTERPRETED_STEP_BYTES = 4096


def interpreted_steps(gk) -> int:
  """What one program of `gk` costs the interpreter, in loop iterations: its loops' trips
  (kernel_trips) plus its loads' (loaded_steps)."""
  return kernel_trips(gk) + loaded_steps(gk)


def loaded_steps(gk) -> int:
  """The bytes one program of `gk` loads, in all its loops' iterations, over
  INTERPRETED_STEP_BYTES: a dot's tiles make each iteration of its loop far dearer to the
  interpreter than a column sum's rows."""
  eqns = {e.index: e for e in gk.eqns} if gk is not None else {}

  def times(e) -> int:
    p = eqns.get(e.parent)
    if p is None:
      return 1
    # an unrolled loop's iterations have records of their own: its trips multiply nothing
    own = p.trips if isinstance(p.trips, int) and p.trips > 0 and not p.unrolled else 1
    return own * times(p)
  parents = {e.parent for e in eqns.values()}      # a loop's record sums its body's: left out
  return sum(e.bytes_read * times(e) for e in eqns.values()
             if e.index not in parents) // INTERPRETED_STEP_BYTES


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


# --- a kernel that reads its program id ----------------------------------------------------
# Whether a block-shape variant keeps what its kernel computes from the program id.
#
# A kernel that reads its program id may compute element offsets from it (the first query
# row of its block, `pl.program_id(0) * block_q`): with blocks half as long along that grid
# axis and twice the programs, the offsets stay right only where the kernel multiplies the
# id by the block's own size, which it then reads from its ref's shape (traced again, the
# product follows the new block). A block size of the kernel's own (a functools.partial
# keyword, as JAX's attention's block_q) does not follow unless rebound, and neither does
# anything else made from the id. So, traced at the variant's blocks, every read of the id
# along the axis the variant rescales must go into a multiply by a literal equal to the new
# block size (straight, or after adding or subtracting a constant: `(id + 1) * block`, its
# block's end), and the kernel must not read that axis's program count; then the variant
# is a kind c (its outputs are compared with the original's before it is timed, as every
# one's are). A kernel that reads no id (JAX's non-causal attention: its start_q is traced
# away unused) may still size its values by such a keyword: its variant is tried with the
# keyword rebound where the blocks alone do not trace (blockshape._traced).

def _jaxprs(jaxpr):
  from ..backend import compat   # lazy: loads jax, kept out of this module's import
  yield jaxpr
  for e in jaxpr.eqns:
    for sub in compat.sub_jaxprs(e):
      yield from _jaxprs(sub)


def _literal(v):
  return getattr(v, "val", None)


def why_not_in_block_units(kernel_jaxpr, axis: int, block: int) -> str | None:
  """None where every program_id(axis) of the kernel is multiplied by `block` at once (and
  num_programs(axis) is not read); else what the kernel does with it, in words. The id is
  followed into the loops and calls it is passed to as a constant (attention's start_q,
  read inside its loop over K and V)."""
  for jaxpr in _jaxprs(kernel_jaxpr):
    for e in jaxpr.eqns:
      name = e.primitive.name
      if name not in ("program_id", "num_programs") or e.params.get("axis") != axis:
        continue
      if name == "num_programs":
        return f"the kernel reads the program count along grid axis {axis}"
      # the id, the id plus or minus a constant, and where they enter a loop or a call
      frontier = [(jaxpr, e.outvars[0])]
      while frontier:
        where, pid = frontier.pop()
        if any(v is pid for v in where.outvars):
          return f"the kernel passes its program id along grid axis {axis} on"
        for use in (u for u in where.eqns if any(v is pid for v in u.invars)):
          why = _use_in_block_units(where, use, pid, block, frontier)
          if why:
            return (f"the kernel computes {why} from its program id along grid axis {axis}, "
                    f"not only the id (plus a constant) times its block size ({block})")
  return None


def _use_in_block_units(where, use, pid, block: int, frontier: list) -> str | None:
  """None where `use` of the id keeps it in block units (its results, or the sub-jaxpr's
  variables it becomes, added to `frontier`); else the use, in words."""
  other = [v for v in use.invars if v is not pid]
  op = use.primitive.name
  if op == "mul" and len(other) == 1 and _literal(other[0]) == block:
    return None                           # an offset in the new blocks' units
  if op in ("add", "sub") and len(other) == 1 and use.invars[0] is pid and _int_literal(other[0]):
    frontier.append((where, use.outvars[0]))    # a later block's start: (id + 1) * block
    return None
  inner = _as_constant_of(use, pid)
  if inner is None:
    return f"`{op}`"
  frontier.extend(inner)
  return None


def _as_constant_of(use, pid) -> list | None:
  """[(sub-jaxpr, its variable)] where `use` (a loop or a call) takes the id as a constant
  of its body (or as a call's argument); None where it takes it otherwise (a loop's carry)."""
  from ..backend import compat   # lazy: loads jax, kept out of this module's import
  at = [i for i, v in enumerate(use.invars) if v is pid]
  op, p = use.primitive.name, use.params
  if op == "while":
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    if any(i >= cn + bn for i in at):
      return None
    cond, body = (compat.open_jaxpr(p[k])[0] for k in ("cond_jaxpr", "body_jaxpr"))
    return [(cond, cond.invars[i]) if i < cn else (body, body.invars[i - cn]) for i in at]
  if op == "scan":
    if any(i >= p["num_consts"] for i in at):
      return None
    body = compat.open_jaxpr(p["jaxpr"])[0]
    return [(body, body.invars[i]) for i in at]
  subs = compat.sub_jaxprs(use)
  if op in ("pjit", "jit", "closed_call", "core_call") and len(subs) == 1 and \
      len(subs[0].invars) == len(use.invars):
    return [(subs[0], subs[0].invars[i]) for i in at]
  return None


def _int_literal(v) -> bool:
  val = _literal(v)
  return val is not None and getattr(val, "shape", ()) == () and \
      isinstance(getattr(val, "item", lambda: val)(), int)


def variant_kernel(call, structs):
  """The kernel jaxpr of a variant's call (traced abstractly: nothing runs)."""
  # lazy: jax, and split.variant, which loads it, are kept out of this module's import
  import jax
  from ..backend import compat
  from .split.variant import _find_call
  eqn = _find_call(jax.make_jaxpr(call)(*structs).jaxpr)
  return None if eqn is None else compat.open_jaxpr(eqn.params["jaxpr"])[0]
