"""dot_general -> tl.dot, with transposed operands, batch dimensions,
precision -> input_precision, preferred_element_type, and small matrices.

Triton's tl.dot needs M, N, K >= 16. Smaller operands are padded to 16 by
repeating them and zeroing the copies (exact: the extra products are 0),
and the result is folded back; JAX's own backend rejects such shapes.
Padded K lanes (non-power-of-two contraction) are zeroed on both sides.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from .. import emit
from ..codegen import Value, is_float, is_int, next_pow2, padded_shape, tl_dtype
from ..errors import Unsupported
from . import register

MIN_DOT = 16
F32 = np.dtype(np.float32)


def _input_precision(precision, a_dtype) -> tuple[str | None, str | None]:
  """(input_precision, forced operand dtype) for a JAX precision spec."""
  Preset = getattr(lax, "DotAlgorithmPreset", None)
  if precision is None or (Preset is not None and precision == Preset.DEFAULT):
    precision = (lax.Precision.DEFAULT, lax.Precision.DEFAULT)
  if Preset is not None and isinstance(precision, Preset):
    table = {
        Preset.TF32_TF32_F32: ("tf32", None),
        Preset.TF32_TF32_F32_X3: ("tf32x3", None),
        Preset.F32_F32_F32: ("ieee", None),
        Preset.BF16_BF16_F32: (None, "bfloat16"),
        Preset.F16_F16_F32: (None, "float16"),
        Preset.BF16_BF16_BF16: (None, "bfloat16"),
        Preset.F16_F16_F16: (None, "float16"),
        Preset.BF16_BF16_F32_X3: ("bf16x3", None),
        Preset.BF16_BF16_F32_X6: ("bf16x6", None),
    }
    if precision not in table:
      raise Unsupported(f"dot algorithm {precision}",
                        "use one of TF32_TF32_F32(_X3), F32_F32_F32, BF16_BF16_F32(_X3/_X6), "
                        "F16_F16_F32")
    return table[precision]
  if isinstance(precision, tuple):
    if any(p in (lax.Precision.HIGH, lax.Precision.DEFAULT, None) for p in precision):
      # Same choice as JAX's Triton backend: DEFAULT and HIGH use TF32.
      return ("tf32" if np.dtype(a_dtype) == F32 else None), None
    return ("ieee" if np.dtype(a_dtype) == F32 else None), None
  if isinstance(precision, lax.Precision):
    return _input_precision((precision, precision), a_dtype)
  raise Unsupported(f"dot precision {precision!r}")


def _accumulator(out_dtype, a_dtype) -> np.dtype:
  if is_int(a_dtype):
    return np.dtype(np.int32)
  if np.dtype(out_dtype) in (np.float16, np.float64):
    return np.dtype(out_dtype)
  return F32


def _pad_rows(ctx, x: Value, axis: int, target: int, zero) -> Value:
  """Grows `axis` from n to `target` lanes: repeat, then zero the copies."""
  n = next_pow2(x.shape[axis])
  reps = target // n
  rank = x.ndim
  padded = list(padded_shape(x.shape))
  # insert a repeat dim before `axis`, broadcast, merge: lane r*n+i holds x[i]
  expanded = emit.expand_to_rank(x, tuple(i if i < axis else i + 1 for i in range(rank)), rank + 1)
  big = padded[:axis] + [reps] + padded[axis:]
  rep = ctx.b.assign("rep", f"tl.broadcast_to({expanded}, {emit.shape_expr(big)})")
  merged_shape = padded[:axis] + [target] + padded[axis + 1:]
  merged = ctx.b.assign("grown", f"tl.reshape({rep}, {emit.shape_expr(merged_shape)})")
  lane = emit.expand_to_rank(Value(f"tl.arange(0, {target})", np.dtype(np.int32), (target,)),
                             (axis,), rank)
  out_shape = tuple(target if i == axis else d for i, d in enumerate(x.shape))
  # lanes >= the logical size are zero (also drops padded lanes of x)
  return ctx.value("grown", f"tl.where({lane} < {x.shape[axis]}, {merged}, {zero})",
                   x.dtype, out_shape)


def _shrink_rows(ctx, acc: Value, axis: int, size: int, padded_size: int) -> Value:
  """Inverse of _pad_rows on the result: lanes beyond padded_size are zero."""
  total = acc.padded[axis]
  if total == padded_size:
    return acc
  reps = total // padded_size
  shape = list(acc.padded)
  split = shape[:axis] + [reps, padded_size] + shape[axis + 1:]
  folded = ctx.b.assign("folded", f"tl.reshape({acc}, {emit.shape_expr(split)})")
  out_shape = tuple(size if i == axis else d for i, d in enumerate(acc.shape))
  return ctx.value("dot_out", f"tl.sum({folded}, axis={axis})", acc.dtype, out_shape)


@register(lax.dot_general_p)
def _dot_general(ctx, a, b, *, dimension_numbers, precision=None, preferred_element_type=None,
                 out_sharding=None, **params):
  (a_contract, b_contract), (a_batch, b_batch) = dimension_numbers
  for v in (a, b):
    if np.issubdtype(v.dtype, np.unsignedinteger):
      raise Unsupported(f"dot of unsigned {v.dtype}", "cast to a signed type first")
  if len(a_contract) != 1 or len(b_contract) != 1:
    raise Unsupported("dot_general contracting several dimensions",
                      "reshape the operands so one dimension is contracted")
  if len(a_batch) > 1 or tuple(a_batch) not in ((), (0,)) or tuple(b_batch) not in ((), (0,)):
    raise Unsupported("dot_general with batch dimensions other than a leading one",
                      "move the batch dimension first")
  batched = bool(a_batch)
  if a.ndim != 2 + batched or b.ndim != 2 + batched:
    raise Unsupported(f"dot of ranks {a.ndim} and {b.ndim}",
                      "tl.dot takes 2D operands (3D with a leading batch dimension)")
  out_dtype = np.dtype(ctx.avals_out[0].dtype)
  input_precision, operand_dtype = _input_precision(precision, a.dtype)
  # bring operands to [batch,] M x K and [batch,] K x N
  ka = a_contract[0]
  if ka != a.ndim - 1:
    a = _swap_last(ctx, a)
  kb = b_contract[0]
  if kb != b.ndim - 2:
    b = _swap_last(ctx, b)
  if operand_dtype is not None:
    a = emit.cast(ctx.b, a, operand_dtype)
    b = emit.cast(ctx.b, b, operand_dtype)
  if a.dtype != b.dtype:
    common = np.promote_types(a.dtype, b.dtype) if not (is_float(a.dtype) and is_float(b.dtype)) \
        else (F32 if max(a.dtype.itemsize, b.dtype.itemsize) <= 4 else np.dtype(np.float64))
    a = emit.cast(ctx.b, a, common)
    b = emit.cast(ctx.b, b, common)
  if np.dtype(a.dtype) == np.bool_:
    a, b = emit.cast(ctx.b, a, np.int8), emit.cast(ctx.b, b, np.int8)
  acc_dtype = _accumulator(out_dtype, a.dtype)
  m_ax, k_ax_a = a.ndim - 2, a.ndim - 1
  k_ax_b, n_ax = b.ndim - 2, b.ndim - 1
  M, K, N = a.shape[m_ax], a.shape[k_ax_a], b.shape[n_ax]
  zero = "0" if is_int(a.dtype) else "0.0"
  # zero padded K lanes: garbage there would pollute every output
  a = emit.mask_padding(ctx.b, a, (k_ax_a,), 0, "lhs")
  b = emit.mask_padding(ctx.b, b, (k_ax_b,), 0, "rhs")
  if next_pow2(K) < MIN_DOT:
    a = _pad_rows(ctx, a, k_ax_a, MIN_DOT, zero)
    b = _pad_rows(ctx, b, k_ax_b, MIN_DOT, zero)
  if next_pow2(M) < MIN_DOT:
    a = _pad_rows(ctx, a, m_ax, MIN_DOT, zero)
  if next_pow2(N) < MIN_DOT:
    b = _pad_rows(ctx, b, n_ax, MIN_DOT, zero)
  out_shape = (a.shape[:-2] + (a.shape[-2], b.shape[-1])) if batched else (a.shape[0], b.shape[1])
  kwargs = [f"out_dtype={tl_dtype(acc_dtype)}"]
  if input_precision is not None:
    kwargs.append(f'input_precision="{input_precision}"')
  acc = ctx.value("acc", f"tl.dot({a}, {b}, {', '.join(kwargs)})", acc_dtype, out_shape)
  acc = _shrink_rows(ctx, acc, acc.ndim - 2, M, next_pow2(M))
  acc = _shrink_rows(ctx, acc, acc.ndim - 1, N, next_pow2(N))
  return emit.cast(ctx.b, acc, out_dtype) if acc.dtype != out_dtype else acc


def _swap_last(ctx, x: Value) -> Value:
  perm = list(range(x.ndim))
  perm[-1], perm[-2] = perm[-2], perm[-1]
  shape = tuple(x.shape[p] for p in perm)
  expr = f"tl.trans({x})" if x.ndim == 2 else f"tl.permute({x}, {tuple(perm)})"
  return ctx.value("t", expr, x.dtype, shape)
