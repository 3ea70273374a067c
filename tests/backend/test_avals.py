"""Avals stay typed (equation_text.Aval: shape tuple, dtype name) from where JAX hands them
over to where they are shown; a saved run's text form is read back once, at load."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from pallas_prof.backend.equation_text import Aval
from pallas_prof.backend.lowering.lower import lower_kernel
from pallas_prof.backend.options import LoweringOptions


def _kernel(x_ref, s_ref, o_ref):
  o_ref[...] = (jnp.exp(x_ref[...]) * s_ref[0]).astype(o_ref.dtype)


@pytest.fixture(scope="module")
def lowered():
  x, s = jax.ShapeDtypeStruct((8, 128), jnp.bfloat16), jax.ShapeDtypeStruct((1,), jnp.int32)
  closed = jax.make_jaxpr(lambda x, s: pl.pallas_call(
      _kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x, s))(x, s)
  [eqn] = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
  gk = lower_kernel(eqn.params["jaxpr"], eqn.params["grid_mapping"],
                    LoweringOptions(num_warps=4, num_stages=3))
  return eqn, gk


def test_an_aval_keeps_jaxs_shape_and_dtype_and_prints_as_jax_does(lowered):
  eqn, _ = lowered
  weak = jax.core.ShapedArray((), jnp.int32, weak_type=True)
  refs = [v.aval for v in eqn.params["jaxpr"].invars]
  for jax_aval in [jax.core.ShapedArray((8, 128), jnp.float32), weak,
                   jax.core.ShapedArray((2, 3), jnp.bfloat16), *refs]:
    aval = Aval.of(jax_aval)
    assert str(aval) == str(jax_aval)
    assert aval.shape == tuple(jax_aval.shape) and aval.dtype == jnp.dtype(jax_aval.dtype).name
    assert Aval.parse(str(jax_aval)) == aval          # what a saved run reads back
  assert Aval.of(weak).weak_type and Aval.of(weak).array_text() == "int32[]"
  assert Aval.of(refs[0]).shown.startswith("Ref") and Aval.of(refs[0]).shape == (8, 128)


def test_text_that_is_no_array_is_kept_to_show():
  token = Aval.parse("Token")
  assert token == Aval(None, None, shown="Token") and str(token) == "Token"


def test_the_equations_avals_are_typed_live_and_after_a_save(lowered, tmp_path):
  from pallas_prof.cli.run_directory import load_kernel
  _, gk = lowered
  exp = next(e for e in gk.eqns if e.primitive == "exp")
  assert exp.out_avals == (Aval((8, 128), "bfloat16"),)
  gk.save(str(tmp_path))
  saved = json.loads((tmp_path / "kernel.json").read_text())
  assert next(e for e in saved["eqns"] if e["primitive"] == "exp")["out_avals"] == \
      ["bfloat16[8,128]"]                                # the file keeps the text form
  loaded, _ = load_kernel(str(tmp_path))
  assert [(e.in_avals, e.out_avals) for e in loaded.eqns] == \
      [(e.in_avals, e.out_avals) for e in gk.eqns]


def test_the_registry_records_a_calls_avals_typed(tmp_path):
  from pallas_prof.backend import kernel_registry

  def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  from tests.helpers import pallas
  kernel_registry.clear()
  x = jnp.ones((16,), jnp.int32)
  jax.block_until_ready(pallas(add_one, jax.ShapeDtypeStruct((16,), jnp.int32),
                               name="typed_avals_add_one")(x))
  [record] = kernel_registry.find("typed_avals_add_one")
  assert record.in_avals == record.out_avals == (Aval((16,), "int32"),)
  assert "int32[16] -> int32[16]" in repr(record)


def test_a_saved_profiles_equation_gives_its_result_shape():
  from pallas_prof.advice.facts import _shape_from_text
  assert _shape_from_text("b:f32[8,128] = exp a") == ((8, 128), "f32")
  assert _shape_from_text("c:i32[] = add a b") == (None, "i32")
  assert _shape_from_text("debug_print[fmt='x: {}'] a") == (None, None)
