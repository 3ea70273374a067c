"""The pallas_call being lowered, read from its equation's params: its kernel jaxpr, grid
mapping, name, the user's line and aliases. What every lowering of it shares (the kernel
the program runs, the tuner's candidates, the workarounds, the profiler's probed variant):
lowering it with some LoweringOptions, its site for errors and warnings, and the
registry record's `relower`.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .. import compat
from ..errors import LoweringError
from ..options import LoweringOptions
from .lower import kernel_name_of, lower_kernel, pallas_call_info


@dataclasses.dataclass(frozen=True)
class PallasCall:
  """The pallas_call being lowered: what every lowering of it (the kernel the program
  runs, the tuner's candidates, the workarounds, the profiler's probed variant) shares."""
  jaxpr: Any
  grid_mapping: Any
  name: str | None
  call_site: Any            # JAX's source info of the equation: the user's line
  aliases: tuple[tuple[int, int], ...]
  platform: str
  no_tf32_arch: str | None = None   # the GPU's arch where it has no TF32 dot (ROCm)

  @classmethod
  def of(cls, params: dict, platform: str, no_tf32_arch: str | None = None) -> "PallasCall":
    # JAX lowers each equation inside its user context: the source info there
    # holds the pallas_call's traceback (the lowering context's own is None
    # for cached lowerings).
    return cls(params["jaxpr"], params["grid_mapping"], params.get("name"),
               compat.source_info_util.current(),
               tuple(tuple(a) for a in params.get("input_output_aliases", ())), platform,
               no_tf32_arch)

  def lower(self, options: LoweringOptions):
    with compat.lowering_for(self.platform, self.no_tf32_arch):
      return lower_kernel(self.jaxpr, self.grid_mapping, options, name=self.name,
                          call_site=self.call_site, input_output_aliases=self.aliases)

  def site(self, kernel_name: str | None = None):
    """The pallas_call as an equation record: errors and warnings point at the user's line."""
    kname = kernel_name or kernel_name_of(self.jaxpr, self.name)
    return pallas_call_info(self.call_site, self.jaxpr, kname, self.grid_mapping)

  def error(self, reason: str, hint: str | None) -> LoweringError:
    return LoweringError(reason, hint=hint, kernel=kernel_name_of(self.jaxpr, self.name),
                         rule="pallas_call", eqn=self.site())

  def relowerer(self, options: LoweringOptions):
    """The registry record's `relower(options=None, *, same_build=False, **changes)`: the
    call lowered again with `options` (the call's own when None) with `changes`.

    Variants measured in place of the kernel (the profiler's probed variant, the advice's
    trials) are of the kernel the program runs unchecked: never the bounds-checked build
    nor the debug print. A workaround is different: the GPU launches it in the kernel's
    place, with the kernel's operands (the checked build's starting values and bounds
    record among them), so it passes `same_build=True` and keeps both. Callers pass the
    compiled kernel's options (a tuner may have chosen another launch order or TMA use
    than the call's own, and workarounds)."""
    def relower(variant: LoweringOptions | None = None, *, same_build: bool = False,
                **changes):
      variant = (variant or options).replace(**changes)
      if not same_build:
        variant = variant.replace(check_bounds=False, debug=False)
      return self.lower(variant)
    return relower
