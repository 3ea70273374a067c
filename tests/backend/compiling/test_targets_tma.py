"""A kernel that asked for TMA, compiled for a target without it (issue 40 item 5): Triton
compiles its tensor descriptors as plain loads and stores, and compile_for says so, on the
outcome (tma_notes) and in one TmaFallbackWarning at the user's line."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.for_targets import compile_for
from pallas_prof.backend.tma_note import TmaFallbackWarning

pallas_prof.install()


def _mm(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)


DOT_LINE = _mm.__code__.co_firstlineno + 1


@pytest.fixture(scope="module")
def tma_kernel():
  s = jax.ShapeDtypeStruct
  call = pl.pallas_call(
      _mm, name="targets_tma_mm", grid=(2, 1), out_shape=s((256, 128), jnp.float32),
      in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, 0)),
                pl.BlockSpec((128, 128), lambda i, j: (0, j))],
      out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
      compiler_params=pallas_prof.CompilerParams(tma=True))
  jax.jit(call).lower(s((256, 128), jnp.float16), s((128, 128), jnp.float16))
  gk = kernel_registry.find("targets_tma_mm")[-1].generated
  assert gk.tma and not gk.tma_notes      # lowered for sm_90: every access through TMA
  return gk


def _compiled(gk, target):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    outcome = compile_for(gk, target, use_disk_cache=False)
  return outcome, [w for w in caught if issubclass(w.category, TmaFallbackWarning)]


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_tma_on_a_target_without_it_compiles_plain_and_says_so_once(tma_kernel, target):
  outcome, warned = _compiled(tma_kernel, target)
  assert outcome.status == "compiled", outcome.reason
  assert [n.access for n in outcome.tma_notes] == ["a_ref", "b_ref", "the store to o_ref"]
  assert all((n.file, n.line) == (__file__, DOT_LINE) for n in outcome.tma_notes)
  assert all(f"{target} has no TMA" in n.reason for n in outcome.tma_notes)
  assert len(warned) == 1, [str(w.message) for w in warned]       # one per kernel and target
  message = str(warned[0].message)
  assert (warned[0].filename, warned[0].lineno) == (__file__, DOT_LINE)
  assert f"`targets_tma_mm` compiled for {target}, which has no TMA" in message
  assert "a_ref, b_ref, the store to o_ref" in message and "Compile for sm_90 or later" in message
  if target == "sm_80":        # the plain loads Triton made: no bulk tensor copy in the PTX
    assert "cp.async.bulk.tensor" not in outcome.compiled.ptx


def test_tma_on_sm90_says_nothing(tma_kernel):
  outcome, warned = _compiled(tma_kernel, "sm_90")
  assert outcome.status == "compiled" and outcome.tma_notes == () and warned == []
  assert "cp.async.bulk.tensor" in outcome.compiled.ptx
