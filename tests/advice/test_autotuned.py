"""Actions of kind b: a block size the script exposes to @pallas_prof.autotune, tried as
the autotuner tries its configs (here on the CPU: whole calls through the interpreter,
timed by the wall clock; the plumbing, not a speed)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.advice import api, autotuned, recipes
from pallas_prof.backend import kernel_registry
from pallas_prof.tune import blocks

pallas_prof.install()

pytestmark = pytest.mark.no_gpu     # asserts what a machine without a GPU says


def add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


@pallas_prof.autotune(configs=[dict(block=64), dict(block=32)], key=["x"], cache=False,
                      budget_s=60, repeats=2, warm_up=1)
def tuned_add(x, y, block=64):
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(add_kernel, grid=(x.shape[0] // block,), in_specs=[spec, spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def test_an_autotuned_block_size_becomes_a_kind_b_action_and_its_trial():
  kernel_registry.clear()
  recipes.clear()
  x = jnp.arange(1 << 16, dtype=jnp.float32)
  with recipes.capture():
    tuned_add(x, x)
  (call,) = blocks.tuned_calls()
  assert call.name.endswith("tuned_add") and call.best in ({"block": 64}, {"block": 32})
  rec = next(r for r in kernel_registry.kernels() if r.label in call.kernels)
  assert autotuned.find(rec, blocks.tuned_calls()) is call
  report = pallas_prof.profile([rec])
  (advice,) = api.for_report([rec], report)
  kinds = {a.kind: a for a in advice.actions}
  b = kinds["b"]
  doubled = call.best["block"] * 2
  assert b.change["config"] == {"block": doubled}
  assert b.title == f"autotune {call.name}: block {call.best['block']} -> {doubled} (larger blocks)"
  assert b.status == "not measured: no GPU" and "@pallas_prof.autotune" in b.apply
  trial = autotuned.trial(b, call, budget_s=60)
  assert trial.outputs_equal and trial.before_s > 0 and trial.after_s > 0, trial
