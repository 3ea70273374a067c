"""tests/fuzz/scan_order.py: the GPU's order of a 16-bit scan, and the fuzzer's verdict
on a program whose only difference from XLA is that order."""
from __future__ import annotations

import types

import numpy as np
import pytest

from tests.fuzz import check
from tests.fuzz.programs import FLOAT_TOL, InputSpec, Program
from tests.fuzz.scan_order import warp_scan

# the two programs of the H200 fuzz run at d875290 (seed 20261218), shrunk (seed 0)
REVERSE = Program(
    "values", "def fn(x0, x1, x2):\n  v3 = lax.cumsum(x0, axis=0, reverse=True)\n"
    "  v4 = lax.cumprod(jnp.clip(v3, -1.1, 1.1), axis=0, reverse=True)\n  return (v4,)\n",
    (InputSpec((33,), "float16"), InputSpec((1,), "float16"), InputSpec((33,), "float16")),
    0, FLOAT_TOL["float16"], features=("clip", "cumprod", "cumsum"))
DOT = Program(
    "values", "def fn(x0):\n  v1 = jnp.cumsum(x0, axis=0)\n  v2 = -v1\n  v3 = -v2\n"
    "  v4 = -v3\n  v5 = -v4\n"
    "  v6 = jnp.dot(v5, v5.T, precision=HIGHEST, preferred_element_type=jnp.float32)\n"
    "  v7 = jnp.sin(v6)\n  return (v7,)\n",
    (InputSpec((5, 1), "float16"),), 0, FLOAT_TOL["float32"],
    features=("cumsum", "dot", "unary"), fragile=True)
GPU = types.SimpleNamespace(platform="gpu")


def _warp_run(program):
  from tests.fuzz.scan_order import namespace_with_warp_scans
  scope = namespace_with_warp_scans(check.namespace())
  exec(program.source, scope)
  return [np.array(r) for r in scope["fn"](*check.make_inputs(program))]


def test_the_warp_order_gives_the_gpu_s_numbers_bit_for_bit():
  # what the H200 gave (fuzz_gpu_h200_d875290_seed20261218.json)
  (got,) = _warp_run(REVERSE)
  np.testing.assert_array_equal(got[:5], np.array([1.063, 0.9663, 0.88, 0.801, 0.7275],
                                                  np.float16))
  (x0,) = check.make_inputs(DOT)
  np.testing.assert_array_equal(np.asarray(warp_scan(x0, 0)).ravel(),
                                np.array([1.096, -0.746, -4.42, -8.28, -5.78], np.float16))
  (got,) = _warp_run(DOT)
  # then sin of the float32 dot: the GPU's sin and XLA's may differ in the last bit
  np.testing.assert_allclose(got[[2, 2, 3], [2, 4, 4]],
                             np.array([0.6468317, 0.4179827, -0.6831641], np.float32), rtol=1e-6)
  # and XLA's own order gives the reference's
  (want,) = check.run_reference(REVERSE, check.make_inputs(REVERSE))
  np.testing.assert_array_equal(want[:5], np.array([1.097, 0.9976, 0.907, 0.8247, 0.751],
                                                   np.float16))


@pytest.mark.parametrize("program", [REVERSE, DOT], ids=["reverse", "dot"])
def test_the_order_alone_is_counted_apart_on_a_gpu(program):
  inputs = check.make_inputs(program)
  got = _warp_run(program)
  assert check.compare(program, got, check.run_reference(program, inputs))[0] is not None
  assert check._xla_agreeing_elsewhere(program, inputs, got, GPU) == "gpu_scan_order"


@pytest.mark.parametrize("program", [REVERSE, DOT], ids=["reverse", "dot"])
def test_wrong_elements_beside_the_order_stay_a_difference(program):
  inputs = check.make_inputs(program)
  got = _warp_run(program)
  flat = got[0].reshape(-1)
  # wrong elements no order gives (three: a fragile program's rounding may flip two)
  flat[-3:] = -flat[-3:] - 1
  assert not check.gpu_scan_order_agrees(program, inputs, got)


def test_on_the_cpu_the_order_is_no_excuse():
  # the interpreter sums one element after another, as XLA's CPU does
  inputs = check.make_inputs(REVERSE)
  got = _warp_run(REVERSE)
  import jax
  assert check._xla_agreeing_elsewhere(REVERSE, inputs, got, jax.devices("cpu")[0]) is None
  assert check._xla_agreeing_elsewhere(REVERSE, inputs, got, None) is None


@pytest.mark.parametrize("shape,axis,reverse", [((70,), 0, False), ((3, 70), 1, True),
                                                ((65, 4), 0, True), ((5,), 0, False)])
def test_the_warp_order_is_a_scan(shape, axis, reverse):
  x = np.random.default_rng(7).uniform(-1, 1, shape).astype(np.float16)
  x64 = np.flip(x, axis).astype(np.float64) if reverse else x.astype(np.float64)
  exact = np.cumsum(x64, axis)
  exact = np.flip(exact, axis) if reverse else exact
  got = np.asarray(warp_scan(x, axis, reverse)).astype(np.float64)
  # within the float16 rounding of a sum of |x| <= 1 over the axis
  assert np.abs(got - exact).max() <= shape[axis] * 2.0 ** -10
  y = np.random.default_rng(7).uniform(-1, 1, shape).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(warp_scan(y, axis, reverse)),
                                np.asarray(__import__("jax").lax.cumsum(y, axis, reverse)))
