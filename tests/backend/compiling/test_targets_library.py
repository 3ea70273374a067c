"""Device-library functions each target's Triton lacks (issue 40): a kernel compiled for an
AMD GPU calls Triton's AMD library (ocml) where it calls libdevice on NVIDIA, and some
Triton releases' AMD library lacks functions libdevice has. Such a compile is a refusal
at the user's line with what to write instead, never Triton's AttributeError; and what
pallas-prof itself emits exists in both libraries (the GPU fuzzer's second-target run
found Triton 3.6's AMD library without rint, which jnp.round used)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.failures import target_features
from pallas_prof.backend.compiling.for_targets import compile_for
from pallas_prof.backend.lowering.rules import elementwise

pallas_prof.install()


def _lower(kernel, x, name):
  spec = pl.BlockSpec((256,), lambda i: (i,))
  jax.jit(pl.pallas_call(kernel, name=name, grid=(2,), in_specs=[spec], out_specs=spec,
                         out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))).lower(x)
  return kernel_registry.find(name)[-1].generated


def _round_even(x_ref, o_ref):
  o_ref[...] = jnp.round(x_ref[...])


def _cube_root(x_ref, o_ref):
  o_ref[...] = jnp.cbrt(x_ref[...])


def test_round_to_even_compiles_for_amd_and_nvidia():
  gk = _lower(_round_even, jnp.ones((512,), jnp.float32), "library_round")
  for target in ("gfx942", "sm_80"):
    out = compile_for(gk, target, use_disk_cache=False)
    assert out.status == "compiled", (target, out.reason)


def test_round_to_even_still_rounds_ties_to_even():
  x = jnp.array(np.r_[np.arange(-4, 4) + 0.5, np.random.default_rng(0).normal(size=504)] * 3,
                jnp.float32)
  spec = pl.BlockSpec((256,), lambda i: (i,))
  got = pl.pallas_call(_round_even, grid=(2,), in_specs=[spec], out_specs=spec,
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.round(x)))
  assert float(got[0]) == np.round(-3.5 * 3) and float(got[3]) == -2.0   # -1.5 * 3 -> -4.5 -> -4


def test_a_function_amds_library_lacks_is_refused_at_the_users_line():
  gk = _lower(_cube_root, jnp.ones((512,), jnp.float32), "library_cbrt")
  out = compile_for(gk, "gfx942", use_disk_cache=False)
  assert out.status == "refused", (out.status, out.reason)
  text = str(out.error)
  assert "AMD device library has no cbrt" in text and "gfx942" in text
  assert f"{__file__}:{_cube_root.__code__.co_firstlineno + 1}" in text
  assert "jnp.abs(x) ** (1 / 3)" in text                 # what to write instead
  assert "AttributeError" not in out.reason
  assert compile_for(gk, "sm_80", use_disk_cache=False).status == "compiled"


def _emitted_library_functions() -> set[str]:
  """Every device-library function a lowering rule can emit, as the rules state it where
  they register (register(library=...)): the table's list, no list of this test's own."""
  from pallas_prof.backend.lowering.rules import table
  return set(table.library_functions())


def test_every_function_written_into_a_rule_is_declared_where_it_registers():
  """The library functions spelled out in the rules' text (`libdevice.exp(`) are among
  those their register() calls state: a rule that starts calling one says so."""
  import inspect
  from pallas_prof.backend.lowering.rules import reductions
  written = set()
  for module in (elementwise, reductions):
    written |= set(re.findall(r"libdevice\.(\w+)\(", inspect.getsource(module)))
  assert {"exp", "log1p", "popc", "fmod"} <= written           # the scan found them
  assert written - _emitted_library_functions() == set()


def test_every_emitted_function_is_in_nvidias_library_and_amds_or_explained():
  from triton.language.extra.cuda import libdevice as nvidia
  from triton.language.extra.hip import libdevice as amd
  names = _emitted_library_functions()
  assert {"exp", "nearbyint", "popc", "mulhi"} <= names            # the scan found them
  assert "rint" not in names
  assert [n for n in names if not hasattr(nvidia, n)] == []
  unexplained = [n for n in names if not hasattr(amd, n)
                 and n not in target_features._LIBRARY_WORKAROUNDS]
  assert unexplained == [], f"AMD's library lacks {unexplained}: add a workaround text"


@pytest.mark.parametrize("message,function", [
    ("AttributeError(\"module 'triton.language.extra.hip.libdevice' has no attribute 'popc'\")",
     "popc"),
    ("module 'triton.language.extra.cuda.libdevice' has no attribute 'foo'", "foo")])
def test_the_refusal_reads_tritons_message(message, function):
  assert target_features._NO_LIBRARY_FUNCTION.search(message).group(2) == function


def _f32_dot(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def test_a_kernel_lowered_for_nvidia_compiled_for_amd_is_refused_with_why(monkeypatch):
  """JAX's conformance kernels, lowered on the H200 and compiled here for gfx942: a float32
  dot carries XLA's CUDA TF32 rounding as NVIDIA PTX, which AMD's assembler rejected
  ("invalid instruction"), and the failure was put down to Triton. (Lowered here as for
  CUDA: a CPU's jaxlib cannot lower the CUDA custom call itself.)"""
  from pallas_prof.backend import compat
  monkeypatch.setattr(compat, "xla_rounds_tf32_dot_operands", lambda: True)
  x = jnp.ones((32, 32), jnp.float32)
  jax.jit(pl.pallas_call(_f32_dot, name="library_dot_cuda",
                         out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))).lower(x, x)
  gk = kernel_registry.find("library_dot_cuda")[-1].generated
  assert "cvt.rna.tf32.f32" in gk.source
  out = compile_for(gk, "gfx942", use_disk_cache=False)
  assert out.status == "refused", (out.status, out.reason)
  text = str(out.error)
  assert "lowered for an NVIDIA GPU and holds NVIDIA PTX" in text and "gfx942" in text
  assert f"{__file__}:{_f32_dot.__code__.co_firstlineno + 1}" in text     # the dot's line
  assert "precision=HIGHEST" in text and "Triton's, not your kernel's" not in text
  assert compile_for(gk, "sm_80", use_disk_cache=False).status == "compiled"


def test_a_dot_lowered_for_rocm_carries_no_ptx():
  """XLA's ROCm pipeline has no TF32 rounding pass, and AMD GPUs run no PTX."""
  from pallas_prof.backend import compat
  with compat.lowering_for("rocm"):
    assert not compat.xla_rounds_tf32_dot_operands()
  with compat.lowering_for("cuda"):
    assert compat.xla_rounds_tf32_dot_operands()


def _tf32x3_dot(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32,
                       precision=lax.DotAlgorithmPreset.TF32_TF32_F32_X3)


def test_a_dot_algorithm_amd_lacks_is_refused_at_its_line_with_one_it_has():
  """tf32x3 (three TF32 products, lax.DotAlgorithmPreset.TF32_TF32_F32_X3): Triton's AMD
  backend takes ieee, bf16x3, bf16x6 (and tf32 on some archs), and its ttir stage failed;
  the matrix of our own rule tests listed it as a failure, not the kernel's choice."""
  x = jnp.ones((32, 32), jnp.float32)
  jax.jit(pl.pallas_call(_tf32x3_dot, name="library_dot_tf32x3",
                         out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))).lower(x, x)
  gk = kernel_registry.find("library_dot_tf32x3")[-1].generated
  assert 'input_precision="tf32x3"' in gk.source
  out = compile_for(gk, "gfx942", use_disk_cache=False)
  assert out.status == "refused", (out.status, out.reason)
  text = str(out.error)
  assert "gfx942 has no tf32x3 dot" in text and "bf16x3" in text, text
  assert f"{__file__}:{_tf32x3_dot.__code__.co_firstlineno + 1}" in text     # the dot's line
  assert "BF16_BF16_F32_X3" in out.error.hint and out.error.fault == "kernel"
  assert compile_for(gk, "sm_80", use_disk_cache=False).status == "compiled"


def test_the_interpreters_library_has_every_function_a_rule_emits():
  """On the CPU a kernel's `libdevice` is the numpy stand-in (interpreter_libdevice.py):
  every function the rules declare where they register must be there."""
  from pallas_prof.backend.running import interpreter_libdevice
  names = _emitted_library_functions()
  assert {"exp", "fmod", "log1p", "mulhi"} <= names
  assert sorted(n for n in names if not callable(getattr(interpreter_libdevice, n, None))) == []
