"""Test helpers: random inputs per dtype, tolerances, running kernels through pallas-prof."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import pallas_prof

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "int16", "int32", "int64", "uint32")

# |out - ref| <= atol + rtol * |ref|, by dtype; NaN only passes where ref is NaN.
TOLERANCES = {
    "float64": (1e-12, 1e-12), "float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}


# The skip reason of tests of JAX's own Triton module (jax.experimental.pallas.triton):
# the removal drill (tests/removal/test_drill.py) accepts no other skip but a GPU's.
JAX_TRITON_GONE = "JAX's Triton backend cannot be imported (removed)"


def jax_plgpu():
  """jax.experimental.pallas.triton, or None where JAX has no Triton backend."""
  try:
    from jax.experimental.pallas import triton
  except ImportError:
    return None
  return triton


def random_array(rng: np.random.Generator, shape, dtype, *, low=None, high=None,
                 nonzero=False):
  """Fresh random values of `dtype` (never all zeros; bool is a coin flip)."""
  dtype = jnp.dtype(dtype)
  if dtype == jnp.bool_:
    return rng.random(shape) < 0.5
  if jnp.issubdtype(dtype, jnp.floating):
    lo = -4.0 if low is None else low
    hi = 4.0 if high is None else high
    x = rng.uniform(lo, hi, size=shape).astype(np.float32)
    if nonzero:
      x = np.where(np.abs(x) < 0.25, 0.25 + np.abs(x), x)
    return np.asarray(jnp.asarray(x, dtype=dtype))
  info = jnp.iinfo(dtype)
  lo = max(info.min, -100) if low is None else low
  hi = min(info.max, 100) if high is None else high
  x = rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
  if nonzero:
    x = np.where(x == 0, 1, x).astype(dtype)
  return x


def xla_on_cpu(fn, *arrays):
  """jax.jit(fn)(*arrays) on XLA's CPU backend, wherever the test runs: the
  reference kernels are checked against. On the GPU machine (jax 0.11.2) XLA's
  GPU backend got some of these wrong (an int8 x int8 -> int32 dot gave twice
  the product; int32 maxima in a multi-output jit came out wrong) and failed
  others (cuBLASLt: "GEMM is not supported"), checked against numpy."""
  cpu = jax.devices("cpu")[0]
  with jax.default_device(cpu):
    return jax.jit(fn)(*[jax.device_put(a, cpu) for a in arrays])


def assert_close(out, ref, dtype=None, *, atol=None, rtol=None, err_msg=""):
  out = np.asarray(out)
  ref = np.asarray(ref)
  assert out.shape == ref.shape, f"shape {out.shape} != {ref.shape} {err_msg}"
  dtype = jnp.dtype(dtype or ref.dtype)
  if jnp.issubdtype(dtype, jnp.floating):
    a, r = TOLERANCES.get(dtype.name, (1e-5, 1e-5))
    a = a if atol is None else atol
    r = r if rtol is None else rtol
    o = out.astype(np.float64)
    f = ref.astype(np.float64)
    np.testing.assert_allclose(o, f, atol=a, rtol=r, equal_nan=True, err_msg=err_msg)
  else:
    np.testing.assert_array_equal(out, ref, err_msg=err_msg)


def pallas(kernel, out_shape, *, grid=(), in_specs=None, out_specs=None, **kwargs):
  """pl.pallas_call routed explicitly to pallas-prof (no global install needed)."""
  from jax.experimental import pallas as pl
  params = kwargs.pop("compiler_params", None) or pallas_prof.CompilerParams()
  extra = {}
  if in_specs is not None:
    extra["in_specs"] = in_specs
  if out_specs is not None:
    extra["out_specs"] = out_specs
  return pl.pallas_call(kernel, out_shape=out_shape, grid=grid, compiler_params=params,
                        **extra, **kwargs)


def elementwise_call(fn, *arrays, out_dtype=None):
  """Runs `o = fn(*x)` as a whole-array Pallas kernel through pallas-prof."""
  shape = arrays[0].shape
  if out_dtype is None:
    out_dtype = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]).dtype

  def kernel(*refs):
    *ins, out = refs
    out[...] = fn(*[r[...] for r in ins])

  return pallas(kernel, jax.ShapeDtypeStruct(shape, out_dtype))(*arrays)


def run_on_values(fn, *arrays, name="kernel"):
  """Runs `fn` on whole-array blocks as one pallas-prof kernel: the refs are
  read, fn is applied to the values, its (pytree of) results are written.
  Returns fn's pytree of outputs."""
  avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
  out_avals, tree = jax.tree.flatten(jax.eval_shape(fn, *avals))

  def kernel(*refs):
    ins, outs = refs[:len(arrays)], refs[len(arrays):]
    for ref, value in zip(outs, jax.tree.leaves(fn(*[r[...] for r in ins]))):
      ref[...] = value

  outs = pallas(kernel, out_avals, name=name)(*arrays)
  return jax.tree.unflatten(tree, outs)



def check_lowering_error(err, test_file: str, *needles, hint: bool = True):
  """A LoweringError names a line of `test_file`, gives a hint and says every needle.

  (The raising stays in the test: a call-level error names the caller's line.)"""
  message = str(err)
  assert f"{test_file}:" in message, message
  if hint:
    assert "hint:" in message, message
  for needle in needles:
    assert needle in message, message
  return err
