"""What the replay launches: a kernel's cubin, grid and parameters, serialisable
(the profiler's child processes, ncu and the sampler, load it from a directory)."""
from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np

from .driver import ProfilerError


@dataclasses.dataclass
class ParamSpec:
  name: str
  dtype: str
  shape: tuple[int, ...]
  role: str                 # "input" | "output"
  index: int

  @property
  def nbytes(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64)) * np_dtype(self.dtype).itemsize


@dataclasses.dataclass
class LaunchSpec:
  """Everything a launch needs, serialisable (for the ncu subprocess)."""
  name: str
  cubin: bytes
  launch_grid: tuple[int, int, int]
  num_warps: int
  warp_size: int
  shared: int
  num_ctas: int
  global_scratch_size: int
  global_scratch_align: int
  profile_scratch_size: int
  profile_scratch_align: int
  params: list[ParamSpec]
  aliases: list[tuple[int, int]]          # (input index, output index)
  zeroed_outputs: list[int]
  ptx_param_count: int | None

  @classmethod
  def from_compiled(cls, ck, aliases=(), zeroed_outputs=()) -> "LaunchSpec":
    gk = ck.generated
    if gk is None:
      raise ProfilerError(f"kernel {ck.name}: no GeneratedKernel, so its parameters are unknown")
    md = ck.metadata
    zeroed = set(zeroed_outputs)
    aliased_outs = {o for _, o in aliases}
    for p in gk.outputs:
      if p.name in getattr(gk, "atomic_params", ()) and p.index not in aliased_outs:
        zeroed.add(p.index)     # the GPU path zeroes outputs updated with atomics
    target = md.get("target") or {}
    if md.get("launch_cooperative_grid") or md.get("launch_pdl"):
      raise ProfilerError(f"kernel {ck.name}: cooperative-grid / PDL launches are not supported "
                          "by the replay")
    return cls(
        name=str(md.get("name") or ck.name), cubin=ck.cubin,
        launch_grid=tuple(int(g) for g in gk.launch_grid), num_warps=int(md["num_warps"]),
        warp_size=int(target.get("warp_size", md.get("warp_size", 32)) or 32),
        shared=int(md.get("shared", 0) or 0), num_ctas=int(md.get("num_ctas", 1) or 1),
        global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
        global_scratch_align=int(md.get("global_scratch_align", 1) or 1),
        profile_scratch_size=int(md.get("profile_scratch_size", 0) or 0),
        profile_scratch_align=int(md.get("profile_scratch_align", 1) or 1),
        params=[ParamSpec(p.name, p.dtype, tuple(p.shape), p.role, p.index) for p in gk.params],
        aliases=[tuple(a) for a in aliases], zeroed_outputs=sorted(zeroed),
        ptx_param_count=ptx_param_count(ck.asm.get("ptx", ""), str(md.get("name") or ck.name)))

  @property
  def inputs(self) -> list[ParamSpec]:
    return [p for p in self.params if p.role == "input"]

  @property
  def outputs(self) -> list[ParamSpec]:
    return [p for p in self.params if p.role == "output"]

  @property
  def programs(self) -> int:
    return int(np.prod(self.launch_grid, dtype=np.int64))

  def save(self, directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "kernel.cubin"), "wb") as f:
      f.write(self.cubin)
    meta = dataclasses.asdict(self)
    meta.pop("cubin")
    with open(os.path.join(directory, "spec.json"), "w") as f:
      json.dump(meta, f)

  @classmethod
  def load(cls, directory: str) -> "LaunchSpec":
    with open(os.path.join(directory, "spec.json")) as f:
      meta = json.load(f)
    with open(os.path.join(directory, "kernel.cubin"), "rb") as f:
      cubin = f.read()
    meta["params"] = [ParamSpec(p["name"], p["dtype"], tuple(p["shape"]), p["role"], p["index"])
                      for p in meta["params"]]
    meta["launch_grid"] = tuple(meta["launch_grid"])
    meta["aliases"] = [tuple(a) for a in meta["aliases"]]
    return cls(cubin=cubin, **meta)


def ptx_param_count(ptx: str, name: str) -> int | None:
  """Number of .param entries of the kernel's .entry in the PTX."""
  m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
  if not m:
    return None
  return len(re.findall(r"\.param\b", m.group(1)))


def np_dtype(name: str) -> np.dtype:
  """numpy dtype of a JAX dtype name; the narrow floats and ints (bfloat16, float8_*,
  int4) from ml_dtypes, which JAX's own dtypes are, so a child process needs no JAX."""
  try:
    return np.dtype(name)
  except TypeError:
    import ml_dtypes
    try:
      return np.dtype(getattr(ml_dtypes, name))
    except AttributeError:
      raise ProfilerError(f"unknown dtype {name!r}") from None


def is_floating(dtype) -> bool:
  dtype = np.dtype(dtype)
  if dtype.kind in "fc":
    return dtype.kind == "f"
  import ml_dtypes
  try:
    ml_dtypes.finfo(dtype)
    return True
  except (TypeError, ValueError):
    return False


def is_integer(dtype) -> bool:
  dtype = np.dtype(dtype)
  if dtype.kind in "iu":
    return True
  import ml_dtypes
  try:
    ml_dtypes.iinfo(dtype)
    return True
  except (TypeError, ValueError):
    return False


