"""A float32 dot at DEFAULT precision on an AMD GPU without TF32 dots (issue 40).

Triton's AMD backend takes a tf32 dot on gfx942 alone; DEFAULT and HIGH precision, which
allow TF32, used to be lowered to `input_precision="tf32"` for every GPU, so every such dot
was refused on gfx90a, gfx950 and RDNA. There it now multiplies in float32, the same dot
precision=HIGHEST gives, with a warning at the dot's line. A preset that names TF32 is what
the user asked for by name: still refused, with the alternatives. Lowered for `rocm` on the
CPU (jax.export); nothing here runs on AMD hardware.
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling import triton_compat
from pallas_prof.backend.errors import CompileError, LoweringError
from pallas_prof.backend.lowering.rules.dot import Tf32FallbackWarning
from pallas_prof.backend.running import rocm

S = jax.ShapeDtypeStruct
ALLOWED = [export.DisabledSafetyCheck.custom_call(rocm.XLA_TRITON_TARGET)]


@pytest.fixture(autouse=True)
def _installed():
  pallas_prof.install()
  kernel_registry.clear()


def _export(call, *args, arch: str) -> str:
  device = jax.sharding.AbstractDevice(device_kind=arch, num_cores=None, platform="rocm")
  mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
  with jax.sharding.use_abstract_mesh(mesh):
    return export.export(jax.jit(call), platforms=["rocm"], disabled_checks=ALLOWED)(
        *args).mlir_module()


def _dot_call(name: str, precision=None):
  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], precision=precision)   # THE DOT
  kernel.__name__ = name
  return pl.pallas_call(kernel, out_shape=S((32, 48), jnp.float32),
                        compiler_params=plgpu.CompilerParams())


ARGS = (np.ones((32, 16), np.float32), np.ones((16, 48), np.float32))


def _dot_line(gk) -> str:
  [line] = [ln for ln in gk.source.splitlines() if "tl.dot(" in ln]
  return line


def test_triton_says_which_amd_archs_have_tf32_dots():
  """Triton's own answer, per release: the fallback follows it, not a list of ours."""
  assert "tf32" in triton_compat.hip_dot_input_precisions("gfx942")
  for arch in ("gfx90a", "gfx950", "gfx1100"):
    assert "tf32" not in triton_compat.hip_dot_input_precisions(arch)
    assert "ieee" in triton_compat.hip_dot_input_precisions(arch)


@pytest.mark.parametrize("arch,precision,tag", [
    ("gfx950", None, "none"), ("gfx90a", None, "none"), ("gfx950", lax.Precision.HIGH, "high"),
    # JAX's own rule: either side allowing TF32 makes the dot a TF32 one
    ("gfx950", (lax.Precision.DEFAULT, lax.Precision.HIGHEST), "mixed")])
def test_a_dot_that_allows_tf32_multiplies_in_float32_and_says_so_once(arch, precision, tag):
  name = f"dot_{tag}_{arch}"          # a kernel of its own: warned once per kernel and line
  with pytest.warns(Tf32FallbackWarning) as caught:
    text = _export(_dot_call(name, precision), *ARGS, arch=arch)
  assert rocm.XLA_TRITON_TARGET in text
  [w] = [w for w in caught if issubclass(w.category, Tf32FallbackWarning)]
  assert w.filename == __file__ and "THE DOT" in open(__file__).read().splitlines()[w.lineno - 1]
  assert f"{arch} has no TF32 dot" in str(w.message) and "float32" in str(w.message)
  [rec] = kernel_registry.find(name)
  assert 'input_precision="ieee"' in _dot_line(rec.generated)
  [dot] = [e for e in rec.generated.eqns if e.primitive == "dot_general"]
  assert dot.dot.precision == "ieee"        # what the work model and the report read
  # the same dot as precision=HIGHEST's, which multiplies in float32 everywhere
  highest = _dot_call(f"highest_{name}", lax.Precision.HIGHEST)
  with warnings.catch_warnings():
    warnings.simplefilter("error", Tf32FallbackWarning)      # HIGHEST falls back from nothing
    _export(highest, *ARGS, arch=arch)
  [other] = kernel_registry.find(f"highest_{name}")
  assert _dot_line(other.generated) == _dot_line(rec.generated)
  # lowered again (the tuner, the workarounds, the profiler and the advice do): no new warning
  with warnings.catch_warnings(record=True) as again:
    warnings.simplefilter("default")
    rec.relower()
  assert not [w for w in again if issubclass(w.category, Tf32FallbackWarning)], again


def test_where_triton_cannot_say_the_rocm_path_lowers_as_before(monkeypatch):
  """A Triton without its AMD backend, or an arch name it cannot read: no answer about TF32
  is no reason to fail a kernel; the gfx compile after it reports what is missing."""
  def cannot(arch):
    raise ModuleNotFoundError("No module named 'triton.backends.amd' (hidden by the test)")
  monkeypatch.setattr(triton_compat, "hip_dot_input_precisions", cannot)
  def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0
  call = pl.pallas_call(add_one, out_shape=S((256,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())
  assert rocm.XLA_TRITON_TARGET in _export(call, np.ones(256, np.float32), arch="gfx950")


def test_gfx942_keeps_tf32_as_jaxs_builtin_lowers_it():
  with warnings.catch_warnings():
    warnings.simplefilter("error", Tf32FallbackWarning)
    _export(_dot_call("default_dot_gfx942"), *ARGS, arch="gfx942")
  [rec] = kernel_registry.find("default_dot_gfx942")
  assert 'input_precision="tf32"' in _dot_line(rec.generated)


def test_a_tf32_preset_is_what_was_asked_for_and_is_refused_where_missing():
  call = _dot_call("preset_dot_gfx950", lax.DotAlgorithmPreset.TF32_TF32_F32)
  with pytest.raises((CompileError, LoweringError)) as raised:
    _export(call, *ARGS, arch="gfx950")
  text = str(raised.value)
  assert "gfx950 has no tf32 dot" in text and "precision=HIGHEST" in text, text
