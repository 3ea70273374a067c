"""lax.scan with xs and ys inside a kernel, against jax.numpy on XLA; every
case also compiles for sm_90 (tests/backend/lowering/rules/test_control_flow.check)."""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from tests.backend.lowering.rules.test_control_flow import check
from testkit.helpers import random_array


def test_scan_rows_with_carry_and_ys(rng):
  x = random_array(rng, (7, 5), "float32")     # 7 steps: a loop, not straight-line
  check(lambda x: {
      "cumsum": lax.scan(lambda c, row: (c + row, c * row), jnp.zeros(5), x),
      "reverse": lax.scan(lambda c, row: (c * 0.5 + row, c - row), x[0], x, reverse=True),
      "scalar_ys": lax.scan(lambda c, row: (c + row.sum(), c), jnp.float32(0), x)[1],
  }, x, name="scan_rows")


def test_short_scans_straight_line_and_several_xs_ys(rng):
  a = random_array(rng, (3, 6), "int32")
  b = random_array(rng, (3,), "float32")
  h = random_array(rng, (3, 4, 2), "bfloat16")

  def step(c, xs):
    row, s, blk = xs
    nc = c + row
    return nc, (nc * 2, row.astype(jnp.float32) * s, blk * blk, s)

  check(lambda a, b, h: {
      "several": lax.scan(step, jnp.zeros(6, jnp.int32), (a, b, h)),
      "no_carry": lax.scan(lambda c, row: (c, row * 3), None, a)[1],
      "reverse_ys": lax.scan(lambda c, s: (c + s, c), jnp.float32(1), b, reverse=True),
  }, a, b, h, name="scan_several")


def test_scan_over_xs_inside_a_loop_and_with_a_ref_read(rng):
  x = random_array(rng, (9, 3), "float32")
  check(lambda x: {
      "nested": lax.fori_loop(0, 2, lambda i, acc: lax.scan(
          lambda c, row: (c + row * i.astype(jnp.float32), c), acc, x)[0], jnp.ones(3)),
      "length_one": lax.scan(lambda c, row: (c - row, row + c), x[0], x[:1]),
  }, x, name="scan_nested")
