"""The one serialiser of pallas-prof's records: to the plain values JSON holds, and back.

    plain(x)               dataclasses, mappings (frozen ones too), tuples, numpy scalars
                           and NaN as json.dump writes them; a class's own to_dict is
                           called at any depth (RuntimeStats writes its headline flat)
    decode(tp, value)      a plain value back as an instance of the type `tp`, led by the
                           dataclasses' type hints; a value of another kind raises Misfit
    from_fields(cls, data) a dataclass from a dict: known fields only, defaults for missing
    to_json(x, **kwargs)   plain(x) as JSON text (a value of no JSON kind as its str())
    Record                 the mixin giving a dataclass to_dict() and from_dict()

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
from typing import Any


def plain(x):
  """`x` as the plain values json.dump writes (dicts with string keys, lists, numbers)."""
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


# --- decoding by type hints ------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
  return typing.get_type_hints(cls)


class Misfit(ValueError):
  """A plain value that is not of its field's type; args: (where, the type, the value)."""

  def describe(self) -> str:
    """'<where> is <kind> where <wanted> belongs', for a message about a damaged file."""
    where, tp, value = self.args
    return f"{where} is {_kind(value)} where {_wanted(tp)} belongs"


def decode(tp, value, where: str = "report"):
  """`value` (as json.load gives it) as an instance of the type `tp`; a value of another
  kind (a list where a record belongs, a string for a number) raises Misfit naming
  `where`, so that a damaged file is refused instead of shown as garbage."""
  if value is None:
    return None
  origin = typing.get_origin(tp)
  if origin in (typing.Union, types.UnionType):
    options = [a for a in typing.get_args(tp) if a is not type(None)]
    for option in options:
      if _fits(option, value):
        return decode(option, value, where)
    raise Misfit(where, options[0] if options else tp, value)
  if not _fits(tp, value):
    raise Misfit(where, tp, value)
  if dataclasses.is_dataclass(tp) and isinstance(tp, type):
    return from_fields(tp, value, where)
  if origin in (list, tuple, typing.Sequence) or tp in (list, tuple):
    args = typing.get_args(tp)
    item = args[0] if args else Any
    items = [decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if origin is tuple or tp is tuple else items
  if origin is dict or tp is dict:
    args = typing.get_args(tp)
    key_type, value_type = args if args else (Any, Any)
    return {_key(key_type, k): decode(value_type, v, f"{where}.{k}") for k, v in value.items()}
  if tp is float and isinstance(value, int):
    return float(value)
  return value


def _fits(tp, value) -> bool:
  origin = typing.get_origin(tp) or tp
  if tp is Any or origin in (typing.Union, types.UnionType):
    return True
  if dataclasses.is_dataclass(tp) or origin is dict:
    return isinstance(value, dict)
  if origin in (list, tuple, typing.Sequence):
    return isinstance(value, list)
  if tp is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if isinstance(origin, type):
    return isinstance(value, origin)
  return True


def _kind(value) -> str:
  if value is None:
    return "missing"
  return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
          int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _wanted(tp) -> str:
  origin = typing.get_origin(tp) or tp
  if dataclasses.is_dataclass(tp) or origin is dict:
    return "an object"
  if origin in (list, tuple, typing.Sequence):
    return "a list"
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
