"""Grouped launch order (CompilerParams(launch_group=G), grid.grouped_launch): the
programs of a 2-D (or wider) grid run in groups of G along the first dimension,
each computing what it computed before. Checked under Triton's interpreter (which
runs programs one at a time in launch order, so an atomic ticket shows the order)
and compiled for sm_90."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from pallas_prof import triton as plgpu

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel


def _matmul(a, b, *, bm, bn, group, name, persistent=0):
  def kernel(a_ref, b_ref, o_ref):
    # HIGHEST: a float32 dot on the GPU is TF32 by default, which the reference below
    # (numpy in float32) is not (on the H200 this test failed its 1e-4 tolerance so)
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32,
                         precision=jax.lax.Precision.HIGHEST)
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      kernel, grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)), name=name,
      in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, bn), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      compiler_params=pallas_prof.CompilerParams(launch_group=group,
                                                 persistent=persistent))(a, b)


class _installed:
  def __enter__(self):
    pallas_prof.install()

  def __exit__(self, *exc):
    pallas_prof.uninstall()


@pytest.mark.parametrize("group", [2, 3, 8])
def test_grouped_matmul_equals_the_plain_one_bit_for_bit(rng, group):
  # 5 x 3 blocks (the last row and column overhang): groups of 2 and 3 leave a
  # short last group; 8 is more rows than the grid has
  a = jnp.asarray(rng.standard_normal((72, 32)), jnp.float32)
  b = jnp.asarray(rng.standard_normal((32, 40)), jnp.float32)
  with _installed():
    plain = jax.jit(functools.partial(_matmul, bm=16, bn=16, group=0, name="mm_plain"))(a, b)
    grouped = jax.jit(functools.partial(_matmul, bm=16, bn=16, group=group,
                                        name=f"mm_g{group}"))(a, b)
  np.testing.assert_array_equal(np.asarray(grouped), np.asarray(plain))
  np.testing.assert_allclose(np.asarray(plain), np.asarray(a) @ np.asarray(b), rtol=1e-4,
                             atol=1e-4)
  (gk,) = [r.generated for r in kernel_registry.find(f"mm_g{group}")][-1:]
  assert gk.launch_group == group and gk.launch_grid == (15, 1, 1)
  assert "launched in groups of" in gk.source


def _order(shape, group) -> np.ndarray:
  def kernel(counter_ref, o_ref):
    ticket = plgpu.atomic_add(counter_ref, (0,), jnp.int32(1))
    o_ref[...] = jnp.full(o_ref.shape, ticket, jnp.int32)
  call = pl.pallas_call(
      kernel, grid=shape, name=f"tickets_g{group}",
      in_specs=[pl.BlockSpec((1,), lambda i, j: (0,))],
      out_specs=pl.BlockSpec((1, 1), lambda i, j: (i, j)),
      out_shape=jax.ShapeDtypeStruct(shape, jnp.int32),
      compiler_params=pallas_prof.CompilerParams(launch_group=group))
  with _installed():
    return np.asarray(jax.jit(call)(jnp.zeros((1,), jnp.int32)))


def test_programs_run_in_groups_along_the_first_dimension():
  if jax.default_backend() == "gpu":
    pytest.skip("a GPU runs programs side by side: only the interpreter shows the order")
  # (The interpreter runs a plain 2-D launch with program_id(0) outermost, where CUDA
  # runs its x axis fastest; a grouped launch is 1-D, run in order by both.)
  assert sorted(_order((5, 4), 0).ravel()) == list(range(20))
  grouped = _order((5, 4), 2)
  # groups of 2 rows: within a group the row varies fastest, then the column;
  # the last group has the one row left
  want = np.array([[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15],
                   [16, 17, 18, 19]])
  np.testing.assert_array_equal(grouped, want)


@pytest.mark.parametrize("option,value", [("launch_group", 8), ("persistent", 4)])
def test_where_the_grid_allows_no_other_order_nothing_changes(rng, option, value):
  # a grid of one dimension has no grouped order; 4 points for 4 persistent programs: no loop
  x = jnp.asarray(rng.standard_normal((64,)), jnp.float32)

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

  def call(asked):
    return pl.pallas_call(kernel, grid=(4,), name=f"one_dim_{option}{asked}",
                          in_specs=[pl.BlockSpec((16,), lambda i: (i,))],
                          out_specs=pl.BlockSpec((16,), lambda i: (i,)),
                          out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
                          compiler_params=pallas_prof.CompilerParams(**{option: asked}))
  with _installed():
    jax.jit(call(0)).lower(x)
    out = jax.jit(call(value))(x)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)
  (plain,) = kernel_registry.find(f"one_dim_{option}0")[-1:]
  (asked,) = kernel_registry.find(f"one_dim_{option}{value}")[-1:]
  assert getattr(asked.generated, option) == 0 and asked.generated.launch_grid == (4, 1, 1)
  assert asked.generated.source.replace(f"one_dim_{option}{value}", f"one_dim_{option}0") \
      == plain.generated.source


def test_a_grouped_three_dimensional_grid_runs_and_compiles(rng):
  x = jnp.asarray(rng.standard_normal((3, 48, 40)), jnp.float32)

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0

  def call(group):
    spec = pl.BlockSpec((1, 16, 8), lambda i, j, k: (k, i, j))
    return pl.pallas_call(kernel, grid=(3, 5, 3), name=f"three_d_g{group}", in_specs=[spec],
                          out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pallas_prof.CompilerParams(launch_group=group))
  with _installed():
    out = jax.jit(call(2))(x)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + 1.0)
  (rec,) = kernel_registry.find("three_d_g2")[-1:]
  assert rec.generated.launch_group == 2 and rec.generated.launch_grid == (15, 3, 1)
  ck = compile_kernel(rec.generated, ("cuda", 90))
  assert ck.cubin
