"""The CPU's two scan orders (testkit/fuzz/scan_order.py): Triton's interpreter's, which
pallas-prof's kernel runs on the CPU, and XLA's, the fuzzer's reference; and the fuzzer's
verdict on a program whose only difference from XLA is the order.

The CPU fuzz at 6bd886f (jax 0.12, triton 3.9, seed 20261225) recorded a float16 double
reverse cumsum over 64 rows, clipped and squared: 242.2 where XLA gave 248.2. Each order
gives its side's number, and every element of both scans, bit for bit. The program in
float64 gives 232.9 there: neither side is exact (pallas-prof's is the nearer), and both
are right float16 sums, in two orders."""
from __future__ import annotations

import json
import pathlib
import re

import jax
import numpy as np
import pytest
from jax import lax

from testkit.fuzz import check
from testkit.fuzz.programs import FLOAT_TOL, InputSpec, Program
from testkit.fuzz.scan_order import interpreter_scan, namespace_with_scans, xla_cpu_scan

RECORD = (pathlib.Path(__file__).resolve().parents[2] / "bench" / "results"
          / "fuzz_cpu_6bd886f_seed20261225_jax012_triton39_sm90.json")
_ELEMENT = re.compile(r"\[(\d+), (\d+)\]: np\.float16\(([-\d.e]+)\) vs np\.float16\(([-\d.e]+)\)")
CPU = jax.devices("cpu")[0]


def _recorded():
  """The recorded program, shrunk to seed 0 (a scan program's "both" inputs: a column,
  a row and the [64, 3] matrix, float16 in [-4, 4]), and the element the run printed:
  (row, column), pallas-prof's number, XLA's."""
  (d,) = json.loads(RECORD.read_text())["differences"]
  assert d["describe"].startswith("values program on float16[64], float16[3], float16[64, 3]")
  program = Program("values", d["source"], (InputSpec((64,), "float16"),
                    InputSpec((3,), "float16"), InputSpec((64, 3), "float16")), 0,
                    FLOAT_TOL["float16"], features=("binary", "clip", "cumsum", "reduce"))
  row, col, ours, xla = _ELEMENT.search(d["message"]).groups()
  return program, (int(row), int(col)), np.float16(ours), np.float16(xla)


DOUBLE_SCAN = "def fn(x):\n  v = lax.cumsum(x, axis=0, reverse=True)\n" \
              "  return (v, lax.cumsum(v, axis=0, reverse=True))\n"


def _scans(scan, x):
  """The recorded program's two scans, as `scan` sums them."""
  scope = namespace_with_scans(check.namespace(), scan)
  exec(DOUBLE_SCAN, scope)
  return [np.asarray(v) for v in scope["fn"](x)]


def test_each_order_gives_its_side_s_numbers_bit_for_bit():
  program, at, ours, xla = _recorded()
  inputs = check.make_inputs(program)
  got = check.run_pallas_prof(program, inputs)
  want = check.run_reference(program, inputs)
  # the recorded difference, as the run printed it
  assert (got[1][at], want[1][at]) == (ours, xla) == (np.float16(242.2), np.float16(248.2))
  # each side's scans, element for element: the interpreter's order gives pallas-prof's,
  # XLA's windowed order the reference's; the two orders differ in most elements
  both = Program("values", "def fn(x0, x1, x2):\n  v = lax.cumsum(x2, axis=0, reverse=True)\n"
                 "  return (v, lax.cumsum(v, axis=0, reverse=True))\n", program.inputs, 0,
                 program.tolerance, features=("cumsum",))
  ours_scans = check.run_pallas_prof(both, inputs)
  xla_scans = check.run_reference(both, inputs)
  x = inputs[2]
  interpreter = _scans(interpreter_scan, x)
  windowed = _scans(lambda v, axis, reverse, op: xla_cpu_scan(np.asarray(v), axis, reverse, op), x)
  for k in range(2):
    np.testing.assert_array_equal(ours_scans[k], interpreter[k])
    np.testing.assert_array_equal(xla_scans[k], windowed[k])
    assert (interpreter[k] != windowed[k]).sum() > 64
  # then the clip and the square, in float16, as the program does
  square = lambda v: np.clip(np.float16(np.clip(v, -300, 300)) ** 2, -300, 300)
  assert square(interpreter[1][at]) == ours and square(windowed[1][at]) == xla
  # the float64 answer: neither side's (pallas-prof's the nearer): a sum that cancels
  reverse_cumsum = lambda v: np.cumsum(v[::-1])[::-1]
  exact = reverse_cumsum(reverse_cumsum(x[:, at[1]].astype(np.float64)))[at[0]]
  assert np.float16(exact ** 2) == np.float16(232.9)
  assert abs(float(ours) - exact ** 2) < abs(float(xla) - exact ** 2)


def test_the_order_alone_is_counted_apart_on_the_cpu():
  program, *_ = _recorded()
  assert check.check(program).status == "interpreter_scan_order"
  assert check.check(program, CPU).status == "interpreter_scan_order"


def _plant(program, inputs, how):
  got = check.run_pallas_prof(program, inputs)
  out = got[1].copy()
  if how == "one element":        # a wrong element in a column the order leaves alone
    out[40, 2] = np.float16(out[40, 2] + 50)
  elif how == "rows shifted":     # a scan one row off
    out = np.roll(out, 1, axis=0)
  elif how == "columns swapped":
    out = out[:, ::-1].copy()
  return [got[0], out]


@pytest.mark.parametrize("how", ["one element", "rows shifted", "columns swapped"])
def test_wrong_elements_beside_the_order_stay_a_difference(how):
  program, *_ = _recorded()
  inputs = check.make_inputs(program)
  bad = _plant(program, inputs, how)
  assert check.compare(program, bad, check.run_reference(program, inputs))[0] is not None
  assert not check.interpreter_scan_order_agrees(program, inputs, bad)
  assert check._xla_agreeing_elsewhere(program, inputs, bad, CPU) is None


def test_a_scan_that_lost_its_direction_stays_a_difference():
  # pallas-prof summing the first scan forward instead of in reverse
  program, *_ = _recorded()
  inputs = check.make_inputs(program)
  lost = Program("values", program.source.replace("lax.cumsum(x2, axis=0, reverse=True)",
                                                  "lax.cumsum(x2, axis=0, reverse=False)"),
                 program.inputs, 0, program.tolerance, features=program.features)
  bad = check.run_pallas_prof(lost, inputs)
  assert not check.interpreter_scan_order_agrees(program, inputs, bad)
  assert check._xla_agreeing_elsewhere(program, inputs, bad, CPU) is None


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_the_interpreter_order_is_pallas_prof_s_on_the_cpu(dtype, op):
  """The model against the thing it stands for: pallas-prof's kernel under Triton's
  interpreter, in each float type (bfloat16 scanned in float32), both directions, both
  axes, bit for bit."""
  source = (f"def fn(x0):\n  return (lax.{op}(x0, axis=0, reverse=True), "
            f"lax.{op}(x0, axis=1), jnp.{op}(x0, axis=0))\n")
  program = Program("values", source, (InputSpec((37, 19), dtype, -2, 2),), 5,
                    FLOAT_TOL[dtype], features=(op,))
  inputs = check.make_inputs(program)
  if op == "cumprod":     # products that stay in range over the axis
    inputs = [np.asarray(np.clip(inputs[0].astype(np.float32), 0.9, 1.1).astype(dtype))]
  got = check.run_pallas_prof(program, inputs)
  scope = namespace_with_scans(check.namespace(), interpreter_scan)
  exec(source, scope)
  for g, m in zip(got, scope["fn"](inputs[0])):
    np.testing.assert_array_equal(g, np.asarray(m))


@pytest.mark.parametrize("n", [1, 5, 16, 17, 33, 64, 100, 257, 300])
@pytest.mark.parametrize("reverse", [False, True])
def test_the_windowed_order_is_xla_s_on_the_cpu(n, reverse):
  """xla_cpu_scan against jitted XLA on the CPU (one window, two levels, three), bit for
  bit: the explanation's other half."""
  x = np.random.default_rng(n).uniform(-4, 4, (n, 2)).astype(np.float16)
  want = jax.jit(lambda v: lax.cumsum(v, 0, reverse=reverse))(x)
  np.testing.assert_array_equal(xla_cpu_scan(x, 0, reverse), np.asarray(want))
  y = np.random.default_rng(n).uniform(0.95, 1.05, (2, n)).astype(np.float16)
  want = jax.jit(lambda v: lax.cumprod(v, 1, reverse=reverse))(y)
  np.testing.assert_array_equal(xla_cpu_scan(y, 1, reverse, "mul"), np.asarray(want))


def test_a_model_that_fails_explains_nothing(monkeypatch):
  """A program the interpreter's order cannot run (the model's own failure) stays the
  difference it is, and the fuzzer records it as one, not as its own crash."""
  from testkit.fuzz import scan_order
  program, *_ = _recorded()

  def broken(*args, **kwargs):
    raise RuntimeError("the model failed")

  monkeypatch.setattr(scan_order, "interpreter_scan", broken)
  with pytest.raises(check.Difference, match=r"\[10, 0\]"):
    check.check(program)
