"""A user's test file with one Pallas kernel, and pytest run on it with the plugin, in a
child process (each run a fresh JAX, as CI's would be)."""
from __future__ import annotations

import os

# the user's test: a kernel whose body, launch settings and marker the cases change
USER_TEST = '''
import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof


def scale_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = BODY


def scale(x):
  return pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        compiler_params=pallas_prof.CompilerParams(num_warps=WARPS))(x)


MARK
def test_scale():
  x = jnp.linspace(-1.0, 1.0, 8 * 128, dtype=jnp.float32).reshape(8, 128)
  assert jnp.isfinite(scale(x)).all()
'''
PLAIN = "x * 2.0"
HEAVY = "jnp.exp(x) * jnp.sin(x) + jnp.cos(x)"     # at one warp it spills on sm_90


def user_test(body: str = PLAIN, warps: int = 4, mark: str = "") -> str:
  return USER_TEST.replace("BODY", body).replace("WARPS", str(warps)).replace("MARK", mark)


def run(pytester, *args):
  """pytest in a child process with the plugin (named as its entry point names it, so a
  copy loaded from the entry point is the same plugin) and a short replay where a GPU is."""
  return pytester.runpytest_subprocess(
      "-p", "pallas_prof.pytest_plugin", "-p", "no:cacheprovider", "-q",
      "--pallas-prof-repeats", "2", "--pallas-prof-launches", "10", *args, timeout=300)


def baseline_path(pytester, name: str = "test_scale") -> str:
  return os.path.join(str(pytester.path), ".pallas-prof", "baseline", "test_user.py",
                      name + ".json")
