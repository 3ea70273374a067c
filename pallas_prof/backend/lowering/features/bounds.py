"""The bounds-checked debug mode: every load and store also checks its indices.

`pallas_prof.install(check_bounds=True)` or `PALLAS_PROF_CHECK=bounds`. Off by
default, and then nothing here runs: the generated code is what it always is.

In check mode each ref access (load, store, atomic) of the generated kernel
computes, per dimension, its index relative to the ref the kernel sees (its
block, or the whole array) and compares it with the ref's extent. Lanes that
fall outside are dropped from the access (so nothing past a buffer is read or
written: no illegal address on a GPU, no stray host memory on the CPU) and
recorded in a flag buffer, an extra int32 output of the kernel:

    per check site: [lanes outside, then per dimension checked at run time:
                     max(OFFSET - index) and max(index + OFFSET) over those lanes]
    per block site:  [accesses of a block outside the array, then the same two per
                      dimension checked for the block index, then per grid dimension for
                      the program id]

A block site is the BlockSpec's: at each access, the block the index map picked is
checked against the array (a block that starts past its end or before its start; a
partial last block is inside), so the error names the BlockSpec's line, the program and
the block index, not the line of the kernel that happens to read the block.

(all `atomic_max`/`atomic_add` from zero, so a zeroed buffer is the initial
state on both platforms). After the kernel the launcher reads the buffer
back and raises BoundsError naming the kernel, the equation, the user's
file:line, the ref with its shape, and the offending index range
(running/bounds_errors.py: this module emits, that one reads).

Why a flag buffer rather than tl.device_assert: on a GPU a failed device
assert traps, and the trap poisons the CUDA context: jaxlib's custom call
then fails, and so does every later computation of the process (as an
illegal address does). A flag written with atomics lets the kernel finish
normally; the check happens on the host, in a callback after the kernel,
whose exception reaches the Python caller while the context stays usable.
"""
from __future__ import annotations

from .... import settings
# the sites are part of the kernel's record, and the flag's encoding with them
from ...check_sites import OFFSET, CheckSite
from .. import triton_names as tl

FLAG_PARAM = "pp_bounds"   # the flag buffer's parameter in the generated kernel
_mode = {"bounds": None}   # None: follow PALLAS_PROF_CHECK


def set_check_bounds(on: bool | None) -> None:
  """install(check_bounds=...): True/False, or None to follow the environment.

  A change of mode clears JAX's caches: a function jitted before would
  otherwise keep the kernel lowered the other way."""
  before = check_bounds_enabled()
  _mode["bounds"] = on
  if check_bounds_enabled() != before:
    # lazy: keeps jax out of this module's import (start-up time)
    import jax
    jax.clear_caches()


def check_bounds_enabled() -> bool:
  """install(check_bounds=...) when given, else PALLAS_PROF_CHECK. A value it does not know
  (PALLAS_PROF_CHECK=1 or =bound) is said once, at the user's line (pallas_prof/settings.py):
  it ran unchecked without a word, and the user debugging an illegal address would think the
  kernel passed the check."""
  if _mode["bounds"] is not None:
    return bool(_mode["bounds"])
  return "bounds" in settings.value("PALLAS_PROF_CHECK")


def check_bounds_source() -> str:
  """How the user turned the check on, in the words they used: a hint that names
  PALLAS_PROF_CHECK to someone who called install(check_bounds=True) sends them looking
  for a variable they never set."""
  if _mode["bounds"]:
    return "pallas_prof.install(check_bounds=True)"
  return "PALLAS_PROF_CHECK=bounds"


class SiteTable:
  """The check sites of one kernel being lowered, in emission order."""

  def __init__(self, param: str = FLAG_PARAM):
    self.param = param           # the flag buffer's name in the generated source
    self.sites: list[CheckSite] = []
    self.size = 0

  def add(self, **fields) -> CheckSite:
    site = CheckSite(base=self.size, **fields)
    self.sites.append(site)
    self.size += site.slots
    return site


def flag_length(sites) -> int:
  return max(1, sum(s.slots for s in sites))


def emit_check(ctx, param: str, site: CheckSite, locals_: list[str], active: str | None,
               shape) -> str:
  """Emits the check of one access into the flag buffer `param`; returns the name of
  its in-bounds mask (a tensor of the access's padded shape, or a scalar).

  `locals_`: per checked dimension of the ref (site.checked_axes), the index
  relative to the ref (an expression broadcast to the access's rank); `active`: the lanes the access
  really performs (padding and the user's mask applied), None for all."""
  b = ctx.b
  conds = []
  for expr, axis in zip(locals_, site.checked_axes, strict=True):
    extent = site.block_shape[axis]
    conds.append(f"(({expr}) >= 0) & (({expr}) < {extent})")
  ok = b.assign("in_bounds", " & ".join(conds) if conds else "True")
  bad_expr = f"~{ok}" if active is None else f"({active}) & ~{ok}"
  bad = b.assign("out_of_bounds", bad_expr)
  flag = f"{param} + {site.base}"
  if shape:
    # a dimension no index depends on still counts its lanes
    from ..codegen import next_pow2
    padded = ", ".join(str(next_pow2(n)) for n in shape)
    bad = b.assign("out_of_bounds", f"{tl.broadcast_to}({bad}, ({padded},))")
    count = b.assign("n_outside", f"{tl.sum}({bad}.to({tl.int32}))")
  else:
    count = b.assign("n_outside", f"{bad}.to({tl.int32})")
  b.emit(f"{tl.atomic_add}({flag}, {count}, mask={count} > 0)")
  for d, expr in enumerate(locals_):
    clamped = b.assign("idx", f"{tl.minimum}({tl.maximum}(({expr}).to({tl.int64}), {1 - OFFSET}), "
                              f"{OFFSET - 1}).to({tl.int32})")
    for k, value in ((1, f"{OFFSET} - {clamped}"), (2, f"{clamped} + {OFFSET}")):
      chosen = f"{tl.where}({bad}, {value}, 0)"
      reduced = f"{tl.max}({chosen})" if shape else chosen
      b.emit(f"{tl.atomic_max}({param} + {site.base + 1 + 2 * d + (k - 1)}, "
             f"{reduced}, mask={count} > 0)")
  return ok


def emit_block_check(ctx, param: str, site: CheckSite, block, active: str | None, shape) -> str:
  """Emits the check of the block an access reads or writes (access.refs.BlockIndices)
  into the flag buffer `param`; returns the name of a scalar, true where the block lies
  inside its array. Only an access that really touches a lane counts (`active`: its lanes,
  None for all): a block outside that a masked or guarded access never touches is no error."""
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ..codegen import next_pow2
  b = ctx.b
  conds = [f"(({i}) >= 0) & (({i}) < {n})" for i, n in zip(block.indices, block.counts,
                                                          strict=True)]
  ok = b.assign("block_inside", " & ".join(conds))
  bad = f"~{ok}"
  padded = ", ".join(str(next_pow2(n)) for n in shape)
  if active is not None:
    lanes = f"{tl.broadcast_to}({active}, ({padded},))" if shape else f"({active})"
    touched = f"{tl.max}({lanes}.to({tl.int32}))" if shape else f"{lanes}.to({tl.int32})"
    bad = f"{bad} & ({touched} > 0)"
  bad = b.assign("block_outside", bad)
  b.emit(f"{tl.atomic_add}({param} + {site.base}, {bad}.to({tl.int32}), mask={bad})")
  for d, expr in enumerate((*block.indices, *block.program_ids)):
    clamped = b.assign("idx", f"{tl.minimum}({tl.maximum}(({expr}).to({tl.int64}), {1 - OFFSET}), "
                              f"{OFFSET - 1}).to({tl.int32})")
    for k, value in ((1, f"{OFFSET} - {clamped}"), (2, f"{clamped} + {OFFSET}")):
      b.emit(f"{tl.atomic_max}({param} + {site.base + 1 + 2 * d + (k - 1)}, {value}, mask={bad})")
  # a block access's mask as a tensor of its shape, made by a comparison: Triton 3.9's
  # interpreter hands a scalar condition to its load as int32, which it refuses as a mask
  return b.assign("block_inside",
                  f"({tl.zeros}(({padded},), {tl.int32}) + {ok}.to({tl.int32})) != 0") \
      if shape else ok
