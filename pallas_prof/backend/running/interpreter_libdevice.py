"""libdevice for Triton's interpreter: the same functions, computed with numpy.

Generated kernels call `libdevice.exp(x)` and friends (CUDA's libdevice,
as JAX's own Triton backend does). Triton's interpreter cannot run extern
calls, so kernels loaded for interpretation get this module in place of
`triton.language.extra.libdevice`. Each function computes in float64 and
rounds to the operand's dtype.
"""
from __future__ import annotations

import math

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle


def _data(x):
  if isinstance(x, tl.core.tensor):
    return x.handle.data
  return np.asarray(x)


def _like(template, data, scalar_ty=None):
  """A tl.tensor shaped like `template` holding `data` (of `scalar_ty`)."""
  ty = template.type
  if scalar_ty is None:
    scalar_ty = template.handle.dtype.scalar if hasattr(template.handle.dtype, "scalar") \
        else template.handle.dtype
    out_ty = ty
  else:
    out_ty = tl.block_type(scalar_ty, ty.shape) if ty.is_block() else scalar_ty
  return tl.core.tensor(TensorHandle(np.asarray(data), scalar_ty), out_ty)


def _template(args):
  """The tensor operand the result takes its type and (broadcast) shape from."""
  tensors = [a for a in args if isinstance(a, tl.core.tensor)]
  return max(tensors, key=lambda t: np.ndim(t.handle.data))


def _float_op(fn):
  def op(*args):
    template = _template(args)
    dtype = _data(template).dtype
    with np.errstate(all="ignore"):
      result = np.asarray(fn(*[_data(a).astype(np.float64) for a in args])).astype(dtype)
    return _like(template, result)
  op.__name__ = getattr(fn, "__name__", "op")
  return op


def _vectorize(scalar_fn, on_error=math.nan):
  """A math.* scalar function over arrays (math.erf and friends have no numpy twin)."""
  def safe(v):
    try:
      return scalar_fn(v)
    except (ValueError, OverflowError):
      return on_error
  vectorized = np.vectorize(safe, otypes=[np.float64])
  return lambda x: vectorized(x) if np.size(x) else np.zeros_like(x, dtype=np.float64)


def _erfinv64(y):
  # Giles' approximation refined by Newton steps on math.erf: exact to f64.
  y = np.asarray(y, dtype=np.float64)
  out = np.full_like(y, np.nan)
  ok = np.abs(y) < 1
  out[y == 1] = np.inf
  out[y == -1] = -np.inf
  w = -np.log((1.0 - y[ok]) * (1.0 + y[ok]))
  x = np.where(w < 5.0, _poly_small(w - 2.5), _poly_large(np.sqrt(w) - 3.0)) * y[ok]
  erf = np.vectorize(math.erf)
  for _ in range(3):
    x = x - (erf(x) - y[ok]) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
  out[ok] = x
  return out


def _poly_small(w):
  p = 2.81022636e-08
  for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
    p = c + p * w
  return p


def _poly_large(w):
  p = -0.000200214257
  for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
            -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
    p = c + p * w
  return p


def _round_half_away(x):
  # exact for every float (x + 0.5 may round), keeping the sign of zero
  whole = np.trunc(x)
  away = np.abs(x - whole) >= 0.5
  return np.copysign(np.where(away, whole + np.sign(x), whole), x)


exp = _float_op(np.exp)
exp2 = _float_op(np.exp2)
expm1 = _float_op(np.expm1)
log = _float_op(np.log)
log2 = _float_op(np.log2)
log10 = _float_op(np.log10)
log1p = _float_op(np.log1p)
sqrt = _float_op(np.sqrt)
rsqrt = _float_op(lambda x: 1.0 / np.sqrt(x))
cbrt = _float_op(np.cbrt)
sin = _float_op(np.sin)
cos = _float_op(np.cos)
tan = _float_op(np.tan)
asin = _float_op(np.arcsin)
acos = _float_op(np.arccos)
atan = _float_op(np.arctan)
sinh = _float_op(np.sinh)
cosh = _float_op(np.cosh)
tanh = _float_op(np.tanh)
asinh = _float_op(np.arcsinh)
acosh = _float_op(np.arccosh)
atanh = _float_op(np.arctanh)
erf = _float_op(_vectorize(math.erf))
erfc = _float_op(_vectorize(math.erfc))
erfinv = _float_op(_erfinv64)
lgamma = _float_op(_vectorize(math.lgamma, on_error=math.inf))
floor = _float_op(np.floor)
ceil = _float_op(np.ceil)
trunc = _float_op(np.trunc)
rint = _float_op(np.rint)
nearbyint = _float_op(np.rint)   # under the default rounding mode, rint
round = _float_op(_round_half_away)  # noqa: A001 - libdevice's name
pow = _float_op(np.power)  # noqa: A001
atan2 = _float_op(np.arctan2)
fmod = _float_op(np.fmod)


def nextafter(x, y):
  template = _template((x, y))
  dtype = _data(template).dtype
  return _like(template, np.nextafter(_data(x).astype(dtype), _data(y).astype(dtype)))


def _bit_count(x, bits):
  u = x.view(np.dtype(f"uint{bits}"))
  return np.bitwise_count(u).astype(np.int32)


def _leading_zeros(x, bits):
  u = x.view(np.dtype(f"uint{bits}")).astype(np.uint64)
  count = np.zeros(u.shape, dtype=np.int32)
  for shift in (32, 16, 8, 4, 2, 1):
    if shift >= bits:
      continue
    top = (u >> np.uint64(bits - shift)) == 0
    count = np.where(top, count + shift, count)
    u = np.where(top, (u << np.uint64(shift)) & np.uint64((1 << bits) - 1), u)
  count = np.where((u >> np.uint64(bits - 1)) == 0, count + 1, count)
  return count.astype(np.int32)


def popc(x):
  data = _data(x)
  return _like(x, _bit_count(data, data.dtype.itemsize * 8), tl.int32)


def clz(x):
  data = _data(x)
  return _like(x, _leading_zeros(data, data.dtype.itemsize * 8), tl.int32)


def mulhi(x, y):
  """The high half of the double-width product (int32/uint32/int64/uint64)."""
  template = _template((x, y))
  a, b = np.broadcast_arrays(_data(x), _data(y))
  bits = a.dtype.itemsize * 8
  wide = [int(p) >> bits for p in (a.astype(object) * b.astype(object)).reshape(-1)]
  unsigned = np.uint64 if bits == 64 else np.uint32
  high = np.array([w & ((1 << bits) - 1) for w in wide], dtype=unsigned)
  return _like(template, high.view(a.dtype).reshape(a.shape))
