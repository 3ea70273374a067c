"""Loop variance is a fact on each Value (Value.loops: the loops being emitted from one
iteration of which to the next it may change), made with the value from its operands;
nothing re-reads the emitted text. The pointer form (test_pointer_form.py) reads it: a
tensor term made from a value that varies with the innermost loop goes last.
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
from pallas_prof.backend.lowering import dispatch, emit
from pallas_prof.backend.lowering.codegen import KernelBuilder, Value
from testkit.helpers import random_array

I32 = np.dtype(np.int32)


@pytest.fixture(autouse=True)
def installed():
  pallas_prof.install()
  yield


# --- the builder ------------------------------------------------------------------------

def test_a_value_varies_with_the_loops_of_what_it_is_made_from():
  b = KernelBuilder("k")
  base = b.value("base", "tl.program_id(0) * 8", I32, of=())
  assert base.loops == frozenset() and not b.varies(base)      # outside loops nothing varies
  with b.loop("for i in range(0, 4):") as outer:
    i = Value("i", I32, loops=outer)                           # the counter
    assert b.varies(i) and not b.varies(base)
    lanes = b.value("lanes", "tl.arange(0, 8)", I32, (8,), of=())
    row = b.value("row", f"{base} + {lanes}", I32, (8,), of=(base, lanes))
    mixed = b.value("mixed", f"{i} * 8 + {lanes}", I32, (8,), of=(i, lanes))
    x = b.value("x", "tl.load(x_ref + row)", np.float32, (8,), of=(row,), opaque=True)
    assert not b.varies(lanes) and not b.varies(row)           # a constant; from outside only
    assert b.varies(mixed) and mixed.loops == outer
    assert b.varies(x) and x.loops == outer                    # a load: memory may change
    assert emit.cast(b, mixed, np.int64).loops == outer        # the helpers carry it along
    assert emit.cast(b, row, np.int64).loops == frozenset()
    with b.loop("for j in range(0, 2):") as inner:
      assert inner > outer and len(inner) == 2
      j = Value("j", I32, loops=inner)
      scaled = b.value("scaled", f"{i} * 2", I32, of=(i,))
      both = b.value("both", f"{j} + {scaled}", I32, of=(j, scaled))
      assert not b.varies(scaled) and scaled.loops == outer    # fixed in the inner loop
      assert b.varies(both) and both.loops == inner
      assert not b.varies(x)                                   # loaded before the inner loop
    assert b.varies(scaled) and b.varies(both)                 # both change with i
  assert not b.varies(mixed)


def test_inside_an_equation_a_value_varies_with_its_operands_unless_told():
  b = KernelBuilder("k")
  with b.loop("for i in range(0, 4):") as loop:
    i = Value("i", I32, loops=loop)
    with b.equation(0, operand_loops=frozenset()):
      assert b.value("k", "tl.arange(0, 8) * 3", I32, (8,)).loops == frozenset()
      # a load: it, and what the equation computes after it, vary with the loop
      assert b.value("y", "tl.load(p)", np.float32, opaque=True).loops == loop
      assert b.value("z", "y * 2", np.float32).loops == loop
    with b.equation(1, operand_loops=i.loops):
      assert b.value("m", f"{i} * 3", I32).loops == loop
      assert b.value("c", "7", I32, of=()).loops == frozenset()
    # outside any equation (a listener's lines) the builder assumes the worst
    assert b.value("w", "something", I32).loops == loop


# --- what the lowering makes ------------------------------------------------------------

def _record_values(monkeypatch) -> list:
  """(primitive, path, loops of each output Value, innermost loop open) per equation lowered."""
  seen = []
  lower = dispatch._lower_equation

  def recording(kernel, event):
    out = lower(kernel, event)
    outs = out if isinstance(out, (list, tuple)) else [out]
    loops = kernel.builder.open_loops
    innermost = max(loops) if loops else None
    seen.append((event.info.primitive, event.info.path,
                 [v.loops for v in outs if isinstance(v, Value)], innermost))
    return out

  monkeypatch.setattr(dispatch, "_lower_equation", recording)
  return seen


def _only(seen, primitive, path_re):
  hits = [s for s in seen if s[0] == primitive and re.fullmatch(path_re, s[1])]
  assert len(hits) == 1, (primitive, path_re, hits)
  return hits[0]


def test_values_of_a_kernel_with_nested_loops(rng, monkeypatch):
  """The loop index, a ref read inside a loop, constants, mixes of them, a nested loop."""
  x = random_array(rng, (8, 16), jnp.float32)

  def kernel(x_ref, o_ref):
    c = x_ref[0, 0].astype(jnp.int32)                 # read before any loop

    def outer(i, acc):
      row = x_ref[i, :]                               # a read in the loop
      k = jnp.arange(16, dtype=jnp.int32) + c         # a constant and a value from outside
      m = i * 3 + k                                   # the index mixed in

      def inner(j, acc2):
        a = i * 5                                     # the outer index only
        return acc2 + (j + a + m).astype(jnp.float32)
      return lax.fori_loop(0, 6, inner, acc) + row
    o_ref[...] = lax.fori_loop(0, 5, outer, jnp.zeros((16,), jnp.float32))

  seen = _record_values(monkeypatch)
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32),
                       name="nested_loop_values")(x)
  xs = np.asarray(x)
  c, k = int(xs[0, 0]), np.arange(16) + int(xs[0, 0])
  want = np.zeros(16, np.float32)
  for i in range(5):
    for j in range(6):
      want = want + (j + i * 5 + i * 3 + k).astype(np.float32)
    want = want + xs[i]
  np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
  assert c == int(xs[0, 0])

  kernel_level = [s for s in seen if "." not in s[1] and s[0] != "scan"]
  assert kernel_level and all(s[3] is None and s[2] in ([], [frozenset()]) for s in kernel_level)
  body = r"\d+\.body\.\d+"
  inner_body = r"\d+\.body\.\d+\.body\.\d+"
  outer_loop = _only(seen, "get", body)[3]            # the read of x_ref[i, :]
  get = _only(seen, "get", body)
  assert get[2] == [frozenset({outer_loop})]
  iota = _only(seen, "iota", body)
  assert iota[2] == [frozenset()]                     # a constant
  adds = [s for s in seen if s[0] == "add" and re.fullmatch(body, s[1])]
  assert adds[0][2] == [frozenset()]                  # arange + c: the same every iteration
  mul_i3 = [s for s in seen if s[0] == "mul" and re.fullmatch(body, s[1])][0]
  assert mul_i3[2] == [frozenset({outer_loop})]       # i * 3
  assert adds[1][2] == [frozenset({outer_loop})]      # i * 3 + k
  inner_loop = _only(seen, "mul", inner_body)[3]
  assert inner_loop != outer_loop
  assert _only(seen, "mul", inner_body)[2] == [frozenset({outer_loop})]   # i * 5: fixed inside
  inner_adds = [s for s in seen if s[0] == "add" and re.fullmatch(inner_body, s[1])]
  assert inner_adds[0][2] == [frozenset({outer_loop, inner_loop})]        # j + i * 5
  # a loop's result (its carry) changes with it and every loop around it
  (inner_call,) = [s for s in seen if s[0] == "scan" and re.fullmatch(body, s[1])]
  assert inner_call[2][-1] == frozenset({outer_loop, inner_loop})
  (outer_call,) = [s for s in seen if s[0] == "scan" and "." not in s[1]]
  assert outer_call[2][-1] == frozenset({outer_loop})


def test_a_branch_on_the_index_that_picks_constants_varies(rng, monkeypatch):
  """`cond_out = 8` in one branch and `= 0` in the other, on a predicate of the loop
  index: each assignment is a constant, but which runs changes every iteration. The
  text-reading version called it loop-invariant and put the gather below in the group
  of tensors that stay the same (`x_ref + (add[:, None] * 32 + lanes[None, :])`)."""
  x = random_array(rng, (16, 32), jnp.float32)

  def kernel(x_ref, o_ref):
    def body(i, acc):
      off = lax.cond(i % 2 == 0, lambda: jnp.int32(0), lambda: jnp.int32(8))
      rows = off + jnp.arange(8, dtype=jnp.int32)
      return acc + x_ref[rows, :]
    o_ref[...] = lax.fori_loop(0, 6, body, jnp.zeros((8, 32), jnp.float32))

  seen = _record_values(monkeypatch)
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 32), jnp.float32),
                       name="cond_picks_rows")(x)
  xs = np.asarray(x)
  np.testing.assert_allclose(np.asarray(out), 3 * (xs[:8] + xs[8:]), rtol=1e-5, atol=1e-5)
  (cond,) = [s for s in seen if s[0] == "cond"]
  assert cond[2] == [frozenset({cond[3]})]
  src = kernel_registry.find("cond_picks_rows")[-1].generated.source
  load = next(line for line in src.splitlines() if "tl.load(x_ref +" in line)
  rows = re.search(r"(\w+) = cond_out\w* \+ iota", src).group(1)
  assert re.search(rf"tl\.load\(x_ref \+ \w+\[None, :\] \+ {rows}\[:, None\] \* 32\)", load), load


def test_a_while_loops_carries_vary_with_it_and_its_condition_before_it_does_not(rng,
                                                                                 monkeypatch):
  x = random_array(rng, (8,), jnp.float32)

  def kernel(n_ref, x_ref, o_ref):
    def cond(state):
      k, _ = state
      return k < n_ref[0]
    def body(state):
      k, acc = state
      return k + 1, acc + x_ref[...] * k.astype(jnp.float32)
    _, acc = lax.while_loop(cond, body, (jnp.int32(0), jnp.zeros((8,), jnp.float32)))
    o_ref[...] = acc

  seen = _record_values(monkeypatch)
  n = jnp.asarray([5], jnp.int32)
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),
                       name="while_carries")(n, x)
  np.testing.assert_allclose(np.asarray(out), np.asarray(x) * sum(range(5)), rtol=1e-5)
  (loop,) = [s for s in seen if s[0] == "while"]
  loop_id = next(s[3] for s in seen if re.fullmatch(r"\d+\.body\.\d+", s[1]))
  assert all(loop_id in l for l in loop[2])
  # the condition's first test, before the loop, reads the carries' initial values
  first_lt = next(s for s in seen if s[0] == "lt")
  assert first_lt[3] is None and first_lt[2] == [frozenset()]
