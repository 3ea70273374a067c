"""CompilerParams(loop_stages=S): an innermost loop that loads and has no dot is Triton's
`tl.range(lo, hi, num_stages=S)`, whose loads Triton pipelines (copies into shared memory
issued ahead), where the kernel's num_stages pipelines only a dot's loads.

Checked: which loops take it (a column sum over rows does; a loop with a dot, a loop around
another loop, a loop that loads nothing, a loop that writes memory (a store, an atomic) do
not; the inner loop of two does), the outputs
equal the plain kernel's and numpy's under the interpreter at ragged shapes, the kernel's
options say whether it applied, the default's generated code is unchanged, and compiled
for sm_90 the staged loop's loads are cp.async copies where the plain loop has none."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.for_targets import compile_for
from testkit.helpers import random_array
from testkit.jax_ops import gpu_op


def _column_sums_kernel(x_ref, s_ref, q_ref, *, block_rows):
  """JAX's norms' dw/db loop in miniature: each program sums its columns over all rows."""
  rows = x_ref.shape[0]
  cols = s_ref.shape[0]
  j = pl.program_id(0)
  col = j * cols + jnp.arange(cols)

  def body(i, acc):
    row = i * block_rows + jnp.arange(block_rows)
    mask = (row < rows)[:, None] & (col < x_ref.shape[1])[None, :]
    x = plgpu.load(x_ref.at[row[:, None], col[None, :]], mask=mask, other=0.0)
    s, q = acc
    return s + x.sum(axis=0), q + (x * x).sum(axis=0)

  s, q = jax.lax.fori_loop(0, pl.cdiv(rows, block_rows), body,
                           (jnp.zeros(cols, jnp.float32), jnp.zeros(cols, jnp.float32)))
  s_ref[...] = s
  q_ref[...] = q


def _column_sums(x, loop_stages, block_rows=8, block_cols=16, name="column_sums"):
  n = x.shape[1]
  part = jax.ShapeDtypeStruct((n,), jnp.float32)
  return pl.pallas_call(
      functools.partial(_column_sums_kernel, block_rows=block_rows),
      out_shape=[part, part], grid=(pl.cdiv(n, block_cols),),
      in_specs=[pl.BlockSpec(x.shape, lambda j: (0, 0))],     # the whole array, indexed
      out_specs=[pl.BlockSpec((block_cols,), lambda j: (j,))] * 2,
      compiler_params=pallas_prof.CompilerParams(loop_stages=loop_stages), name=name)(x)


def _record(name):
  return kernel_registry.find(name)[-1]


def _loop_headers(source: str) -> list[str]:
  return [line.split("#")[0].strip() for line in source.splitlines()
          if line.strip().startswith("for ")]


@pytest.mark.parametrize("shape", [(203, 72), (64, 16), (45, 40)])
def test_a_column_sum_loop_is_staged_and_gives_the_plain_kernels_outputs(rng, shape):
  x = random_array(rng, shape, "float32")
  want = jax.jit(functools.partial(_column_sums, loop_stages=0, name="sums_plain"))(x)
  got = jax.jit(functools.partial(_column_sums, loop_stages=3, name="sums_staged"))(x)
  for g, w in zip(got, want, strict=True):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  np.testing.assert_allclose(np.asarray(got[0]), x.sum(0), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(np.asarray(got[1]), (x * x).sum(0), rtol=1e-5, atol=1e-3)
  staged, plain = _record("sums_staged").generated, _record("sums_plain").generated
  assert _loop_headers(staged.source) == [
      f"for i_raw in tl.range(0, {-(-shape[0] // 8)}, num_stages=3):"], staged.source
  assert _loop_headers(plain.source) == [f"for i_raw in range(0, {-(-shape[0] // 8)}):"]
  assert staged.options.loop_stages == 3 and plain.options.loop_stages == 0
  assert staged.options.settings.label == "4w 3s l3"


def _dot_loop_kernel(a_ref, b_ref, o_ref):
  def step(k, acc):
    return acc + jnp.dot(a_ref[:, pl.ds(k * 16, 16)], b_ref[pl.ds(k * 16, 16), :])
  o_ref[...] = jax.lax.fori_loop(0, a_ref.shape[1] // 16, step, jnp.zeros(o_ref.shape))


def _nested_kernel(x_ref, o_ref):
  def outer(i, acc):
    def inner(j, a):
      return a + x_ref[pl.ds(i * 4, 4), pl.ds(j * 8, 8)].sum()
    return jax.lax.fori_loop(0, x_ref.shape[1] // 8, inner, acc)
  o_ref[...] = jnp.full(o_ref.shape, jax.lax.fori_loop(0, x_ref.shape[0] // 4, outer, 0.0))


def _no_load_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jax.lax.fori_loop(0, 7, lambda i, a: a * 0.5 + x, jnp.zeros_like(x))


def _read_write_kernel(x_ref, o_ref):
  """Each iteration reads the row the one before wrote (a running sum in memory): staged,
  Triton would issue the read before that write (triton-lang/triton#8259)."""
  o_ref[0, :] = x_ref[0, :]

  def step(i, c):
    o_ref[pl.ds(i, 1), :] = o_ref[pl.ds(i - 1, 1), :] + x_ref[pl.ds(i, 1), :]
    return c
  jax.lax.fori_loop(1, x_ref.shape[0], step, 0)


def _nested_write_kernel(x_ref, o_ref):
  """_read_write_kernel's store two calls deep in the loop's body (a jit inside a jit)."""
  @jax.jit
  def put(i, v):
    @jax.jit
    def store(v):
      o_ref[pl.ds(i, 1), :] = v
    store(v)
  o_ref[0, :] = x_ref[0, :]

  def step(i, c):
    put(i, o_ref[pl.ds(i - 1, 1), :] + x_ref[pl.ds(i, 1), :])
    return c
  jax.lax.fori_loop(1, x_ref.shape[0], step, 0)


def _atomic_kernel(x_ref, o_ref):
  o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)

  def step(i, c):
    plgpu.atomic_add(o_ref, (slice(None),), x_ref[i, :])
    return c
  jax.lax.fori_loop(0, x_ref.shape[0], step, 0)


@pytest.mark.parametrize("kernel,args,out,headers", [
    (_read_write_kernel, ((12, 16),), (12, 16), ["for i_raw in range(1, 12):"]),
    (_nested_write_kernel, ((12, 16),), (12, 16), ["for i_raw in range(1, 12):"]),
    (_atomic_kernel, ((12, 16),), (16,), ["for i_raw in range(0, 12):"]),
    (_dot_loop_kernel, ((32, 48), (48, 16)), (32, 16), ["for i_raw in range(0, 3):"]),
    (_nested_kernel, ((24, 48),), (8,), ["for i_raw in range(0, 6):",
                                        "for i_raw_2 in tl.range(0, 6, num_stages=2):"]),
    (_no_load_kernel, ((8, 16),), (8, 16), ["for _iter in range(0, 7):"]),
], ids=["read_write", "nested_write", "atomic", "dot", "nested", "no_load"])
def test_only_innermost_loops_that_load_and_have_no_dot_are_staged(rng, kernel, args, out,
                                                                   headers):
  xs = [random_array(rng, s, "float32") for s in args]
  name = f"stages_{kernel.__name__}"
  call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out, jnp.float32), name=name,
                        compiler_params=pallas_prof.CompilerParams(loop_stages=2))
  plain = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out, jnp.float32),
                         name=name + "_plain", compiler_params=pallas_prof.CompilerParams())
  np.testing.assert_array_equal(np.asarray(jax.jit(call)(*xs)), np.asarray(jax.jit(plain)(*xs)))
  gk = _record(name).generated
  assert _loop_headers(gk.source) == headers, gk.source
  assert gk.options.loop_stages == (2 if any("tl.range" in h for h in headers) else 0)


def test_jax_rms_norm_backward_dw_db_loop_is_staged_when_relowered():
  """The kernel the option is for: JAX's rms_norm backward dw/db (through install), lowered
  again with loop_stages=3 as the tuner lowers its candidates."""
  rms_norm = gpu_op("rms_norm")     # JAX 0.12 ships no GPU ops: skipped there
  pallas_prof.install()
  try:
    x = jax.random.normal(jax.random.key(0), (3, 40, 72), jnp.float32)
    w, b = jnp.ones(72), jnp.zeros(72)
    jax.grad(lambda w, b: rms_norm.rms_norm(x, w, b).sum(), argnums=(0, 1))(w, b)
  finally:
    pallas_prof.uninstall()
  rec = _record("ln_backward_dw_db")
  assert rec.generated.options.loop_stages == 0
  staged = rec.relower(rec.generated.options.replace(loop_stages=3))
  assert staged.options.loop_stages == 3
  assert _loop_headers(staged.source) == ["for i_raw in tl.range(0, 8, num_stages=3):"]
  # everything but the loop's header is the plain kernel's
  plain_lines = [l for l in rec.generated.source.splitlines() if "range(" not in l]
  staged_lines = [l for l in staged.source.splitlines() if "range(" not in l]
  assert plain_lines == staged_lines


def test_compiled_for_sm90_the_staged_loops_loads_are_asynchronous_copies(rng):
  x = random_array(rng, (512, 256), "float32")
  args = jax.ShapeDtypeStruct(x.shape, jnp.float32)
  for stages in (0, 3):
    jax.jit(functools.partial(_column_sums, loop_stages=stages, block_cols=64,
                              name=f"sums_sm90_{stages}")).lower(args)
  ptx = {s: compile_for(_record(f"sums_sm90_{s}").generated, "sm_90",
                        use_disk_cache=False).compiled.ptx for s in (0, 3)}
  assert "cp.async" not in ptx[0]
  assert ptx[3].count("cp.async") > 0


def test_compiler_params_refuse_a_loop_stages_out_of_range():
  with pytest.raises(ValueError, match=r"loop_stages=-1.*from 0 to 16"):
    pallas_prof.CompilerParams(loop_stages=-1)
