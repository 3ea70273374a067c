"""What pallas-prof does once JAX has no Triton backend. These run in the removal drill
(test_drill.py), where `jax._src.pallas.triton` and `jax.experimental.pallas.triton`
cannot be imported; with JAX's Triton backend importable they skip.
"""
from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend import pallas_call_rule
from testkit.helpers import jax_plgpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
S = jax.ShapeDtypeStruct

pytestmark = pytest.mark.skipif(
    jax_plgpu() is not None,
    reason="JAX's Triton backend is importable here: the removal drill runs these without it")


@pytest.mark.parametrize("module", ["jax.experimental.pallas.triton", "jax._src.pallas.triton",
                                    "jax._src.pallas.triton.primitives"])
def test_jax_triton_backend_is_gone_here_and_in_subprocesses(module):
  with pytest.raises(ModuleNotFoundError):
    __import__(module)
  # as the CLI's tests start theirs: the project's root on the path, and nothing else
  env = dict(os.environ, PYTHONPATH=ROOT)
  done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                        text=True, env=env, cwd=ROOT, timeout=300)
  assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, done.stderr


def test_kernels_written_against_plgpu_run(rng):
  x = rng.integers(0, 100, size=(3, 20)).astype(np.int32)

  def histogram(x_ref, o_ref):
    i = pl.program_id(0)
    plgpu.atomic_add(o_ref, (0, slice(None)), plgpu.load(x_ref.at[i], mask=jnp.arange(20) < 17,
                                                         other=0))
    plgpu.atomic_max(o_ref, (1, pl.ds(0, 4)), x_ref[i, 16:20])

  call = pl.pallas_call(histogram, out_shape=S((2, 20), jnp.int32), grid=(3,),
                        compiler_params=plgpu.CompilerParams(num_warps=2))
  want = np.zeros((2, 20), np.int32)
  want[0] = np.where(np.arange(20) < 17, x, 0).sum(0)
  want[1, :4] = np.maximum(0, x[:, 16:20].max(0))
  np.testing.assert_array_equal(call(x), want)


def test_comparing_with_jax_builtin_backend_says_it_is_gone():
  with pytest.raises(RuntimeError) as info:
    pallas_call_rule.route_to_builtin(True)
  message = str(info.value)
  assert "JAX's built-in Pallas Triton backend" in message and jax.__version__ in message
  assert "pallas_prof.CompilerParams" in message, message
  pallas_call_rule.route_to_builtin(False)


def _lower_for_cuda(call, *args):
  from jax import export
  allowed = [export.DisabledSafetyCheck.custom_call(plgpu.CUSTOM_CALL_TARGET_NAME)]
  export.export(jax.jit(call), platforms=["cuda"], disabled_checks=allowed)(*args)


def test_a_plain_call_after_uninstall_says_jax_builtin_backend_is_gone():
  """uninstall() hands plain calls back to JAX, which has no Triton backend left to take
  them on a GPU: the error says so (lowered for CUDA on any machine)."""
  def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  plain = pl.pallas_call(add_one, out_shape=S((8,), jnp.float32))
  assert not pallas_prof.installed()
  with pytest.raises(Exception) as info:
    _lower_for_cuda(plain, np.zeros(8, np.float32))
  assert "JAX's built-in Pallas Triton backend" in str(info.value), info.value
  pallas_prof.install()          # pallas-prof takes it
  try:
    _lower_for_cuda(plain, np.zeros(8, np.float32))
  except AttributeError as e:    # as far as a CPU jaxlib goes: it has no Triton launcher
    assert "TritonKernel" in str(e), e
  finally:
    pallas_prof.uninstall()


def test_the_rules_listing_has_the_triton_flavoured_primitives():
  env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="100")
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "rules"], capture_output=True,
                        text=True, env=env, cwd=ROOT, timeout=300)
  assert done.returncode == 0, done.stderr
  listed = {line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()}
  assert {"atomic_rmw", "atomic_cas", "debug_barrier", "elementwise_inline_asm",
          "max_contiguous"} <= listed, done.stdout
