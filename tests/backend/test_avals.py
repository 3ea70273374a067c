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

  from testkit.helpers import pallas
  kernel_registry.clear()
  x = jnp.ones((16,), jnp.int32)
  jax.block_until_ready(pallas(add_one, jax.ShapeDtypeStruct((16,), jnp.int32),
                               name="typed_avals_add_one")(x))
  [record] = kernel_registry.find("typed_avals_add_one")
  assert record.in_avals == record.out_avals == (Aval((16,), "int32"),)
  assert "int32[16] -> int32[16]" in repr(record)


def test_a_profile_saved_before_its_equations_avals_reads_them_once_at_load():
  """EquationProfile.out_avals, typed; a report from before them gets its first result's
  aval from the equation's text when it is loaded (the advice then reads only the field)."""
  from pallas_prof.profiler.schema import EquationProfile
  from pallas_prof.serial import decode
  base = dict(index=0, path="0", primitive="exp", user_file=None, user_line=None,
              function=None, parent=None, region="body", generated_lines=[],
              ptx_instructions=0, sass_instructions=0, weight=0.0, inclusive_weight=0.0,
              loop_instructions=0, ptx_counts={}, sass_counts={})
  old = lambda text: decode(EquationProfile, {**base, "text": text}).out_avals
  assert old("b:f32[8,128] = exp a") == [Aval((8, 128), "f32")]
  assert old("c:i32[] = add a b") == [Aval((), "i32")]
  assert old("debug_print[fmt='x: {}'] a") == []
  saved = {**base, "text": "b:f32[8] = exp a", "out_avals": ["float32[8,128]"]}
  assert decode(EquationProfile, saved).out_avals == [Aval((8, 128), "float32")]
  assert EquationProfile.from_dict(saved).to_dict()["out_avals"] == ["float32[8,128]"]


def test_the_run_report_keeps_avals_typed_and_the_file_their_text(tmp_path):
  """report.json holds the avals' text as it always has; RunReport.load builds them once,
  and a value that is no aval's text is refused naming the field."""
  from pallas_prof.cli.report import KernelEntry, ReportError, RunReport
  entry = KernelEntry(label="k#1", name="k", in_avals=(Aval((8, 128), "float32"),),
                      out_avals=(Aval((), "int32", weak_type=True),))
  RunReport(kernels=(entry,)).save(str(tmp_path))
  saved = json.loads((tmp_path / "report.json").read_text())
  assert saved["kernels"][0]["in_avals"] == ["float32[8,128]"]
  assert saved["kernels"][0]["out_avals"] == ["~int32[]"]
  loaded = RunReport.load(str(tmp_path))
  assert loaded.kernels[0].in_avals == entry.in_avals
  assert loaded.kernels[0].out_avals == entry.out_avals
  saved["kernels"][0]["in_avals"] = [[8, 128]]
  (tmp_path / "report.json").write_text(json.dumps(saved))
  with pytest.raises(ReportError) as e:
    RunReport.load(str(tmp_path))
  assert "kernels[0].in_avals[0] is a list" in str(e.value)
  assert "where a string (the text of aval) belongs" in str(e.value)
