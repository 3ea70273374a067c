"""LaunchSpec: what a launch of a compiled kernel outside JAX needs (the profiler's replay,
ncu, the tuner's timing), saved as a run's spec.json beside kernel.cubin. No JAX: the
profiler's child processes load it.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import ClassVar

from ... import serial
from ...run_layout import CUBIN, SPEC
from ...safe_files import write_atomic
from ...serial import Saved
from ..artifacts import CompiledKernel, KernelParam, Writer, read_json, write_json


@dataclasses.dataclass(frozen=True)
class LaunchSpec(Saved):
  """A compiled kernel's launch, as the profiler's replay (in this process or a
  child, under ncu) performs it: cubin, grid, launch figures, parameters."""
  SCHEMA: ClassVar[str] = "pallas-prof/launch/1"
  OTHER_KEYS: ClassVar[tuple[str, ...]] = ("schema",)

  name: str                              # the kernel's symbol in the cubin
  cubin: bytes = serial.field(saved=False)     # kernel.cubin, beside spec.json
  launch_grid: tuple[int, int, int]
  num_warps: int
  warp_size: int
  shared: int
  num_ctas: int
  global_scratch_size: int
  global_scratch_align: int
  profile_scratch_size: int
  profile_scratch_align: int
  params: tuple[KernelParam, ...]        # in the kernel's order
  aliases: tuple[tuple[int, int], ...]   # (input index, output index)
  zeroed_outputs: tuple[int, ...]        # output indices zeroed before each launch
  ptx_param_count: int | None            # .param entries of the PTX's .entry

  def __post_init__(self):
    object.__setattr__(self, "launch_grid", tuple(int(g) for g in self.launch_grid))
    object.__setattr__(self, "params", tuple(self.params))
    object.__setattr__(self, "aliases", tuple((int(i), int(o)) for i, o in self.aliases))
    object.__setattr__(self, "zeroed_outputs", tuple(sorted(int(i) for i in self.zeroed_outputs)))

  @classmethod
  def from_compiled(cls, ck: CompiledKernel, aliases=(), zeroed_outputs=()) -> "LaunchSpec":
    """ck's launch (its cubin must be assembled: compile.assemble_cubin).
    ValueError where the replay cannot launch it."""
    gk = ck.generated
    if gk is None:
      raise ValueError(f"kernel {ck.name}: no GeneratedKernel, so its parameters are unknown")
    md = ck.metadata
    zeroed = set(zeroed_outputs) | set(gk.zeroed_outputs(aliases))   # as the GPU path does
    target = md.get("target") or {}
    if md.get("launch_cooperative_grid") or md.get("launch_pdl"):
      raise ValueError(f"kernel {ck.name}: cooperative-grid / PDL launches are not supported "
                       "by the replay")
    name = str(md.get("name") or ck.name)
    return cls(
        name=name, cubin=ck.cubin, launch_grid=gk.launch_grid, num_warps=int(md["num_warps"]),
        warp_size=int(target.get("warp_size", md.get("warp_size", 32)) or 32),
        shared=int(md.get("shared", 0) or 0), num_ctas=int(md.get("num_ctas", 1) or 1),
        global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
        global_scratch_align=int(md.get("global_scratch_align", 1) or 1),
        profile_scratch_size=int(md.get("profile_scratch_size", 0) or 0),
        profile_scratch_align=int(md.get("profile_scratch_align", 1) or 1),
        params=gk.params, aliases=aliases, zeroed_outputs=zeroed,
        ptx_param_count=ptx_param_count(ck.asm.get("ptx", ""), name))

  @property
  def inputs(self) -> list:
    return [p for p in self.params if p.role == "input"]

  @property
  def outputs(self) -> list:
    return [p for p in self.params if p.role == "output"]

  @property
  def programs(self) -> int:
    return math.prod(self.launch_grid)

  def save(self, directory: str, write: Writer = write_atomic) -> None:
    """Writes spec.json and kernel.cubin into `directory`, each whole (`write`)."""
    os.makedirs(directory, exist_ok=True)
    write(os.path.join(directory, CUBIN), self.cubin)
    write_json(os.path.join(directory, SPEC),
                {"schema": self.SCHEMA, **serial.dump(self)}, write)

  @classmethod
  def load(cls, directory: str) -> "LaunchSpec":
    """What save() wrote; SchemaMismatch for another layout, OSError if absent, Misfit
    (a ValueError) naming the field for a value save() does not write."""
    where = os.path.join(directory, SPEC)
    meta = read_json(where, cls.SCHEMA)
    with open(os.path.join(directory, CUBIN), "rb") as f:
      cubin = f.read()
    return serial.load(cls, meta, where, cubin=cubin)



def ptx_param_count(ptx: str, name: str) -> int | None:
  """Number of .param entries of the kernel's .entry in the PTX."""
  m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
  if m is None:
    return None
  return len(re.findall(r"\.param\b", m.group(1)))
