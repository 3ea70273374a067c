"""Small typed building blocks the rules share: casts, broadcasts, masks.

Each function takes the KernelBuilder and Values and returns a Value whose
dtype and shape are exactly what Triton will compute, with every dtype
change spelled out (no reliance on Triton's implicit promotion).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import compat
from .codegen import (KernelBuilder, Value, is_bool, is_float, is_int, is_low_float, is_packed4,
                      register_dtype,
                      is_signed, literal, next_pow2, tl_dtype)
from ..errors import Unsupported
from . import triton_names as tl

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def const(value, dtype) -> Value:
  dtype = np.dtype(dtype)
  return Value(literal(value, dtype), dtype, (), const=_python_scalar(value, dtype))


def _python_scalar(value, dtype):
  value = np.asarray(value).reshape(())
  if is_bool(dtype):
    return bool(value)
  if is_float(dtype):
    return float(value)
  return int(value)


def shape_expr(shape) -> str:
  dims = ", ".join(str(d) for d in shape)
  return f"({dims},)" if len(shape) == 1 else f"({dims})"


def full(b: KernelBuilder, shape, value, dtype, hint="full") -> Value:
  """A tensor of `shape` (logical) filled with a constant."""
  dtype = np.dtype(dtype)
  if not shape:
    return const(value, dtype)
  v = const(value, dtype)
  if is_low_float(dtype):
    expr = (f"{tl.full}({shape_expr(_padded(shape))}, {_scalar_text(v)}, {tl.float32})"
            f".to({tl_dtype(dtype)})")
  else:
    expr = f"{tl.full}({shape_expr(_padded(shape))}, {_scalar_text(v)}, {tl_dtype(dtype)})"
  return b.value(hint, expr, dtype, shape, of=())


def materialize(b: KernelBuilder, v: Value, hint="c") -> Value:
  """A scalar constant as a 0-d tensor of its dtype (Triton then computes with
  it in that dtype; a bare Python number would be computed by Python)."""
  if v.const is None or v.shape:
    return v
  expr = (f"{tl.full}((), {_scalar_text(v)}, {tl.float32}).to({tl_dtype(v.dtype)})"
          if is_low_float(v.dtype) else f"{tl.full}((), {_scalar_text(v)}, {tl_dtype(v.dtype)})")
  return b.value(hint, expr, v.dtype, (), of=())


def _scalar_text(v: Value) -> str:
  """The raw Python literal of a constant (tl.full takes the dtype itself)."""
  if is_bool(v.dtype):
    return "True" if v.const else "False"
  if is_float(v.dtype):
    x = float(v.const)
    if x != x:
      return 'float("nan")'
    if x in (float("inf"), float("-inf")):
      return 'float("inf")' if x > 0 else 'float("-inf")'
    return repr(x)
  return str(int(v.const))


def _padded(shape):
  return tuple(next_pow2(d) for d in shape)


def cast(b: KernelBuilder, v: Value, dtype, hint: str | None = None) -> Value:
  """Converts with XLA's semantics on CPU.

  float -> int saturates and maps NaN to 0; -> bool is x != 0; conversions
  into a 16-bit float go through float32 where XLA's do (so the rounding
  matches it: int32 -> bf16 is rounded twice; see _through_float32).
  """
  dtype = np.dtype(dtype)
  src = np.dtype(v.dtype)
  if src == dtype:
    return v
  if v.const is not None and not v.shape and not (is_packed4(src) or is_packed4(dtype)):
    return const(_convert_scalar(v.const, src, dtype), dtype)
  hint = hint or f"{_short(dtype)}"
  if is_packed4(src) or is_packed4(dtype):
    return _cast_4bit(b, v, dtype, hint)
  if is_bool(dtype):
    if is_low_float(src):
      # compare the value, not the bits: Triton's interpreter keeps bf16 as
      # raw uint16 bits, where -0.0 is not 0
      v = b.value(hint + "_f32", f"{v}.to({tl.float32})", F32, v.shape, of=(v,))
    zero = literal(0, v.dtype) if not is_bool(v.dtype) else "False"
    return b.value(hint, f"{v} != {zero}", dtype, v.shape, of=(v,))
  if is_float(src) and is_int(dtype):
    return _float_to_int(b, v, dtype, hint)
  if _through_float32(src, dtype):
    v = b.value(hint + "_f32", f"{v}.to({tl.float32})", F32, v.shape, of=(v,))
  return b.value(hint, f"{v}.to({tl_dtype(dtype)})", dtype, v.shape, of=(v,))


def _through_float32(src, dst) -> bool:
  """Conversions into a 16-bit float that XLA rounds twice, through float32:
  from integers (XLA's int32 -> bf16, on the CPU and the H200), and from
  float64 in the JAX versions whose XLA does (compat)."""
  if not is_low_float(dst) or (is_float(src) and np.dtype(src).itemsize == 4):
    return False
  if np.dtype(src) == np.float64:
    return compat.xla_rounds_f64_to_16bit_twice(dst)
  return True


def _cast_4bit(b: KernelBuilder, v: Value, dtype, hint: str) -> Value:
  """Casts from or to int4/uint4 (held in int8/uint8 registers), as XLA does:
  floats saturate (NaN -> 0), integers wrap to the low 4 bits."""
  src = np.dtype(v.dtype)
  if is_packed4(src):
    v = dataclasses.replace(v, dtype=register_dtype(src))   # the held 8-bit value
    if not is_packed4(dtype):
      return cast(b, v, dtype, hint)
    src = v.dtype
  signed = np.dtype(dtype).name == "int4"
  reg = tl_dtype(dtype)
  if is_float(src):
    lo, hi = (-8.0, 7.0) if signed else (0.0, 15.0)
    x = b.value(hint + "_f", f"{v}.to({tl.float32})", F32, v.shape, of=(v,))
    sat = f"{tl.minimum}({tl.maximum}({x}, {lo!r}), {hi!r}).to({reg})"
    return b.value(hint, f"{tl.where}({x} != {x}, {literal(0, register_dtype(dtype))}, {sat})",
                   dtype, v.shape, of=(x,))
  low = b.assign(hint + "_bits", f"{v}.to({tl.int32}) & 15")
  expr = f"(({low} ^ 8) - 8).to({reg})" if signed else f"{low}.to({reg})"
  return b.value(hint, expr, dtype, v.shape, of=(v,))


def _convert_scalar(x, src, dst):
  """A constant converted at lowering time, with the same rules as `cast`."""
  if is_bool(dst):
    return bool(x != 0)
  if is_int(dst) and is_float(src):
    if x != x:
      return 0
    info = np.iinfo(dst)
    if x >= 2.0 ** (info.bits - (1 if info.min < 0 else 0)):
      return int(info.max)
    return int(max(np.trunc(x), info.min))
  if is_int(dst):
    return int(np.asarray(int(x)).astype(dst)) if not is_bool(src) else int(bool(x))
  if _through_float32(src, dst):
    x = np.float32(x)   # the same double rounding as `cast`
  return float(np.asarray(x).astype(dst).astype(np.float64))


def _float_to_int(b: KernelBuilder, v: Value, dtype, hint: str) -> Value:
  """XLA's float -> int: NaN -> 0, saturating at both ends, else truncating."""
  info = np.iinfo(dtype)
  x = v
  if is_low_float(v.dtype):
    x = b.value(hint + "_f", f"{v}.to({tl.float32})", F32, v.shape, of=(v,))
  # 2**(bits-1) (2**bits unsigned) is exact in every float type; at and above
  # it the result is the largest int. Below it truncation fits.
  first_too_big = float(2.0 ** (info.bits - (1 if info.min < 0 else 0)))
  lowest = f"{tl.full}((), {float(info.min)!r}, {tl_dtype(x.dtype)})"
  truncated = f"{tl.maximum}({x}, {lowest}).to({tl_dtype(dtype)})"
  saturated = b.assign(hint + "_sat", f"{tl.where}({x} >= {first_too_big!r}, "
                       f"{literal(int(info.max), dtype)}, {truncated})")
  return b.value(hint, f"{tl.where}({x} != {x}, {literal(0, dtype)}, {saturated})", dtype, v.shape,
                 of=(x,))


def _short(dtype) -> str:
  return {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
          "int32": "i32", "int64": "i64", "int8": "i8", "int16": "i16", "uint8": "u8",
          "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "pred"}.get(
              np.dtype(dtype).name, np.dtype(dtype).name)


def broadcast_to(b: KernelBuilder, v: Value, shape, hint="bcast") -> Value:
  """Broadcasts a value whose rank already matches (or a scalar) to `shape`."""
  shape = tuple(shape)
  if tuple(v.shape) == shape:
    return v
  if not v.shape:
    if v.const is not None:
      return full(b, shape, v.const, v.dtype, hint)
    return b.value(hint, f"{tl.broadcast_to}({v}, {shape_expr(_padded(shape))})", v.dtype, shape,
                   of=(v,))
  if len(v.shape) != len(shape) or any(s not in (1, d)
                                        for s, d in zip(v.shape, shape, strict=True)):
    raise Unsupported(f"cannot broadcast shape {v.shape} to {shape}")
  return b.value(hint, f"{tl.broadcast_to}({v}, {shape_expr(_padded(shape))})", v.dtype, shape,
                 of=(v,))


def expand_to_rank(v: Value, positions: tuple[int, ...], rank: int) -> str:
  """`v[:, None, ...]`: places v's dims at `positions` of a rank-`rank` tensor."""
  if len(positions) == rank:
    return str(v)
  index = ["None"] * rank
  for p in positions:
    index[p] = ":"
  return f"{v}[{', '.join(index)}]"


def valid_lanes(b: KernelBuilder, shape, axes, hint="valid") -> str | None:
  """A boolean expression (padded shape) that is True on logical lanes of `axes`."""
  rank = len(shape)
  parts = []
  for a in axes:
    if next_pow2(shape[a]) != shape[a]:
      cond = Value(f"({tl.arange}(0, {next_pow2(shape[a])}) < {shape[a]})", BOOL, (shape[a],))
      parts.append(expand_to_rank(cond, (a,), rank))
  if not parts:
    return None
  return b.assign(hint, " & ".join(parts))


def mask_padding(b: KernelBuilder, v: Value, axes, fill, hint="masked") -> Value:
  """Replaces padded lanes along `axes` with `fill` (e.g. the reduction identity)."""
  mask = valid_lanes(b, v.shape, axes)
  if mask is None:
    return v
  return b.value(hint, f"{tl.where}({mask}, {v}, {literal(fill, v.dtype)})", v.dtype, v.shape,
                 of=(v,))


def identity_of(kind: str, dtype):
  dtype = np.dtype(dtype)
  if kind == "sum":
    return False if is_bool(dtype) else 0
  if kind == "prod":
    return True if is_bool(dtype) else 1
  if kind == "logsumexp":
    return float("-inf")
  if kind in ("max", "argmax"):
    if is_float(dtype):
      return float("-inf")
    if is_bool(dtype):
      return False
    return int(np.iinfo(dtype).min)
  if kind in ("min", "argmin"):
    if is_float(dtype):
      return float("inf")
    if is_bool(dtype):
      return True
    return int(np.iinfo(dtype).max)
  if kind == "and":
    return True if is_bool(dtype) else -1 if is_signed(dtype) else int(np.iinfo(dtype).max)
  if kind in ("or", "xor"):
    return False if is_bool(dtype) else 0
  raise ValueError(kind)
