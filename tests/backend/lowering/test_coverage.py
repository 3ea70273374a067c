"""Outputs the grid does not cover: a warning at lowering that names the
user's pallas_call line and the unwritten range of each output (and nothing
when the grid covers every output, or the output is aliased to an input)."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.lowering.coverage import UncoveredOutputWarning
from testkit.helpers import pallas, random_array

S = jax.ShapeDtypeStruct


def _copy(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1


def _warnings_of(fn, *args):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = fn(*args)
  return out, [w for w in caught if issubclass(w.category, UncoveredOutputWarning)]


def test_a_short_grid_warns_with_the_line_and_the_range(rng):
  x = random_array(rng, (100,), "float32")
  call = pallas(_copy, S((100,), jnp.float32), grid=(100 // 48,),
                in_specs=[pl.BlockSpec((48,), lambda i: (i,))],
                out_specs=pl.BlockSpec((48,), lambda i: (i,)), name="short_grid")
  out, found = _warnings_of(call, x)
  [w] = found
  text = str(w.message)
  assert "test_coverage.py:" in text and w.filename.endswith("test_coverage.py"), text
  assert "short_grid" in text and "[96:100]" in text and "4 of 100 elements" in text, text
  # the covered part is right; the rest was never written
  np.testing.assert_allclose(np.asarray(out)[:96], x[:96] + 1)
  rec = kernel_registry.find("short_grid")[-1]
  [u] = rec.uncovered_outputs
  assert u.to_dict()["range"] == [[96, 100]] and u.count == 4


def test_a_grid_of_no_programs_leaves_every_element_unwritten(rng):
  """64 // 128 == 0 programs: nothing runs, and the warning says so (it said
  nothing). In check mode the output is all poison, on the CPU and the GPU."""
  from pallas_prof.backend.lowering.features import bounds
  x = random_array(rng, (64, 8), "float32")
  call = pallas(_copy, S((64, 8), jnp.float32), grid=(64 // 128,),
                in_specs=[pl.BlockSpec((128, 8), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((128, 8), lambda i: (i, 0)), name="empty_grid")
  _, found = _warnings_of(call, x)
  [w] = found
  assert "512 of 512 elements" in str(w.message) and "[0:64, 0:8]" in str(w.message), w.message
  bounds.set_check_bounds(True)
  try:
    out, _ = _warnings_of(call, x)
  finally:
    bounds.set_check_bounds(None)
  assert np.isnan(np.asarray(out)).all()


def test_the_gpu_launcher_launches_no_empty_grid():
  """CUDA refuses a launch of no program: on the GPU such a pallas_call gives
  the outputs a run of none leaves (an aliased output its input, poison in
  check mode, else zeros) without launching (backend.launch.no_programs)."""
  from pallas_prof.backend.running.launch import no_programs
  avals = [S((3,), jnp.float32), S((2,), jnp.int32), S((2,), jnp.int32)]
  x = jnp.arange(2, dtype=jnp.int32) + 5
  poisoned = no_programs(avals, ((1, 2),), poison=True)(jnp.ones(4), x)
  assert np.isnan(np.asarray(poisoned[0])).all() and (np.asarray(poisoned[1]) == -1).all()
  np.testing.assert_array_equal(np.asarray(poisoned[2]), [5, 6])
  plain = no_programs(avals, (), poison=False)(jnp.ones(4), x)
  assert all((np.asarray(o) == 0).all() for o in plain)


def test_two_dimensions_and_several_outputs(rng):
  x = random_array(rng, (10, 20), "float32")

  def kernel(x_ref, a_ref, b_ref):
    a_ref[...] = x_ref[...]
    b_ref[...] = x_ref[...] * 2

  # blocks of 4 rows: 3 row blocks, the grid visits 2; every column block
  call = pallas(kernel, (S((10, 20), jnp.float32), S((10, 20), jnp.float32)), grid=(2, 3),
                in_specs=[pl.BlockSpec((4, 8), lambda i, j: (i, j))],
                out_specs=[pl.BlockSpec((4, 8), lambda i, j: (i, j)),
                           pl.BlockSpec((4, 8), lambda i, j: (i, j // 2))], name="two_d")
  _, found = _warnings_of(call, x)
  texts = sorted(str(w.message) for w in found)
  assert len(texts) == 2, texts
  assert "output 0" in texts[0] and "[8:10, 0:20]" in texts[0] and "40 of 200" in texts[0]
  # the second output: row block 2, and column block 2 (j // 2 <= 1): an L
  # whose bounding range is the whole array
  assert "output 1" in texts[1] and "[0:10, 0:20]" in texts[1], texts[1]
  assert "72 of 200" in texts[1], texts[1]    # 40 + 4 columns x 8 covered rows


@pytest.mark.parametrize("case", ["cdiv_grid", "revisited_block", "aliased", "squeezed",
                                  "whole_array"])
def test_no_warning_when_every_output_is_covered(case, rng):
  x = random_array(rng, (37, 5), "int32")
  kwargs = {}
  if case == "cdiv_grid":
    grid, spec = (pl.cdiv(37, 8),), pl.BlockSpec((8, 5), lambda i: (i, 0))
    out_spec = spec
  elif case == "revisited_block":
    grid, spec = (3,), pl.BlockSpec((37, 5), lambda i: (0, 0))
    out_spec = spec
  elif case == "aliased":
    grid, spec = (2,), pl.BlockSpec((8, 5), lambda i: (i, 0))
    out_spec = spec
    kwargs["input_output_aliases"] = {0: 0}
  elif case == "squeezed":
    grid, spec = (37,), pl.BlockSpec((None, 5), lambda i: (i, 0))
    out_spec = spec
  else:
    grid, spec, out_spec = (), None, None
  call = pallas(_copy, S((37, 5), jnp.int32), grid=grid,
                in_specs=None if spec is None else [spec], out_specs=out_spec,
                name=f"covered_{case}", **kwargs)
  out, found = _warnings_of(call, x)
  assert not found, [str(w.message) for w in found]
  if case != "aliased":
    np.testing.assert_array_equal(np.asarray(out), x + 1)


def test_a_squeezed_output_dimension_short_of_rows(rng):
  x = random_array(rng, (7, 16), "float32")
  call = pallas(_copy, S((7, 16), jnp.float32), grid=(5,),
                in_specs=[pl.BlockSpec((None, 16), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((None, 16), lambda i: (i, 0)), name="squeezed_short")
  _, [w] = _warnings_of(call, x)
  assert "[5:7, 0:16]" in str(w.message) and "32 of 112" in str(w.message)


def test_report_json_records_the_warning(rng, tmp_path):
  """The run report's kernel entry carries the warning, and reads back."""
  import json
  from pallas_prof.cli.report import KernelEntry
  from pallas_prof.cli.run_steps.entries import kernel_entry
  x = random_array(rng, (100,), "float32")
  call = pallas(_copy, S((100,), jnp.float32), grid=(2,),
                in_specs=[pl.BlockSpec((48,), lambda i: (i,))],
                out_specs=pl.BlockSpec((48,), lambda i: (i,)), name="reported_short_grid")
  _warnings_of(call, x)
  entry = kernel_entry(kernel_registry.find("reported_short_grid")[-1], {})
  assert entry.warnings == ("output 0 (o_ref: float32[100]): 4 of 100 elements in no "
                            "block the grid writes, within [96:100]",), entry.warnings
  back = KernelEntry.from_dict(json.loads(json.dumps(entry.to_dict())))
  assert back.warnings == entry.warnings


@pytest.mark.parametrize("dtype,want", [
    ("float32", "nan"), ("bfloat16", "nan"), ("float8_e4m3fn", "nan"), ("float16", "nan"),
    ("int8", -1), ("int32", -1), ("int4", -1), ("uint8", 255), ("uint4", 15), ("bool", True)])
def test_poison_value_for_every_dtype(dtype, want):
  # what check mode fills a GPU output with before the kernel runs; int4/uint4 and the
  # ml_dtypes floats are numpy kind 'V', on which np.iinfo raised (the H200 run of
  # test_int4_windows_are_checked_in_elements failed so at 3c29677)
  import ml_dtypes
  from pallas_prof.backend.running.launch import poison_value
  dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
  v = poison_value(dt)
  if want == "nan":
    assert np.isnan(np.float32(np.array(v, dt)))
  else:
    assert np.array(v).astype(dt).astype(np.int64) == int(want)


# --- output blocks several programs read and write: a race on a GPU ---------------------

def _revisits_of(fn, *args):
  from pallas_prof.backend.lowering.coverage import RevisitedOutputWarning
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = fn(*args)
  return out, [w for w in caught if issubclass(w.category, RevisitedOutputWarning)]


def _k_grid_matmul_kernel(x_ref, w_ref, o_ref):
  @pl.when(pl.program_id(2) == 0)
  def _():
    o_ref[...] = jnp.zeros_like(o_ref)
  o_ref[...] += jnp.dot(x_ref[...], w_ref[...])      # the read that races: this line


def test_a_reduction_over_a_grid_axis_into_the_output_warns_with_the_axis_and_the_read(rng):
  """The TPU's pattern, accumulating into the output across the grid's last axis: right
  under the interpreter (programs in order), a race on a GPU. The warning names the
  output, the block, the grid axis its index map ignores and the line that reads it."""
  import inspect
  x, w = random_array(rng, (48, 40), "float32"), random_array(rng, (40, 24), "float32")
  call = pallas(_k_grid_matmul_kernel, S((48, 24), jnp.float32), grid=(3, 3, 5),
                in_specs=[pl.BlockSpec((16, 8), lambda i, j, k: (i, k)),
                          pl.BlockSpec((8, 8), lambda i, j, k: (k, j))],
                out_specs=pl.BlockSpec((16, 8), lambda i, j, k: (i, j)), name="k_grid")
  out, [found] = _revisits_of(call, x, w)
  text = str(found.message)
  read_line = inspect.getsourcelines(_k_grid_matmul_kernel)[1] + 4
  assert found.filename.endswith("test_coverage.py"), found.filename
  assert "`k_grid`" in text and "output 0 (o_ref: float32[48,24])" in text, text
  assert "picked by 5 programs along grid axis 2" in text, text
  assert f"(test_coverage.py:{read_line})" in text and "races" in text, text
  assert "Reduce over grid axis 2 inside the kernel" in text, text
  np.testing.assert_allclose(np.asarray(out), x @ w, rtol=1e-5, atol=1e-4)   # in order: right
  rec = kernel_registry.find("k_grid")[-1]
  [r] = rec.revisited_outputs
  assert (r.axes, r.programs, r.block) == ((2,), 5, (0, 0))


def test_outputs_written_alike_or_updated_atomically_by_several_programs_do_not_warn(rng):
  """A block several programs only write (the same values: no fault), and one they add
  to with an atomic (how programs share a block on a GPU), are not races; a block each
  program reads and writes alone is not either."""
  from jax.experimental.pallas import triton as plgpu
  x = random_array(rng, (32, 8), "float32")

  def written_alike(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref) + 1.0

  def atomic(x_ref, o_ref):
    plgpu.atomic_add(o_ref, (slice(None),), x_ref[...].sum(axis=0))

  def own_block(x_ref, o_ref):
    o_ref[...] = x_ref[...]
    o_ref[...] += 1.0

  cases = [(written_alike, S((8,), jnp.float32), pl.BlockSpec((8,), lambda i: (0,))),
           (atomic, S((8,), jnp.float32), pl.BlockSpec((8,), lambda i: (0,))),
           (own_block, S((32, 8), jnp.float32), pl.BlockSpec((8, 8), lambda i: (i, 0)))]
  for kernel, shape, out_spec in cases:
    call = pallas(kernel, shape, grid=(4,), in_specs=[pl.BlockSpec((8, 8), lambda i: (i, 0))],
                  out_specs=out_spec, name=f"not_raced_{kernel.__name__}")
    _, found = _revisits_of(call, x)
    assert not found, (kernel.__name__, [str(w.message) for w in found])


def test_the_run_reports_kernel_entry_carries_the_revisit(rng):
  from pallas_prof.cli.run_steps.entries import kernel_entry
  x, w = random_array(rng, (32, 16), "float32"), random_array(rng, (16, 8), "float32")
  call = pallas(_k_grid_matmul_kernel, S((32, 8), jnp.float32), grid=(2, 1, 2),
                in_specs=[pl.BlockSpec((16, 8), lambda i, j, k: (i, k)),
                          pl.BlockSpec((8, 8), lambda i, j, k: (k, j))],
                out_specs=pl.BlockSpec((16, 8), lambda i, j, k: (i, j)), name="k_grid_reported")
  _revisits_of(call, x, w)
  entry = kernel_entry(kernel_registry.find("k_grid_reported")[-1], {})
  assert entry.warnings == ("output 0 (o_ref: float32[32,8]): block (0, 0) is picked by 2 "
                            "programs along grid axis 2, and the kernel reads it",), entry.warnings
