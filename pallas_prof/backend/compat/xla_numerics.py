"""What XLA computes where its backends or versions differ, so that a kernel agrees with
the XLA beside it: the platform a pallas_call is being lowered for (lowering_for), the
roundings that follow it (TF32 dot operands, float64 to a 16-bit float), and the
libdevice XLA's GPU compiler links.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import jax
import numpy as np

from ... import settings
from .jax_names import JAX_VERSION


# the platform a pallas_call is being lowered for ("cpu": Triton's interpreter, "cuda")
_lowering_platform = contextvars.ContextVar("pallas_prof_lowering_platform", default="cpu")
# the GPU being lowered for where Triton gives it no tf32 dot (AMD archs but gfx942), else None
_no_tf32_arch = contextvars.ContextVar("pallas_prof_no_tf32_arch", default=None)


@contextlib.contextmanager
def lowering_for(platform: str, no_tf32_arch: str | None = None):
  """Lowering inside this block is for `platform`: conversions whose rounding XLA's
  backends do not agree on follow that platform's XLA. `no_tf32_arch`: the GPU lowered for
  multiplies no float32 dot in TF32 (Triton's backend for it takes no tf32)."""
  token = _lowering_platform.set(platform)
  arch_token = _no_tf32_arch.set(no_tf32_arch)
  try:
    yield
  finally:
    _no_tf32_arch.reset(arch_token)
    _lowering_platform.reset(token)


def arch_without_tf32_dots() -> str | None:
  """The GPU being lowered for (lowering_for) where it has no TF32 dot, else None: a float32
  dot at DEFAULT or HIGH precision, which allows TF32, then multiplies in float32."""
  return _no_tf32_arch.get()


def xla_rounds_tf32_dot_operands() -> bool:
  """Whether XLA, on the platform being lowered for, rounds the float32 operands of a
  TF32 dot to TF32 first: its GPU Triton pipeline does, for JAX's built-in backend
  (RoundF32ToTF32ForTf32DotRewritePass, cvt.rna.tf32.f32), where the tensor cores
  alone would truncate; its CPU computes such a dot in float32, and its ROCm pipeline
  has no such pass (and AMD GPUs no PTX)."""
  return _lowering_platform.get() == "cuda"


def xla_rounds_f64_to_16bit_twice(dtype) -> bool:
  """Whether XLA, on the platform being lowered for (lowering_for), converts
  float64 to a 16-bit float through float32, rounding twice; pallas-prof
  then does too, so a kernel agrees with the XLA beside it.

  It differs by version and by backend: jaxlib 0.10.2's CPU rounds twice for
  both types (1 + 2**-11 + 2**-40 becomes 1.0 in float16, 1 + 2**-8 + 2**-40 1.0
  in bfloat16; rounded once they are 1.001 and 1.008); jaxlib 0.11.2's CPU rounds
  float64 -> float16 once and float64 -> bfloat16 twice, its GPU both once (H200,
  2026-12-02, bench/results/convert_rounding_h200_3c29677.txt). So it is asked of
  that XLA, once per process, platform and type, on such a tie; if that fails,
  by version. Triton rounds once when asked directly (cvt.rn.f16.f64 /
  cvt.rn.bf16.f64 on sm_90, numpy's conversions in its interpreter) and twice
  when given the float32 step."""
  return _xla_rounds_twice(np.dtype(dtype).name, _lowering_platform.get())


@functools.cache
def _xla_rounds_twice(name: str, platform: str) -> bool:
  tie = {"float16": 1 + 2 ** -11 + 2 ** -40, "bfloat16": 1 + 2 ** -8 + 2 ** -40}[name]
  try:
    device = jax.devices("cpu" if platform == "cpu" else "gpu")[0]
    with jax.enable_x64(True):
      x = jax.device_put(np.array([tie], np.float64), device)     # an argument: not folded
      y = jax.jit(lambda v: v.astype(name))(x)
      return float(np.asarray(y).astype(np.float64)[0]) == 1.0
  except Exception:  # noqa: BLE001 - no such backend: what the versions measured did
    return platform == "cpu" and (JAX_VERSION < (0, 11) or name == "bfloat16")

@functools.lru_cache(maxsize=1)
def xla_libdevice_path() -> str | None:
  """The libdevice XLA's GPU compiler links, so that libdevice functions
  (powf among them) compute bit for bit what XLA and JAX's built-in backend
  compute; Triton's wheel ships a different libdevice version. XLA looks in
  --xla_gpu_cuda_data_dir, else in the CUDA directory JAX found (CUDA_ROOT, the
  nvidia-cuda-nvcc wheel), else in /usr/local/cuda. None: use Triton's own.
  PALLAS_PROF_LIBDEVICE=<path> chooses one; PALLAS_PROF_LIBDEVICE=triton keeps Triton's."""
  chosen = settings.value("PALLAS_PROF_LIBDEVICE")
  if chosen:
    return None if chosen == "triton" else chosen
  roots = []
  for flag in os.environ.get("XLA_FLAGS", "").split():
    if flag.startswith("--xla_gpu_cuda_data_dir="):
      roots.append(flag.split("=", 1)[1])
  try:
    # lazy: private to JAX, absent in some releases (the except says what then)
    from jax._src import lib as jax_lib
    if isinstance(getattr(jax_lib, "cuda_path", None), str):
      roots.append(jax_lib.cuda_path)
  except ImportError:
    pass
  roots.append("/usr/local/cuda")
  for root in roots:
    path = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
    if os.path.isfile(path):
      return path
  return None
