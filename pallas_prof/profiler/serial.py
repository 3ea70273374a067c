"""The profiler's report types serialise through this: `to_dict()` of plain values."""
from __future__ import annotations

import dataclasses
from typing import Any


class _Serializable:
  def to_dict(self) -> dict[str, Any]:
    return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _plain(x):
  if isinstance(x, _Serializable):
    return x.to_dict()            # its own to_dict (RuntimeStats adds its headline)
  if dataclasses.is_dataclass(x) and not isinstance(x, type):
    return _plain(dataclasses.asdict(x))
  if isinstance(x, dict):
    return {str(k): _plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_plain(v) for v in x]
  if isinstance(x, float) and x != x:     # NaN is not JSON
    return None
  if hasattr(x, "item") and callable(x.item):   # numpy scalars
    return x.item()
  return x
