"""The lowering's features as listeners that own their state (feature_hooks.py,
features/listeners.py): a kernel with TMA asked for is lowered once (no planning pass
whose code is thrown away), so a rule's failure under TMA is the error the user sees,
never swallowed into a kernel that silently lost TMA; and two kernels lowered one after
the other share no feature state."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.errors import LoweringError
from pallas_prof.backend.lowering import dispatch
from pallas_prof.backend.pallas_call_rule import TmaFallbackWarning

_names = iter(range(10_000))


def _copy_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1.0


def _lower(tma: bool = True, **params):
  """Lowers (not runs) a 2-D copy kernel whose read and write both suit TMA; its
  GeneratedKernel."""
  name = f"feature_listeners_{next(_names)}"
  spec = pl.BlockSpec((16, 16), lambda i, j: (i, j))
  call = pl.pallas_call(_copy_kernel, grid=(2, 2), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct((32, 32), jnp.float32), name=name,
                        compiler_params=pallas_prof.CompilerParams(tma=tma, **params))
  jax.jit(call).lower(jax.ShapeDtypeStruct((32, 32), jnp.float32))
  return kernel_registry.find(name)[-1].generated


@pytest.fixture
def rule_calls(monkeypatch):
  """The primitives whose rules the dispatcher ran, in order; `fail_first` names one
  whose rule raises the first time it runs."""
  calls, fail_first = [], set()
  real_rule_for = dispatch.rule_for

  def counting_rule_for(primitive):
    rule = real_rule_for(primitive)
    if rule is None:
      return None

    def counted(ctx, *args, **params):
      calls.append(primitive.name)
      if primitive.name in fail_first:
        fail_first.discard(primitive.name)
        raise RuntimeError("a rule that fails once")
      return rule(ctx, *args, **params)
    return counted
  monkeypatch.setattr(dispatch, "rule_for", counting_rule_for)
  return calls, fail_first


def test_a_tma_kernel_is_lowered_once(rule_calls):
  calls, _ = rule_calls
  gk = _lower(tma=True)
  assert gk.tma and "x_ref_desc.load(" in gk.source and "o_ref_desc.store(" in gk.source
  tma_calls = list(calls)
  calls.clear()
  plain = _lower(tma=False)
  assert not plain.tma and "make_tensor_descriptor" not in plain.source
  # the same rules, as often as the plain kernel's: no second pass over the body
  assert tma_calls == calls and tma_calls.count("get") == 1, (tma_calls, calls)


def test_a_rule_failing_under_tma_is_raised_not_swallowed(rule_calls):
  _, fail_first = rule_calls
  fail_first.add("get")
  with pytest.raises(LoweringError) as raised:
    _lower(tma=True)
  message = str(raised.value)
  assert "internal error in the `get` rule" in message and "a rule that fails once" in message
  assert "please report this" in message          # what to do next
  # nothing of the failed lowering stays: the next one gets TMA as asked
  gk = _lower(tma=True)
  assert gk.tma and not gk.tma_notes


@pytest.fixture
def bounds_checked():
  """Turns the bounds-checked mode on for the test (install(check_bounds=True)'s switch)."""
  from pallas_prof.backend.lowering.features.bounds import set_check_bounds
  set_check_bounds(True)
  try:
    yield
  finally:
    set_check_bounds(None)


def test_features_keep_no_state_between_kernels(bounds_checked):
  """A bounds-checked kernel with TMA asked for (refused there: the checked mode checks
  every index), then the same kernel unchecked: the second has TMA and neither the first
  one's sites nor its notes."""
  from pallas_prof.backend.lowering.features.bounds import set_check_bounds
  with pytest.warns(TmaFallbackWarning, match="bounds-checked mode"):
    bounded = _lower(tma=True)
  set_check_bounds(False)
  plain = _lower(tma=True)
  assert not bounded.tma and "make_tensor_descriptor" not in bounded.source
  assert any("bounds-checked" in note.reason for note in bounded.tma_notes)
  assert plain.tma and not plain.tma_notes and not plain.bounds_sites
  assert "pp_bounds" not in plain.source and "pp_bounds" in bounded.source


def test_the_copy_kernel_runs_the_same_with_and_without_tma():
  name = f"feature_listeners_run_{next(_names)}"
  x = jnp.arange(32 * 32, dtype=jnp.float32).reshape(32, 32)
  outs = []
  for tma in (False, True):
    spec = pl.BlockSpec((16, 16), lambda i, j: (i, j))
    call = pl.pallas_call(_copy_kernel, grid=(2, 2), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct((32, 32), jnp.float32),
                          name=f"{name}_{tma}",
                          compiler_params=pallas_prof.CompilerParams(tma=tma))
    outs.append(np.asarray(jax.jit(call)(x)))
  np.testing.assert_array_equal(outs[0], np.asarray(x) + 1)
  np.testing.assert_array_equal(outs[1], outs[0])
