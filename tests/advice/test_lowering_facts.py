"""What the lowering records for the advice: each access's operand and the bytes of its
longest contiguous run, and which loop-body equations are loop-invariant."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
# the loops of the loop_stages tests: a running sum in memory, a loop inside a loop
from tests.backend.lowering.test_loop_stages import _nested_kernel, _read_write_kernel

pallas_prof.install()


def _copy(shape, block, index_map):
  kernel_registry.clear()
  x = jnp.ones(shape, jnp.float32)
  grid = tuple(s // b for s, b in zip(shape, block))

  def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0

  spec = pl.BlockSpec(block, index_map)
  pl.pallas_call(copy_kernel, grid=grid, in_specs=[spec], out_specs=spec,
                 out_shape=jax.ShapeDtypeStruct(shape, jnp.float32))(x)
  (rec,) = kernel_registry.kernels()
  return {e.primitive: e for e in rec.generated.eqns}


@pytest.mark.parametrize("shape, block, run", [
    ((96, 40), (96, 1), 4),          # a column of a row-major array: 4 B runs
    ((96, 40), (1, 40), 160),        # one whole row
    ((96, 40), (8, 40), 8 * 160),    # whole rows follow one another
    ((96, 48), (8, 24), 96),         # part of each row
    ((5, 6, 40), (1, 3, 40), 480),   # a 3-d block of whole rows
])
def test_contiguous_run_of_a_block(shape, block, run):
  index_map = (lambda i, j: (i, j)) if len(shape) == 2 else (lambda i, j, k: (i, j, k))
  eqns = _copy(shape, block, index_map)
  assert eqns["get"].operand == "x_ref" and eqns["get"].contiguous_bytes == run
  assert eqns["swap"].operand == "o_ref" and eqns["swap"].contiguous_bytes == run
  assert eqns["add"].operand is None and eqns["add"].contiguous_bytes is None


def test_loop_invariant_equations_are_marked():
  kernel_registry.clear()

  def loop_kernel(x_ref, o_ref):
    x = x_ref[...]

    def body(i, acc):
      e = jnp.exp(x) * 0.5                        # reads only x: invariant
      return acc + e * i.astype(jnp.float32) + jnp.sin(acc)
    o_ref[...] = jax.lax.fori_loop(0, 10, body, jnp.zeros_like(x))

  x = jnp.ones((24, 40), jnp.float32)
  spec = pl.BlockSpec((8, 40), lambda i: (i, 0))
  out = pl.pallas_call(loop_kernel, grid=(3,), in_specs=[spec], out_specs=spec,
                       out_shape=x)(x)
  assert out.shape == x.shape
  (rec,) = kernel_registry.kernels()
  body = [e for e in rec.generated.eqns if e.region == "body"]
  flags = [(e.primitive, e.invariant) for e in body]
  # exp(x) * 0.5 is invariant; what reads the index or the carry is not
  assert flags == [("exp", True), ("mul", True), ("convert_element_type", False),
                   ("mul", False), ("add", False), ("sin", False), ("add", False)], flags
  assert not any(e.invariant for e in rec.generated.eqns if e.region != "body")
  body = {e.primitive: e for e in body}
  # and the record survives kernel.json
  from pallas_prof.backend.artifacts import EquationRecord
  again = EquationRecord.from_dict(body["exp"].to_dict())
  assert again.invariant and again.operand is None


def _loop_reads(write_to_input: bool):
  kernel_registry.clear()

  def store_loop_kernel(x_ref, o_ref):
    def body(i, acc):
      x = x_ref[...]                               # a read of x_ref in every iteration
      acc = acc * 0.9 + jnp.exp(x) * jnp.sin(x)
      o_ref[...] = acc
      if write_to_input:
        x_ref[...] = acc                          # ... which the loop also writes
      return acc
    jax.lax.fori_loop(0, 8, body, jnp.zeros(x_ref.shape, jnp.float32))

  x = jnp.ones((16, 128), jnp.float32)
  spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
  pl.pallas_call(store_loop_kernel, grid=(2,), in_specs=[spec], out_specs=spec, out_shape=x)(x)
  (rec,) = kernel_registry.kernels()
  return [(e.primitive, e.invariant) for e in rec.generated.eqns if e.region == "body"]


def test_a_read_of_a_ref_the_loop_does_not_write_is_invariant():
  flags = _loop_reads(write_to_input=False)
  # x, exp(x), sin(x) and their product: invariant; acc * 0.9, the sum and the store: not
  assert flags == [("get", True), ("mul", False), ("exp", True), ("sin", True), ("mul", True),
                   ("add", False), ("swap", False)], flags
  flags = _loop_reads(write_to_input=True)
  assert not any(invariant for _, invariant in flags), flags


def _sum_rows_kernel(x_ref, o_ref):
  """A column sum walking rows (JAX's norms' dw/db loop): loads, no dot, no store."""
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 4, 4), :].sum(axis=0)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // 4, body, jnp.zeros(o_ref.shape, jnp.float32))


def _branch_loop_kernel(x_ref, o_ref):
  """A branch in the loop, whose trip count is known only at run time (a count the
  compiler knows, it unrolls this short body whole)."""
  def body(i, acc):
    row = x_ref[pl.ds(i, 1), :]
    return jax.lax.cond(i % 2 == 0, lambda: acc + row, lambda: acc - row)
  rows = x_ref.shape[0] - (x_ref[0, 0] > 1e30).astype(jnp.int32)     # all of them
  o_ref[...] = jax.lax.fori_loop(0, rows, body, jnp.zeros(o_ref.shape, jnp.float32))


# the loops are long enough that the compiled code keeps them loops (LLVM unrolls a short
# one whole, and then no load waits on the one before)
@pytest.mark.parametrize("kernel, shape, out, stageable, offered", [
    (_sum_rows_kernel, (4096, 16), (16,), [True], True),
    (_read_write_kernel, (1024, 16), (1024, 16), [False], False),
    (_nested_kernel, (32, 4096), (8,), [False, True], True),
    (_branch_loop_kernel, (1024, 16), (1, 16), [False], False),
], ids=["sum_rows", "running_sum", "nested", "branch"])
def test_each_loop_records_whether_loop_stages_pipelines_it(kernel, shape, out, stageable,
                                                            offered):
  """The lowering records, for every loop it emits, whether CompilerParams(loop_stages)
  would pipeline it, with the option unset; advice's unstaged_loop reads it, and so offers
  loop_stages on the column sum and the inner loop of two, and on nothing else here, though
  every one of these loops loads in every iteration of the compiled loop."""
  from pallas_prof.advice.facts import kernel_facts
  from pallas_prof.advice.rules import RULES
  from pallas_prof.profiler import profile
  kernel_registry.clear()
  x = jax.random.normal(jax.random.key(3), shape, jnp.float32)
  pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out, jnp.float32),
                 name=f"facts_{kernel.__name__}")(x)
  (rec,) = kernel_registry.kernels()
  loops = [e for e in rec.generated.eqns if e.primitive in ("scan", "while")]
  assert [e.stageable for e in loops] == stageable
  assert rec.generated.options.loop_stages == 0 and "tl.range" not in rec.generated.source
  from pallas_prof.backend.artifacts import EquationRecord
  assert EquationRecord.from_dict(loops[0].to_dict()).stageable == stageable[0]
  f = kernel_facts(profile([rec], sample=False).kernel(rec.label), rec.generated)
  innermost = f.loops()[-1]
  assert any(e.is_load and e.in_machine_loop for e in f.children(innermost.index))
  changes = [a.change for finding in RULES["unpipelined_loop"](f) for a in finding.actions]
  assert [c["loop_stages"] for c in changes] == ([2, 3] if offered else []), changes
