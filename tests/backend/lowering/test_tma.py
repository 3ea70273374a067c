"""TMA block loads and stores (CompilerParams(tma=True), backend/lowering/features/tma.py): Triton's
interpreter runs tensor-descriptor loads and stores, so each kernel here runs twice,
plain and with TMA, on fresh random inputs, and the two must agree bit for bit (and
with numpy). Accesses TMA cannot serve stay plain, with the reason in
GeneratedKernel.tma_notes, the source's header and a TmaFallbackWarning at the
user's line."""
from __future__ import annotations

import functools
import json
import os
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from pallas_prof import triton as plgpu

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.cli.run_directory import load_kernel
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.backend.pallas_call_rule import TmaFallbackWarning

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
import matmul as example  # noqa: E402

_counter = [0]


def _both(kernel, args, *, grid, in_specs, out_specs, out_shape, **params):
  """(plain output, tma output, plain GeneratedKernel, tma GeneratedKernel, warnings)."""
  _counter[0] += 1
  outs, gks = [], []
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for tma in (False, True):
      name = f"k{_counter[0]}_{'tma' if tma else 'plain'}"
      call = pl.pallas_call(kernel, grid=grid, in_specs=in_specs, out_specs=out_specs,
                            out_shape=out_shape, name=name,
                            compiler_params=pallas_prof.CompilerParams(tma=tma, **params))
      outs.append(np.asarray(jax.jit(call)(*args)))
      gks.append(kernel_registry.find(name)[-1].generated)
  found = [w for w in caught if issubclass(w.category, TmaFallbackWarning)]
  return outs[0], outs[1], gks[0], gks[1], found


def _matmul(a, b, bm, bn, bk, **params):
  m, k = a.shape
  n = b.shape[1]
  return _both(functools.partial(example.matmul_kernel, block_k=bk), (a, b),
               grid=(pl.cdiv(m, bm), pl.cdiv(n, bn)),
               in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                         pl.BlockSpec((k, bn), lambda i, j: (0, j))],
               out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
               out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), **params)


@pytest.mark.parametrize("m,k,n,dtype,blocks", [
    (128, 128, 128, jnp.bfloat16, (32, 64, 32)),
    (100, 96, 72, jnp.float32, (32, 64, 32)),       # blocks overhang m and n
    (70, 192, 200, jnp.bfloat16, (64, 128, 64)),    # no power of two anywhere but the blocks
    (48, 64, 40, jnp.float16, (16, 16, 16)),
])
def test_the_matmul_example_loads_through_tma_and_equals_the_plain_kernel(rng, m, k, n, dtype,
                                                                          blocks):
  a = jnp.asarray(rng.standard_normal((m, k)), dtype)
  b = jnp.asarray(rng.standard_normal((k, n)), dtype)
  plain, tma, gk_plain, gk, found = _matmul(a, b, *blocks)
  np.testing.assert_array_equal(tma, plain)
  ref = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(plain, np.float32), ref, rtol=2e-2, atol=2e-1)
  assert gk.tma and not gk.tma_notes and not found
  assert not gk_plain.tma and "make_tensor_descriptor" not in gk_plain.source
  # one descriptor per operand, made in the prologue (before the K loop); the inputs'
  # loaded in it, the output's stored once after it (blocks overhanging the array clipped)
  lines = gk.source.splitlines()
  made = [i for i, ln in enumerate(lines) if "tl.make_tensor_descriptor(" in ln]
  loop = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("for "))
  assert len(made) == 3 and max(made) < loop
  assert "a = a_ref_desc.load([a_ref_start0, mul])" in gk.source
  assert "b_ref_desc.load([mul, b_ref_start1])" in gk.source
  assert "o_ref_desc.store([o_ref_start0, o_ref_start1], " in gk.source
  assert "tl.store(" not in gk.source and "tl.load(" not in gk.source
  assert "# TMA loads (tensor descriptors): blocks of a_ref" in gk.source    # the header
  assert "# TMA stores (tensor descriptors): blocks of o_ref" in gk.source


def test_a_tma_kernel_compiles_for_sm90_with_global_scratch_and_bulk_tensor_copies(rng):
  a = jnp.asarray(rng.standard_normal((128, 128)), jnp.bfloat16)
  *_, gk, _ = _matmul(a, a, 64, 64, 32)
  ck = compile_kernel(gk, ("cuda", 90), need_cubin=True)
  # the descriptors live in Triton's per-program global scratch (jaxlib and the
  # profiler's replay allocate it); the copies are the bulk tensor copy engine's
  assert int(ck.metadata.get("global_scratch_size") or 0) >= 3 * 128
  assert "cp.async.bulk.tensor" in ck.ptx and ck.cubin


def test_squeezed_and_offset_blocks_load_through_tma(rng):
  """A batch dimension squeezed by the BlockSpec (an integer index: a block of 1,
  reshaped away) and a static slice that starts inside the block."""
  x = jnp.asarray(rng.standard_normal((3, 40, 64)), jnp.float32)

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[:, pl.ds(16, 32)] * 2.0 + x_ref[:, 0:32]
  spec_in = pl.BlockSpec((None, 8, 64), lambda b, i: (b, i, 0))
  spec_out = pl.BlockSpec((None, 8, 32), lambda b, i: (b, i, 0))
  plain, tma, _, gk, found = _both(kernel, (x,), grid=(3, 5), in_specs=[spec_in],
                                   out_specs=spec_out,
                                   out_shape=jax.ShapeDtypeStruct((3, 40, 32), jnp.float32))
  np.testing.assert_array_equal(tma, plain)
  np.testing.assert_allclose(plain, np.asarray(x)[:, :, 16:48] * 2 + np.asarray(x)[:, :, :32],
                             rtol=1e-6)
  assert gk.tma and not found and "tl.reshape(x_ref_desc.load(" in gk.source


def _fallback(kernel, args, reason: str, **call):
  plain, tma, gk_plain, gk, found = _both(kernel, args, **call)
  np.testing.assert_array_equal(tma, plain)
  assert any(reason in note.reason for note in gk.tma_notes), gk.tma_notes
  assert any(reason in str(w.message) for w in found), [str(w.message) for w in found]
  # each warning at its note's line (the records' fields, not their text re-read)
  assert {(w.filename, w.lineno) for w in found} == {(n.file, n.line) for n in gk.tma_notes}
  assert all(os.path.exists(n.file) and n.line for n in gk.tma_notes), gk.tma_notes
  assert f"TMA not used for {gk.tma_notes[0].portable()}" in gk.source
  assert os.path.basename(gk.tma_notes[0].file) + ":" in gk.source
  return plain, gk


def _elementwise(shape, block, dtype=jnp.float32):
  spec = pl.BlockSpec(block, lambda i, j: (i, j))
  grid = (pl.cdiv(shape[0], block[0]), pl.cdiv(shape[1], block[1]))
  return dict(grid=grid, in_specs=[spec], out_specs=spec,
              out_shape=jax.ShapeDtypeStruct(shape, dtype))


def _double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2


@pytest.mark.parametrize("shape,block,reason", [
    ((16, 66), (8, 32), "stride along dimension 0 is 264 bytes"),      # rows not 16-byte multiples
    ((24, 64), (24, 32), "24 elements, not a power of two"),
    ((16, 64), (8, 2), "last dimension is 8 bytes"),
    ((16, 1024), (8, 512), "512 elements (TMA: at most 256)"),
])
def test_blocks_tma_cannot_move_fall_back_to_plain_loads(rng, shape, block, reason):
  x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
  plain, gk = _fallback(_double, (x,), reason, **_elementwise(shape, block))
  np.testing.assert_array_equal(plain, np.asarray(x) * 2)
  assert not gk.tma


def test_a_one_dimensional_array_and_a_strided_slice_fall_back(rng):
  x = jnp.asarray(rng.standard_normal((256,)), jnp.float32)
  spec = pl.BlockSpec((64,), lambda i: (i,))
  _fallback(_double, (x,), "a 1-D array", grid=(4,), in_specs=[spec], out_specs=spec,
            out_shape=jax.ShapeDtypeStruct((256,), jnp.float32))

  y = jnp.asarray(rng.standard_normal((16, 128)), jnp.float32)

  def strided(x_ref, o_ref):
    o_ref[...] = x_ref[:, pl.ds(0, 32, stride=2)]
  plain, _ = _fallback(strided, (y,), "a strided slice (stride 2)", grid=(2,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 32), lambda i: (i, 0)),
                       out_shape=jax.ShapeDtypeStruct((16, 32), jnp.float32))
  np.testing.assert_array_equal(plain, np.asarray(y)[:, 0:64:2])


def test_a_start_not_known_to_be_aligned_falls_back_unless_pl_multiple_of_says_so(rng):
  x = jnp.asarray(rng.standard_normal((16, 256)), jnp.float32)
  spec_in = pl.BlockSpec((8, 256), lambda i: (i, 0))
  spec_out = pl.BlockSpec((8, 32), lambda i: (i, 0))
  call = dict(grid=(2,), in_specs=[spec_in], out_specs=spec_out,
              out_shape=jax.ShapeDtypeStruct((16, 32), jnp.float32))

  def unaligned(x_ref, o_ref):
    start = pl.program_id(0) * 3 + 1           # 1 and 4: not multiples of 4 floats
    o_ref[...] = x_ref[:, pl.ds(start, 32)]
  plain, _ = _fallback(unaligned, (x,), "not known to be a multiple of 4 elements", **call)
  xs = np.asarray(x)
  np.testing.assert_array_equal(plain, np.concatenate([xs[:8, 1:33], xs[8:, 4:36]]))

  def promised(x_ref, o_ref):
    start = pl.multiple_of(pl.program_id(0) * 36 + 4 * (pl.program_id(0) + 1), 4)
    o_ref[...] = x_ref[:, pl.ds(start, 32)]
  plain, tma, _, gk, found = _both(promised, (x,), **call)
  np.testing.assert_array_equal(tma, plain)
  np.testing.assert_array_equal(plain, np.concatenate([xs[:8, 4:36], xs[8:, 44:76]]))
  assert gk.tma and not found


def test_refs_the_kernel_writes_and_masked_loads_stay_plain(rng):
  x = jnp.asarray(rng.standard_normal((16, 64)), jnp.float32)

  def in_place(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1
    o_ref[...] = o_ref[...] * 2         # reads what this program wrote
  plain, _ = _fallback(in_place, (x,), "the kernel writes this ref", **_elementwise((16, 64),
                                                                                  (8, 32)))
  np.testing.assert_allclose(plain, (np.asarray(x) + 1) * 2, rtol=1e-6)

  def masked(x_ref, o_ref):
    cols = jnp.arange(32)[None, :]
    o_ref[...] = plgpu.load(x_ref, mask=cols < 20, other=0.0)
  plain, _ = _fallback(masked, (x,), "a masked pl.load", **_elementwise((16, 64), (8, 32)))
  xs = np.asarray(x)
  np.testing.assert_array_equal(plain[:, :20], xs[:, :20])
  np.testing.assert_array_equal(plain[:, 32:52], xs[:, 32:52])
  assert not plain[:, 20:32].any() and not plain[:, 52:].any()

  def evicting(x_ref, o_ref):
    o_ref[...] = plgpu.load(x_ref, cache_modifier=".cg") + 1
  _fallback(evicting, (x,), "load options ['cache_modifier']", **_elementwise((16, 64), (8, 32)))


def test_an_input_aliased_to_an_output_stays_plain(rng):
  x = jnp.asarray(rng.standard_normal((16, 64)), jnp.float32)
  spec = pl.BlockSpec((8, 32), lambda i, j: (i, j))
  outs, gks = [], []
  for tma in (False, True):
    name = f"aliased_{tma}"
    call = pl.pallas_call(_double, grid=(2, 2), in_specs=[spec], out_specs=spec, name=name,
                          out_shape=jax.ShapeDtypeStruct((16, 64), jnp.float32),
                          input_output_aliases={0: 0},
                          compiler_params=pallas_prof.CompilerParams(tma=tma))
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", TmaFallbackWarning)
      outs.append(np.asarray(jax.jit(call)(x)))
    gks.append(kernel_registry.find(name)[-1].generated)
  np.testing.assert_array_equal(outs[1], outs[0])
  np.testing.assert_array_equal(outs[0], np.asarray(x) * 2)
  assert not gks[1].tma and any("writes this ref" in n.reason for n in gks[1].tma_notes)


def test_below_sm90_and_in_the_bounds_checked_mode_loads_stay_plain(rng, monkeypatch):
  a = jnp.asarray(rng.standard_normal((64, 64)), jnp.bfloat16)
  plain, tma, _, gk, found = _matmul(a, a, 32, 32, 32, compute_capability=80)
  np.testing.assert_array_equal(tma, plain)
  assert not gk.tma and any("sm_90 or newer (compiling for sm_80)" in n.reason
                             for n in gk.tma_notes)

  pallas_prof.install(check_bounds=True)
  try:
    plain, tma, _, gk, found = _matmul(a, a, 32, 32, 32)
  finally:
    pallas_prof.install(check_bounds=False)
    pallas_prof.uninstall()
  np.testing.assert_array_equal(tma, plain)
  assert not gk.tma and any("bounds-checked mode" in n.reason for n in gk.tma_notes)


def test_tma_and_its_notes_survive_saving_the_kernel(rng, tmp_path):
  x = jnp.asarray(rng.standard_normal((24, 64)), jnp.float32)
  *_, gk, _ = _both(_double, (x,), **_elementwise((24, 64), (24, 32)))
  gk.save(str(tmp_path / "k"))
  back = load_kernel(str(tmp_path / "k"))[0]
  assert back.tma == gk.tma is False and back.tma_notes == gk.tma_notes and gk.tma_notes
  # a kernel.json of an earlier pallas-prof kept each note as its text: it reads back as such
  meta_path = tmp_path / "k" / "kernel.json"
  meta = json.loads(meta_path.read_text())
  meta["tma_notes"] = [str(n) for n in gk.tma_notes]
  meta_path.write_text(json.dumps(meta))
  assert [str(n) for n in load_kernel(str(tmp_path / "k"))[0].tma_notes] == \
      [str(n) for n in gk.tma_notes]
  a = jnp.asarray(rng.standard_normal((64, 64)), jnp.bfloat16)
  *_, gk, _ = _matmul(a, a, 32, 32, 32)
  gk.save(str(tmp_path / "m"))
  assert load_kernel(str(tmp_path / "m"))[0].tma is True


def test_the_planning_pass_leaves_no_trace(rng):
  """TMA lowers a kernel twice (tma.py): the first pass's equations are neither
  recorded nor reported; the kernel's records match the plain kernel's."""
  a = jnp.asarray(rng.standard_normal((64, 64)), jnp.float32)
  _, _, gk_plain, gk, _ = _matmul(a, a, 32, 32, 32)
  assert [e.primitive for e in gk.eqns] == [e.primitive for e in gk_plain.eqns]
  assert [e.index for e in gk.eqns] == list(range(len(gk.eqns)))
  reads = [e for e in gk.eqns if e.primitive == "get"]
  assert reads and [e.bytes_read for e in reads] == \
      [e.bytes_read for e in gk_plain.eqns if e.primitive == "get"] and reads[0].bytes_read


def test_the_planning_pass_opens_no_spans(rng):
  from pallas_prof.backend import hooks

  class Counting(hooks.NullObserver):
    def __init__(self):
      self.kernels, self.equations = [], []

    def kernel(self, name, attributes):
      self.kernels.append(name)
      return hooks.NULL_SPAN

    def equation(self, eqn):
      self.equations.append(eqn.index)
      return hooks.NULL_SPAN

  a = jnp.asarray(rng.standard_normal((64, 64)), jnp.float32)
  watcher = Counting()
  hooks.add_observer(watcher)
  try:
    _, _, gk_plain, gk, _ = _matmul(a, a, 32, 32, 32)
  finally:
    hooks.remove_observer(watcher)
  assert gk.tma and len(watcher.kernels) == 2        # one kernel span each, plain and tma
  half = len(watcher.equations) // 2
  assert watcher.equations[:half] == watcher.equations[half:] == list(range(len(gk.eqns)))


def test_the_one_store_of_an_output_goes_through_tma_and_overhangs_are_clipped(rng):
  # 40 x 72 with 16 x 32 blocks: the last row and column of blocks overhang the array
  x = jnp.asarray(rng.standard_normal((40, 72)), jnp.float32)
  plain, tma, _, gk, found = _both(_double, (x,), **_elementwise((40, 72), (16, 32)))
  np.testing.assert_array_equal(tma, plain)
  np.testing.assert_array_equal(plain, np.asarray(x) * 2)
  assert gk.tma and not found and "o_ref_desc.store([o_ref_start0, o_ref_start1], " in gk.source


def test_a_squeezed_output_dimension_stores_through_tma(rng):
  x = jnp.asarray(rng.standard_normal((3, 16, 64)), jnp.float32)
  spec = pl.BlockSpec((None, 8, 64), lambda b, i: (b, i, 0))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0
  plain, tma, _, gk, found = _both(kernel, (x,), grid=(3, 2), in_specs=[spec], out_specs=spec,
                                   out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
  np.testing.assert_array_equal(tma, plain)
  np.testing.assert_array_equal(plain, np.asarray(x) + 1)
  assert gk.tma and not found and ".store([" in gk.source and "tl.reshape(" in gk.source


def test_stores_that_are_not_the_one_plain_write_of_an_unread_output_stay_plain(rng):
  x = jnp.asarray(rng.standard_normal((16, 64)), jnp.float32)
  xs = np.asarray(x)
  call = _elementwise((16, 64), (8, 32))

  def twice(x_ref, o_ref):
    o_ref[...] = x_ref[...]
    o_ref[:, 0:16] = x_ref[:, 0:16] * 3     # a second write of part of the block
  plain, _ = _fallback(twice, (x,), "writes this ref more than once", **call)
  want = xs.copy()
  want[:, 0:16] *= 3
  want[:, 32:48] *= 3
  np.testing.assert_array_equal(plain, want)

  def in_loop(x_ref, o_ref):
    def body(i, carry):
      o_ref[pl.ds(i * 4, 4), :] = x_ref[pl.ds(i * 4, 4), :] - 1.0
      return carry
    jax.lax.fori_loop(0, 2, body, 0)
  plain, _ = _fallback(in_loop, (x,), "a store inside a loop or branch", **call)
  np.testing.assert_array_equal(plain, xs - 1)

  def masked(x_ref, o_ref):
    plgpu.store(o_ref, x_ref[...], mask=jnp.arange(32)[None, :] < 30)
  _fallback(masked, (x,), "a masked store", **call)


def test_an_output_that_is_also_read_keeps_its_plain_store(rng):
  x = jnp.asarray(rng.standard_normal((16, 64)), jnp.float32)

  def swap_read(x_ref, o_ref):
    old = o_ref[...]
    o_ref[...] = x_ref[...] + old * 0      # reads the output (zeros here) before its write
  plain, _ = _fallback(swap_read, (x,), "reads it", **_elementwise((16, 64), (8, 32)))
  np.testing.assert_array_equal(plain, np.asarray(x))


def test_the_run_report_carries_why_tma_was_not_used(rng):
  import json
  from pallas_prof.cli.report import KernelEntry
  from pallas_prof.cli.run_steps.entries import kernel_entry
  x = jnp.asarray(rng.standard_normal((24, 64)), jnp.float32)
  _both(_double, (x,), **_elementwise((24, 64), (24, 32)))
  entry = kernel_entry(kernel_registry.find(f"k{_counter[0]}_tma")[-1], {})
  want = "24 elements, not a power of two"
  assert [w for w in entry.warnings if w.startswith("TMA not used for x_ref at ")
          and want in w], entry.warnings
  assert [w for w in entry.warnings if w.startswith("TMA not used for the store to o_ref")]
  assert KernelEntry.from_dict(json.loads(json.dumps(entry.to_dict()))).warnings == \
      entry.warnings


def test_an_ejected_tma_kernel_runs_standalone_under_the_interpreter(rng, tmp_path):
  """`pallas-prof show --eject` of a TMA kernel: its launcher also gives Triton an
  allocator for the descriptors' global scratch on a GPU (not run here)."""
  import subprocess
  from pallas_prof.cli.eject import eject
  a = jnp.asarray(rng.standard_normal((64, 96)), jnp.float32)
  b = jnp.asarray(rng.standard_normal((96, 80)), jnp.float32)
  plain, _, _, gk, _ = _matmul(a, b, 32, 64, 32)
  assert gk.tma
  np.savez(tmp_path / "in.npz", a_ref=np.asarray(a), b_ref=np.asarray(b))
  path = eject(gk, str(tmp_path / "k.py"))
  assert "triton.set_allocator(allocate)" in open(path).read()
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  done = subprocess.run([sys.executable, path, "--interpret", "--inputs", str(tmp_path / "in.npz"),
                         "--output", str(tmp_path / "out.npz")], capture_output=True, text=True,
                        env=env, timeout=300)
  assert done.returncode == 0, done.stdout + done.stderr
  got = np.load(tmp_path / "out.npz")["o_ref"]
  if jax.default_backend() == "cpu":         # both under Triton's interpreter
    np.testing.assert_array_equal(got, plain)
  else:     # `plain` ran on the GPU: its dot sums in the tensor cores' order, not numpy's
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)   # seen: ~1e-6 relative
