"""testkit/fuzz/op_by_op.py: the fuzzer's op-by-op reference rounds every equation to its dtype
(float16 and bfloat16 included), in plain jaxprs, control flow and a pallas_call's body; and
check.py judges the recorded float16 "reference's differences" with it (issue 47 item 6)."""
from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

from testkit.fuzz import check, op_by_op

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "corpus"
# the CPU fuzz's one difference of 2026-12-05 (x1 * x1 + 1, its fourth power, a sin), and the
# GPU fuzz's float16 finding of 2026-12-15 read then as XLA's FMA
RECORDED = ["fuzz_cpu_04e1a5d_seed20261240_jax012_triton39_targets_repro/repro_kernel_0_eb4dd29e.py",
            "fuzz_gpu_h200_04b520d_seed20261215_repro/repro_kernel_0_b93cd438.py"]


def _grid(dtype, n=4096, seed=0):
  return np.random.default_rng(seed).uniform(-4, 4, n).astype(np.float32).astype(dtype)


def _once_and_each(x, dtype):
  """x * x + 1 rounded once (float32 kept between) and after each operation."""
  once = (x.astype(np.float32) * x.astype(np.float32) + 1).astype(dtype)
  each = ((x * x).astype(dtype) + dtype(1)).astype(dtype)
  return once, each


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_each_equation_is_rounded_to_its_dtype(dtype):
  x = _grid(dtype)
  once, each = _once_and_each(x, dtype)
  assert (once != each).any()                # the inputs tell the two roundings apart
  fn = lambda v: v * v + 1                   # noqa: E731 - two equations: mul, add
  [got] = op_by_op.evaluate(jax.make_jaxpr(fn)(x), x)
  assert np.asarray(got).dtype == np.dtype(dtype)
  np.testing.assert_array_equal(np.asarray(got), each)


def test_a_jnp_function_and_a_loop_body_are_walked_into_not_compiled_whole():
  """jnp.clip (a jit) over a product, and a fori_loop whose body is `c * x + 1`: each step
  of each rounded to float16, as numpy's float16 gives them."""
  x = _grid(np.float16, 512, seed=1) / np.float16(2)

  def fn(v):
    w = jnp.clip(v * v + 1, -300, 300)
    return lax.fori_loop(0, 3, lambda i, c: c * v + 1, w)
  [got] = op_by_op.evaluate(jax.make_jaxpr(fn)(x), x)
  want = np.clip((x * x).astype(np.float16) + np.float16(1), -300, 300).astype(np.float16)
  for _ in range(3):
    want = ((want * x).astype(np.float16) + np.float16(1)).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(got), want)


def test_a_scan_and_a_cond_are_evaluated_step_by_step():
  x = (_grid(np.float16, 64, seed=2) / np.float16(4)).reshape(8, 8)

  def fn(v):
    carry, ys = lax.scan(lambda c, row: (c * row + 1, c * c + row), v[0], v, reverse=True)
    return lax.cond(carry[0] > 0, lambda a: a * a + 1, lambda a: a + a, carry), ys
  got_carry, got_ys = op_by_op.evaluate(jax.make_jaxpr(fn)(x), x)
  c, ys = x[0], [None] * 8
  for i in reversed(range(8)):
    c, ys[i] = ((c * x[i]).astype(np.float16) + np.float16(1)), \
        ((c * c).astype(np.float16) + x[i]).astype(np.float16)
  c = c.astype(np.float16)
  want_carry = ((c * c).astype(np.float16) + np.float16(1)) if c[0] > 0 else c + c
  np.testing.assert_array_equal(np.asarray(got_carry), want_carry.astype(np.float16))
  np.testing.assert_array_equal(np.asarray(got_ys), np.stack(ys))


def test_a_pallas_kernels_body_is_rounded_per_equation_where_the_interpreter_fuses():
  """The kernel `o = x * x + 1` in float16 over a grid: the op-by-op reference gives the
  product rounded first, in every element, where JAX's own interpreter (XLA's jit) may not."""
  x = _grid(np.float16, 256, seed=3)

  def kernel(x_ref, o_ref):
    v = x_ref[...]
    o_ref[...] = v * v + 1
  call = pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
                        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
                        out_shape=jax.ShapeDtypeStruct((256,), jnp.float16), interpret=True)
  [got] = op_by_op.evaluate(jax.make_jaxpr(call)(x), x)
  once, each = _once_and_each(x, np.float16)
  assert (once != each).any()
  np.testing.assert_array_equal(np.asarray(got), each)


def _xla_as_recorded(program, inputs, monkeypatch) -> list:
  """XLA's jitted reference for `program`, as the machine that recorded the case computed it.

  Whether XLA's jit on the CPU skips a float16 rounding depends on the CPU: the recording
  machine's did, and a later CI machine's gave the op-by-op answer exactly. There, the
  recorded kind of reference is made: the op-by-op answer with every element of the first
  output moved (more than a fragile program's FLIPS), put in place of check.run_reference,
  so that what the check decides is still tested against a reference that differs."""
  xla = check.run_reference(program, inputs)
  reference = op_by_op.run_program(program, inputs)
  if any(not np.array_equal(np.asarray(a), np.asarray(b))
         for a, b in zip(xla, reference, strict=True)):
    return xla
  moved = [np.array(r, copy=True) for r in reference]
  moved[0] = (moved[0].astype(np.float32) * 1.25 + 0.375).astype(moved[0].dtype)
  monkeypatch.setattr(check, "run_reference", lambda *a, **k: [m.copy() for m in moved])
  return moved


@pytest.mark.parametrize("name", RECORDED, ids=["cpu_04e1a5d", "gpu_04b520d"])
def test_the_recorded_float16_differences_are_xlas_decided_not_asserted(name, monkeypatch):
  """The recorded "reference's difference" cases: pallas-prof (Triton's interpreter) equals
  the op-by-op reference bit for bit, XLA's jitted interpreter differs, and the check says
  so ("xla_skips_16bit_rounding"); the old check raised a Difference on both."""
  program = check.load_reproducer(str(CORPUS / name))
  inputs = check.make_inputs(program)
  got = check.run_pallas_prof(program, inputs)
  reference = op_by_op.run_program(program, inputs)
  for ours, theirs in zip(got, reference):
    np.testing.assert_array_equal(ours, theirs)
  assert check.compare(program, got, _xla_as_recorded(program, inputs, monkeypatch))[0] \
      is not None
  outcome = check.check(program)
  assert outcome.status == "xla_skips_16bit_rounding", outcome


def test_a_tolerated_flip_that_the_op_by_op_reference_does_not_give_is_ours(monkeypatch):
  """A fragile float16 program whose pallas-prof answer is XLA's fused one with one element
  wrong: one flip from XLA is tolerated, but against the op-by-op reference it differs in
  more elements than a fragile program may, so it is a Difference, pallas-prof's."""
  program = check.load_reproducer(str(CORPUS / RECORDED[0]))
  assert program.fragile
  inputs = check.make_inputs(program)
  xla = _xla_as_recorded(program, inputs, monkeypatch)
  bad = [a.copy() for a in xla]
  bad[0][0] = -bad[0][0] + np.float16(0.5)
  assert check.compare(program, bad, xla)[1].startswith("tolerated")
  monkeypatch.setattr(check, "run_pallas_prof", lambda *a, **k: [b.copy() for b in bad])
  with pytest.raises(check.Difference, match="op-by-op reference"):
    check.check(program)


def test_an_equation_that_comes_back_wider_than_its_dtype_is_refused():
  """The evaluator vouches for its roundings: a result in float32 where the jaxpr says
  float16 is an error, not a silent wider intermediate."""
  x = _grid(np.float16, 8)
  closed = jax.make_jaxpr(lambda v: v * v)(x)
  eqn = op_by_op._split(closed)[0].eqns[0]
  with pytest.raises(op_by_op.NotRoundedError, match="float32"):
    op_by_op._rounded(np.zeros(8, np.float32), eqn.outvars[0].aval, eqn)
