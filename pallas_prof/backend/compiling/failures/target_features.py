"""A compile that failed because the target GPU lacks what the kernel uses, said so.

Compiling for a GPU other than the one a kernel was written on meets what that
GPU does not have before anything else: Triton's front end refuses an fp8 type
the target lacks ("type fp8e4nv not supported in this architecture"), ptxas
refuses an instruction an older target lacks ("Feature 'cvt with .e4m3x2'
requires .target sm_89 or higher"). Read as compile_diagnostics reads any
failure, these look like pallas-prof's or Triton's bugs; they are the kernel's
use of a feature the target lacks: a refusal, at the user's line, with what to do.
"""
from __future__ import annotations

import dataclasses
import re

from ...errors import CompileError
from .. import triton_compat
from ...lowering import triton_names
from ...targets import as_target

# Triton's names of the fp8 types -> JAX's (jnp.float8_*), and the jaxpr's short names
FP8_NAMES = {"fp8e4nv": ("float8_e4m3fn", "f8_e4m3fn"), "fp8e5": ("float8_e5m2", "f8_e5m2"),
             "fp8e4b8": ("float8_e4m3fnuz", "f8_e4m3fnuz"),
             "fp8e5b16": ("float8_e5m2fnuz", "f8_e5m2fnuz"), "fp8e4b15": ("fp8e4b15", "fp8e4b15")}

_FP8_REFUSED = re.compile(r"type (fp8\w+) not supported in this architecture")
_PTX_FEATURE = re.compile(r"Feature '([^']+)' requires \.target (sm_\d+a?) or higher")
_NO_DOT_PRECISION = re.compile(r"input_precision must be one of \(([^)]*)\)\. Got (\w+)")
_NO_LIBRARY_FUNCTION = re.compile(
    r"module 'triton\.language\.extra\.(hip|cuda)\.libdevice' has no attribute '(\w+)'")

# What to write instead, for the device-library functions some Triton's AMD library lacks
_LIBRARY_WORKAROUNDS = {
    "cbrt": "write jnp.sign(x) * jnp.abs(x) ** (1 / 3) instead of jnp.cbrt",
    "popc": "count the bits with shifts and masks, or compile with a Triton whose AMD "
            "library has popc (3.9 has it)",
    "clz": "find the leading zeros with shifts and comparisons, or compile with a Triton "
           "whose AMD library has clz (3.9 has it)",
    "mulhi": "widen to int64, multiply, and shift right by 32",
}


def refusal(gk, diagnosis, message: str, request: dict | None) -> CompileError | None:
  """The CompileError of a compile that failed on a feature its target lacks, or None
  when the failure (`message`: Triton's error; `diagnosis`: as diagnosed) is another."""
  if request is None:
    return None
  target = as_target(request["target"])
  text = "\n".join((message, *diagnosis.messages))
  fp8 = _FP8_REFUSED.search(text)
  if fp8:
    return _fp8_refusal(gk, diagnosis, target, fp8.group(1))
  if target.backend == "hip" and _PTX_ASM in gk.source:
    return _ptx_refusal(gk, diagnosis, target)
  precision = _NO_DOT_PRECISION.search(text)
  if precision:
    return _precision_refusal(gk, diagnosis, target, precision.group(2),
                              re.findall(r"\w+", precision.group(1)))
  missing = _NO_LIBRARY_FUNCTION.search(text)
  if missing:
    return _library_refusal(gk, diagnosis, target, missing.group(2))
  feature = _PTX_FEATURE.search(text)
  if feature:
    summary = (f"{target.name} lacks {feature.group(1)!r}, which the kernel's code needs "
               f"(PTX has it from {feature.group(2)})")
    hint = (f"compile for {feature.group(2)} or later; on {target.name}, convert the fp8 "
            "operands to bfloat16 or float16 first" if "e4m3" in feature.group(1) or
            "e5m2" in feature.group(1) else f"compile for {feature.group(2)} or later")
    return _error(gk, diagnosis, target, summary, hint, diagnosis.equations)
  return None


def _fp8_refusal(gk, diagnosis, target, triton_name: str) -> CompileError:
  jax_name, short = FP8_NAMES.get(triton_name, (triton_name, triton_name))
  since = " (NVIDIA GPUs have it from sm_89)" if target.backend == "cuda" else ""
  summary = f"{target.name} has no {jax_name}{since}"
  later = "sm_89 or later" if target.backend == "cuda" else f"a target that has {jax_name}"
  hint = f"convert the {jax_name} values to bfloat16 or float16 before using them, " \
         f"or compile for {later}"
  equations = diagnosis.equations or tuple(
      e.index for e in gk.eqns if short in getattr(e, "text", ""))
  return _error(gk, diagnosis, target, summary, hint, equations)


_PTX_ASM = f"{triton_names.inline_asm_elementwise}("   # pallas-prof emits it with NVIDIA PTX only


def _equations_with(gk, needle: str) -> tuple[int, ...]:
  """The equations whose generated lines hold `needle`, in order."""
  return tuple(dict.fromkeys(
      gk.line_map[n] for n, text in enumerate(gk.code_lines(), 1)
      if needle in text and gk.line_map.get(n) is not None))


def _ptx_refusal(gk, diagnosis, target) -> CompileError:
  """A kernel lowered for an NVIDIA GPU, compiled for an AMD one: the PTX pallas-prof put
  in it (XLA's CUDA pipeline's TF32 rounding of a float32 dot's operands) is no AMDGCN."""
  equations = _equations_with(gk, _PTX_ASM)
  summary = (f"the kernel was lowered for an NVIDIA GPU and holds NVIDIA PTX (a float32 dot's "
             f"TF32 rounding, as XLA's CUDA pipeline does it), which {target.name} cannot run")
  hint = ("lower it for the GPU it will run on: on a ROCm machine, or on a CPU "
          "(`pallas-prof show KERNEL --target " + target.name + "` there); or give the dot "
          "precision=HIGHEST, which takes no TF32 rounding")
  return _error(gk, diagnosis, target, summary, hint, equations or diagnosis.equations)


# what a dot algorithm the target lacks can become, in lax.DotAlgorithmPreset's words
_PRECISION_WORKAROUNDS = {
    "tf32x3": "BF16_BF16_F32_X3 (bf16x3) is as close to float32 and {target} has it; or "
              "precision=HIGHEST for exact float32 products",
    "tf32": "precision=HIGHEST for exact float32 products, or BF16_BF16_F32_X3 (bf16x3)",
}


def _precision_refusal(gk, diagnosis, target, precision: str, allowed) -> CompileError:
  """A float32 dot's algorithm (tl.dot's input_precision, from lax.DotAlgorithmPreset or
  precision=) that Triton's backend for the target does not take: AMD has no tf32x3."""
  summary = (f"{target.name} has no {precision} dot (Triton's backend for it takes "
             f"{', '.join(allowed)}), which a float32 dot of the kernel asks for")
  hint = ("give the dot another algorithm: " + _PRECISION_WORKAROUNDS.get(
      precision, "one of those").format(target=target.name))
  equations = diagnosis.equations or _equations_with(gk, f'input_precision="{precision}"')
  return _error(gk, diagnosis, target, summary, hint, equations)


def _library_refusal(gk, diagnosis, target, function: str) -> CompileError:
  """Triton's device library for the target (libdevice on NVIDIA, ocml on AMD, as
  triton.language.extra.libdevice picks it) lacks a function the kernel calls."""
  library = "AMD" if target.backend == "hip" else "NVIDIA"
  summary = (f"Triton {triton_compat.triton_release()}'s {library} device library has no "
             f"{function}, which the kernel calls: it cannot compile for {target.name}")
  hint = _LIBRARY_WORKAROUNDS.get(function, "compute it from other operations, or compile "
                                            "with a Triton whose device library has it")
  equations = diagnosis.equations or tuple(
      e.index for e in gk.eqns if function in getattr(e, "text", ""))
  return _error(gk, diagnosis, target, summary, hint, equations)


def _error(gk, diagnosis, target, summary: str, hint: str, equations) -> CompileError:
  d = dataclasses.replace(
      diagnosis, kind="target", summary=summary, equations=tuple(equations), fault="kernel",
      fault_reason=f"the kernel uses a feature {target.name} does not have (not a bug)",
      mapped_by=diagnosis.mapped_by or "the equations of the type the target lacks")
  eqns = [gk.eqns[i] for i in d.equations]
  return CompileError(summary, diagnosis=d, equations=eqns, hint=hint, kernel=gk.name,
                      stage=d.stage, details={"target": target.name,
                                              "Triton said": _first_line(diagnosis)},
                      jaxpr_text=gk.jaxpr_text, ref_names=gk.ref_names)


def _first_line(diagnosis) -> str:
  return (diagnosis.messages[0] if diagnosis.messages else diagnosis.summary)[:300]
