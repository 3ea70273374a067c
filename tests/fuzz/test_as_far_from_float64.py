"""check.as_far_from_float64: a float32 program whose answer float32 does not settle at
the fuzzer's tolerance (XLA's own float32 misses the float64 answer there) is counted
apart when pallas-prof misses it by no more; a wrong element beside it stays a
difference. The program is the CPU fuzz's finding at 49c3970 (seed 20261224, jax 0.12 and
triton 3.9; the same numbers on jax 0.10 and triton 3.6): a sin of a cumsum of values
up to ten thousand, where an ulp of the sum is a thousandth of the sin."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from testkit.fuzz import check
from testkit.fuzz.programs import InputSpec, Program

SIN_OF_CUMSUM = Program(
    "values",
    "def fn(x0, x1, x2):\n"
    "  v3 = jnp.cumsum(x2[:, None], axis=0) * x2[None, :]\n"
    "  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n"
    "  v5 = jnp.cumsum((x2 * x2)[:, None] * v4, axis=0)\n"
    "  v6 = jnp.clip(v5, -10000, 10000)\n"
    "  v7 = jnp.sin(v5)\n"
    "  return (v6, v7,)\n",
    (InputSpec((33,), "float32", -4, 4), InputSpec((1,), "float32", -4, 4),
     InputSpec((33,), "float32", -4, 4)),
    0, 0.0002, scale=79200.0, features=("clip", "cumsum", "unary"), fragile=True)

# the same steps with the sin's argument a thousand times smaller: float32 settles it
SETTLED = SIN_OF_CUMSUM.__class__(**{**SIN_OF_CUMSUM.__dict__, "fragile": False, "source": (
    SIN_OF_CUMSUM.source.replace("v7 = jnp.sin(v5)", "v7 = jnp.sin(v5 * 0.001)"))})


@pytest.fixture(scope="module")
def run():
  inputs = check.make_inputs(SIN_OF_CUMSUM)
  return inputs, check.run_reference(SIN_OF_CUMSUM, inputs), \
      check.run_pallas_prof(SIN_OF_CUMSUM, inputs)


def _float64(program, inputs):
  scope = check.build(program)
  with jax.enable_x64(True):
    return [np.asarray(r) for r in jax.tree.leaves(
        scope["fn"](*[a.astype(np.float64) for a in inputs]))]


def test_the_finding_differs_from_xla_and_xla_from_float64(run, monkeypatch):
  inputs, want, got = run
  diff, _ = check.compare(SIN_OF_CUMSUM, got, want)
  assert diff is not None and diff.startswith("output 1")     # beyond the fragile share
  exact = _float64(SIN_OF_CUMSUM, inputs)[1]
  near = exact.astype(np.float32)
  xla_off = int(check._mismatches(SIN_OF_CUMSUM, np.asarray(want[1]), near).sum())
  ours_off = int(check._mismatches(SIN_OF_CUMSUM, np.asarray(got[1]), near).sum())
  assert xla_off > 50 and ours_off <= xla_off, (xla_off, ours_off)
  assert check.as_far_from_float64(SIN_OF_CUMSUM, inputs, got, want)
  # the scans' order alone explains it first (Triton's interpreter sums one element after
  # another, XLA's CPU in windows: tests/fuzz/test_interpreter_scan_order.py); without
  # that check, the float64 one counts it apart
  assert check.check(SIN_OF_CUMSUM).status == "interpreter_scan_order"
  monkeypatch.setattr(check, "interpreter_scan_order_agrees", lambda *args: False)
  assert check.check(SIN_OF_CUMSUM).status == "xla_as_far_from_float64"


@pytest.mark.parametrize("plant", ["negated", "shifted", "nan", "three_small"])
def test_a_wrong_element_beside_it_stays_a_difference(run, plant):
  inputs, want, got = run
  bad = [np.array(g) for g in got]
  sin = bad[1]
  if plant == "negated":
    sin[5, 7] = -sin[5, 7] if abs(sin[5, 7]) > 0.1 else 0.9
  elif plant == "shifted":
    sin[0, 0] += 0.05                      # twenty times XLA's worst miss
  elif plant == "nan":
    sin[3, 3] = np.nan
  else:                                    # a neighbour's value in three elements
    sin[10:13, 2] = sin[10:13, 3] + 0.02
  assert not check.as_far_from_float64(SIN_OF_CUMSUM, inputs, bad, want)


def test_where_float32_settles_the_answer_a_wrong_element_is_a_difference():
  inputs = check.make_inputs(SETTLED)
  want = check.run_reference(SETTLED, inputs)
  got = [np.array(g) for g in check.run_pallas_prof(SETTLED, inputs)]
  assert check.compare(SETTLED, got, want)[0] is None          # agrees as it is
  got[1][4, 4] += 0.01
  assert check.compare(SETTLED, got, want)[0] is not None
  assert not check.as_far_from_float64(SETTLED, inputs, got, want)


def test_kernel_programs_and_other_dtypes_are_not_judged_by_it(run):
  inputs, want, got = run
  kernel = SIN_OF_CUMSUM.__class__(**{**SIN_OF_CUMSUM.__dict__, "kind": "kernel"})
  assert not check.as_far_from_float64(kernel, inputs, got, want)
  ints = [a.astype(np.int32) for a in inputs]
  assert not check.as_far_from_float64(SIN_OF_CUMSUM, ints, got, want)
