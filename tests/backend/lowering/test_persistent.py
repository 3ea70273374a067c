"""Persistent programs (CompilerParams(persistent=P), grid.persistent_launch): P programs
are launched, each looping over the launch grid's points from its own id in steps of P,
each point computing what its program computed before. Checked under Triton's interpreter
(which runs the P programs one at a time, in order, so an atomic ticket shows which
program ran which point, and when) and compiled for sm_90."""
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
from pallas_prof.backend.options import TunedSettings
from pallas_prof.tune import validate

from .test_launch_order import _installed, _matmul


def _generated(name):
  (rec,) = kernel_registry.find(name)[-1:]
  return rec.generated


@pytest.mark.parametrize("group,persistent", [(0, 1), (0, 4), (0, 14), (3, 4), (2, 7)])
def test_persistent_matmul_equals_the_plain_one_bit_for_bit(rng, group, persistent):
  # 5 x 3 blocks, the last row and column overhanging: 15 points; 4 and 7 programs leave
  # programs with one point fewer than others; 14 leaves one program two points
  a = jnp.asarray(rng.standard_normal((72, 33)), jnp.float32)
  b = jnp.asarray(rng.standard_normal((33, 40)), jnp.float32)
  name = f"mm_p{persistent}_g{group}"
  with _installed():
    plain = jax.jit(functools.partial(_matmul, bm=16, bn=16, group=0, persistent=0,
                                      name="mm_p0"))(a, b)
    out = jax.jit(functools.partial(_matmul, bm=16, bn=16, group=group,
                                    persistent=persistent, name=name))(a, b)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(plain))
  np.testing.assert_allclose(np.asarray(plain), np.asarray(a) @ np.asarray(b), rtol=1e-4,
                             atol=1e-4)
  gk = _generated(name)
  assert gk.persistent == persistent and gk.launch_grid == (persistent, 1, 1)
  assert gk.launch_group == group
  assert f"range(tl.program_id(0), 15, {persistent})" in gk.source
  assert gk.options.settings.label.endswith(f"p{persistent}")


def _tickets(grid, persistent, name) -> np.ndarray:
  def kernel(counter_ref, o_ref):
    ticket = plgpu.atomic_add(counter_ref, (0,), jnp.int32(1))
    o_ref[...] = jnp.full(o_ref.shape, ticket, jnp.int32)
  call = pl.pallas_call(
      kernel, grid=grid, name=name,
      in_specs=[pl.BlockSpec((1,), lambda *ids: (0,))],
      out_specs=pl.BlockSpec((1,) * len(grid), lambda *ids: ids),
      out_shape=jax.ShapeDtypeStruct(grid, jnp.int32),
      compiler_params=pallas_prof.CompilerParams(persistent=persistent))
  with _installed():
    return np.asarray(jax.jit(call)(jnp.zeros((1,), jnp.int32)))


def test_each_program_runs_its_points_in_turn():
  if jax.default_backend() == "gpu":
    pytest.skip("a GPU runs programs side by side: only the interpreter shows the order")
  # 11 points, 4 programs: program p runs points p, p + 4, p + 8 (axis 0 fastest), and the
  # interpreter runs program 0 whole, then program 1, ...
  tickets = _tickets((11,), 4, "tickets_p4")
  owners = [[p for p in range(4) if (t - p) % 4 == 0][0] for t in range(11)]
  want, next_ticket = [None] * 11, 0
  for p in range(4):
    for t in range(11):
      if owners[t] == p:
        want[t], next_ticket = next_ticket, next_ticket + 1
  np.testing.assert_array_equal(tickets, want)
  assert _generated("tickets_p4").launch_grid == (4, 1, 1)


def test_a_three_dimensional_grid_with_a_dimension_of_one_runs_every_point_once():
  # grid (3, 1, 5): launch axes (3, 1, 5); the persistent loop computes all three ids
  tickets = _tickets((3, 1, 5), 4, "tickets_3d_p4")
  assert sorted(tickets.ravel()) == list(range(15))
  gk = _generated("tickets_3d_p4")
  assert gk.persistent == 4 and gk.launch_grid == (4, 1, 1)
  assert "pid_axis2" in gk.source


def test_a_loop_a_masked_reduction_and_two_outputs(rng):
  # rows of 37 (masked to 64 lanes) summed over a fori_loop of column blocks, two outputs
  x = jnp.asarray(rng.standard_normal((45, 3, 37)), jnp.float32)

  def kernel(x_ref, sum_ref, max_ref):
    def body(j, carry):
      s, m = carry
      row = x_ref[:, j, :]
      return s + jnp.sum(row, axis=-1), jnp.maximum(m, jnp.max(row, axis=-1))
    s, m = jax.lax.fori_loop(0, 3, body, (jnp.zeros((5,), jnp.float32),
                                          jnp.full((5,), -jnp.inf, jnp.float32)))
    sum_ref[...] = s
    max_ref[...] = m

  def call(persistent):
    return pl.pallas_call(
        kernel, grid=(9,), name=f"rows_p{persistent}",
        in_specs=[pl.BlockSpec((5, 3, 37), lambda i: (i, 0, 0))],
        out_specs=[pl.BlockSpec((5,), lambda i: (i,))] * 2,
        out_shape=[jax.ShapeDtypeStruct((45,), jnp.float32)] * 2,
        compiler_params=pallas_prof.CompilerParams(persistent=persistent))
  with _installed():
    plain = jax.jit(call(0))(x)
    out = jax.jit(call(2))(x)
  for got, want in zip(out, plain, strict=True):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  np.testing.assert_allclose(np.asarray(out[0]), np.asarray(x).sum(axis=(1, 2)), rtol=1e-5,
                             atol=1e-5)
  np.testing.assert_array_equal(np.asarray(out[1]), np.asarray(x).max(axis=(1, 2)))
  assert _generated("rows_p2").launch_grid == (2, 1, 1)


# a grid of no more points than programs is lowered as before: test_launch_order.py's
# test_where_the_grid_allows_no_other_order_nothing_changes


def test_the_probed_variant_launches_one_program_a_point(rng):
  # its probes time each program once, entry to end: it is lowered without the loop
  a = jnp.asarray(rng.standard_normal((64, 16)), jnp.float32)
  b = jnp.asarray(rng.standard_normal((16, 64)), jnp.float32)
  with _installed():
    jax.jit(functools.partial(_matmul, bm=16, bn=16, group=0, persistent=3,
                              name="mm_probed_p3")).lower(a, b)
  (rec,) = kernel_registry.find("mm_probed_p3")[-1:]
  assert rec.generated.persistent == 3
  probed = rec.relower(rec.generated.options.replace(probes=True))
  assert probed.persistent == 0 and probed.launch_grid == (4, 4, 1)


def test_a_persistent_kernel_compiles_for_sm90(rng):
  a = jnp.asarray(rng.standard_normal((96, 64)), jnp.float32)
  b = jnp.asarray(rng.standard_normal((64, 80)), jnp.float32)
  with _installed():
    jax.jit(functools.partial(_matmul, bm=32, bn=16, group=2, persistent=5,
                              name="mm_sm90_p5")).lower(a, b)
  gk = _generated("mm_sm90_p5")
  assert gk.persistent == 5
  assert compile_kernel(gk, ("cuda", 90)).cubin


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_a_bad_persistent_is_refused_at_the_users_line(bad):
  with pytest.raises(ValueError, match="persistent"):
    pallas_prof.CompilerParams(persistent=bad)


def test_saved_settings_without_persistent_read_as_zero_and_bad_ones_are_refused():
  old = {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": False}
  assert validate.settings_problem(old) is None
  assert validate.settings_problem({**old, "persistent": 132}) is None
  assert "persistent" in validate.settings_problem({**old, "persistent": -2})
  assert "persistent" in validate.settings_problem({**old, "persistent": 1.5})
  assert validate.settings_problem({**old, "persistent": 0, "extra": 1})
  assert TunedSettings(persistent=132).label == "4w 3s p132"
