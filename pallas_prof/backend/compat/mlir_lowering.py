"""JAX's MLIR lowering as pallas-prof's rule meets it: registering the pallas_call rule,
lowering functions and custom calls, jaxlib's Triton custom-call bindings and kernel
(whose constructor changed in jax 0.11), kernel names as JAX spells them.
"""
from __future__ import annotations

from jax._src.interpreters import mlir
from jax._src.pallas import core as pallas_core
from jax._src.pallas import pallas_call as _pallas_call_mod

def register_platform_lowering(prim, rule, platform: str) -> None:
  mlir.register_lowering(prim, rule, platform=platform)


def default_pallas_call_lowering():
  """JAX's own (platform-independent) pallas_call lowering rule."""
  return _pallas_call_mod._pallas_call_lowering


def register_backend_lowering_rule(params_cls, rule, platform: str = "gpu") -> None:
  pallas_core.register_lowering_rule(params_cls, rule, platform)


def lower_fun(fun, multiple_results: bool = True):
  return mlir.lower_fun(fun, multiple_results=multiple_results)


def gpu_triton():
  """jaxlib's Triton custom-call bindings (GPU builds only)."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src.lib import gpu_triton as lib
  return lib


def custom_call(*args, **kwargs):
  return mlir.custom_call(*args, **kwargs)


def aval_to_ir_type(module_context, aval):
  return mlir.aval_to_ir_type(module_context, aval)


def ir():
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src.lib.mlir import ir as _ir
  return _ir


def make_triton_kernel(lib, *, name, num_warps, shared_bytes, ptx, ttir, compute_capability,
                       global_scratch_size=0, global_scratch_align=1):
  """jaxlib's TritonKernel; its constructor grew scratch arguments in jax 0.11."""
  try:
    return lib.TritonKernel(name, num_warps, 1, shared_bytes, ptx, ttir, compute_capability,
                            global_scratch_size, global_scratch_align)
  except TypeError:
    if global_scratch_size:
      raise RuntimeError(
          f"kernel {name} needs {global_scratch_size} bytes of global scratch, which this "
          f"jaxlib cannot allocate; upgrade to jax >= 0.11") from None
    return lib.TritonKernel(name, num_warps, 1, shared_bytes, ptx, ttir, compute_capability)


def sanitize_name(name: str) -> str:
  """A kernel name as JAX's MLIR lowering spells it."""
  return mlir.sanitize_name(name)
