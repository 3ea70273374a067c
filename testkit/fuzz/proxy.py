"""A module seen through a proxy: some names replaced, the others wrapped or as they are
(the fuzzer's alternative references run a program's `jnp` and `lax` calls their own way:
scan_order.py's scans in the GPU's order, rounded.py's calls rounded from float64)."""
from __future__ import annotations

import types
from typing import Callable


class ModuleProxy(types.ModuleType):
  """`module`'s names, those in `replaced` replaced; `wrap(value)` for the others it finds
  (None: as they are)."""

  def __init__(self, module, wrap: Callable | None = None, **replaced):
    super().__init__(module.__name__)
    self._module, self._wrap, self._replaced = module, wrap, replaced

  def __getattr__(self, name):
    if name in ("_module", "_wrap", "_replaced"):
      raise AttributeError(name)
    if name in self._replaced:
      return self._replaced[name]
    value = getattr(self._module, name)
    return value if self._wrap is None else self._wrap(value)
