"""dot_general -> tl.dot, with transposed operands, a leading batch dimension,
vectors, precision -> input_precision, preferred_element_type, small matrices.

Triton (3.6, NVIDIA) takes M and N from 1 but needs K >= 16 (K >= 32 for
8-bit operands); float64 dots need M, N, K >= 16 (smaller tiles crash the
MMAv2 layout, as JAX's own backend notes). Smaller dimensions are grown by
repeating the operand and zeroing the copies (exact: the extra products are 0),
and the result is folded back. Padded K lanes (a non-power-of-two contraction)
are zeroed on both sides. Integer dots other than int8 have no tensor-core
path: they multiply and sum in registers, in the result's integer type, which
wraps exactly like XLA.

A float32 dot at DEFAULT or HIGH precision multiplies in TF32, as XLA's GPU
backend and JAX's Triton backend do; on an AMD GPU whose Triton backend takes no
tf32 dot (its allowed_dot_input_precisions) it multiplies in float32, which those
precisions allow, and says so at the dot's line once (Tf32FallbackWarning).
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import jax.numpy as jnp
from jax import lax

from ... import compat
from .. import emit
from ...artifacts import DotFacts
from ..codegen import Value, is_bool, is_float, is_int, next_pow2, tl_dtype
from ...errors import Unsupported
from .table import register
from .reductions import sum_dtype
from .shape import grow_axis, reshape_value
from .. import triton_names as tl

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)
INT8 = np.dtype(np.int8)


@dataclasses.dataclass(frozen=True)
class _Algorithm:
  input_precision: str | None      # tl.dot's input_precision (f32 operands only)
  operand_dtype: np.dtype | None   # operands are converted to this first
  acc_dtype: np.dtype | None       # tl.dot's out_dtype


_TF32_PRECISIONS = (lax.Precision.DEFAULT, lax.Precision.HIGH, None)


class Tf32FallbackWarning(UserWarning):
  """A float32 dot that allows TF32 multiplies in float32: the GPU has no TF32 dot."""


def _preset_algorithm(preset) -> _Algorithm:
  Preset = lax.DotAlgorithmPreset
  precisions = {
      Preset.TF32_TF32_F32: "tf32", Preset.TF32_TF32_F32_X3: "tf32x3",
      Preset.F32_F32_F32: "ieee", Preset.BF16_BF16_F32_X3: "bf16x3",
      Preset.BF16_BF16_F32_X6: "bf16x6",
      # Triton has no 9-pass bf16 split; plain f32 is at least as precise
      Preset.BF16_BF16_F32_X9: "ieee", Preset.F64_F64_F64: None,
      Preset.BF16_BF16_F32: None, Preset.BF16_BF16_BF16: None,
      Preset.F16_F16_F32: None, Preset.F16_F16_F16: None,
  }
  if preset not in precisions:
    raise Unsupported(f"dot algorithm {preset.name}",
                      "use DEFAULT, F32_F32_F32, TF32_TF32_F32(_X3), BF16_BF16_F32(_X3/_X6/_X9), "
                      "BF16_BF16_BF16, F16_F16_F32, F16_F16_F16 or F64_F64_F64")
  operand = np.dtype(preset.supported_lhs_types[0])
  acc = np.dtype(preset.accumulation_type)
  if acc == jnp.bfloat16:
    acc = F32          # tl.dot cannot accumulate in bf16; round once at the end
  return _Algorithm(precisions[preset], operand, acc)


def _algorithm(precision, operand_dtype) -> _Algorithm:
  Preset = getattr(lax, "DotAlgorithmPreset", None)
  if Preset is not None and isinstance(precision, Preset) and precision != Preset.DEFAULT:
    return _preset_algorithm(precision)
  if precision is None or (Preset is not None and precision == Preset.DEFAULT):
    precision = (lax.Precision.DEFAULT, lax.Precision.DEFAULT)
  if isinstance(precision, lax.Precision):
    precision = (precision, precision)
  if not isinstance(precision, tuple):
    raise Unsupported(f"dot precision {precision!r}",
                      "use a lax.Precision or a lax.DotAlgorithmPreset")
  if np.dtype(operand_dtype) != F32:
    return _Algorithm(None, None, None)
  # As JAX's Triton backend and XLA on GPU: DEFAULT and HIGH multiply in TF32.
  tf32 = any(p in _TF32_PRECISIONS for p in precision)
  return _Algorithm("tf32" if tf32 else "ieee", None, None)


def _asks_tf32_by_name(precision) -> bool:
  """A DotAlgorithmPreset that names TF32: what the user asked for, refused where missing."""
  preset = getattr(lax, "DotAlgorithmPreset", None)
  return preset is not None and isinstance(precision, preset) and "TF32" in precision.name


# warned once per kernel, line and arch in this process: the tuner, the workarounds, the
# profiler and the advice lower the same call again
_warned: set[tuple] = set()


def _float32_instead(ctx, algorithm: _Algorithm) -> _Algorithm:
  arch = compat.arch_without_tf32_dots()
  info = ctx.info
  key = (ctx.kernel.name, info.file, info.line, arch)
  if key not in _warned:
    _warned.add(key)
    warnings.warn_explicit(
        f"kernel `{ctx.kernel.name}`: {arch} has no TF32 dot, so this DEFAULT/HIGH-precision "
        "float32 dot multiplies in full float32. Pass precision=HIGHEST to ask for that (no "
        "warning), or lax.DotAlgorithmPreset.BF16_BF16_F32_X3 for speed at near-float32 "
        "accuracy", Tf32FallbackWarning, info.file or "an unknown line", info.line or 0)
  return dataclasses.replace(algorithm, input_precision="ieee")


def _common_dtype(a: Value, b: Value) -> np.dtype:
  if a.dtype == b.dtype:
    dt = np.dtype(a.dtype)
  else:
    dt = np.dtype(jnp.promote_types(a.dtype, b.dtype))
  return INT8 if is_bool(dt) else dt


def _min_sizes(dtype) -> tuple[int, int, int]:
  """The smallest (M, N, K) tl.dot takes for these operands on NVIDIA."""
  dtype = np.dtype(dtype)
  if dtype == F64:
    return 16, 16, 16
  if dtype.itemsize == 1:
    return 1, 1, 32
  return 1, 1, 16


def _pad_rows(ctx, x: Value, axis: int, target: int, zero: str) -> Value:
  """Grows `axis` from n to `target` lanes: repeat, then zero the copies."""
  grown = grow_axis(ctx, x, axis, target)
  lane = emit.expand_to_rank(Value(f"{tl.arange}(0, {target})", I32, (target,)), (axis,), x.ndim)
  # lanes >= the logical size are zero (also drops padded lanes of x)
  return ctx.value("grown", f"{tl.where}({lane} < {x.shape[axis]}, {grown}, {zero})",
                   x.dtype, grown.shape)


def _shrink_rows(ctx, acc: Value, axis: int, size: int, padded_size: int) -> Value:
  """Inverse of _pad_rows on the result: lanes beyond padded_size are zero."""
  total = acc.padded[axis]
  if total == padded_size:
    return acc
  reps = total // padded_size
  shape = list(acc.padded)
  split = shape[:axis] + [reps, padded_size] + shape[axis + 1:]
  folded = ctx.b.assign("folded", f"{tl.reshape}({acc}, {emit.shape_expr(split)})")
  out_shape = tuple(size if i == axis else d for i, d in enumerate(acc.shape))
  summed = ctx.value("dot_out", f"{tl.sum}({folded}, axis={axis})", sum_dtype(acc.dtype), out_shape)
  return emit.cast(ctx.b, summed, acc.dtype)


def _swap_last(ctx, x: Value) -> Value:
  perm = list(range(x.ndim))
  perm[-1], perm[-2] = perm[-2], perm[-1]
  shape = tuple(x.shape[p] for p in perm)
  expr = f"{tl.trans}({x})" if x.ndim == 2 else f"{tl.permute}({x}, {tuple(perm)})"
  return ctx.value("t", expr, x.dtype, shape)


@register(lax.dot_general_p, limits=(
    "one contracting dimension; batch: none or one leading dimension; operands vectors, "
    f"matrices or 3-D with the batch first; {tl.dot} on float and int8 operands (other integers "
    "multiply and sum in registers); fp8 DotAlgorithmPresets refused"))
def _dot_general(ctx, a, b, *, dimension_numbers, precision=None, preferred_element_type=None,
                 out_sharding=None, **params):
  (a_contract, b_contract), (a_batch, b_batch) = dimension_numbers
  if len(a_contract) != 1 or len(b_contract) != 1:
    raise Unsupported("dot_general contracting several dimensions",
                      "reshape the operands so one dimension is contracted")
  if tuple(a_batch) not in ((), (0,)) or tuple(b_batch) not in ((), (0,)):
    raise Unsupported("dot_general with batch dimensions other than one leading one",
                      "move the batch dimension first (jnp.moveaxis / einsum order)")
  batched = bool(a_batch)
  for x in (a, b):
    if x.ndim not in ((3,) if batched else (1, 2)):
      raise Unsupported(f"dot of operands of shapes {a.shape} and {b.shape}",
                        f"{tl.dot} takes vectors, matrices, or 3D operands with a leading "
                        "batch dimension")
  out_shape = tuple(ctx.avals_out[0].shape)
  out_dtype = np.dtype(ctx.avals_out[0].dtype)
  # bring operands to [batch,] M x K and [batch,] K x N
  if a.ndim == 1:
    a = ctx.value("row", f"{a}[None, :]", a.dtype, (1, a.shape[0]))
  elif a_contract[0] != a.ndim - 1:
    a = _swap_last(ctx, a)
  if b.ndim == 1:
    b = ctx.value("col", f"{b}[:, None]", b.dtype, (b.shape[0], 1))
  elif b_contract[0] != b.ndim - 2:
    b = _swap_last(ctx, b)
  common = _common_dtype(a, b)
  algorithm = _algorithm(precision, common)
  if algorithm.input_precision == "tf32" and compat.arch_without_tf32_dots() and \
      not _asks_tf32_by_name(precision):
    algorithm = _float32_instead(ctx, algorithm)
  operand_dtype = algorithm.operand_dtype or common
  ctx.record(dot=DotFacts(
      batch=a.shape[0] if batched else 1, m=a.shape[-2], n=b.shape[-1], k=a.shape[-1],
      operand_dtype=np.dtype(operand_dtype).name,
      # what _tl_dot passes to tl.dot (f32 operands only); None: Triton's default
      precision=algorithm.input_precision if np.dtype(operand_dtype) == F32 else None))
  a = emit.cast(ctx.b, a, operand_dtype)
  b = emit.cast(ctx.b, b, operand_dtype)
  if is_int(operand_dtype) and operand_dtype != INT8:
    result = _integer_dot(ctx, a, b, out_dtype)
  else:
    result = _tl_dot(ctx, a, b, algorithm, out_dtype)
  result = emit.cast(ctx.b, result, out_dtype)
  if tuple(result.shape) != out_shape:   # vector operands: drop their unit dims
    result = reshape_value(ctx, result, out_shape, "dot_out")
  return result


def _accumulator(algorithm: _Algorithm, operand_dtype, out_dtype) -> np.dtype:
  if algorithm.acc_dtype is not None:
    return algorithm.acc_dtype
  if is_int(operand_dtype):
    return I32
  if np.dtype(operand_dtype) == F64:
    return F64
  # f32 accumulation for 16-bit inputs too, then one rounding: what XLA does
  return F32


def _tl_dot(ctx, a: Value, b: Value, algorithm: _Algorithm, out_dtype) -> Value:
  if not (is_float(a.dtype) or a.dtype == INT8):
    raise Unsupported(f"dot of {a.dtype} operands", "cast the operands to a float type")
  acc_dtype = _accumulator(algorithm, a.dtype, out_dtype)
  m_ax, k_ax_a = a.ndim - 2, a.ndim - 1
  k_ax_b, n_ax = b.ndim - 2, b.ndim - 1
  M, K, N = a.shape[m_ax], a.shape[k_ax_a], b.shape[n_ax]
  min_m, min_n, min_k = _min_sizes(a.dtype)
  zero = "0" if is_int(a.dtype) else "0.0"
  if next_pow2(K) < min_k:
    # the copies are zeroed, and so are padded K lanes
    a = _pad_rows(ctx, a, k_ax_a, min_k, zero)
    b = _pad_rows(ctx, b, k_ax_b, min_k, zero)
  else:
    # zero padded K lanes: garbage there would pollute every output
    a = emit.mask_padding(ctx.b, a, (k_ax_a,), 0, "lhs")
    b = emit.mask_padding(ctx.b, b, (k_ax_b,), 0, "rhs")
  if next_pow2(M) < min_m:
    a = _pad_rows(ctx, a, m_ax, min_m, zero)
  if next_pow2(N) < min_n:
    b = _pad_rows(ctx, b, n_ax, min_n, zero)
  if (algorithm.input_precision == "tf32" and np.dtype(a.dtype) == F32
      and compat.xla_rounds_tf32_dot_operands()):
    a, b = _round_to_tf32(ctx, a, "lhs"), _round_to_tf32(ctx, b, "rhs")
  shape = a.shape[:-1] + (b.shape[-1],)
  kwargs = [f"out_dtype={tl_dtype(acc_dtype)}"]
  if algorithm.input_precision is not None and np.dtype(a.dtype) == F32:
    kwargs.append(f'input_precision="{algorithm.input_precision}"')
  acc = ctx.value("acc", f"{tl.dot}({a}, {b}, {', '.join(kwargs)})", acc_dtype, shape)
  acc = _shrink_rows(ctx, acc, acc.ndim - 2, M, next_pow2(M))
  return _shrink_rows(ctx, acc, acc.ndim - 1, N, next_pow2(N))


# f32 -> tf32, round to nearest (ties away): what XLA's Triton pipeline inserts
# before every tf32 dot of f32 operands (RoundF32ToTF32ForTf32DotRewritePass),
# so JAX's built-in backend rounds where the tensor cores would truncate; only when
# lowering for the GPU (XLA's CPU multiplies in float32: compat). Also
# the faster kernel on sm_90: an operand that is not loaded straight into the dot
# is staged in shared memory as it lies in global memory (16-byte cp.async)
# instead of K-major (the layout tf32 wgmma needs, 4-byte cp.async for a K x N
# operand). interpreter_runtime.py computes the same rounding with numpy.
TF32_ROUND_ASM = "cvt.rna.tf32.f32 $0, $1;"


def _round_to_tf32(ctx, x: Value, name: str) -> Value:
  return ctx.value(f"{name}_tf32", f'{tl.inline_asm_elementwise}("{TF32_ROUND_ASM}", "=r,r", [{x}], '
                   f"dtype={tl.float32}, is_pure=True, pack=1)", x.dtype, x.shape)


def _integer_dot(ctx, a: Value, b: Value, out_dtype) -> Value:
  """sum_k a[m, k] * b[k, n] in registers, in the result's integer type."""
  acc_dtype = np.dtype(out_dtype) if is_int(out_dtype) else np.dtype(
      jnp.promote_types(a.dtype, I32))
  a = emit.cast(ctx.b, a, acc_dtype)
  b = emit.cast(ctx.b, b, acc_dtype)
  k_axis = a.ndim - 1
  a = emit.mask_padding(ctx.b, a, (k_axis,), 0, "lhs")
  rank = a.ndim + 1
  lhs = ctx.value("lhs_mkn", emit.expand_to_rank(a, tuple(range(rank - 1)), rank), acc_dtype,
                  a.shape + (1,))
  rhs = ctx.value("rhs_mkn", emit.expand_to_rank(b, tuple(range(rank - 3)) + (rank - 2, rank - 1),
                                                 rank), acc_dtype,
                  b.shape[:-2] + (1,) + b.shape[-2:])
  shape = a.shape + (b.shape[-1],)
  products = ctx.value("products", f"{lhs} * {rhs}", acc_dtype, shape)
  summed = ctx.value("dot", f"{tl.sum}({products}, axis={k_axis})", sum_dtype(acc_dtype),
                     a.shape[:-1] + (b.shape[-1],))
  return emit.cast(ctx.b, summed, acc_dtype)
