"""Triton bugs that compile into wrong numbers, found in the IR and worked around.

The H200 fuzz run of 2026-12-03 (seed 20261204) found every program with
`jnp.cumsum(x[:, None], axis=0)` wrong on the GPU and right under the
interpreter. Triton 3.6's ScanOpToLLVM takes the lane distance along the
scanned axis from the tensor's shape, not its layout: on a tensor<4x1> whose
layout gives the size-1 axis 4 lanes it shuffles by 1 lane where 4 is right
(Triton 3.9 shuffles by the layout's stride). silent_faults.py finds such scans
in the TTGIR and workarounds.py lowers them otherwise (here: as 1-D scans).
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.failures import silent_faults, workarounds
from pallas_prof.backend.compiling import triton_compat
from pallas_prof.backend.compiling.failures.compile_diagnostics import FailedOp
from pallas_prof.backend.errors import CompileError

AFFECTED = triton_compat.triton_version() < (3, 9)
HERE = __file__


def colscan(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.cumsum(x[:, None], axis=0) * x[None, :]       # THE SCAN


def chain(x_ref, y_ref, o_ref):
  # the fuzzer's shape of it: the selective scan's two cumsums of broadcast columns
  x, y = x_ref[...], y_ref[...]
  a = jnp.cumsum(x[:, None], axis=0) * y[None, :]
  b = jnp.exp(jnp.clip(-a, -5, 5))
  o_ref[...] = jnp.cumsum((x * x)[:, None] * b, axis=0)


def _lowered(kernel, *arrays, out_shape):
  kernel_registry.clear()
  out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, jnp.float32),
                       compiler_params=pallas_prof.CompilerParams(),
                       name=kernel.__name__)(*arrays)
  return np.asarray(out), kernel_registry.kernels()[-1]


def _line(marker: str) -> int:
  return next(i for i, l in enumerate(open(HERE).read().splitlines(), 1) if marker in l)


def test_the_layout_reader():
  def op(types, layout, axis=0):
    return FailedOp(
        "tt.scan", 3, 17, f"axis = {axis}, reverse = false", types,
        (f"#blocked = #ttg.blocked<{{sizePerThread = [1, 1], threadsPerWarp = {layout}, "
         f"warpsPerCTA = [4, 1], order = [1, 0]}}>",))
  t = "(tensor<{}xf32, #blocked>) -> tensor<{}xf32, #blocked>"
  assert silent_faults._replicated(op(t.format("4x1", "4x1"), "[8, 4]"))
  assert silent_faults._replicated(op(t.format("2x1", "2x1"), "[16, 2]"))
  assert not silent_faults._replicated(op(t.format("4x4", "4x4"), "[8, 4]"))
  assert not silent_faults._replicated(op(t.format("16x1", "16x1"), "[32, 1]"))
  # the scanned axis itself may be replicated: its replicas' results are never stored
  assert not silent_faults._replicated(op(t.format("1x4", "1x4"), "[8, 4]", axis=0))


@pytest.mark.parametrize("n", [2, 3, 7, 16])
def test_a_column_scan_is_found_and_lowered_otherwise(n, rng):
  x = rng.uniform(-4, 4, n).astype(np.float32)
  out, rec = _lowered(colscan, x, out_shape=(n, n))
  np.testing.assert_allclose(out, np.cumsum(x.astype(np.float64))[:, None] * x[None, :],
                             rtol=1e-5, atol=1e-5)
  try:
    plain = pcompile.compile_kernel(rec.generated, ("cuda", 90), need_cubin=False)
  except CompileError as e:
    # the bug's other face, at other sizes: ScanOpToLLVM asserts (issue 28)
    assert AFFECTED and e.fault == "triton" and "ScanOpToLLVM" in str(e)
    plain = None
  if not AFFECTED:
    assert silent_faults.find(plain) is None      # Triton 3.9 shuffles by the layout's stride
    return
  if plain is not None:
    found = silent_faults.find(plain)
    assert found is not None and found.op_kind == "tt.scan"
    eqn = rec.generated.eqns[found.equations[0]]
    assert eqn.primitive == "cumsum" and eqn.location.endswith(f":{_line('# THE SCAN')}")
    shuffles = [int(d) for d in re.findall(r"shfl\.sync\.up\.b32\s+%r\d+, %r\d+, (\d+),",
                                           plain.ptx)]
    assert shuffles and shuffles[0] == 1    # the wrong lane: its layout puts rows lanes apart
  ck = workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                          need_cubin=False)
  assert silent_faults.find(ck) is None
  assert ck.generated.workarounds and "cumsum" in ck.generated.workarounds[0]
  assert "Triton workaround" in ck.generated.source


@pytest.mark.skipif(not AFFECTED, reason="Triton 3.9 lowers these scans right")
def test_with_the_workarounds_off_it_is_refused_not_run(monkeypatch, rng):
  monkeypatch.setenv(workarounds.ENV, "0")
  x = rng.uniform(-4, 4, 3).astype(np.float32)
  with pytest.raises(CompileError) as info:
    # on a GPU the call itself compiles, and is refused there; on a CPU the
    # interpreter runs it and the sm_90 compile below is refused
    _, rec = _lowered(colscan, x, out_shape=(3, 3))
    workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                       need_cubin=False)
  text = str(info.value)
  assert "read the wrong lanes" in text and f":{_line('# THE SCAN')}" in text
  assert info.value.fault == "triton"


@pytest.mark.parametrize("n", [3, 7, 16])
def test_the_fuzzers_chain_compiles_with_no_risky_scan_left(n, rng):
  x = rng.uniform(-2, 2, n).astype(np.float32)
  y = rng.uniform(-2, 2, n).astype(np.float32)
  out, rec = _lowered(chain, x, y, out_shape=(n, n))
  x64, y64 = x.astype(np.float64), y.astype(np.float64)
  b = np.exp(np.clip(-(np.cumsum(x64)[:, None] * y64[None, :]), -5, 5))
  np.testing.assert_allclose(out, np.cumsum((x64 * x64)[:, None] * b, axis=0), rtol=1e-4)
  ck = workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                          need_cubin=False)
  assert silent_faults.find(ck) is None


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [colscan, chain])
def test_on_the_gpu_the_scans_are_right(kernel):
  gpu = jax.devices("gpu")[0]
  for n in (2, 3, 7, 16, 33):
    rng = np.random.default_rng(n)
    x = rng.uniform(-2, 2, n).astype(np.float32)
    y = rng.uniform(-2, 2, n).astype(np.float32)
    args = (x,) if kernel is colscan else (x, y)
    out = np.asarray(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32),
        compiler_params=pallas_prof.CompilerParams())(*[jax.device_put(a, gpu) for a in args]))
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    if kernel is colscan:
      want = np.cumsum(x64)[:, None] * x64[None, :]
    else:
      b = np.exp(np.clip(-(np.cumsum(x64)[:, None] * y64[None, :]), -5, 5))
      want = np.cumsum((x64 * x64)[:, None] * b, axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=f"n={n}")


def twice(x_ref, y_ref, o_ref, p_ref):
  # the fuzzer's selective-scan step twice in one kernel (bench/results/fuzz_cpu_ae18e30_
  # seed20261215_scans_sm90_workarounds.json): Triton folds the two column scans'
  # locations into one, so the failure named one of them and every form kept failing
  x = x_ref[...]
  for out in (o_ref, p_ref):
    a = jnp.cumsum(x[:, None], axis=0) * x[None, :]
    b = jnp.exp(jnp.clip(-a, -5, 5))
    out[...] = jnp.cumsum((x * x)[:, None] * b, axis=0)


def test_two_scans_folded_into_one_location_are_both_lowered_otherwise(rng):
  x = rng.uniform(-2, 2, 32).astype(np.float32)
  kernel_registry.clear()
  shape = jax.ShapeDtypeStruct((32, 32), jnp.float32)
  o, p = pl.pallas_call(twice, out_shape=[shape, shape],
                        compiler_params=pallas_prof.CompilerParams())(x, x)
  x64 = x.astype(np.float64)
  b = np.exp(np.clip(-(np.cumsum(x64)[:, None] * x64[None, :]), -5, 5))
  for out in (o, p):
    np.testing.assert_allclose(np.asarray(out), np.cumsum((x64 * x64)[:, None] * b, axis=0),
                               rtol=1e-4)
  rec = kernel_registry.kernels()[-1]
  ck = workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                          need_cubin=False)
  assert silent_faults.find(ck) is None


def rowscan(x_ref, w_ref, o_ref):
  # the GPU fuzzer's finding of 2026-12-03 (seed 20261216, a bounds-checked job): a row
  # cumsum of a [1, 2] block, next to an unused input
  o_ref[...] = jnp.cumsum(x_ref[...], axis=1)


@pytest.mark.parametrize("case", ["rowscan", "colscan"])
def test_a_workaround_keeps_the_bounds_checked_build(case, rng):
  """The GPU launches a workaround in the kernel's place with the kernel's operands: in
  the bounds-checked build those include the outputs' starting values and the bounds
  record. A workaround lowered unchecked had neither, and the launch failed with
  'safe_zip() argument 1 has length 1 but argument 0 has length 2'."""
  from pallas_prof.backend.lowering.features import bounds
  bounds.set_check_bounds(True)
  try:
    if case == "rowscan":
      x = rng.uniform(-4, 4, (1, 2)).astype(np.float32)
      w = rng.uniform(-4, 4, (2, 1)).astype(np.float32)
      kernel_registry.clear()
      out = pl.pallas_call(
          rowscan, grid=(1,), out_shape=jax.ShapeDtypeStruct((1, 2), jnp.float32),
          in_specs=[pl.BlockSpec((1, 2), lambda i: (i, 0)), pl.BlockSpec((2, 1), lambda i: (0, 0))],
          out_specs=pl.BlockSpec((1, 2), lambda i: (i, 0)),
          compiler_params=pallas_prof.CompilerParams(), name="rowscan")(x, w)
      rec = kernel_registry.kernels()[-1]
      np.testing.assert_allclose(np.asarray(out), np.cumsum(x, axis=1), rtol=1e-6)
    else:
      x = rng.uniform(-4, 4, 3).astype(np.float32)
      out, rec = _lowered(colscan, x, out_shape=(3, 3))
      np.testing.assert_allclose(out, np.cumsum(x)[:, None] * x[None, :], rtol=1e-5)
  finally:
    bounds.set_check_bounds(None)
  gk = rec.generated
  assert gk.check_bounds
  ck = workarounds.compile_working_around(gk, ("cuda", 90), rec.relower, need_cubin=False,
                                          use_disk_cache=False)
  if AFFECTED:
    assert ck.generated.workarounds, "the scan needed a workaround on this Triton"
  assert ck.generated.check_bounds
  assert [(p.name, p.role) for p in ck.generated.params] == [(p.name, p.role) for p in gk.params]


def test_the_record_s_own_variants_stay_unchecked():
  """What the profiler and the advice time in the kernel's place is the kernel the
  program runs unchecked: relower without same_build drops the checked build."""
  from pallas_prof.backend.lowering.features import bounds
  bounds.set_check_bounds(True)
  try:
    _, rec = _lowered(colscan, np.ones(3, np.float32), out_shape=(3, 3))
  finally:
    bounds.set_check_bounds(None)
  assert rec.generated.check_bounds
  assert not rec.relower(num_warps=8).check_bounds
  assert rec.relower(rec.generated.options, same_build=True).check_bounds
