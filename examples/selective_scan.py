"""Mamba-style selective scan, forward and backward, in chunks of 16 time steps.

For each channel d (one program each) and state n:
    h[t] = exp(dt[t] * A[n]) * h[t-1] + dt[t] * x[t] * B[t, n],     y[t] = sum_n C[t, n] * h[t]
A chunk of 16 steps is a few block operations: the decays as a cumulative sum
along axis 0 of a 16 x 16 block of a broadcast product, exp, and a row sum. The
backward runs the chunks in reverse and adds the gradients of B and C, shared
by all channels, with atomic_add. Checked against a float64 numpy recurrence.

    python examples/selective_scan.py            # small, quick on CPU
    python examples/selective_scan.py --large    # 1024 channels x 4096 steps, for a GPU

Triton 3.6 fails to compile the first cumsum for sm_90 (an assertion in its
scan lowering); pallas-prof lowers it otherwise and says so (the kernel's
source header, report.json). PALLAS_PROF_WORKAROUNDS=0 shows the failure.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

import pallas_prof

pallas_prof.install()

T = 16            # time steps per chunk


def forward_kernel(x_ref, dt_ref, a_ref, b_ref, c_ref, y_ref, states_ref):
  a = a_ref[...]                                            # (N,) this channel's A

  def chunk(i, h0):
    t = pl.ds(i * T, T)
    dt, x = dt_ref[t], x_ref[t]                             # (T,)
    b, c = b_ref[t, :], c_ref[t, :]                         # (T, N)
    states_ref[pl.ds(i, 1), :] = h0[None, :]                # the chunk's starting state
    da = jnp.cumsum(dt[:, None], axis=0) * a[None, :]       # (T, N): log of the decays so far
    u = (dt * x)[:, None] * b * jnp.exp(-da)
    h = jnp.exp(da) * (h0[None, :] + jnp.cumsum(u, axis=0))
    y_ref[t] = jnp.sum(h * c, axis=1)
    return jnp.exp(jnp.sum(dt) * a) * (h0 + jnp.sum(u, axis=0))   # h at the chunk's last step

  lax.fori_loop(0, x_ref.shape[0] // T, chunk, jnp.zeros_like(a))


def backward_kernel(x_ref, dt_ref, a_ref, b_ref, c_ref, states_ref, dy_ref,
                    dx_ref, ddt_ref, da_ref, db_ref, dc_ref):
  a = a_ref[...]
  chunks = x_ref.shape[0] // T
  first_step = lax.broadcasted_iota(jnp.int32, (T, a.shape[0]), 0) == 0

  def chunk(j, carry):
    g_after, da_sum = carry                 # dL/dh flowing in from the next chunk; dL/dA so far
    i = chunks - 1 - j                      # the chunks in reverse
    t = pl.ds(i * T, T)
    dt, x, dy = dt_ref[t], x_ref[t], dy_ref[t]
    b, c = b_ref[t, :], c_ref[t, :]
    h0 = states_ref[pl.ds(i, 1), :][0]
    da = jnp.cumsum(dt[:, None], axis=0) * a[None, :]
    decay, grow = jnp.exp(da), jnp.exp(-da)
    u = (dt * x)[:, None] * b * grow
    s = jnp.cumsum(u, axis=0)
    h = decay * (h0[None, :] + s)                   # h[t]
    kept = decay * (h0[None, :] + s - u)            # exp(dt[t] A) * h[t-1]
    later = lax.cumsum(c * dy[:, None] * decay, axis=0, reverse=True)
    g = grow * (later + (jnp.exp(jnp.sum(dt) * a) * g_after)[None, :])    # dL/dh[t]
    bg = jnp.sum(b * g, axis=1)
    dx_ref[t] = dt * bg
    ddt_ref[t] = x * bg + jnp.sum(a[None, :] * kept * g, axis=1)
    plgpu.atomic_add(db_ref, (t, slice(None)), (dt * x)[:, None] * g)      # summed over channels
    plgpu.atomic_add(dc_ref, (t, slice(None)), dy[:, None] * h)
    g_before = jnp.sum(jnp.where(first_step, decay * g, 0.0), axis=0)
    return g_before, da_sum + jnp.sum(dt[:, None] * kept * g, axis=0)

  zeros = jnp.zeros_like(a)
  _, da_ref[...] = lax.fori_loop(0, chunks, chunk, (zeros, zeros))


def _channel(shape):     # one channel's row of a (channels, ...) array
  return pl.BlockSpec((None, *shape), lambda d: (d,) + (0,) * len(shape))


def _shared(shape):      # an array all channels read (or add to)
  return pl.BlockSpec(shape, lambda d: (0,) * len(shape))


@jax.jit
def forward(x, dt, A, B, C):
  (channels, length), n = x.shape, A.shape[1]
  chunks = length // T
  return pl.pallas_call(
      forward_kernel, grid=(channels,),
      in_specs=[_channel((length,)), _channel((length,)), _channel((n,)),
                _shared((length, n)), _shared((length, n))],
      out_specs=[_channel((length,)), _channel((chunks, n))],
      out_shape=[jax.ShapeDtypeStruct((channels, length), jnp.float32),
                 jax.ShapeDtypeStruct((channels, chunks, n), jnp.float32)],
  )(x, dt, A, B, C)


@jax.jit
def backward(x, dt, A, B, C, states, dy):
  (channels, length), n = x.shape, A.shape[1]
  chunks = length // T
  return pl.pallas_call(
      backward_kernel, grid=(channels,),
      in_specs=[_channel((length,)), _channel((length,)), _channel((n,)),
                _shared((length, n)), _shared((length, n)), _channel((chunks, n)),
                _channel((length,))],
      out_specs=[_channel((length,)), _channel((length,)), _channel((n,)),
                 _shared((length, n)), _shared((length, n))],
      out_shape=[jax.ShapeDtypeStruct((channels, length), jnp.float32)] * 2
      + [jax.ShapeDtypeStruct((channels, n), jnp.float32)]
      + [jax.ShapeDtypeStruct((length, n), jnp.float32)] * 2,
  )(x, dt, A, B, C, states, dy)


@jax.custom_vjp
def selective_scan(x, dt, A, B, C):
  """y (channels, length) of the selective scan; differentiable in all five inputs."""
  return forward(x, dt, A, B, C)[0]


def _fwd(x, dt, A, B, C):
  y, states = forward(x, dt, A, B, C)
  return y, (x, dt, A, B, C, states)


def _bwd(saved, dy):
  return tuple(backward(*saved, dy))


selective_scan.defvjp(_fwd, _bwd)


# --- the float64 numpy reference: the recurrence, one step at a time ---------------------

def reference(x, dt, A, B, C, dy):
  """(y, dx, ddt, dA, dB, dC) in float64, for the loss sum(y * dy)."""
  x, dt, A, B, C, dy = (np.asarray(v, np.float64) for v in (x, dt, A, B, C, dy))
  channels, length = x.shape
  alpha = np.exp(dt[:, :, None] * A[:, None, :])                    # (D, L, N)
  beta = (dt * x)[:, :, None] * B[None]
  h = np.zeros((channels, length + 1, A.shape[1]))                  # h[:, t + 1] = h[t]
  for t in range(length):
    h[:, t + 1] = alpha[:, t] * h[:, t] + beta[:, t]
  y = np.einsum("dtn,tn->dt", h[:, 1:], C)
  g = np.zeros_like(h[:, 0])
  dh = np.zeros_like(h[:, 1:])
  for t in reversed(range(length)):
    g = C[t] * dy[:, t, None] + (alpha[:, t + 1] * g if t + 1 < length else 0.0)
    dh[:, t] = g
  kept = alpha * h[:, :-1]
  bg = np.einsum("dtn,tn->dt", dh, B)
  return (y, dt * bg, x * bg + np.einsum("dtn,dn->dt", kept * dh, A),
          np.einsum("dt,dtn->dn", dt, kept * dh), np.einsum("dt,dtn->tn", dt * x, dh),
          np.einsum("dt,dtn->tn", dy, h[:, 1:]))


def inputs(seed: int, channels: int, length: int, n: int = 16):
  k = jax.random.split(jax.random.PRNGKey(seed), 6)
  x = jax.random.normal(k[0], (channels, length), jnp.float32)
  # steps in [0.001, 0.1], Mamba's range: a chunk's decays stay within exp(+-25.6) in float32
  dt = 0.001 + 0.099 * jax.nn.sigmoid(jax.random.normal(k[1], (channels, length)))
  A = -jnp.exp(jax.random.uniform(k[2], (channels, n), minval=0.0, maxval=jnp.log(16.0)))
  B = jax.random.normal(k[3], (length, n), jnp.float32)
  C = jax.random.normal(k[4], (length, n), jnp.float32)
  dy = jax.random.normal(k[5], (channels, length), jnp.float32)
  return x, dt, A, B, C, dy


NAMES = ("y", "dx", "ddt", "dA", "dB", "dC")


def errors(seed: int, channels: int, length: int) -> dict[str, float]:
  """Each output's largest error, relative to the reference's largest magnitude."""
  x, dt, A, B, C, dy = inputs(seed, channels, length)
  # the kernels called as jax.vjp(selective_scan, ...) would call them; called directly,
  # the backward's equations keep their own lines (under jax.vjp JAX gives everything
  # traced for the backward the forward call's line)
  y, states = forward(x, dt, A, B, C)
  got = (y, *backward(x, dt, A, B, C, states, dy))
  want = reference(x, dt, A, B, C, dy)
  return {name: float(np.max(np.abs(np.asarray(g, np.float64) - w)) / max(np.max(np.abs(w)), 1e-30))
          for name, g, w in zip(NAMES, got, want)}


TOLERANCE = 1e-4      # float32 against float64: chunked sums of up to `length` terms


def main(argv):
  # the inputs are random: a fresh seed each run, printed, so that --seed N redraws them
  seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else int(np.random.randint(2**31))
  print(f"seed {seed} (--seed {seed} draws the same inputs)")
  channels, length = (1024, 4096) if "--large" in argv else (4, 64)
  errs = errors(seed, channels, length)
  print(f"selective scan, {channels} channels x {length} steps, 16 states: max |error| / max "
        "|reference| = " + ", ".join(f"{k} {v:.2g}" for k, v in errs.items()))
  return 0 if max(errs.values()) < TOLERANCE else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
