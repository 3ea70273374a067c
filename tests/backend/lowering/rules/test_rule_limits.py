"""`pallas-prof rules`: each primitive with what its rule refuses, the words
kept beside the rule's registration (rules.table.LIMITS)."""
from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend.lowering.rules import rule_limits
from pallas_prof.backend.lowering.rules.table import LIMITS


def test_every_limit_belongs_to_a_registered_rule():
  limits = rule_limits()
  assert set(LIMITS) <= set(limits), set(LIMITS) - set(limits)
  assert "xs/ys" in limits["scan"] and "contracting" in limits["dot_general"]


def test_the_rules_command_prints_them():
  out = subprocess.run([sys.executable, "-m", "pallas_prof", "rules"], capture_output=True,
                       text=True, env={"COLUMNS": "100", "PATH": "", **_pythonpath()},
                       timeout=300)
  assert out.returncode == 0, out.stderr
  lines = out.stdout.splitlines()
  # its own count (a process that imported JAX's Triton module lists JAX's primitives too,
  # where their names differ from pallas-prof's own: jax < 0.12)
  names = [line.split()[0] for line in lines[1:] if line[2:3].strip()]
  assert lines[0].startswith(f"{len(names)} primitives"), lines[0]
  assert set(names) <= set(rule_limits()) and "atomic_rmw" in names
  (scan,) = [line for line in lines if line.split()[:1] == ["scan"]]
  assert "no refs as carries" in scan
  assert all(len(line) <= 100 for line in lines)


def _pythonpath():
  import os
  return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME",
                                                       "PALLAS_PROF_CACHE_DIR")}


def _contract_both(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.broadcast_to(
      jax.lax.dot_general(a_ref[...], b_ref[...], (((0, 1), (0, 1)), ((), ()))), (4, 8))


def _argmax_one_axis(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.broadcast_to(
      jax.lax.argmax(a_ref[...], 0, jnp.int32).astype(jnp.float32), (4, 8))


@pytest.mark.parametrize("name, kernel, limit, refused", [
    ("dot_general", _contract_both, "one contracting dimension", "contracting several"),
    ("argmax", _argmax_one_axis, "one axis at a time", None),
])
def test_a_stated_limit_is_what_the_rule_refuses(name, kernel, limit, refused):
  """The words say what the rule does: a dot contracting two dimensions is
  refused; an argmax over one axis is not (its limit is several axes)."""
  assert limit in rule_limits()[name]
  x = np.ones((4, 8), np.float32)
  call = jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 8), jnp.float32),
                                compiler_params=pallas_prof.CompilerParams()))
  if refused is None:
    call.lower(x, x)
  else:
    with pytest.raises(pallas_prof.LoweringError, match=refused):
      call.lower(x, x)
