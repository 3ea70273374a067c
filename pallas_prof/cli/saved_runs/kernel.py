"""A run's saved kernel, decoded by type: kernel.json back as a GeneratedKernel,
compiled.json (or an older run's "compiled" in kernel.json) back as a CompiledKernel.

GeneratedKernel.save and CompiledKernel.save (backend/artifacts.py) write them; this
is how a run directory reads them back (run_directory.load_kernel reads the files).
Every value goes through serial.load, led by the dataclasses' type hints, and what
the views index by is checked against what it indexes (a line's equation is one of
the kernel's, an equation's index its place), so that a damaged or edited file is
refused with Damaged, naming the field, instead of failing inside `show` or the page.
"""
from __future__ import annotations

from ...backend.artifacts import (CompiledKernel, GeneratedKernel, SchemaMismatch,  # noqa: F401
                                 saved_stages)
from ...serial import Misfit, decode


class Damaged(ValueError):
  """A saved kernel's file whose values are not what its writer writes; the message
  names the field (`where`) and what is wrong with it."""


def generated(meta, source: str, where: str) -> GeneratedKernel:
  """kernel.json's values (`meta`) and source.py's text as a GeneratedKernel; Damaged
  or SchemaMismatch for a file its writer did not write. `where` names the file."""
  try:
    gk = GeneratedKernel.from_saved(meta, source, where)
  except Misfit as e:
    raise Damaged(e.describe()) from None
  _check_indices(gk.eqns, gk.line_map, where)
  return gk


def _check_indices(eqns, line_map: dict, where: str) -> None:
  """What `show` and the page index by points where it may: each equation's index is
  its place, its parent one of the others, and each generated line's equation exists."""
  for i, e in enumerate(eqns):
    if e.index != i:
      raise Damaged(f"{where}.eqns[{i}].index is {e.index} where {i} belongs")
    if e.parent is not None and not 0 <= e.parent < len(eqns):
      raise Damaged(f"{where}.eqns[{i}].parent is {e.parent}, not one of the "
                    f"{len(eqns)} equations")
  for line, index in line_map.items():
    if not isinstance(line, int) or line < 1:
      raise Damaged(f"{where}.line_map has the key {line!r} where a line number belongs")
    if not isinstance(index, int) or not 0 <= index < len(eqns):
      raise Damaged(f"{where}.line_map.{line} is {index}, not one of the "
                    f"{len(eqns)} equations")


# --- compiled.json ---------------------------------------------------------------------

def stages(meta, where: str) -> tuple[str, ...]:
  """The stages compiled.json says it saved, each one of STAGE_FILES'."""
  try:
    return saved_stages(meta, where)
  except Misfit as e:
    raise Damaged(e.describe()) from None
  except ValueError as e:
    raise Damaged(str(e)) from None


def compiled(meta, asm: dict, gk: GeneratedKernel, where: str) -> CompiledKernel:
  """compiled.json's values (or an older kernel.json's "compiled") and each stage's
  saved text as a CompiledKernel of `gk`; Damaged or SchemaMismatch otherwise."""
  if not isinstance(meta, dict):
    raise Damaged(Misfit(where, dict, meta).describe())
  try:
    ck = CompiledKernel.from_saved(meta, asm, gk, where)
    for name in ("num_warps", "num_stages"):       # what the listings' headers read
      decode(int, ck.metadata.get(name), f"{where}.metadata.{name}", strict=True)
    decode(int | None, ck.metadata.get("shared"), f"{where}.metadata.shared", strict=True)
  except Misfit as e:
    raise Damaged(e.describe()) from None
  except ValueError as e:            # a target or a count of another kind
    raise Damaged(str(e)) from None
  return ck


def aliases(meta, where: str) -> tuple[tuple[int, int], ...]:
  """The (input, output) pairs spec.json's "aliases" or kernel.json's
  "input_output_aliases" hold (`meta`: that list)."""
  try:
    pairs = decode(tuple[tuple[int, ...], ...], meta, where) if meta is not None else ()
  except Misfit as e:
    raise Damaged(e.describe()) from None
  if any(len(p) != 2 for p in pairs):
    raise Damaged(f"{where} holds {list(map(list, pairs))!r} where (input, output) pairs belong")
  return tuple((i, o) for i, o in pairs)
