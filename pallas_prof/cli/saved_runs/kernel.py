"""A run's saved kernel, decoded by type: kernel.json back as a GeneratedKernel,
compiled.json (or an older run's "compiled" in kernel.json) back as a CompiledKernel.

GeneratedKernel.save and CompiledKernel.save (backend/artifacts.py) write them; this
is how a run directory reads them back (run_directory.load_kernel reads the files).
Every value goes through serial.decode, led by the dataclasses' type hints, and what
the views index by is checked against what it indexes (a line's equation is one of
the kernel's, an equation's index its place), so that a damaged or edited file is
refused with Damaged, naming the field, instead of failing inside `show` or the page.
"""
from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any

from ...backend.artifacts import (STAGE_FILES, CompiledKernel, DotFacts, EquationRecord,
                                 GeneratedKernel, KernelParam, SchemaMismatch)
from ...backend.check_sites import CheckSite
from ...backend.equation_text import Description
from ...backend.options import LoweringOptions, option_problem
from ...backend.targets import Target, UnknownTarget, as_target
from ...backend.tma_note import TmaNote
from ...serial import Misfit, decode, from_fields


class Damaged(ValueError):
  """A saved kernel's file whose values are not what its writer writes; the message
  names the field (`where`) and what is wrong with it."""


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
  return typing.get_type_hints(cls)


def _value(cls, name: str, data: dict, where: str, key: str | None = None, required=True):
  """data[key] decoded as `cls`'s field `name`; a required one may not be missing."""
  key = key or name
  value = decode(_hints(cls)[name], data.get(key), f"{where}.{key}")
  if value is None and required:
    raise Misfit(f"{where}.{key}", _hints(cls)[name], None)
  return value


def _complete(record, where: str, cls):
  """`record`, a `cls` decoded by serial (which gives a missing field or item None),
  with every field its type does not let be None present."""
  if record is None:
    raise Misfit(where, cls, None)
  for f in dataclasses.fields(record):
    hint = _hints(type(record))[f.name]
    optional = hint is Any or type(None) in typing.get_args(hint)
    if getattr(record, f.name) is None and not optional:
      raise Misfit(f"{where}.{f.name}", hint, None)
  return record


def _object(value, where: str) -> dict:
  if not isinstance(value, dict):
    raise Misfit(where, dict, value)
  return value


_DESCRIPTION = ("text", "in_avals", "out_avals", "jaxpr_line")


def equation(data, where: str) -> EquationRecord:
  """One of kernel.json's "eqns" (EquationRecord.to_dict's layout)."""
  data = _object(data, where)
  description = Description.fixed(
      decode(str, data.get("text"), f"{where}.text") or "",
      decode(tuple[str, ...], data.get("in_avals"), f"{where}.in_avals") or (),
      decode(tuple[str, ...], data.get("out_avals"), f"{where}.out_avals") or (),
      decode(int, data.get("jaxpr_line"), f"{where}.jaxpr_line"))
  fields = {k: v for k, v in data.items() if k not in _DESCRIPTION and k != "description"}
  record = from_fields(EquationRecord, fields, where)
  for name in ("index", "path", "primitive", "region"):
    if getattr(record, name) is None:
      raise Misfit(f"{where}.{name}", _hints(EquationRecord)[name], None)
  if record.dot is not None:
    _complete(record.dot, f"{where}.dot", DotFacts)
  return dataclasses.replace(record, description=description)


def _tma_note(saved, where: str) -> TmaNote:
  if isinstance(saved, str):            # an earlier pallas-prof saved the reason alone
    return TmaNote.from_saved(saved)
  return _complete(from_fields(TmaNote, _object(saved, where), where), where, TmaNote)


def generated(meta, source: str, where: str) -> GeneratedKernel:
  """kernel.json's values (`meta`) and source.py's text as a GeneratedKernel; Damaged
  or SchemaMismatch for a file its writer did not write. `where` names the file."""
  try:
    return _generated(_object(meta, where), source, where)
  except Misfit as e:
    raise Damaged(e.describe()) from None


def _generated(meta: dict, source: str, where: str) -> GeneratedKernel:
  schema = meta.get("schema", GeneratedKernel.SCHEMA)
  if schema != GeneratedKernel.SCHEMA:
    raise SchemaMismatch(f"{where} has schema {schema!r}; this pallas-prof reads "
                         f"{GeneratedKernel.SCHEMA!r}")
  field = functools.partial(_value, GeneratedKernel, data=meta, where=where)
  eqns = meta.get("eqns")
  if not isinstance(eqns, list):
    raise Misfit(f"{where}.eqns", list, eqns)
  eqns = tuple(equation(e, f"{where}.eqns[{i}]") for i, e in enumerate(eqns))
  line_map = field("line_map")
  _check_indices(eqns, line_map, where)
  params = tuple(_complete(p, f"{where}.params[{i}]", KernelParam)
                 for i, p in enumerate(field("params")))
  sites = decode(tuple[CheckSite, ...], meta.get("bounds_sites"), f"{where}.bounds_sites") or ()
  sites = tuple(_complete(s, f"{where}.bounds_sites[{i}]", CheckSite)
                for i, s in enumerate(sites))
  notes = meta.get("tma_notes") or []
  if not isinstance(notes, list):
    raise Misfit(f"{where}.tma_notes", list, notes)
  for i, pair in enumerate(field("ref_names", required=False) or ()):
    if len(pair) != 2:
      raise Damaged(f"{where}.ref_names[{i}] has {len(pair)} names where 2 belong "
                    "(the jaxpr's and the kernel's)")
  grid, launch_grid = field("grid"), field("launch_grid")
  if len(launch_grid) != 3:
    raise Damaged(f"{where}.launch_grid has {len(launch_grid)} dimensions where 3 belong")
  for name, sizes in (("grid", grid), ("launch_grid", launch_grid)):
    if None in sizes:
      raise Misfit(f"{where}.{name}[{sizes.index(None)}]", int, None)
  optional = {name: field(name, required=False)
              for name in ("gc_seconds", "atomic_params", "workarounds", "ref_names")}
  return GeneratedKernel(
      name=field("name"), source=source, path=field("path", key="source_path"),
      line_map=line_map, eqns=eqns, params=params, grid=grid, launch_grid=launch_grid,
      options=_options(meta, where), jaxpr_text=field("jaxpr_text"),
      source_info=field("source_info"),
      lowering_seconds=field("lowering_seconds"), key=field("key"), bounds_sites=sites,
      tma_notes=tuple(_tma_note(n, f"{where}.tma_notes[{i}]") for i, n in enumerate(notes)),
      **{k: v for k, v in optional.items() if v is not None})


def _options(meta: dict, where: str) -> LoweringOptions:
  """The kernel's LoweringOptions, of what kernel.json keeps of them (LoweringOptions.SAVED;
  num_warps and num_stages required, the rest as an older file may lack them); the options
  no file keeps (the target, probes, a workaround plan) at their defaults."""
  saved = {name: _value(LoweringOptions, name, meta, where,
                        required=name in ("num_warps", "num_stages"))
           for name in LoweringOptions.SAVED}
  for name, value in saved.items():
    if value is not None and option_problem(name, value):
      raise Damaged(f"{where}.{name} is {value!r}, which pallas-prof never writes: it "
                    f"{option_problem(name, value)}")
  return LoweringOptions(**{k: v for k, v in saved.items() if v is not None})


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
    saved = decode(tuple[str, ...], _object(meta, where).get("stages"), f"{where}.stages")
  except Misfit as e:
    raise Damaged(e.describe()) from None
  unknown = [s for s in saved or () if s not in STAGE_FILES]
  if unknown:
    raise Damaged(f"{where}.stages names {unknown[0]!r}, not a compile stage "
                  f"({', '.join(STAGE_FILES)})")
  return tuple(saved or ())


def compiled(meta, asm: dict, gk: GeneratedKernel, where: str) -> CompiledKernel:
  """compiled.json's values (or an older kernel.json's "compiled") and each stage's
  saved text as a CompiledKernel of `gk`; Damaged or SchemaMismatch otherwise."""
  try:
    return _compiled(_object(meta, where), asm, gk, where)
  except Misfit as e:
    raise Damaged(e.describe()) from None


def _compiled(meta: dict, asm: dict, gk: GeneratedKernel, where: str) -> CompiledKernel:
  if "schema" in meta and meta["schema"] != CompiledKernel.SCHEMA:
    raise SchemaMismatch(f"{where} has schema {meta['schema']!r}; this pallas-prof reads "
                         f"{CompiledKernel.SCHEMA!r}")
  target = _target(meta.get("target"), where)
  value = functools.partial(_value, CompiledKernel, data=meta, where=where)
  optional = functools.partial(value, required=False)
  metadata = value("metadata")
  for name in ("num_warps", "num_stages"):       # what the listings' headers read
    if decode(int, metadata.get(name), f"{where}.metadata.{name}") is None:
      raise Misfit(f"{where}.metadata.{name}", int, None)
  decode(int, metadata.get("shared"), f"{where}.metadata.shared")
  return CompiledKernel(
      name=optional("name") or gk.name, key=value("key"), target=target, asm=asm,
      metadata=metadata, stage_seconds=value("stage_seconds"),
      compile_seconds=value("compile_seconds"), registers=optional("registers"),
      spill_stores=optional("spill_stores"), spill_loads=optional("spill_loads"),
      stack_bytes=optional("stack_bytes"), ptxas_log=optional("ptxas_log") or "",
      generated=gk, cache=optional("cache") or "disk",
      worker_wait_seconds=optional("worker_wait_seconds") or 0.0,
      target_resources=_resources(meta.get("target_resources"), where))


def _target(saved, where: str) -> Target:
  """compiled.json's target, ["cuda", 90] or ["hip", "gfx942"], as the Target it names."""
  shape_ok = isinstance(saved, list) and len(saved) == 2 and (
      (saved[0] == "cuda" and isinstance(saved[1], int) and not isinstance(saved[1], bool))
      or (saved[0] == "hip" and isinstance(saved[1], str)))
  try:
    if shape_ok:
      return as_target(saved)
  except UnknownTarget:
    pass
  raise Damaged(f"{where}.target is {saved!r} where a target like [\"cuda\", 90] or "
                f"[\"hip\", \"gfx942\"] belongs")


def _resources(saved, where: str) -> dict[str, int]:
  """An AMD compile's figures (amd_resources.py): whole numbers by name."""
  if saved is None:
    return {}
  saved = _object(saved, f"{where}.target_resources")
  for name, value in saved.items():
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
      raise Damaged(f"{where}.target_resources.{name} is {value!r} where a count belongs")
  return dict(saved)


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
