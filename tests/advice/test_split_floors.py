"""Issue 47, item 2: advice proposes no split its own evidence says cannot pay.

A 1024-element kernel with a sin, in blocks of 256 (4 programs), was told "block 256 -> 2
... estimate: -97 %": the floor of work per program (16 KiB moved) held only where the
kernel's time is memory traffic, so a kernel with a transcendental or a dot was split to
two elements a program, with an estimate that took each program's start as free. Every
kind of work now has its floor (advice/floors.py), the threads of a program keep an element
each, and a split's estimate keeps each program's start.

The tiny kernels of each kind run on this CPU (static facts, 132 SMs assumed)."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import floors, recipes
from pallas_prof.advice.rules import RULES
from pallas_prof.backend import kernel_registry

from .synthetic import synthetic_eq, synthetic_facts, synthetic_work

pallas_prof.install()
pytestmark = pytest.mark.no_gpu     # a GPU times these kernels, and so diagnoses otherwise

F32 = jnp.float32


def sin_kernel(x_ref, o_ref):
  o_ref[...] = jnp.sin(x_ref[...] * 1e4) * 3.0


def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def dot_kernel(x_ref, w_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=F32)


def logsumexp_kernel(x_ref, o_ref):
  x = x_ref[...]
  m = jnp.max(x, axis=1)
  o_ref[...] = m + jnp.log(jnp.sum(jnp.exp(x - m[:, None]), axis=1))


def _sin():
  s = pl.BlockSpec((256,), lambda i: (i,))
  pl.pallas_call(sin_kernel, grid=(4,), in_specs=[s], out_specs=s,
                 out_shape=jax.ShapeDtypeStruct((1024,), F32))(jnp.ones(1024, F32))


def _add():
  s = pl.BlockSpec((256,), lambda i: (i,))
  pl.pallas_call(add_kernel, grid=(4,), in_specs=[s, s], out_specs=s,
                 out_shape=jax.ShapeDtypeStruct((1024,), F32))(jnp.ones(1024, F32),
                                                               jnp.ones(1024, F32))


def _dot():
  pl.pallas_call(dot_kernel, grid=(4,),
                 in_specs=[pl.BlockSpec((32, 32), lambda i: (i, 0)),
                           pl.BlockSpec((32, 32), lambda i: (0, 0))],
                 out_specs=pl.BlockSpec((32, 32), lambda i: (i, 0)),
                 out_shape=jax.ShapeDtypeStruct((128, 32), F32))(jnp.ones((128, 32), F32),
                                                                 jnp.ones((32, 32), F32))


def _logsumexp():
  pl.pallas_call(logsumexp_kernel, grid=(4,),
                 in_specs=[pl.BlockSpec((16, 128), lambda i: (i, 0))],
                 out_specs=pl.BlockSpec((16,), lambda i: (i,)),
                 out_shape=jax.ShapeDtypeStruct((64,), F32))(jnp.ones((64, 128), F32))


def _advice(call, name):
  recipes.clear()
  kernel_registry.clear()
  with recipes.capture():
    call()
  (advice,) = pallas_prof.advise(name, trials=False, progress=None, sample=False)
  return advice


@pytest.mark.parametrize("call,name,kind", [
    (_sin, "sin_kernel", "transcendental"), (_add, "add_kernel", "memory"),
    (_dot, "dot_kernel", "dot"), (_logsumexp, "logsumexp_kernel", "reduction")])
def test_a_tiny_kernel_of_each_kind_is_not_split_and_says_why(call, name, kind):
  advice = _advice(call, name)
  few = next(d for d in advice.diagnoses if d.rule == "few_programs")
  assert few.text == "4 programs on 132 SMs: 128 SMs have nothing to do"
  assert not [a for a in advice.actions if a.change.get("block") == "smaller"], \
      [a.title for a in advice.actions]
  (why,) = [e for e in few.evidence if e.what == "work per program"]
  assert "too little to split" in why.text and why.value < 1, why
  named = {"transcendental": "transcendental functions", "memory": "moves ",
           "dot": "dot FLOPs", "reduction": "transcendental functions"}[kind]
  assert named in why.text, why.text


def test_the_sin_example_names_its_sins_not_a_97_percent_split():
  """The issue's own example: "block 256 -> 2 ... estimate: -97 %"."""
  advice = _advice(_sin, "sin_kernel")
  (why,) = [e for d in advice.diagnoses for e in d.evidence if e.what == "work per program"]
  assert why.text == ("each program moves 2.0 KiB and evaluates 256 transcendental functions: "
                      "too little to split (programs with less than 16.0 KiB or 4,096 "
                      "transcendental functions spend most of their time starting); a problem "
                      "this small does not fill the GPU")
  assert all((a.estimate_pct or 0) < 50 for a in advice.actions)


def _kernel(kind: str, per_program: float, grid=(4,), block=(256,)):
  """Synthetic facts of a kernel whose programs each do `per_program` floors of `kind`."""
  least = {fl.kind: fl.least for fl in floors.FLOORS}[kind]
  programs = grid[0]
  amount = int(least * per_program * programs)
  work = {"memory": dict(bytes=amount, block_bytes=amount),
          "dot": dict(bytes=1024 * programs, block_bytes=1024 * programs, dot_flops=amount),
          "transcendental": dict(bytes=1024 * programs, block_bytes=1024 * programs,
                                 transcendentals=amount),
          "arithmetic": dict(bytes=1024 * programs, block_bytes=1024 * programs,
                             elementwise_flops=amount)}[kind]
  eqs = [synthetic_eq(0, "get", block_shape=block, dtype="float32")]
  return synthetic_facts(eqs, grid=grid, work=synthetic_work(programs=programs, **work))


def _after(f, factor: int):
  """The same kernel split `factor`x: its work over `factor` times the programs."""
  grid = (f.grid[0] * factor,)
  block = (f.largest_block().block_shape[0] // factor,)
  return dataclasses.replace(
      f, grid=grid, programs=grid[0], work=dataclasses.replace(f.work, programs=grid[0]),
      equations={0: dataclasses.replace(f.equations[0], block_shape=block)})


@pytest.mark.parametrize("kind", [fl.kind for fl in floors.FLOORS])
@pytest.mark.parametrize("per_program", [0.3, 1.0, 3.0, 40.0, 1000.0])
@pytest.mark.parametrize("rule_name,grid", [("few_programs", (4,)), ("underfilled", (200,))])
def test_every_split_survives_its_own_rules(kind, per_program, rule_name, grid):
  """Whatever the kind of work: a proposed split leaves each program at a floor of its work
  or above and an element for each thread, small_programs does not then ask for larger
  blocks, and the estimate is no more than the floors' model allows."""
  f = _kernel(kind, per_program, grid=grid, block=(1 << 16,))
  (finding,) = RULES[rule_name](f)
  for action in finding.actions:
    factor = action.change["factor"]
    after = _after(f, factor)
    work = floors.program_work(after)
    assert work.in_floors >= 1 and work.elements >= after.threads, (factor, work)
    assert not RULES["small_programs"](after)
    if action.estimate_pct is not None:
      w = per_program
      assert action.estimate_pct <= 100 * (1 - (1 + w / factor) / (1 + w)) + 1e-9
  if per_program < 2:
    assert finding.actions == []


def test_a_program_keeps_an_element_for_each_thread():
  """A sin kernel heavy enough to split, in blocks of 256 for 128 threads: split 2x, not the
  128x the rule asks (blocks of 2 leave 126 of 128 threads idle)."""
  f = _kernel("transcendental", 1000.0, block=(256,))
  (finding,) = RULES["few_programs"](f)
  assert finding.actions[0].change["factor"] == 2
  (why,) = [e for e in finding.diagnosis.evidence if e.what == "work per program"]
  assert why.text == ("each program's largest block holds 256 elements: split at most 2x, "
                      "to keep an element of the block for each of its 128 threads")
