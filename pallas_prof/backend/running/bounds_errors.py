"""BoundsError: what the bounds-checked mode's flag buffer says after the kernel.

The lowering emits the checks and the flag buffer (lowering/features/bounds.py); the
launcher reads the buffer back after the kernel, and raise_if_violated raises BoundsError
naming the kernel, the equation, the user's file:line, the ref with its shape and the
offending index range. `pallas-prof show --eject` words its findings with describe_site.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..check_sites import OFFSET, OUTSIDE_HINT, block_outside_words
from ..equation_text import with_ref_names
from ..lowering.features.bounds import check_bounds_source
from .runtime_errors import KernelRuntimeError, remember


class BoundsError(KernelRuntimeError, IndexError):
  """A kernel read or wrote outside a ref: found by the bounds-checked mode (the ref, its
  shape and the index range named), or on the CPU by Triton's interpreter (an access
  outside every buffer the kernel was given). `except pallas_prof.BoundsError` catches
  it on both platforms (runtime_errors.py: how it crosses the host callback)."""
  __module__ = "pallas_prof"


def violations(flag: np.ndarray, sites, kernel_name: str, eqns=(), ref_names=()) -> list[str]:
  """One message per site whose lanes went outside their ref (`ref_names`: the
  kernel's names for the jaxpr's refs, GeneratedKernel.ref_names)."""
  flag = np.asarray(flag).reshape(-1)
  found = []
  for site in sites:
    count = int(flag[site.base])
    if count <= 0:
      continue
    if site.kind == "block":
      found.append(block_violation(flag, site, eqns, ref_names))
      continue
    head, tail = describe_site(site, kernel_name, eqns, ref_names)
    found.append(f"{head} at index [{', '.join(index_ranges(flag, site))}]: {count} lane(s) "
                 f"outside the ref, dropped{tail}")
  return found


def _ranges(flag, site, first: int, count: int) -> list[tuple[int, int]]:
  """(lowest, highest) of `count` recorded values from slot pair `first` on."""
  return [(OFFSET - int(flag[site.base + 1 + 2 * d]), int(flag[site.base + 2 + 2 * d]) - OFFSET)
          for d in range(first, first + count)]


def _span(lo: int, hi: int) -> str:
  return str(lo) if lo == hi else f"{lo} to {hi}"


def _spans(values) -> str:
  """One value as itself; several dimensions' as a tuple."""
  texts = [v if isinstance(v, str) else _span(*v) for v in values]
  return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"


def block_violation(flag, site, eqns=(), ref_names=(), short: bool = False) -> str:
  """What a block site found: the BlockSpec (its line), the block index it picked outside
  the array, for which programs, and the access that then read or wrote nothing of it."""
  blocks = _ranges(flag, site, 0, len(site.checked_axes))
  programs = _ranges(flag, site, len(site.checked_axes), len(site.grid))
  per_axis = list(site.static_ranges) or [None] * len(site.array_shape)
  outside = None
  for axis, (lo, hi) in zip(site.checked_axes, blocks, strict=True):
    per_axis[axis] = (lo, hi)
    size, bs = site.array_shape[axis], site.block_shape[axis]
    count = size if site.squeezed and site.squeezed[axis] else -(-size // bs)
    if outside is None and (lo < 0 or hi >= count):
      outside = (axis, lo if lo < 0 else hi)
  axis, block = outside if outside is not None else (site.checked_axes[0], blocks[0][1])
  squeezed = bool(site.squeezed and site.squeezed[axis])
  where = f" at {site.where[0]}:{site.where[1]}" if site.where and not short else ""
  several = any(lo != hi for lo, hi in programs)
  head = (f"the BlockSpec of {site.ref} ({site.operand}){where} picks block "
          f"{_spans(v if v is not None else '?' for v in per_axis)} for "
          f"program{'s' if several else ''} {_spans(programs)} of grid {tuple(site.grid)}: "
          + block_outside_words(axis, block, site.block_shape[axis], site.array_shape[axis],
                                squeezed))
  eqn = eqns[site.eqn_index] if 0 <= site.eqn_index < len(eqns) else None
  verb = {"read": "reads", "write": "writes", "atomic": "updates"}[site.access]
  by = f"`{eqn.primitive}` at line {eqn.line}" if eqn is not None else "the access"
  text = f"{head}; {by} {verb} nothing of it (dropped)"
  if short:
    return text
  eqn_text = with_ref_names(_equation_text(eqn), ref_names)
  return "out of bounds: " + text + (f"\n  equation: {eqn_text}" if eqn_text else "")


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


def describe_site(site, kernel_name: str, eqns=(), ref_names=()) -> tuple[str, str]:
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
  if site.kind == "block":
    # (an ejected kernel's words: the index range that follows is the block index's)
    spec = f" at {site.where[0]}:{site.where[1]}" if site.where else ""
    head = (f"{head}: the BlockSpec of {site.ref} ({site.operand}){spec} picks a block "
            f"outside the array, block index")
  eqn_text = with_ref_names(_equation_text(eqn), ref_names)
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


def raise_if_violated(flag, sites, kernel_name: str, eqns=(), jaxpr_text=None,
                      ref_names=()) -> None:
  found = violations(flag, sites, kernel_name, eqns, ref_names)
  if not found:
    return
  flag = np.asarray(flag).reshape(-1)
  bad = [s for s in sites if int(flag[s.base]) > 0]
  eqn = eqns[bad[0].eqn_index] if 0 <= bad[0].eqn_index < len(eqns) else None
  source = check_bounds_source()
  hint = (f"the access was dropped (the bounds check, on through {source}); without the check "
          "it reads or writes past the ref (on a GPU: CUDA_ERROR_ILLEGAL_ADDRESS, which ends the "
          "process's CUDA context)")
  if bad[0].kind == "block":
    # the mistake is the index map's: the error is at the BlockSpec's line
    eqn = _blockspec_record(bad[0], eqn)
    hint = f"{OUTSIDE_HINT}. The access was dropped (the bounds check, on through {source})"
  raise remember(BoundsError(
      "\n".join(_short(s, flag, eqns, several=len(bad) > 1) for s in bad), kernel=kernel_name,
      eqn=eqn, jaxpr_text=jaxpr_text, hint=hint, ref_names=ref_names,
      where=f"the bounds check after the kernel ({source})",
      message="\n".join(found) + f"\n  hint: {hint}"))


def _blockspec_record(site, access_eqn):
  """An equation record at the BlockSpec's line, for the error's location (the access's
  own equation where the index map is not the user's code)."""
  if not site.where or access_eqn is None:
    return access_eqn
  file, line, function = site.where
  return dataclasses.replace(access_eqn, file=file, line=line, function=function)


def _short(site, flag, eqns, several: bool) -> str:
  """A violation as the run-time report words it (its kernel, line and equation are
  said beside it): what the access did; with several sites, which access."""
  if site.kind == "block":
    return block_violation(flag, site, eqns, short=not several)
  what = access_words(site)
  eqn = eqns[site.eqn_index] if 0 <= site.eqn_index < len(eqns) else None
  if several and eqn is not None:
    what = f"[{eqn.index}] `{eqn.primitive}` at line {eqn.line}: {what}"
  return (f"{what} at index [{', '.join(index_ranges(flag, site))}]: {int(flag[site.base])} "
          "lane(s) outside the ref, dropped")
