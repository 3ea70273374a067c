"""testkit/fuzz/rounded.py: the reference with each jnp and lax call rounded from float64,
and the fuzzer's verdict on the H200's ceil-of-tanh finding (seed 20261222), which it
explains: XLA's CPU tanh, not pallas-prof, is off there."""
from __future__ import annotations

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from testkit.fuzz import check
from testkit.fuzz.programs import FLOAT_TOL, InputSpec, Program
from testkit.fuzz.rounded import namespace_rounded_from_float64, rounded_from_float64

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results"
RECORD = RESULTS / "fuzz_gpu_h200_095f1e6_seed20261222.json"


def _finding(describe_start: str) -> dict:
  found = [d for d in json.loads(RECORD.read_text())["differences"]
           if d["describe"].startswith(describe_start)]
  assert len(found) == 1, describe_start
  return found[0]


def _ceil_of_tanh() -> Program:
  d = _finding("kernel program on int32[13]")
  assert "jnp.ceil(v5)" in d["source"] and "jnp.tanh(v4)" in d["source"]
  return Program("kernel", d["source"], (InputSpec((13,), "int32"),), 3038330,
                 FLOAT_TOL["float32"], features=("cast", "global_index", "select", "unary"),
                 fragile=True)


def test_a_call_rounded_from_float64_is_the_float32_nearest():
  x = jnp.asarray([-10.0, -9.0, 4.706857], jnp.float32)
  nearest = np.tanh(np.asarray(x, np.float64)).astype(np.float32)
  with jax.enable_x64(True):
    got = np.asarray(rounded_from_float64(jnp.tanh)(x))
    exp = np.asarray(rounded_from_float64(jnp.exp)(x))
  assert got.dtype == np.float32 and exp.dtype == np.float32
  np.testing.assert_array_equal(got, nearest)
  np.testing.assert_array_equal(exp, np.exp(np.asarray(x, np.float64)).astype(np.float32))
  # integers pass through untouched, 16-bit floats keep their dtype
  with jax.enable_x64(True):
    assert rounded_from_float64(jnp.add)(jnp.int32(3), jnp.int32(4)).dtype == jnp.int32
    assert rounded_from_float64(jnp.sin)(jnp.ones(3, jnp.float16)).dtype == jnp.float16
    # 16-bit calls are XLA's own (a 16-bit sum rounded once would excuse a skipped rounding)
    h = jnp.asarray(np.linspace(0, 40, 64), jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(rounded_from_float64(jnp.cumsum)(h)),
                                  np.asarray(jnp.cumsum(h)))


def test_the_namespace_keeps_types_and_takes_replacements():
  scope = namespace_rounded_from_float64(check.namespace(), **{"jnp.cumsum": "mine"})
  assert scope["jnp"].float32 is jnp.float32
  assert scope["jnp"].cumsum == "mine"
  assert scope["lax"].Precision is jax.lax.Precision


def test_the_h200_s_ceil_of_tanh_is_xla_s_ulp_and_not_a_difference():
  program = _ceil_of_tanh()
  inputs = check.make_inputs(program)
  (want,) = check.run_reference(program, inputs)
  (got,) = check.run_pallas_prof(program, inputs)
  # the finding as the H200 printed it: pallas-prof -1.0, JAX's interpreter -0.0 at 10..12
  assert list(got[10:13]) == [-1.0] * 3 and list(want[10:13]) == [0.0] * 3
  assert np.signbit(want[10:13]).all()
  # tanh(-10) in float64 is -0.9999999958776927: its float32 nearest is -1.0, so
  # ceil(tanh(-10)) is -1.0 in float32 op by op; XLA's tanh stops short of it
  assert np.float32(np.tanh(-10.0)) == -1.0
  outcome = check.check(program)
  assert outcome.status == "xla_less_precise_than_float64", outcome


def test_a_wrong_element_beside_xla_s_ulp_stays_a_difference():
  program = _ceil_of_tanh()
  inputs = check.make_inputs(program)
  (got,) = check.run_pallas_prof(program, inputs)
  assert check.rounded_reference_agrees(program, inputs, [got])
  one, three = got.copy(), got.copy()
  one[[4]] = 3.0
  three[[0, 4, 7]] = 3.0
  # a fragile program (a ceil of a tanh) may flip check.FLIPS elements, no more
  assert check.FLIPS == 2
  assert check.rounded_reference_agrees(program, inputs, [one])
  assert not check.rounded_reference_agrees(program, inputs, [three])
  # and a program with nothing fragile, not one
  sturdy = dataclasses.replace(program, fragile=False)
  assert check.rounded_reference_agrees(sturdy, inputs, [got])
  assert not check.rounded_reference_agrees(sturdy, inputs, [one])


def test_a_program_without_floats_is_not_explained_by_float64():
  program = Program("values", "def fn(x0):\n  return (x0 * 3,)\n",
                    (InputSpec((8,), "int32"),), 0, 0.0)
  inputs = check.make_inputs(program)
  assert not check.rounded_reference_agrees(program, inputs, [inputs[0] * 3])
