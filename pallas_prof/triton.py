"""The names of `jax.experimental.pallas.triton` (plgpu), served by pallas-prof.

JAX deprecated its Pallas Triton backend in 0.11 and will remove it, that module with
it. A kernel written against it moves to pallas-prof with one line:

    from pallas_prof import triton as plgpu  # instead of: from jax.experimental.pallas import triton as plgpu

Everything here works without JAX's Triton backend: the atomics, compare-and-swap,
inline assembly, barrier and contiguity hint are pallas-prof's own primitives
(backend/triton_primitives.py), lowered by the rules that lower JAX's; load and store
are Pallas's own. `CompilerParams` is pallas-prof's, which selects pallas-prof for the
call (no install() needed) and takes JAX's num_warps and num_stages among its fields.
The GPU-information names (jax 0.11+) describe the default device. What is not the same
as JAX's: docs/migrating-from-jax-triton.md.
"""
from __future__ import annotations

import dataclasses
import enum
import re

import jax

from .import_errors import reported

# the package no longer imports the backend (pallas_prof/api.py does, on first use): a
# failure here is said as the package's was, the real cause and the versions found
with reported("pallas_prof.triton"):
  from .backend import compat
  from .backend.running.launch import CUSTOM_CALL_TARGET_NAME
  from .backend.pallas_call_rule import CompilerParams
  from .backend.triton_primitives import (approx_tanh, atomic_add, atomic_and, atomic_cas,
                                          atomic_max, atomic_min, atomic_or, atomic_xchg,
                                          atomic_xor, debug_barrier, elementwise_inline_asm,
                                          load, max_contiguous, store)

dot = compat.pallas_dot


class GpuVersion(enum.Enum):
  """GPUs known by name (as jax.experimental.pallas.triton.GpuVersion)."""
  A10 = "NVIDIA A10"
  A30 = "NVIDIA A30"
  A100 = "NVIDIA A100"
  H100 = "NVIDIA H100"
  H200 = "NVIDIA H200"
  GH200 = "NVIDIA GH200"
  B200 = "NVIDIA B200"
  GB200 = "NVIDIA GB200"
  B300 = "NVIDIA B300"
  GB300 = "NVIDIA GB300"
  GB10 = "NVIDIA GB10"
  L4 = "NVIDIA L4"
  L40 = "NVIDIA L40"
  T4 = "Tesla T4"
  RTX_4090 = "NVIDIA GeForce RTX 4090"
  RTX_PRO_4500 = "NVIDIA RTX PRO 4500"
  RTX_PRO_5000 = "NVIDIA RTX PRO 5000"
  RTX_PRO_6000 = "NVIDIA RTX PRO 6000"
  THOR = "NVIDIA Thor"
  VR200 = "NVIDIA VR200"

  def __str__(self) -> str:
    return self.value


_CAPABILITY = {"T4": 75, "A100": 80, "A30": 80, "A10": 86, "L4": 89, "L40": 89, "RTX_4090": 89,
               "H100": 90, "H200": 90, "GH200": 90, "B200": 100, "GB200": 100, "B300": 103,
               "GB300": 103, "VR200": 107, "THOR": 110, "RTX_PRO_4500": 120,
               "RTX_PRO_5000": 120, "RTX_PRO_6000": 120, "GB10": 121}
# longer names first: "NVIDIA A100" is not an A10
_VERSION_RE = re.compile(r"\b(" + "|".join(
    re.escape(v.value) for v in sorted(GpuVersion, key=lambda v: -len(v.value))) + r")\b")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuInfo:
  gpu_version: GpuVersion | None      # None: a GPU not known by name
  arch_name: str                      # "9.0"
  compute_capability: int             # 90


def get_gpu_info_from_version(gpu_version: GpuVersion) -> GpuInfo:
  cc = _CAPABILITY[gpu_version.name]
  return GpuInfo(gpu_version=gpu_version, arch_name=f"{cc // 10}.{cc % 10}", compute_capability=cc)


def _default_device():
  return jax.devices()[0]


def is_gpu_device() -> bool:
  """Whether JAX's default device is a GPU."""
  return _default_device().platform == "gpu"


def get_gpu_info() -> GpuInfo:
  """The default device's GPU information; ValueError where it is no CUDA GPU."""
  device = _default_device()
  kind = device.device_kind
  named = _VERSION_RE.search(kind)
  if named:
    return get_gpu_info_from_version(GpuVersion(named.group(1)))
  cc = compat.gpu_compute_capability(device) if device.platform == "gpu" else None
  if cc is None:
    raise ValueError(f"Unsupported GPU device kind: {kind}")
  return GpuInfo(gpu_version=None, arch_name=f"{cc // 10}.{cc % 10}", compute_capability=cc)


__all__ = ["CompilerParams", "CUSTOM_CALL_TARGET_NAME", "GpuInfo", "GpuVersion", "approx_tanh",
           "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
           "atomic_xchg", "atomic_xor", "debug_barrier", "dot", "elementwise_inline_asm",
           "get_gpu_info", "get_gpu_info_from_version", "is_gpu_device", "load",
           "max_contiguous", "store"]
