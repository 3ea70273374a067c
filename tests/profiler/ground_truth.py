"""Known-answer kernels for attribution, one for each kind of code pallas-prof emits.

    pallas-prof run tests/profiler/ground_truth.py --large    # on a GPU: PC samples
    pallas-prof run tests/profiler/ground_truth.py            # CPU: static counts

Each kernel is built so that its answer is known before it runs: the line marked
`# heavy` (or the lines, taken together) does nearly all the work, by construction, and
each line marked `# cheap` does almost none. The work is made heavy by libdevice's slow
paths (sin of large arguments, as in rotary embeddings), or by a loop of many rounds around
the construct under test (a library call, a reduction, a scan, a dot, an atomic), beside a
single elementwise operation outside it. Lines marked neither (loads, stores) are left
unjudged: where the wait for memory is charged depends on the GPU's queueing.

`# not run` marks a branch of a `lax.cond` the inputs never take: measured, it must stay
cheap; static counts weigh instructions whether or not they run, so static answers are
not judged on it (docs/profiling.md says so to users).

ground_truth_checks.py judges a run's report.json against the markers; the CPU test
(tests/profiler/static/test_ground_truth.py) runs it in CI, the GPU run is recorded in
bench/results. Each kernel checks its output against jax.numpy first: a wrong kernel
has no attribution worth judging.
"""
from __future__ import annotations

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

ROUNDS = 32
ATOMICS = 64       # contended atomic adds per program, against one sum of its block
RATE = 1e7          # |x * RATE| > 105615 for every x of the inputs: sin's slow argument reduction


def _rows(kernel, x, block_rows, *, extra=(), warps=4, outs=1):
  """One program per `block_rows` rows of x; `extra` operands come whole (scalars)."""
  rows, cols = x.shape
  spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
  out_shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
  import pallas_prof
  return pl.pallas_call(
      kernel, grid=(rows // block_rows,),
      in_specs=[pl.BlockSpec(e.shape, lambda i, n=e.ndim: (0,) * n) for e in extra] + [spec],
      out_specs=spec if outs == 1 else [spec] * outs,
      out_shape=out_shape if outs == 1 else [out_shape] * outs,
      compiler_params=pallas_prof.CompilerParams(num_warps=warps))(*extra, x)


# --- device-library slow paths -------------------------------------------------------------

def gt_sin_large_kernel(x_ref, o_ref):
  x = x_ref[...]
  s = jnp.sin(x * RATE)  # heavy
  o = s * 3.0  # cheap
  o_ref[...] = o


def gt_rotary_kernel(x_ref, o_ref):
  x = x_ref[...]
  angle = x * RATE  # cheap
  c = jnp.cos(angle)  # heavy
  s = jnp.sin(angle)  # heavy
  o = x * c + s  # cheap
  o_ref[...] = o


def gt_masked_sin_kernel(x_ref, o_ref):
  # 1000 columns in a block of 1024 lanes: every load and store is masked
  x = x_ref[...]
  s = jnp.sin(x * RATE)  # heavy
  o = s + 1.0  # cheap
  o_ref[...] = o


def _library_loop(fn):
  """A kernel of ROUNDS rounds of four calls of a library function, each round followed by
  an affine step that keeps the value in the function's domain (in (0, 1))."""

  def kernel(x_ref, o_ref):
    def body(i, v):
      y = fn(v) + fn(v * 0.5) + fn(v * 0.25) + fn(v * 0.125)  # heavy
      return y * 0.0625 + 0.25
    v = lax.fori_loop(0, ROUNDS, body, x_ref[...])
    o = v * 2.0  # cheap
    o_ref[...] = o

  kernel.__name__ = f"gt_{fn.__name__}_kernel"
  return kernel


def _pow(v):
  return v ** 1.7  # heavy


_pow.__name__ = "pow"
LIBRARY = {"erfinv": jax.scipy.special.erfinv, "pow": _pow, "tanh": jnp.tanh,
           "log1p": jnp.log1p}


# --- loops ----------------------------------------------------------------------------------

def gt_fori_kernel(x_ref, o_ref):
  x = x_ref[...]

  def body(i, v):
    return jnp.sin(v) * 0.75 + jnp.cos(v) * 0.25  # heavy
  v = lax.fori_loop(0, ROUNDS, body, x)
  o = v + x  # cheap
  o_ref[...] = o


def gt_while_kernel(n_ref, x_ref, o_ref):
  # the trip count is data: n_ref[0] rounds
  n = n_ref[0]

  def body(carry):
    i, v = carry
    return i + 1, jnp.sin(v) * 0.75 + jnp.cos(v) * 0.25  # heavy
  _, v = lax.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), x_ref[...]))
  o = v * 2.0  # cheap
  o_ref[...] = o


# --- reductions and scans ---------------------------------------------------------------------

def gt_reduce_rows_kernel(x_ref, o_ref):
  x = x_ref[...]

  def body(i, acc):
    return acc + jnp.sum(jnp.exp(x * acc), axis=1, keepdims=True) * (0.01 / x.shape[1])  # heavy
  acc = lax.fori_loop(0, ROUNDS, body, jnp.zeros((x.shape[0], 1), jnp.float32))
  o = x + acc  # cheap
  o_ref[...] = o


def gt_reduce_cols_kernel(x_ref, o_ref):
  x = x_ref[...]

  def body(i, acc):
    return acc + jnp.max(jnp.exp(x * acc), axis=0, keepdims=True) * 1e-4  # heavy
  acc = lax.fori_loop(0, ROUNDS, body, jnp.zeros((1, x.shape[1]), jnp.float32))
  o = x + acc  # cheap
  o_ref[...] = o


def gt_scan_kernel(x_ref, o_ref):
  x = x_ref[...]

  def body(i, v):
    return jnp.cumsum(jnp.exp(v * -1.0), axis=1) * 1e-3  # heavy
  v = lax.fori_loop(0, ROUNDS, body, x)
  o = v * 2.0  # cheap
  o_ref[...] = o


# --- dots, atomics, branches, several outputs --------------------------------------------------

def gt_dot_kernel(a_ref, b_ref, o_ref, *, block_k):
  def step(k, acc):
    a = a_ref[:, pl.ds(k * block_k, block_k)]  # heavy
    b = b_ref[pl.ds(k * block_k, block_k), :]  # heavy
    return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)  # heavy

  acc = lax.fori_loop(0, a_ref.shape[1] // block_k, step, jnp.zeros(o_ref.shape, jnp.float32))
  o = acc * 0.5  # cheap
  o_ref[...] = o.astype(o_ref.dtype)


def gt_atomic_kernel(x_ref, zeros_ref, o_ref):
  # every program adds its rows' sums into the one output row (zeros_ref, aliased):
  # contended atomics
  from pallas_prof import triton as plgpu
  x = x_ref[...]
  s = jnp.sum(x, axis=0)  # cheap
  for r in range(ATOMICS):
    plgpu.atomic_add(o_ref, (slice(None),), s * (r + 1.0))  # heavy


def gt_cond_kernel(flag_ref, x_ref, o_ref):
  x = x_ref[...]

  def taken(v):
    return lax.fori_loop(0, ROUNDS, lambda i, w: jnp.sin(w) * 0.75 + 0.25, v)  # heavy

  def not_taken(v):
    return jnp.sin(v * RATE) + jnp.cos(v * RATE)  # not run

  y = lax.cond(flag_ref[0] > 0, taken, not_taken, x)
  o = y * 2.0  # cheap
  o_ref[...] = o


def gt_two_outputs_kernel(x_ref, a_ref, b_ref):
  x = x_ref[...]
  a = jnp.sin(x * RATE)  # heavy
  b = x * 2.0  # cheap
  a_ref[...] = a
  b_ref[...] = b


# --- the run ------------------------------------------------------------------------------------

def kernels_in_this_file():
  """{kernel name: the functions holding its marked lines} of every kernel judged."""
  own = {name: (f,) for name, f in globals().items() if name.startswith("gt_") and callable(f)}
  own.update({f"gt_{name}_kernel": (_library_loop, fn) for name, fn in LIBRARY.items()})
  return own


def main(argv):
  import pallas_prof
  pallas_prof.install()
  large = "--large" in argv
  seed = np.random.randint(2**31)
  print(f"ground_truth: seed {seed}")
  keys = iter(jax.random.split(jax.random.PRNGKey(seed), 32))
  failures = []

  def check(name, out, ref, tol):
    out, ref = np.asarray(out, np.float32), np.asarray(ref, np.float32)
    err = float(np.max(np.abs(out - ref) / (1.0 + np.abs(ref))))
    print(f"{name}: max relative error {err:.3g}")
    if not err <= tol:
      failures.append(name)

  rows, cols = (4096, 1024) if large else (8, 256)
  x = jax.random.uniform(next(keys), (rows, cols), jnp.float32, 0.05, 0.9)
  one = functools.partial(_rows, block_rows=1)
  check("gt_sin_large", jax.jit(lambda x: one(gt_sin_large_kernel, x))(x),
        jnp.sin(x * RATE) * 3.0, 1e-5)
  check("gt_rotary", jax.jit(lambda x: one(gt_rotary_kernel, x))(x),
        x * jnp.cos(x * RATE) + jnp.sin(x * RATE), 1e-5)
  xm = jax.random.uniform(next(keys), (rows, 1000), jnp.float32, 0.05, 0.9)
  check("gt_masked_sin", jax.jit(lambda x: one(gt_masked_sin_kernel, x))(xm),
        jnp.sin(xm * RATE) + 1.0, 1e-5)
  for name, fn in LIBRARY.items():
    def step(i, v, fn=fn):
      return (fn(v) + fn(v * 0.5) + fn(v * 0.25) + fn(v * 0.125)) * 0.0625 + 0.25
    ref = lax.fori_loop(0, ROUNDS, step, x) * 2.0
    check(f"gt_{name}", jax.jit(lambda x, fn=fn: one(_library_loop(fn), x))(x), ref, 1e-4)
  loop_ref = lax.fori_loop(0, ROUNDS, lambda i, v: jnp.sin(v) * 0.75 + jnp.cos(v) * 0.25, x)
  check("gt_fori", jax.jit(lambda x: one(gt_fori_kernel, x))(x), loop_ref + x, 1e-4)
  n = jnp.array([ROUNDS], jnp.int32)
  check("gt_while", jax.jit(lambda n, x: one(gt_while_kernel, x, extra=(n,)))(n, x),
        loop_ref * 2.0, 1e-4)
  block = 8
  acc = jnp.zeros((rows, 1), jnp.float32)
  for _ in range(ROUNDS):
    acc = acc + jnp.sum(jnp.exp(x * acc), axis=1, keepdims=True) * (0.01 / cols)
  check("gt_reduce_rows", jax.jit(lambda x: _rows(gt_reduce_rows_kernel, x, block))(x),
        x + acc, 1e-4)
  xb = x.reshape(rows // block, block, cols)
  acc = jnp.zeros((rows // block, 1, cols), jnp.float32)
  for _ in range(ROUNDS):
    acc = acc + jnp.max(jnp.exp(xb * acc), axis=1, keepdims=True) * 1e-4
  check("gt_reduce_cols", jax.jit(lambda x: _rows(gt_reduce_cols_kernel, x, block))(x),
        (xb + acc).reshape(rows, cols), 1e-4)
  v = x
  for _ in range(ROUNDS):
    v = jnp.cumsum(jnp.exp(-v), axis=1) * 1e-3
  check("gt_scan", jax.jit(lambda x: _rows(gt_scan_kernel, x, block))(x), v * 2.0, 1e-3)
  n = 2048 if large else 64
  bm = bn = 128 if large else 32
  bk = 64 if large else 32
  a = jax.random.normal(next(keys), (n, n), jnp.float32).astype(jnp.bfloat16)
  b = jax.random.normal(next(keys), (n, n), jnp.float32).astype(jnp.bfloat16)
  dot = pl.pallas_call(
      functools.partial(gt_dot_kernel, block_k=bk), grid=(n // bm, n // bn),
      in_specs=[pl.BlockSpec((bm, n), lambda i, j: (i, 0)),
                pl.BlockSpec((n, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32),
      compiler_params=pallas_prof.CompilerParams(num_warps=4, num_stages=3))
  check("gt_dot", jax.jit(dot)(a, b),
        jnp.dot(a, b, preferred_element_type=jnp.float32) * 0.5, 2e-2)
  # multiples of 1/8 below 2**21 in every partial sum: exact in float32, in any order
  xa = jnp.round(x[: 256 if large else 16, :256] * 8) / 8
  atomic = pl.pallas_call(
      gt_atomic_kernel, grid=(xa.shape[0] // 8,),
      in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0)), pl.BlockSpec((256,), lambda i: (0,))],
      out_specs=pl.BlockSpec((256,), lambda i: (0,)),
      out_shape=jax.ShapeDtypeStruct((256,), jnp.float32), input_output_aliases={1: 0})
  check("gt_atomic", jax.jit(atomic)(xa, jnp.zeros((256,), jnp.float32)),
        xa.sum(0) * sum(range(1, ATOMICS + 1)), 1e-5)
  flag = jnp.array([1], jnp.int32)
  taken = lax.fori_loop(0, ROUNDS, lambda i, w: jnp.sin(w) * 0.75 + 0.25, x)
  check("gt_cond", jax.jit(lambda f, x: one(gt_cond_kernel, x, extra=(f,)))(flag, x),
        taken * 2.0, 1e-4)
  outs = jax.jit(lambda x: one(gt_two_outputs_kernel, x, outs=2))(x)
  check("gt_two_outputs", outs[0], jnp.sin(x * RATE), 1e-5)
  check("gt_two_outputs (b)", outs[1], x * 2.0, 0)
  if failures:
    print("DIFFER:", ", ".join(failures))
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
