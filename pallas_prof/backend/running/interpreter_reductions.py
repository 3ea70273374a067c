"""Triton's interpreter reductions and scans, vectorized: what interpreter_runtime.py
patches in for ReduceOps/ScanOps (see its _patch_vectorized_reduce_scan).

The interpreter reduces and scans with a custom combiner one element at a time;
these combine whole slices in log2(n) steps, always as combine(earlier, later).
Imports only numpy: an ejected program inlines this file with interpreter_runtime.py.
"""
import numpy as np


def _combine(op, earlier, later, dtypes, axis):
  """combine_fn over whole arrays: lists of numpy arrays in, same dtypes out.
  Triton tensors need power-of-two shapes: the slices are padded along `axis`
  with copies of their last lane and the padding is dropped afterwards."""
  n = earlier[0].shape[axis]
  width = [(0, 0)] * earlier[0].ndim
  width[axis] = (0, (1 << (n - 1).bit_length()) - n)
  pad = lambda d: np.pad(d, width, mode="edge")
  args = [op.to_tensor(pad(d), t) for d, t in zip(earlier, dtypes, strict=True)]
  args += [op.to_tensor(pad(d), t) for d, t in zip(later, dtypes, strict=True)]
  out = op.combine_fn.fn(*args)
  out = out if isinstance(out, tuple) else (out,)
  padded_shape = args[0].handle.data.shape
  keep = np.arange(n)
  return [np.take(np.broadcast_to(np.asarray(o.handle.data if hasattr(o, "handle") else o),
                                  padded_shape), keep, axis=axis).astype(e.dtype)
          for o, e in zip(out, earlier, strict=True)]


def _vectorized_reduce(self, input):
  """ReduceOps.generic_reduce in log2(n) combiner calls on whole slices."""
  original_axis, original_rank = self.axis, len(input[0].handle.data.shape)
  input, axis = self.unravel(input, self.axis)
  dtypes = [arg.dtype for arg in input]
  data = [np.asarray(arg.handle.data) for arg in input]
  while data[0].shape[axis] > 1:
    n = data[0].shape[axis]
    pairs = n // 2 * 2
    take = lambda d, sl: np.take(d, np.arange(n)[sl], axis=axis)
    combined = _combine(self, [take(d, slice(0, pairs, 2)) for d in data],
                        [take(d, slice(1, pairs, 2)) for d in data], dtypes, axis)
    if n % 2:
      combined = [np.concatenate([c, take(d, slice(n - 1, n))], axis=axis)
                  for c, d in zip(combined, data, strict=True)]
    data = combined
  ret = []
  for d, dtype in zip(data, dtypes, strict=True):
    if original_axis is None:
      d = d.reshape((1,) * original_rank) if self.keep_dims else d.item()
    elif not self.keep_dims:
      d = np.squeeze(d, axis=axis)
    ret.append(self.to_tensor(d, dtype))
  return ret


def _wrapping_sum(self, input):
  """ReduceOps.sum with integers summed in their own width, wrapping as the GPU's adds
  (and XLA's) do. The interpreter's np.sum widens int32 to int64, and the one-element
  array it then makes of a scalar result raises OverflowError out of int32's range
  (jnp.sum of an int32 vector to a scalar: the CPU fuzzer's run of 2026-12-03)."""
  data = input.handle.data
  wrap = {"dtype": data.dtype} if np.issubdtype(data.dtype, np.integer) else {}
  return self.to_tensor(np.sum(data, axis=self.axis, keepdims=self.keep_dims, **wrap),
                        input.dtype)


def _vectorized_scan(self, input):
  """ScanOps.generic_scan as a Hillis-Steele scan: log2(n) combiner calls."""
  dtypes = [arg.dtype for arg in input]
  data = [np.asarray(arg.handle.data) for arg in input]
  n = data[0].shape[self.axis]
  step = 1
  while step < n:
    take = lambda d, lo, hi: np.take(d, np.arange(lo, hi), axis=self.axis)
    combined = _combine(self, [take(d, 0, n - step) for d in data],
                        [take(d, step, n) for d in data], dtypes, self.axis)
    data = [np.concatenate([take(d, 0, step), c], axis=self.axis)
            for d, c in zip(data, combined, strict=True)]
    step *= 2
  return [self.to_tensor(d, dtype) for d, dtype in zip(data, dtypes, strict=True)]
