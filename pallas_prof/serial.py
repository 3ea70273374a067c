"""The one serialiser of pallas-prof's records: to the plain values JSON holds, and back.

    plain(x)               dataclasses, mappings (frozen ones too), tuples, numpy scalars
                           and NaN as json.dump writes them; a class's own to_dict is
                           called at any depth (RuntimeStats writes its headline flat)
    decode(tp, value)      a plain value back as an instance of the type `tp`, led by the
                           dataclasses' type hints; a value of another kind raises Misfit
    from_fields(cls, data) a dataclass from a dict: known fields only, defaults for missing
    to_json(x, **kwargs)   plain(x) as JSON text (a value of no JSON kind as its str())
    Record                 the mixin giving a dataclass to_dict() and from_dict()
    Text                   the mixin of a typed value saved as its one text form (an aval,
                           a verdict): written as str(x), read back once by from_text

and, for the files the kernel artifacts keep (kernel.json, compiled.json, spec.json, the
saved workaround plans: what a later process executes, so nothing is guessed):

    dump(x)                a dataclass as its saved fields, each as its serial.field says
    load(cls, data, where) the dataclass back: a key it does not know, a field missing that
                           has no default, a value of another type (null included, where
                           the type does not say "| None") raise Misfit naming `where` (the
                           file) and the field
    field(...)             a dataclass field with how it is saved (under another key, not
                           at all, written and read by functions of its own, left out when
                           empty)
    Saved                  the mixin giving such a dataclass to_dict() and from_dict()

The kernel artifacts (backend/artifacts.py), the profiler's and the advice's reports and
the run report (cli/report.py) all write and read through these. Reading is by field
name: a field added later is read back without a change here, a field an older file
lacks gets its default (an empty collection or None where there is none), a key this
version does not know is left out. A class whose older layout differs names a
classmethod `upgrade_layout(data) -> data` that brings it up to its fields first.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Callable


def plain(x):
  """`x` as the plain values json.dump writes (dicts with string keys, lists, numbers)."""
  if isinstance(x, Text):
    return str(x)
  if dataclasses.is_dataclass(x) and not isinstance(x, type):
    if hasattr(x, "to_dict"):
      return x.to_dict()
    return fields_plain(x)
  if isinstance(x, Mapping):
    return {str(k): plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [plain(v) for v in x]
  if isinstance(x, float) and x != x:     # NaN is not JSON
    return None
  if hasattr(x, "item") and callable(x.item):      # numpy scalars
    return x.item()
  return x


def to_json(x, **kwargs) -> str:
  return json.dumps(plain(x), default=str, **kwargs)


def fields_plain(x) -> dict[str, Any]:
  """A dataclass instance's fields, each plain, in their declared order."""
  return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}


class Record:
  """A dataclass that writes itself as its fields, plain, and reads itself back by them."""

  def to_dict(self) -> dict[str, Any]:
    return fields_plain(self)

  @classmethod
  def from_dict(cls, data: dict):
    return from_fields(cls, data)


class Text:
  """A typed value that a file holds as its text (str(x), made in one place: the class's
  __str__), so that what users and tools read of a report stays text while the program
  holds the record. decode reads it back once, by the class's
  `from_text(text, where)`, which raises Misfit (naming `where`) for a text its writer does
  not write."""

  @classmethod
  def from_text(cls, text: str, where: str):
    raise NotImplementedError


def _text_type(tp) -> bool:
  return isinstance(tp, type) and issubclass(tp, Text)


# --- decoding by type hints ------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
  return typing.get_type_hints(cls)


class Misfit(ValueError):
  """A plain value that is not of its field's type; args: (where, the type, the value)."""

  def describe(self) -> str:
    """'<where> is <kind> where <wanted> belongs', for a message about a damaged file (or
    the one sentence it was raised with)."""
    if len(self.args) != 3:
      return str(self.args[0]) if self.args else "a value its writer does not write"
    where, tp, value = self.args
    if isinstance(value, list) and typing.get_origin(tp) is tuple:
      return f"{where} is a list of {len(value)} items where {_wanted(tp)} belongs"
    return f"{where} is {_kind(value)} where {_wanted(tp)} belongs"

  def __str__(self) -> str:
    return self.describe() if len(self.args) == 3 else super().__str__()


class Missing(Misfit):
  """Fields a saved record must have that its file lacks; args: (where, the class, keys)."""

  def describe(self) -> str:
    where, cls, keys = self.args
    return f"{where} lacks the fields {', '.join(keys)} of a saved {cls.__name__}"


class Unknown(Misfit):
  """A key a saved record does not have; args: (where, the record's class, the key)."""

  def describe(self) -> str:
    where, cls, key = self.args
    return f"{where} has the field {key!r}, which a saved {cls.__name__} does not have"


def decode(tp, value, where: str = "report", strict: bool = False):
  """`value` (as json.load gives it) as an instance of the type `tp`; a value of another
  kind (a list where a record belongs, a string for a number) raises Misfit naming
  `where`, so that a damaged file is refused instead of shown as garbage. `strict`: null
  too, where `tp` does not allow None, and a fixed tuple of another length (load's rules)."""
  if value is None:
    if strict and not _optional(tp):
      raise Misfit(where, tp, None)
    return None
  origin = typing.get_origin(tp)
  if origin in (typing.Union, types.UnionType):
    options = [a for a in typing.get_args(tp) if a is not type(None)]
    for option in options:
      if _fits(option, value):
        return decode(option, value, where, strict)
    raise Misfit(where, options[0] if options else tp, value)
  if _text_type(tp):
    if not isinstance(value, str):
      raise Misfit(where, tp, value)
    return tp.from_text(value, where)
  if dataclasses.is_dataclass(tp) and isinstance(tp, type) and isinstance(tp, _SavedType):
    return load(tp, value, where)
  if not _fits(tp, value):
    raise Misfit(where, tp, value)
  if dataclasses.is_dataclass(tp) and isinstance(tp, type):
    return from_fields(tp, value, where)
  if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
    return _sequence(tp, value, where, strict)
  if origin in (dict, Mapping) or tp is dict:
    args = typing.get_args(tp)
    key_type, value_type = args if args else (Any, Any)
    return {_key(key_type, k): decode(value_type, v, f"{where}.{k}", strict)
            for k, v in value.items()}
  if tp is float and isinstance(value, int):
    return float(value)
  return value


def _sequence(tp, value: list, where: str, strict: bool):
  args = typing.get_args(tp)
  fixed = args and args[-1] is not Ellipsis and typing.get_origin(tp) is tuple
  if strict and fixed and len(value) != len(args):
    raise Misfit(where, tp, value)
  items = [decode(args[i] if fixed else args[0] if args else Any, v, f"{where}[{i}]", strict)
           for i, v in enumerate(value)]
  return tuple(items) if typing.get_origin(tp) is tuple or tp is tuple else items


def _optional(tp) -> bool:
  return tp is Any or type(None) in typing.get_args(tp)


def _fits(tp, value) -> bool:
  origin = typing.get_origin(tp) or tp
  if tp is Any or origin in (typing.Union, types.UnionType):
    return True
  if _text_type(tp):
    return isinstance(value, str)
  if dataclasses.is_dataclass(tp) or origin in (dict, Mapping):
    return isinstance(value, dict)
  if origin in (list, tuple, typing.Sequence):
    return isinstance(value, list)
  if tp is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if isinstance(origin, type):
    return isinstance(value, origin)
  return True


def _count(tp) -> str:
  args = typing.get_args(tp)
  return f"a list of {len(args)} items" if args and args[-1] is not Ellipsis else "a list"


def _kind(value) -> str:
  if value is None:
    return "missing"
  return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
          int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _wanted(tp) -> str:
  if _text_type(tp):
    return f"a string (the text of {tp.__name__.lower()})"
  origin = typing.get_origin(tp) or tp
  if dataclasses.is_dataclass(tp) or origin in (dict, Mapping):
    return "an object"
  if origin in (list, tuple, typing.Sequence):
    return _count(tp)
  return {str: "a string", int: "a whole number", float: "a number",
          bool: "true/false"}.get(tp, str(tp))


def _key(tp, key):
  # JSON object keys are strings: dict[int, ...] comes back with int keys
  if tp is int:
    try:
      return int(key)
    except ValueError:
      return key
  return key


def from_fields(cls, data: dict, where: str = "report"):
  """An instance of the dataclass `cls` from a dict: known fields only, defaults for missing."""
  upgrade = getattr(cls, "upgrade_layout", None)
  if upgrade is not None:
    data = upgrade(data)
  hints = _hints(cls)
  for name in getattr(cls, "REQUIRED", ()):
    if data.get(name) is None:          # what every view keys on: nothing to show without it
      raise Misfit(f"{where}.{name}", hints[name], None)
  kwargs = {}
  for f in dataclasses.fields(cls):
    if f.name in data:
      kwargs[f.name] = decode(hints[f.name], data[f.name], f"{where}.{f.name}")
    elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
      kwargs[f.name] = _empty(hints[f.name])     # an older file without this field
  return cls(**kwargs)


def _empty(tp):
  """What a field without a default holds when a file lacks it: an empty collection, or None."""
  origin = typing.get_origin(tp) or tp
  return {list: [], dict: {}, tuple: ()}.get(origin) if isinstance(origin, type) else None


# --- saved records: the kernel artifacts' files ------------------------------------------

_HOW = "pallas_prof.serial"


@dataclasses.dataclass(frozen=True)
class How:
  """How a field is saved (serial.field's arguments)."""
  key: str | None = None        # its key in the file (None: the field's name)
  saved: bool = True            # False: kept elsewhere (its own file) or not at all
  write: Callable[[Any], Any] | None = None            # the value -> what the file holds
  read: Callable[[Any, str], Any] | None = None        # (what the file holds, where) -> value
  # written as these keys of the record's own: write(the record) gives them as a dict,
  # read(that dict, where) the field's value
  flat: tuple[str, ...] = ()
  omit_empty: bool = False      # an empty value is not written (files before it lack it)


_PLAIN_FIELD = How()


def field(*, key: str | None = None, saved: bool = True, write=None, read=None, flat=(),
          omit_empty: bool = False, **kwargs):
  """dataclasses.field, with how the field is saved (How); `kwargs` go to dataclasses.field."""
  how = How(key, saved, write, read, tuple(flat), omit_empty)
  return dataclasses.field(metadata={_HOW: how}, **kwargs)


def _how(f: dataclasses.Field) -> How:
  return f.metadata.get(_HOW, _PLAIN_FIELD)


def dump(x) -> dict[str, Any]:
  """A saved record's fields as its file holds them, in their declared order."""
  out: dict[str, Any] = {}
  for f in dataclasses.fields(x):
    how, value = _how(f), getattr(x, f.name)
    if not how.saved or (how.omit_empty and not value):
      continue
    if how.flat:                  # written from the record: what its properties say
      out.update(how.write(x))
    else:
      out[how.key or f.name] = how.write(value) if how.write is not None else plain(value)
  out.update({name: plain(getattr(x, name)) for name in getattr(type(x), "DERIVED", ())})
  return out


def load(cls, data, where: str, **given):
  """The saved record `cls` from what its file holds (`data`), by its fields' types; the
  fields in `given` (kept in files of their own) as they are. Misfit, naming `where` and
  the field, for a key `cls` does not know (its OTHER_KEYS are written beside it by
  others; its DERIVED keys, properties dump writes for readers of the file, are not read
  back), a field missing that has no default, and a value that is not of its type."""
  upgrade = getattr(cls, "upgrade_layout", None)
  if upgrade is not None:
    data = upgrade(data)
  if not isinstance(data, dict):
    raise Misfit(where, cls, data)
  hints = _hints(cls)
  known = {*getattr(cls, "OTHER_KEYS", ()), *getattr(cls, "DERIVED", ())}
  kwargs, missing = dict(given), []
  for f in dataclasses.fields(cls):
    how = _how(f)
    if not how.saved or f.name in given:
      continue
    if how.flat:
      known.update(how.flat)
      flat = {k: data.get(k) for k in how.flat}
      if all(v is None for v in flat.values()) and f.default is dataclasses.MISSING \
          and f.default_factory is dataclasses.MISSING:
        missing.append((how.flat[0], hints[f.name]))   # named with the others missing
        continue
      kwargs[f.name] = how.read(flat, where)
      continue
    key = how.key or f.name
    known.add(key)
    if key not in data:
      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        missing.append((key, hints[f.name]))
      continue
    kwargs[f.name] = how.read(data[key], f"{where}.{key}") if how.read is not None else \
        decode(hints[f.name], data[key], f"{where}.{key}", strict=True)
  unknown = sorted(set(data) - known)
  if unknown:
    raise Unknown(f"{where}.{unknown[0]}", cls, unknown[0])
  if len(missing) == 1:
    raise Misfit(f"{where}.{missing[0][0]}", missing[0][1], None)
  if missing:
    raise Missing(where, cls, tuple(key for key, _ in missing))
  return cls(**kwargs)


class _SavedType(type):
  """The metaclass that marks a saved record (decode loads one strictly, wherever it is)."""


class Saved(metaclass=_SavedType):
  """A dataclass saved by dump and read back by load: to_dict() and from_dict() are they."""

  def to_dict(self) -> dict[str, Any]:
    return dump(self)

  @classmethod
  def from_dict(cls, data, where: str = "record"):
    return load(cls, data, where)
