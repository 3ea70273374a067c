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

(all `atomic_max`/`atomic_add` from zero, so a zeroed buffer is the initial
state on both platforms). After the kernel the launcher reads the buffer
back and raises BoundsError naming the kernel, the equation, the user's
file:line, the ref with its shape, and the offending index range.

Why a flag buffer rather than tl.device_assert: on a GPU a failed device
assert traps, and the trap poisons the CUDA context: jaxlib's custom call
then fails, and so does every later computation of the process (as an
illegal address does). A flag written with atomics lets the kernel finish
normally; the check happens on the host, in a callback after the kernel,
whose exception reaches the Python caller while the context stays usable.
"""
from __future__ import annotations

import os

import numpy as np

from .check_sites import CheckSite   # the sites are part of the kernel's record
from .runtime_errors import KernelRuntimeError, remember

OFFSET = 1 << 30           # indices are recorded as OFFSET -/+ index, clamped to (-OFFSET, OFFSET)
FLAG_PARAM = "pp_bounds"   # the flag buffer's parameter in the generated kernel
_mode = {"bounds": None}   # None: follow PALLAS_PROF_CHECK


def set_check_bounds(on: bool | None) -> None:
  """install(check_bounds=...): True/False, or None to follow the environment.

  A change of mode clears JAX's caches: a function jitted before would
  otherwise keep the kernel lowered the other way."""
  before = check_bounds_enabled()
  _mode["bounds"] = on
  if check_bounds_enabled() != before:
    import jax
    jax.clear_caches()


def check_bounds_enabled() -> bool:
  if _mode["bounds"] is not None:
    return bool(_mode["bounds"])
  words = os.environ.get("PALLAS_PROF_CHECK", "").lower().replace(",", " ").split()
  unknown = [w for w in words if w not in _KNOWN_CHECK_WORDS]
  if unknown and tuple(unknown) not in _warned:
    # PALLAS_PROF_CHECK=1 or =bound ran unchecked without a word: the user debugging an
    # illegal address would think the kernel passed the check
    _warned.add(tuple(unknown))
    import warnings
    warnings.warn(f"PALLAS_PROF_CHECK={os.environ['PALLAS_PROF_CHECK']!r}: pallas-prof knows "
                  f"no check {', '.join(map(repr, unknown))}; the one it has is 'bounds' "
                  "(PALLAS_PROF_CHECK=bounds, or install(check_bounds=True))", stacklevel=2)
  return "bounds" in words


_KNOWN_CHECK_WORDS = {"bounds", "0", "off", "none", "false", "no"}
_warned: set = set()


class BoundsError(KernelRuntimeError, IndexError):
  """A kernel read or wrote outside a ref: found by the bounds-checked mode (the ref, its
  shape and the index range named), or on the CPU by Triton's interpreter (an access
  outside every buffer the kernel was given). `except pallas_prof.BoundsError` catches
  it on both platforms (runtime_errors.py: how it crosses the host callback)."""
  __module__ = "pallas_prof"


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


def emit_check(ctx, site: CheckSite, locals_: list[str], active: str | None, shape) -> str:
  """Emits the check of one access; returns the name of its in-bounds mask
  (a tensor of the access's padded shape, or a scalar).

  `locals_`: per checked dimension of the ref (site.checked_axes), the index
  relative to the ref (an expression broadcast to the access's rank); `active`: the lanes the access
  really performs (padding and the user's mask applied), None for all."""
  b = ctx.b
  conds = []
  for expr, axis in zip(locals_, site.checked_axes):
    extent = site.block_shape[axis]
    conds.append(f"(({expr}) >= 0) & (({expr}) < {extent})")
  ok = b.assign("in_bounds", " & ".join(conds) if conds else "True")
  bad_expr = f"~{ok}" if active is None else f"({active}) & ~{ok}"
  bad = b.assign("out_of_bounds", bad_expr)
  param = ctx.kernel.bounds.param
  flag = f"{param} + {site.base}"
  if shape:
    # a dimension no index depends on still counts its lanes
    from .codegen import next_pow2
    padded = ", ".join(str(next_pow2(n)) for n in shape)
    bad = b.assign("out_of_bounds", f"tl.broadcast_to({bad}, ({padded},))")
    count = b.assign("n_outside", f"tl.sum({bad}.to(tl.int32))")
  else:
    count = b.assign("n_outside", f"{bad}.to(tl.int32)")
  b.emit(f"tl.atomic_add({flag}, {count}, mask={count} > 0)")
  for d, expr in enumerate(locals_):
    clamped = b.assign("idx", f"tl.minimum(tl.maximum(({expr}).to(tl.int64), {1 - OFFSET}), "
                              f"{OFFSET - 1}).to(tl.int32)")
    for k, value in ((1, f"{OFFSET} - {clamped}"), (2, f"{clamped} + {OFFSET}")):
      chosen = f"tl.where({bad}, {value}, 0)"
      reduced = f"tl.max({chosen})" if shape else chosen
      b.emit(f"tl.atomic_max({param} + {site.base + 1 + 2 * d + (k - 1)}, "
             f"{reduced}, mask={count} > 0)")
  return ok


def violations(flag: np.ndarray, sites, kernel_name: str, eqns=()) -> list[str]:
  """One message per site whose lanes went outside their ref."""
  flag = np.asarray(flag).reshape(-1)
  found = []
  for site in sites:
    count = int(flag[site.base])
    if count <= 0:
      continue
    head, tail = describe_site(site, kernel_name, eqns)
    found.append(f"{head} at index [{', '.join(index_ranges(flag, site))}]: {count} lane(s) "
                 f"outside the ref, dropped{tail}")
  return found


def index_ranges(flag, site) -> list[str]:
  """The index range the site's lanes touched, per axis of its ref, from the flag."""
  ranges = list(site.static_ranges) or [None] * len(site.block_shape)
  for d, axis in enumerate(site.checked_axes):
    lo = OFFSET - int(flag[site.base + 1 + 2 * d])
    hi = int(flag[site.base + 2 + 2 * d]) - OFFSET
    # indices were clamped into (-OFFSET, OFFSET) to fit the flag
    lo_text = f"<={lo}" if lo <= 1 - OFFSET else str(lo)
    hi_text = f">{hi}" if hi >= OFFSET - 1 else str(hi + 1)
    ranges[axis] = lo_text if lo == hi else f"{lo_text}:{hi_text}"
  return [str(r) for r in ranges]


def describe_site(site, kernel_name: str, eqns=()) -> tuple[str, str]:
  """What a violation message says about its site: the text before the index
  range (the access, the kernel, the user's line, the ref) and after it (the
  equation)."""
  eqn = eqns[site.eqn_index] if 0 <= site.eqn_index < len(eqns) else None
  where = ""
  if eqn is not None and eqn.file:
    fn = f" (in {eqn.function})" if eqn.function else ""
    where = f" at {eqn.file}:{eqn.line}{fn}"
  primitive = eqn.primitive if eqn is not None else "access"
  head = f"out of bounds: `{primitive}` in kernel `{kernel_name}`{where} {access_words(site)}"
  eqn_text = _equation_text(eqn)
  return head, (f"\n  equation: {eqn_text}" if eqn_text else "")


def access_words(site) -> str:
  """"reads x_ref (shape (32,), float32)": what the site's access does, to which ref."""
  block = tuple(site.block_shape)
  array = ",".join(map(str, site.array_shape))
  seen = (f"shape {block}, {site.dtype}" if block == tuple(site.array_shape) else
          f"a block of shape {block} of {site.dtype}[{array}]")
  verb = {"read": "reads", "write": "writes", "atomic": "updates"}[site.access]
  return f"{verb} {site.ref} ({seen})"


def _equation_text(eqn) -> str | None:
  if eqn is None:
    return None
  for attr in ("text",):
    try:
      value = getattr(eqn, attr)
    except Exception:  # noqa: BLE001 - a lazily described equation
      value = None
    if value:
      return str(value)
  return None


def raise_if_violated(flag, sites, kernel_name: str, eqns=(), jaxpr_text=None) -> None:
  found = violations(flag, sites, kernel_name, eqns)
  if not found:
    return
  flag = np.asarray(flag).reshape(-1)
  bad = [s for s in sites if int(flag[s.base]) > 0]
  eqn = eqns[bad[0].eqn_index] if 0 <= bad[0].eqn_index < len(eqns) else None
  hint = ("the access was dropped (check mode); without PALLAS_PROF_CHECK=bounds it reads "
          "or writes past the ref (on a GPU: CUDA_ERROR_ILLEGAL_ADDRESS, which ends the "
          "process's CUDA context)")
  raise remember(BoundsError(
      "\n".join(_short(s, flag, eqns, several=len(bad) > 1) for s in bad), kernel=kernel_name,
      eqn=eqn, jaxpr_text=jaxpr_text, hint=hint,
      where="the bounds check after the kernel (PALLAS_PROF_CHECK=bounds)",
      message="\n".join(found) + f"\n  hint: {hint}"))


def _short(site, flag, eqns, several: bool) -> str:
  """A violation as the run-time report words it (its kernel, line and equation are
  said beside it): what the access did; with several sites, which access."""
  what = access_words(site)
  eqn = eqns[site.eqn_index] if 0 <= site.eqn_index < len(eqns) else None
  if several and eqn is not None:
    what = f"[{eqn.index}] `{eqn.primitive}` at line {eqn.line}: {what}"
  return (f"{what} at index [{', '.join(index_ranges(flag, site))}]: {int(flag[site.base])} "
          "lane(s) outside the ref, dropped")
