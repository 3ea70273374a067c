"""The bounds-checked debug mode (install(check_bounds=True) / PALLAS_PROF_CHECK=bounds):
an access outside its ref raises BoundsError naming the kernel, the equation,
the user's line, the ref with its shape and the offending index range, after
the kernel, with the process alive; outputs start poisoned; valid kernels
compute what they compute without it; off, nothing changes."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from jax.experimental import pallas as pl
from pallas_prof import triton as plgpu

import pallas_prof
from pallas_prof.backend.lowering.features import bounds
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.options import LoweringOptions
from tests.backend.lowering.rules.test_memory import generated_kernel
from testkit.helpers import pallas, random_array

S = jax.ShapeDtypeStruct
HERE = __file__.rsplit("/", 1)[-1]


@pytest.fixture
def check_mode():
  bounds.set_check_bounds(True)
  try:
    yield
  finally:
    bounds.set_check_bounds(None)


def _window_kernel(s_ref, x_ref, o_ref):
  o_ref[...] = x_ref[pl.ds(s_ref[0], 16)] * 2          # the line the error names


def _line_of(fn, needle: str) -> int:
  import inspect
  lines, first = inspect.getsourcelines(fn)
  return first + next(i for i, text in enumerate(lines) if needle in text)


def test_a_read_past_the_ref_raises_with_line_ref_shape_and_range(check_mode, rng):
  x = random_array(rng, (128,), "float32")
  call = pallas(_window_kernel, S((16,), jnp.float32), name="window_read")
  ok = call(np.array([3], np.int32), x)
  np.testing.assert_allclose(np.asarray(ok), x[3:19] * 2)
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(np.array([120], np.int32), x))
  text = str(info.value)
  assert "out of bounds: `get` in kernel `window_read`" in text, text
  assert f"{HERE}:{_line_of(_window_kernel, 'the line the error names')}" in text, text
  assert "reads x_ref (shape (128,), float32) at index [128:136]" in text, text
  assert "8 lane(s)" in text and "equation: " in text, text
  # the hint names the switch the user turned (install), not a variable they never set
  assert "pallas_prof.install(check_bounds=True)" in text and "PALLAS_PROF_CHECK" not in text, text
  # the process and its devices go on
  np.testing.assert_allclose(np.asarray(call(np.array([0], np.int32), x)), x[:16] * 2)


def test_a_write_past_the_ref_is_dropped_and_named(check_mode, rng):
  def kernel(s_ref, x_ref, o_ref):
    o_ref[...] = jnp.zeros((40,), jnp.int32)
    o_ref[pl.ds(s_ref[0], 8)] = x_ref[...]

  x = random_array(rng, (8,), "int32")
  call = pallas(kernel, S((40,), jnp.int32), name="window_write")
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(np.array([-3], np.int32), x))
  text = str(info.value)
  assert "`swap` in kernel `window_write`" in text and "writes o_ref" in text, text
  assert "at index [-3:0]" in text and "3 lane(s)" in text, text


def test_a_window_past_its_block_names_the_block(check_mode, rng):
  # blocks of 48 over 100 elements; the window starts 40 into the block
  def kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(s_ref[0], 16)]

  x = random_array(rng, (100,), "float32")
  call = pallas(kernel, S((48,), jnp.float32), grid=(3,),
                in_specs=[pl.BlockSpec((1,), lambda i: (0,)),
                          pl.BlockSpec((48,), lambda i: (i,))],
                out_specs=pl.BlockSpec((16,), lambda i: (i,)), name="block_window")
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(np.array([40], np.int32), x))
  text = str(info.value)
  assert "reads x_ref (a block of shape (48,) of float32[100]) at index [48:56]" in text, text
  # the last block overhangs the array: its padding is not a violation
  out = call(np.array([20], np.int32), x)
  np.testing.assert_allclose(np.asarray(out)[:32], np.concatenate([x[20:36], x[68:84]]))


def test_gathers_and_scalar_reads_are_checked(check_mode, rng):
  def kernel(i_ref, x_ref, o_ref):
    o_ref[...] = x_ref[i_ref[...]] + x_ref[i_ref[2]]

  x = random_array(rng, (10,), "float32")
  call = pallas(kernel, S((4,), jnp.float32), name="gather_read")
  ok = call(np.array([0, 9, 3, 1], np.int32), x)
  np.testing.assert_allclose(np.asarray(ok), x[[0, 9, 3, 1]] + x[3])
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(np.array([0, 12, 11, 1], np.int32), x))
  text = str(info.value)
  assert "at index [11:13]" in text and "at index [11]" in text, text


def test_the_environment_variable_turns_it_on(monkeypatch, rng):
  monkeypatch.setenv("PALLAS_PROF_CHECK", "bounds")
  x = random_array(rng, (128,), "float32")
  with pytest.raises(Exception, match="out of bounds") as info:
    jax.block_until_ready(pallas(_window_kernel, S((16,), jnp.float32), name="by_env")(
        np.array([127], np.int32), x))
  assert "PALLAS_PROF_CHECK=bounds" in str(info.value) and "install(" not in str(info.value)


def test_poisoned_outputs_show_what_nothing_writes(check_mode, rng):
  x = random_array(rng, (100,), "float32")
  n = random_array(rng, (100,), "int32")

  def kernel(x_ref, n_ref, o_ref, p_ref):
    o_ref[...] = x_ref[...]
    p_ref[pl.ds(0, 5)] = n_ref[pl.ds(0, 5)]     # the rest of each block: never written

  with pytest.warns(pallas_prof.UncoveredOutputWarning, match=r"never written \(check mode's "
                    r"poison: NaN, or all ones\)"):      # not 'zeros on the CPU'
    out, part = pallas(kernel, (S((100,), jnp.float32), S((100,), jnp.int32)), grid=(2,),
                       in_specs=[pl.BlockSpec((48,), lambda i: (i,))] * 2,
                       out_specs=[pl.BlockSpec((48,), lambda i: (i,))] * 2,
                       name="poisoned")(x, n)
  out, part = np.asarray(out), np.asarray(part)
  np.testing.assert_array_equal(out[:96], x[:96])
  assert np.isnan(out[96:]).all()          # no block covers them
  written = np.zeros(100, bool)
  written[[*range(5), *range(48, 53)]] = True
  np.testing.assert_array_equal(part[written], n[written])
  # outputs start poisoned (on a GPU: aliased to poisoned starting values), so
  # what the kernel skips inside its blocks shows too, not only what no block covers
  assert (part[~written] == -1).all()


def test_off_by_default_the_generated_code_is_unchanged(rng):
  from pallas_prof.backend.lowering.lower import lower_kernel
  from tests.backend.lowering.rules.test_memory import pallas_call_eqns

  def kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(s_ref[0], 16)] * 2

  args = (S((1,), jnp.int32), S((128,), jnp.float32))
  [eqn] = pallas_call_eqns(lambda s, x: pallas(kernel, S((16,), jnp.float32))(s, x), *args)

  def lower(**kwargs):
    return lower_kernel(eqn.params["jaxpr"], eqn.params["grid_mapping"],
                        LoweringOptions(num_warps=4, num_stages=3, **kwargs))

  assert not bounds.check_bounds_enabled()
  plain, off, on = lower(), lower(check_bounds=False), lower(check_bounds=True)
  assert plain.source == off.source and plain.key == off.key
  assert "pp_bounds" not in plain.source and "in_bounds" not in plain.source
  assert not plain.bounds_sites and all(p.role != "check" for p in plain.params)
  assert "pp_bounds" in on.source and len(on.bounds_sites) == 1      # the window; o_ref is static
  assert [p.role for p in on.params][-1] == "check"


@settings(max_examples=25, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(program=__import__("testkit.fuzz.programs", fromlist=["kernel_programs"]).kernel_programs())
def test_valid_kernels_compute_the_same_in_check_mode(program):
  """The fuzzer's grid kernels (in bounds by construction: overhanging blocks,
  masked loads and stores, pl.ds windows, atomics, matmuls) raise nothing and
  match the reference with every access checked (on the default device: on
  the GPU machine, compiled kernels)."""
  from testkit.fuzz.check import check
  bounds.set_check_bounds(True)
  try:
    check(program, jax.devices()[0])
  finally:
    bounds.set_check_bounds(None)


def test_without_check_mode_a_wild_read_on_the_cpu_is_an_error_not_a_crash(tmp_path):
  """Triton's interpreter reads through raw pointers: a read 4 GiB before a
  buffer ended the process with a segmentation fault. Every interpreted access
  is now checked against the kernel's buffers (interpreter_memory.MemoryGuard).
  In a child process, so a regression cannot take pytest down with it."""
  import os
  import subprocess
  import sys
  from tests.backend.running.test_bounds_gpu import PROGRAM
  script = tmp_path / "wild_read.py"
  script.write_text(PROGRAM)
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
  done = subprocess.run([sys.executable, str(script), "plain"], capture_output=True, text=True,
                        timeout=300, env=env)
  out = done.stdout + done.stderr
  assert done.returncode == 0, f"exit status {done.returncode}\n{out[-3000:]}"
  assert "reads 16 element(s) outside x_ref" in out, out[-3000:]
  assert "PALLAS_PROF_CHECK=bounds" in out and "wild_read.py:9" in out, out[-3000:]
  assert "AFTER 1000.0 10.0" in done.stdout, out[-3000:]


@pytest.mark.parametrize("dtype, poison", [("int4", -1), ("uint4", 15), ("int8", -1)])
def test_packed_int4_outputs_start_poisoned_too(check_mode, rng, dtype, poison):
  """int4/uint4 outputs (two a byte in the kernel's buffer) start poisoned on the CPU as
  on the GPU (launch.poison_value): they started as zeros, so what nothing writes looked
  written."""
  import ml_dtypes
  dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
  x = rng.integers(0, 7, (16, 16), endpoint=True).astype(dt)
  with pytest.warns(pallas_prof.UncoveredOutputWarning):
    out = pallas(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]), S((16, 16), dt),
                 grid=(1,), in_specs=[pl.BlockSpec((8, 16), lambda i: (i, 0))],
                 out_specs=pl.BlockSpec((8, 16), lambda i: (i, 0)), name=f"half_{dtype}")(x)
  out = np.asarray(out).astype(np.int64)
  np.testing.assert_array_equal(out[:8], x[:8].astype(np.int64))
  assert (out[8:] == poison).all(), out[8:]


@pytest.mark.parametrize("value, on, warns", [
    ("bounds", True, False), ("", False, False), ("off", False, False),
    ("1", False, True), ("bound", False, True), ("bounds,races", True, True)])
def test_an_unknown_check_in_the_environment_is_named(monkeypatch, value, on, warns):
  """PALLAS_PROF_CHECK=1 or =bound left check mode off without a word: one warning now
  names the value and the check there is (pallas_prof/settings.py)."""
  import warnings
  from pallas_prof import settings
  bounds.set_check_bounds(None)
  monkeypatch.setattr(settings, "_warned", set())
  monkeypatch.setenv("PALLAS_PROF_CHECK", value)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert bounds.check_bounds_enabled() is on
    bounds.check_bounds_enabled()                      # once per value, not per lowering
  texts = [str(w.message) for w in caught]
  assert len(texts) == int(warns), texts
  if warns:
    assert f"PALLAS_PROF_CHECK={value!r}" in texts[0] and "it accepts bounds" in texts[0]
