"""The name XLA (and so XProf and any jax.profiler trace) gives a pallas-prof kernel's op:
its op_name carries pallas-prof's label of the kernel and the user's pallas_call line, and
its source location stays the user's line (issue 41 item 1; docs/xprof.md).

The CPU path is compiled here; the GPU path's custom call is lowered for CUDA with a
stand-in for jaxlib's gpu_triton, which a CPU-only jaxlib lacks (as in
test_jaxlib_payload.py): the kernel is compiled to PTX by Triton as on the GPU.
"""
from __future__ import annotations

import inspect
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import compat, kernel_registry
from pallas_prof.backend.running import xla_names

THIS_FILE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def _installed():
  """Installed for each test, not only at import: another file's test in this process
  may have left it uninstalled (conftest's _install_state_kept puts it back after)."""
  pallas_prof.install()


def exp_add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) + y_ref[...]


def exp_add(x, y):
  spec = pl.BlockSpec((128,), lambda i: (i,))
  return pl.pallas_call(exp_add_kernel, grid=(2,), in_specs=[spec, spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


CALL_LINE = next(i for i, text in enumerate(inspect.getsource(exp_add).splitlines())
                 if "pl.pallas_call(" in text) + inspect.getsourcelines(exp_add)[1]


def _scope() -> str:
  [rec] = kernel_registry.find("exp_add_kernel")
  return f"pallas_prof[{rec.label.replace('#', '_')} {THIS_FILE} line {CALL_LINE}]"


def test_the_cpu_op_is_named_for_the_kernel_and_the_users_line():
  kernel_registry.clear()
  x = jnp.asarray(np.random.rand(256), jnp.float32)
  lowered = jax.jit(exp_add).lower(x, x)
  compiled = lowered.compile()
  hlo = compiled.as_text()
  op_names = re.findall(r'op_name="([^"]*)"', hlo)
  scope = _scope()
  assert f"jit(exp_add)/{scope}/pure_callback" in op_names, op_names
  # the source location is still the user's pallas_call line: XLA keeps it as a stack
  # frame (older XLA: source_file/source_line); either way this file and line are in it
  assert re.search(rf'"[^"]*{re.escape(THIS_FILE)}"', hlo), hlo
  assert re.search(rf"\bline={CALL_LINE}\b", hlo) or f"source_line={CALL_LINE}" in hlo, hlo
  # and the kernel still runs, to the right answer
  np.testing.assert_allclose(np.asarray(compiled(x, x)), np.exp(np.asarray(x)) + np.asarray(x),
                             rtol=1e-6)


class _FakeCall:
  def to_proto(self, name, metadata):
    return b"payload"


class _FakeGpuTriton:              # jaxlib's gpu_triton, which a CPU-only jaxlib lacks
  def TritonKernel(self, *args):
    return "kernel"

  def create_array_parameter(self, nbytes, divisibility):
    return (nbytes, divisibility)

  def TritonKernelCall(self, *args):
    return _FakeCall()


def test_the_gpu_custom_call_is_named_for_the_kernel_and_the_users_line(monkeypatch):
  monkeypatch.setattr(compat, "gpu_triton", lambda: _FakeGpuTriton())
  kernel_registry.clear()
  x = jax.ShapeDtypeStruct((256,), jnp.float32)
  lowered = jax.jit(exp_add).trace(x, x).lower(lowering_platforms=("cuda",))
  scope = _scope()
  mlir_text = lowered.as_text(debug_info=True)
  [call] = [line for line in mlir_text.splitlines() if "@triton_kernel_call_ffi" in line]
  loc_id = re.search(r"loc\((#loc\d+)\)\s*$", call).group(1)
  locs = dict(re.findall(r"^(#loc\d+) = (.*)$", mlir_text, re.M))
  assert locs[loc_id].startswith(f'loc("jit(exp_add)/{scope}"('), locs[loc_id]
  # its child location leads to this file's pallas_call line
  assert any(f'{THIS_FILE}":{CALL_LINE}:' in text for text in locs.values()), locs
  # XLA names the HLO instruction after the scope (its characters made HLO-safe)
  hlo = lowered.as_text(dialect="hlo")
  [instr] = [line for line in hlo.splitlines() if "custom-call(" in line]
  assert re.sub(r"[^\w-]", "_", scope) in instr, instr


@pytest.mark.parametrize("label, file, line, expected", [
    ("k#1f22e0", "/home/me/my model.py", 7, "pallas_prof[k_1f22e0 my model.py line 7]"),
    ("k@x", "a/b:c.py", 3, "pallas_prof[k_x b_c.py line 3]"),
    ("k#1", None, None, "pallas_prof[k_1]"),
])
def test_the_scope_holds_no_character_xla_or_xprof_reads_as_structure(label, file, line,
                                                                       expected):
  class Site:
    pass
  site = Site()
  site.file, site.line = file, line
  name = xla_names.scope_name(label, site)
  assert name == expected
  assert not set("@/:") & set(name)
