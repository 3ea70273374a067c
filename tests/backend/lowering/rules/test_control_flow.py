"""Control flow in kernels: fori_loop, while_loop, scan, cond/switch, inlined
calls (jit, custom_jvp/vjp, checkpoint), program ids inside regions, and
debug printing, run by Triton's interpreter against jax.numpy/lax.

The interpreter accepts loop carries and if/else outputs whose types drift;
Triton's compiler does not, so every test here also compiles for sm_90.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from testkit.helpers import assert_close, pallas, random_array, run_on_values


def run(fn, *arrays, name):
  return run_on_values(fn, *arrays, name=name)


def check(fn, *arrays, name, **tolerances):
  """Matches XLA and compiles for sm_90; returns the generated kernel."""
  out = run(fn, *arrays, name=name)
  ref = jax.jit(fn)(*arrays)
  for (path, got), want in zip(jax.tree_util.tree_leaves_with_path(out), jax.tree.leaves(ref)):
    key = jax.tree_util.keystr(path)
    assert got.dtype == want.dtype, key
    assert_close(got, want, err_msg=key, **tolerances)
  gk = kernel_registry.find(name)[-1].generated
  ck = compile_kernel(gk)
  assert ".target sm_90" in ck.ptx
  return gk


def test_fori_loops(rng):
  x = random_array(rng, (5, 7), "float32")
  h = random_array(rng, (5, 7), "bfloat16")
  n = np.array([3, 7], np.int32)
  gk = check(lambda x, h, n: {
      "static": lax.fori_loop(0, 6, lambda i, c: c * 0.5 + i, x),
      "bf16_carry": lax.fori_loop(0, 5, lambda i, c: c * 0.5 + 1, h),
      "index_only": lax.fori_loop(2, 9, lambda i, c: c + i * i, jnp.int32(0)).reshape(1),
      "dynamic_upper": lax.fori_loop(0, n[0], lambda i, c: c * 0.5 + i, x),
      "dynamic_both": lax.fori_loop(n[0] - 2, n[1], lambda i, c: c - i.astype(jnp.float32), x),
      "empty": lax.fori_loop(n[1], n[0], lambda i, c: c + 1.0, x),
      "nested": lax.fori_loop(0, 5, lambda i, c: lax.fori_loop(
          0, i + 1, lambda j, d: d + (j * i).astype(jnp.float32), c), x),
  }, x, h, n, name="fori_loops")
  # dynamic bounds arrive as while_loops: they must still be `for` loops
  # (static trip counts are above MAX_UNROLL_TRIPS: loops, not straight-line)
  code = [line.split("#")[0].strip() for line in gk.source.splitlines()]
  assert not any(line.startswith("while ") for line in code)
  assert sum(line.startswith("for i_raw") for line in code) == 7


def test_loop_carries_swap_and_mix_dtypes(rng):
  x = random_array(rng, (5, 7), "float32")
  i = random_array(rng, (5, 7), "int32")

  def rotate(_, c):
    a, b, k = c
    return b, k + 1, a

  def mixed(step, c):
    count, acc, half, flag = c
    return (count + step, acc * 2 - 1, half + jnp.float16(0.5), ~flag)

  check(lambda x, i: {
      "swap": lax.fori_loop(0, 3, lambda _, c: (c[1], c[0] + 1.0), (x, x * 2))[0],
      "rotate": lax.fori_loop(0, 5, rotate, (i, i * 2, i - 3))[1],
      "mixed": lax.fori_loop(0, 3, mixed, (jnp.int32(0), x, jnp.float16(1.5), jnp.bool_(True))),
      "literal_init": lax.fori_loop(0, 3, lambda _, c: (c[0] + x, c[1] + 1),
                                    (jnp.zeros_like(x), 0))[0],
      "unchanged": lax.fori_loop(0, 3, lambda _, c: (c[0], c[1] + 1.0), (i, x))[0],
  }, x, i, name="loop_carries")


def test_while_loops(rng):
  x = random_array(rng, (5, 7), "float32")
  n = np.array([25], np.int32)
  gk = check(lambda x, n: {
      "general": lax.while_loop(lambda c: c[1] < 10.0,
                                lambda c: (c[0] + 1, c[1] + jnp.max(jnp.abs(c[0]))),
                                (x, jnp.float32(0)))[0],
      "count": lax.while_loop(lambda c: c[0] * 2 < n[0],
                              lambda c: (c[0] + 3, c[1] * 1.5), (jnp.int32(1), x))[1],
      "never": lax.while_loop(lambda c: jnp.any(c > 100.0), lambda c: c + 1.0, x),
  }, x, n, name="while_loops")
  code = [line.split("#")[0].strip() for line in gk.source.splitlines()]
  assert sum(line.startswith("while keep_going") for line in code) == 3


def test_scan_without_xs(rng):
  x = random_array(rng, (5, 7), "float32")
  check(lambda x: {
      "carry": lax.scan(lambda c, _: (c * 2 + 1, None), x, None, length=3)[0],
      "swap": lax.scan(lambda c, _: ((c[1], c[0] - 1), None), (x, x + 1), None,
                       length=3)[0],
      "reverse": lax.scan(lambda c, _: (c - 1, None), x, None, length=2, reverse=True)[0],
  }, x, name="scan_carry")


def test_loops_of_one_iteration_are_straight_line(rng):
  x = random_array(rng, (5, 7), "float32")
  n = np.array([3], np.int32)
  gk = check(lambda x, n: {
      "fori": lax.fori_loop(0, 1, lambda i, c: c * 0.5 + i, x),
      "fori_offset_swap": lax.fori_loop(3, 4, lambda i, c: (c[1] + i.astype(jnp.float32),
                                                           c[0] * 2), (x, x + 1)),
      "literal_carry": lax.fori_loop(0, 1, lambda i, c: (c[0] + x, c[1] + i + 1),
                                     (jnp.zeros_like(x), 0)),
      "index_only": lax.fori_loop(5, 6, lambda i, c: c + i * i, jnp.int32(2)).reshape(1),
      "scan": lax.scan(lambda c, _: ((c[1], c[0] - 1), None), (x, x + 1), None, length=1)[0],
      "scan_reverse": lax.scan(lambda c, _: (c * 3, None), x, None, length=1, reverse=True)[0],
      # the fori_loop pattern as a while_loop with constant bounds
      "while_fori": lax.while_loop(lambda c: c[0] < c[1],
                                   lambda c: (c[0] + 1, c[1], c[2] * 3 + c[0]), (4, 5, x)),
      # 5 iterations: above MAX_UNROLL_TRIPS, stays a loop
      "in_a_loop": lax.fori_loop(0, 5, lambda i, c: lax.fori_loop(
          i, i + 1, lambda j, d: d * 0.5 + j, c) + lax.fori_loop(
          0, 1, lambda j, d: d - i, c), x),
      "around_a_loop": lax.fori_loop(2, 3, lambda i, c: lax.fori_loop(
          0, n[0], lambda j, d: d * 0.5 + (i * j), c), x),
  }, x, n, name="one_iteration")
  code = [line.split("#")[0].strip() for line in gk.source.splitlines()]
  # left as loops: in_a_loop's outer loop and its inner loop with traced
  # bounds (i, i + 1), and around_a_loop's inner loop
  assert sum(line.startswith(("for ", "while ")) for line in code) == 3, gk.source
  assert gk.source.count("# one iteration") == 9, gk.source


def test_loops_of_few_iterations_are_straight_line(rng):
  x = random_array(rng, (5, 7), "float32")
  n = np.array([3], np.int32)
  gk = check(lambda x, n: {
      "fori2": lax.fori_loop(0, 2, lambda i, c: c * 0.5 + i, x),
      "fori3_swap": lax.fori_loop(3, 6, lambda i, c: (c[1] + i.astype(jnp.float32),
                                                       c[0] * 2 - c[1]), (x, x + 1)),
      "fori4_int": lax.fori_loop(-2, 2, lambda i, c: c * 3 + i * i, jnp.int32(2)).reshape(1),
      "scan2": lax.scan(lambda c, _: ((c[1] - c[0], c[0] * 0.5), None), (x, x + 1), None,
                        length=2)[0],
      "scan3_reverse": lax.scan(lambda c, _: (c * 3 - 1, None), x, None, length=3,
                                reverse=True)[0],
      "scan4_reverse": lax.scan(lambda c, _: ((c[0] * c[1], c[1] + 1), None), (x, x), None,
                                length=4, reverse=True)[0],
      # the fori_loop pattern as a while_loop with constant bounds
      "while_fori3": lax.while_loop(lambda c: c[0] < c[1],
                                    lambda c: (c[0] + 1, c[1], c[2] * 3 + c[0]), (4, 7, x)),
      # a traced start: the index is lo + k in each copy
      "traced_start": lax.fori_loop(n[0], n[0] + 3, lambda i, c: c * 2 + i, x),
      # nested: 2 copies of the outer body, each with 3 copies of the inner
      "nested": lax.fori_loop(0, 2, lambda i, c: lax.fori_loop(
          0, 3, lambda j, d: d * 0.5 + (i * 10 + j), c), x),
  }, x, n, name="few_iterations")
  code = [line.split("#")[0].strip() for line in gk.source.splitlines()]
  # traced_start: the fori_loop becomes a while_loop with traced bounds
  assert sum(line.startswith(("for ", "while ")) for line in code) == 1, gk.source
  assert gk.source.count("# iteration 1 of 2") == 3, gk.source     # fori2, scan2, nested
  assert gk.source.count("# iteration 3 of 3") == 5, gk.source     # fori3, scan3, while, 2 inner
  assert gk.source.count("# iteration 4 of 4") == 2, gk.source


def test_loops_above_the_unroll_bounds_stay_loops(rng):
  from pallas_prof.backend.lowering.rules import control_flow
  x = random_array(rng, (5, 7), "float32")

  def big_body(i, c):
    for _ in range(control_flow.MAX_UNROLL_EQNS):
      c = c * 0.5
    return c + i

  gk = check(lambda x: {
      "five": lax.fori_loop(0, control_flow.MAX_UNROLL_TRIPS + 1, lambda i, c: c * 0.5 + i, x),
      "scan_five": lax.scan(lambda c, _: (c * 3 - 1, None), x, None,
                            length=control_flow.MAX_UNROLL_TRIPS + 1)[0],
      "big_body": lax.fori_loop(0, 2, big_body, x),
  }, x, name="above_bounds")
  code = [line.split("#")[0].strip() for line in gk.source.splitlines()]
  assert sum(line.startswith("for ") for line in code) == 3, gk.source
  assert "# iteration" not in gk.source, gk.source


def test_cond_and_switch(rng):
  x = random_array(rng, (5, 7), "float32")
  for s in (-1, 0, 1, 2, 3, 9):   # switch clamps its index
    check(lambda x, s: {
        "cond": lax.cond(x[0, 0] > 0, lambda v: v * 2, lambda v: v - 1, x),
        "cond_constant": lax.cond(s[0] > 0, lambda v: v * 2, lambda v: jnp.ones_like(v), x),
        "cond_literal": x + lax.cond(s[0] > 1, lambda: 1.0, lambda: 2.0),
        "cond_dtypes": lax.cond(s[0] > 0, lambda v: (v, jnp.int32(3), v > 0, v.astype(jnp.float16)),
                                lambda v: (v * 3, s[0], v < 1,
                                           jnp.float16(2) + v.astype(jnp.float16)),
                                x),
        "switch2": lax.switch(s[0], [lambda v: v, lambda v: v * 2], x),
        "switch3": lax.switch(s[0], [lambda v: v, lambda v: v * 2,
                                     lambda v: jnp.zeros_like(v) + 7], x),
        "switch4": lax.switch(s[0], [lambda v: (v, 1), lambda v: (v + 1, 2), lambda v: (v - 1, 3),
                                     lambda v: (-v, s[0])], x),
    }, x, np.array([s], np.int32), name=f"cond_switch_{s + 1}")


@jax.jit
def _jitted_helper(v, w):
  return jnp.sin(v) * w + 1


@jax.custom_vjp
def _custom_vjp_triple(v):
  return v * 3


_custom_vjp_triple.defvjp(lambda v: (v * 3, None), lambda _, g: (g * 3,))


@jax.custom_jvp
def _custom_jvp_exp1(v):
  return jnp.exp(v) + 1


_custom_jvp_exp1.defjvp(lambda p, t: (_custom_jvp_exp1(p[0]), jnp.exp(p[0]) * t[0]))


def test_inlined_calls(rng):
  x = random_array(rng, (5, 7), "float32")
  check(lambda x: {
      "jit": _jitted_helper(x, 2.0) + _jitted_helper(x, x),
      "relu": jax.nn.relu(x), "softplus": jax.nn.softplus(x), "silu": jax.nn.silu(x),
      "custom_vjp": _custom_vjp_triple(x), "custom_jvp": _custom_jvp_exp1(x),
      "checkpoint": jax.checkpoint(lambda v: jnp.sin(v) * 2)(x),
      "jit_in_loop": lax.fori_loop(0, 2, lambda i, c: _jitted_helper(c, 0.5), x),
  }, x, name="inlined_calls", atol=1e-5, rtol=1e-5)


def test_program_ids_in_loops_and_conds(rng):
  x = random_array(rng, (4, 8), "float32")
  n = np.array([3], np.int32)

  def kernel(x_ref, n_ref, o_ref):
    pid, num = pl.program_id(0), pl.num_programs(0)

    def body(i, c):
      return lax.cond(i % 2 == pid, lambda v: v + pl.program_id(0).astype(jnp.float32),
                      lambda v: v * 2.0 + pl.num_programs(0), c)

    v = lax.fori_loop(0, n_ref[0], body, x_ref[...])
    count, v = lax.while_loop(lambda c: c[0] < pid + n_ref[0],
                              lambda c: (c[0] + 1, c[1] + c[0].astype(jnp.float32)),
                              (jnp.int32(0), v))
    o_ref[...] = v + num

    @pl.when(pid == 1)
    def _():
      o_ref[...] = v * 100

  out = pallas(kernel, jax.ShapeDtypeStruct((3, 4, 8), jnp.float32), grid=(3,),
               in_specs=[pl.BlockSpec((4, 8), lambda i: (0, 0)),
                         pl.BlockSpec((1,), lambda i: (0,))],
               out_specs=pl.BlockSpec((None, 4, 8), lambda i: (i, 0, 0)),
               name="pids_in_regions")(x, n)
  for pid in range(3):
    v = x.copy()
    for i in range(3):
      v = v + pid if i % 2 == pid else v * 2 + 3
    v = v + sum(range(pid + 3))
    assert_close(out[pid], v * 100 if pid == 1 else v + 3, err_msg=f"program {pid}")
  ck = compile_kernel(kernel_registry.find("pids_in_regions")[-1].generated)
  assert ".target sm_90" in ck.ptx


def test_debug_print_runs_and_prints(rng, capfd):
  x = random_array(rng, (2, 4), "int32")

  def kernel(x_ref, o_ref):
    total = jnp.sum(x_ref[...])
    pl.debug_print("total is", total)
    pl.debug_print('a "quoted" bf16:', x_ref[0, 0].astype(jnp.float32).astype(jnp.bfloat16))
    o_ref[...] = x_ref[...] + 1

  out = pallas(kernel, jax.ShapeDtypeStruct((2, 4), jnp.int32), name="debug_print")(x)
  np.testing.assert_array_equal(out, x + 1)
  printed = capfd.readouterr().out
  assert "total is" in printed and str(int(x.sum())) in printed
  # the bf16 value prints as its value (as float32), not as raw bits (once
  # under the interpreter, once per thread on a GPU)
  shown = re.findall(r'a "quoted" bf16:\s*\[?([-0-9.e+]+)', printed)
  assert shown and all(float(s) == float(x[0, 0]) for s in shown), shown
  ck = compile_kernel(kernel_registry.find("debug_print")[-1].generated)
  assert "vprintf" in ck.ptx
