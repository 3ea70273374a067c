"""Grids, BlockSpecs, program ids, vmap, aliasing, caching and 64-bit offsets,
checked on the CPU interpreter against jax.numpy and compiled for sm_90."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend.lowering import blockspec
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.equation_text import Aval
from pallas_prof.backend.lowering import grid as launch_grid
from tests.backend.lowering.rules.test_memory import CASES as MEMORY_CASES
from tests.backend.lowering.rules.test_memory import (check_case, compiles_for_sm90,
                                                      generated_kernel, rand)
from testkit.helpers import check_lowering_error, assert_close, pallas

S = jax.ShapeDtypeStruct
F32 = jnp.float32

CASES: dict = {}


def case(name):
  def register(builder):
    CASES[name] = builder
    return builder
  return register


# --- BlockSpecs ------------------------------------------------------------------------

@case("blocked_pow2")
def _blocked_pow2(rng):
  x = rand(rng, (16, 32))
  spec = pl.BlockSpec((8, 16), lambda i, j: (i, j))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + 1

  return pallas(kernel, S(x.shape, F32), grid=(2, 2), in_specs=[spec], out_specs=spec), \
      (x,), x * 2 + 1


@case("ragged_last_block")
def _ragged_last_block(rng):
  # 10 x 13 in 4 x 8 blocks: the last block row and column overhang the array
  x = rand(rng, (10, 13))
  y = rand(rng, (10, 13))
  spec = pl.BlockSpec((4, 8), lambda i, j: (i, j))

  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] - y_ref[...]

  fn = pallas(kernel, S(x.shape, F32), grid=(3, 2), in_specs=[spec, spec], out_specs=spec)
  return fn, (x, y), x - y


@case("non_pow2_blocks")
def _non_pow2_blocks(rng):
  # 3 x 5 blocks are padded to 4 x 8 lanes and masked
  x = rand(rng, (9, 10))
  spec = pl.BlockSpec((3, 5), lambda i, j: (i, j))

  def kernel(x_ref, o_ref, s_ref):
    o_ref[...] = x_ref[...] * 3
    s_ref[...] = jnp.sum(x_ref[...], axis=1)  # reductions must not see the padding

  fn = pallas(kernel, (S(x.shape, F32), S((9, 2), F32)), grid=(3, 2), in_specs=[spec],
              out_specs=[spec, pl.BlockSpec((3, None), lambda i, j: (i, j))])
  return fn, (x,), (x * 3, x.reshape(9, 2, 5).sum(-1))


@case("non_pow2_ragged")
def _non_pow2_ragged(rng):
  x = rand(rng, (11, 7))
  spec = pl.BlockSpec((3, 6), lambda i, j: (i, j))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  fn = pallas(kernel, S(x.shape, F32), grid=(4, 2), in_specs=[spec], out_specs=spec)
  return fn, (x,), x + 1


@case("squeezed_dims")
def _squeezed_dims(rng):
  x = rand(rng, (3, 4, 16))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * pl.program_id(1).astype(F32)

  spec = pl.BlockSpec((None, None, 16), lambda i, j: (i, j, 0))
  fn = pallas(kernel, S(x.shape, F32), grid=(3, 4), in_specs=[spec], out_specs=spec)
  return fn, (x,), x * jnp.arange(4, dtype=F32)[None, :, None]


@case("whole_array_refs")
def _whole_array_refs(rng):
  # refs without a BlockSpec see the whole array in every program
  x = rand(rng, (6, 8))
  table = rand(rng, (5, 8))
  row = pl.BlockSpec((None, 8), lambda i: (i, 0))

  def kernel(x_ref, t_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[...] + t_ref[i % 5] + t_ref[4]

  fn = pallas(kernel, S(x.shape, F32), grid=(6,), in_specs=[row, pl.no_block_spec],
              out_specs=row)
  return fn, (x, table), x + table[jnp.arange(6) % 5] + table[4]


@case("element_windows")
def _element_windows(rng):
  # pl.Element: the index map returns element offsets. The output's last
  # window (15..18) overhangs its 18 elements: that lane must not be written.
  x = rand(rng, (20,))
  init = rand(rng, (18,))
  window = pl.BlockSpec((pl.Element(4),), lambda i: (i * 5,))

  def kernel(x_ref, init_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  fn = pallas(kernel, S((18,), F32), grid=(4,), in_specs=[window, pl.no_block_spec],
              out_specs=window, input_output_aliases={1: 0})
  ref = init
  for i in range(4):
    ref = ref.at[i * 5:i * 5 + 4].set(x[i * 5:i * 5 + 4][:18 - i * 5] + 1)
  return fn, (x, init), ref


@case("index_map_several_grid_indices")
def _index_map_several_grid_indices(rng):
  # out[j, i] = x[i, j] block-wise, and a block chosen by (i + j) % 3
  x = rand(rng, (6, 4, 8))
  y = rand(rng, (3, 8))

  def kernel(x_ref, y_ref, o_ref, p_ref):
    o_ref[...] = x_ref[...]
    p_ref[...] = y_ref[...]

  fn = pallas(kernel, (S((4, 6, 8), F32), S((6, 4, 8), F32)), grid=(6, 4),
              in_specs=[pl.BlockSpec((None, None, 8), lambda i, j: (i, j, 0)),
                        pl.BlockSpec((None, 8), lambda i, j: ((i + 2 * j) % 3, 0))],
              out_specs=[pl.BlockSpec((None, None, 8), lambda i, j: (j, i, 0)),
                         pl.BlockSpec((None, None, 8), lambda i, j: (i, j, 0))])
  i, j = np.meshgrid(np.arange(6), np.arange(4), indexing="ij")
  return fn, (x, y), (x.transpose(1, 0, 2), y[(i + 2 * j) % 3])


# --- grids and program ids ------------------------------------------------------------

def _grid_case(grid):
  """Every program writes a value built from its program ids and the grid sizes."""
  rank = len(grid)

  def build(rng):
    base = rand(rng, grid + (4,))

    def kernel(b_ref, o_ref):
      code = jnp.int32(0)
      for axis in range(rank):
        code = code * pl.num_programs(axis) + pl.program_id(axis)
      o_ref[...] = b_ref[...] + code.astype(F32)

    spec = pl.BlockSpec((None,) * rank + (4,), lambda *ids: (*ids, 0))
    fn = pallas(kernel, S(base.shape, F32), grid=grid, in_specs=[spec], out_specs=spec)
    codes = np.arange(math.prod(grid), dtype=np.float32).reshape(grid)
    return fn, (base,), base + codes[..., None]
  return build


for _grid in [(), (3,), (2, 3), (2, 3, 2), (2, 2, 3, 2), (2, 3, 1, 2, 3)]:
  CASES[f"grid_rank{len(_grid)}"] = _grid_case(_grid)


@case("several_outputs_and_aliases")
def _several_outputs_and_aliases(rng):
  x = rand(rng, (8, 16))
  acc = rand(rng, (8, 16))
  counts = rand(rng, (8,), jnp.int32)
  spec = pl.BlockSpec((4, 16), lambda i: (i, 0))

  def kernel(x_ref, acc_ref, c_ref, sum_ref, acc_out, c_out, max_ref):
    sum_ref[...] = x_ref[...] + acc_ref[...]
    acc_out[...] = acc_ref[...] * 2                    # aliased to acc: updated in place
    c_out[pl.program_id(0)] = c_ref[pl.program_id(0)] + 1
    max_ref[...] = jnp.max(x_ref[...], axis=1)

  count_spec = pl.BlockSpec((8,), lambda i: (0,))
  fn = pallas(kernel, (S(x.shape, F32), S(x.shape, F32), S((8,), jnp.int32), S((8,), F32)),
              grid=(2,), in_specs=[spec, spec, count_spec],
              out_specs=[spec, spec, count_spec, pl.BlockSpec((4,), lambda i: (i,))],
              input_output_aliases={1: 1, 2: 2})
  return fn, (x, acc, counts), (x + acc, acc * 2, counts.at[:2].add(1), x.max(1))


@case("aliased_refs_share_a_buffer")
def _aliased_refs_share_a_buffer(rng):
  # As on the GPU, where XLA passes one pointer for both: the input ref sees
  # what was written through the output ref.
  x = rand(rng, (4, 8))

  def kernel(x_ref, o_ref, seen_ref):
    o_ref[...] = x_ref[...] * 2
    seen_ref[...] = x_ref[...]

  fn = pallas(kernel, (S(x.shape, F32), S(x.shape, F32)), input_output_aliases={0: 0})
  return fn, (x,), (x * 2, x * 2)


@case("vmap")
def _vmap(rng):
  x = rand(rng, (5, 12, 8))
  y = rand(rng, (8,))
  spec = pl.BlockSpec((4, 8), lambda i: (i, 0))

  def kernel(x_ref, y_ref, o_ref):
    # program_id(0) is the kernel's own grid axis, not the batch axis
    o_ref[...] = x_ref[...] * y_ref[...] + pl.program_id(0).astype(F32) \
        + jnp.float32(pl.num_programs(0)) * 10

  call = pallas(kernel, S((12, 8), F32), grid=(3,),
                in_specs=[spec, pl.BlockSpec((8,), lambda i: (0,))], out_specs=spec)
  fn = jax.vmap(call, in_axes=(0, None))
  ref = x * y + jnp.repeat(jnp.arange(3, dtype=F32), 4)[None, :, None] + 30
  return fn, (x, y), ref


@case("nested_vmap")
def _nested_vmap(rng):
  x = rand(rng, (3, 6, 4, 8))      # batch 3, then a batch of 4 at axis 2
  w = rand(rng, (6, 8))

  def kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...] + pl.program_id(0).astype(F32)

  spec = pl.BlockSpec((3, 8), lambda i: (i, 0))
  call = pallas(kernel, S((6, 8), F32), grid=(2,), in_specs=[spec, spec], out_specs=spec)
  inner = jax.vmap(call, in_axes=(1, None), out_axes=1)      # over the axis of size 4
  fn = jax.vmap(inner, in_axes=(0, None))                    # over the axis of size 3
  ref = x * w[None, :, None, :] + jnp.repeat(jnp.arange(2, dtype=F32), 3)[None, :, None, None]
  return fn, (x, w), ref


@case("vmap_of_grid_rank3")
def _vmap_of_grid_rank3(rng):
  # a rank-3 grid plus two batch dims: five grid dims, folded into three launch axes
  x = rand(rng, (2, 3, 2, 2, 2, 4))

  def kernel(x_ref, o_ref):
    code = (pl.program_id(0) * 4 + pl.program_id(1) * 2 + pl.program_id(2)).astype(F32)
    o_ref[...] = x_ref[...] + code

  spec = pl.BlockSpec((None, None, None, 4), lambda i, j, k: (i, j, k, 0))
  call = pallas(kernel, S((2, 2, 2, 4), F32), grid=(2, 2, 2), in_specs=[spec], out_specs=spec)
  fn = jax.vmap(jax.vmap(call))
  codes = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
  return fn, (x,), x + codes[None, None, ..., None]


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_matches_jax(name, rng):
  check_case(CASES[name], rng)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_for_sm90(name, rng):
  fn, args, _ = CASES[name](rng)
  compiles_for_sm90(fn, *args)


# --- folding grids into CUDA's launch axes ---------------------------------------------

def _jax_launch_grid(grid, vmapped_dims=()):
  """JAX's own Triton backend's fold (_process_grid_to_3d_grid), for comparison."""
  order = [i for i in range(len(grid)) if i not in vmapped_dims] + list(reversed(vmapped_dims))
  sizes = [grid[i] for i in order]
  num_collapse = len(sizes[:-2])
  if num_collapse + 1 < len(sizes) and sizes[num_collapse + 1] > 65535:
    num_collapse += 2
  elif num_collapse < len(sizes) and sizes[num_collapse] > 65535:
    num_collapse += 1
  if num_collapse == 0:
    return tuple(sizes)
  return (math.prod(sizes[:num_collapse]), *sizes[num_collapse:])


@pytest.mark.parametrize("grid, vmapped", [
    ((), ()), ((7,), ()), ((3, 4), ()), ((2, 3, 4), ()), ((2, 3, 4, 5), ()),
    ((2, 3, 4, 5, 6), ()), ((2, 3, 4), (0,)), ((5, 2, 3, 4), (0, 1)),
    ((3, 70000), ()), ((70000, 3), ()), ((2, 70000, 3), ()), ((2, 3, 70000), ()),
    ((4, 5, 70000, 2), ()), ((2**20,), ()),
])
def test_launch_grid_matches_jax(grid, vmapped):
  launch, axes = launch_grid.launch_grid_for(grid, vmapped)
  expected = _jax_launch_grid(grid, vmapped)
  assert launch == tuple(expected) + (1,) * (3 - len(expected))
  assert sorted(d for ax in axes for d in ax) == list(range(len(grid)))
  assert launch[0] <= 2**31 - 1 and launch[1] <= 65535 and launch[2] <= 65535


def test_grid_beyond_cuda_limits_is_a_lowering_error(rng):
  def kernel(o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

  spec = pl.BlockSpec((None, None, 1), lambda i, j: (0, 0, 0))
  fn = pallas(kernel, S((1, 1, 1), F32), grid=(70000, 70000), out_specs=spec)
  with pytest.raises(pallas_prof.LoweringError) as info:
    generated_kernel(fn)
  assert "launch limits" in str(info.value) and "hint:" in str(info.value)


def test_large_axis_collapse_runs_and_compiles(rng, monkeypatch):
  # The collapse of a > 65535 axis into launch axis 0 is the same code at any
  # size: shrink the limit so the interpreter can run it, then compile the
  # real thing (2 x 70000 programs) for sm_90.
  fn, args, expected = _grid_case((2, 3, 5))(rng)
  monkeypatch.setattr(launch_grid, "MAX_GRID_YZ", 4)
  gk = generated_kernel(fn, *args)
  assert gk.launch_grid == (30, 1, 1)
  assert_close(fn(*args), expected)
  monkeypatch.undo()

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + pl.program_id(1).astype(F32)

  spec = pl.BlockSpec((None, 8), lambda i, j: (i * 70000 + j, 0))
  big = pallas(kernel, S((140000, 8), F32), grid=(2, 70000), in_specs=[spec], out_specs=spec)
  ck = compiles_for_sm90(big, S((140000, 8), F32))
  assert ck.generated.launch_grid == (140000, 1, 1)


# --- jit, repeated calls and the registry -------------------------------------------------

def test_jit_repeated_calls_reuse_the_kernel(rng):
  def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  call = jax.jit(pallas(add_one, S((8, 8), F32), name="add_one_cached"))
  for _ in range(3):
    x = rand(rng, (8, 8))
    assert_close(call(x), x + 1)
  [record] = kernel_registry.find("add_one_cached")
  # launches counts the interpreter's; on a GPU XLA launches the kernel
  assert record.lowerings == 1 and record.launches == (3 if jax.default_backend() == "cpu" else 0)
  assert record.in_avals == (Aval((8, 8), "float32"),)   # typed, as JAX gave them

  call16 = jax.jit(pallas(add_one, S((16, 8), F32), name="add_one_cached"))
  y = rand(rng, (16, 8))
  assert_close(call16(y), y + 1)
  records = kernel_registry.find("add_one_cached")
  assert sorted(str(r.in_avals[0]) for r in records) == ["float32[16,8]", "float32[8,8]"]


# --- 64-bit offsets ---------------------------------------------------------------------

def _blocked_copy(shape, block):
  spec = pl.BlockSpec(block, lambda i, j: (i, j))
  grid = tuple(pl.cdiv(s, b) for s, b in zip(shape, block))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

  return pallas(kernel, S(shape, F32), grid=grid, in_specs=[spec], out_specs=spec)


def test_int64_offsets_for_arrays_of_2_31_elements():
  shape = (2**16, 2**15)                           # 2**31 elements: 8 GiB, never allocated
  fn = _blocked_copy(shape, (64, 128))
  gk = generated_kernel(fn, S(shape, F32))
  source = gk.source
  assert "tl.arange(0, 64).to(tl.int64)" in source and "tl.arange(0, 128).to(tl.int64)" in source
  # the block start is widened before it is scaled, so pid * 64 * 32768 cannot wrap
  starts = [line for line in source.splitlines() if "_start0 =" in line]
  assert starts and all(".to(tl.int64)" in line or "_idx0" in line for line in starts)
  assert ".to(tl.int64)" in next(line for line in source.splitlines() if "_idx0 =" in line)
  ck = compiles_for_sm90(fn, S(shape, F32))
  assert "mul.wide.s32" in ck.ptx or ".s64" in ck.ptx


def test_int32_offsets_for_normal_sizes(rng):
  shape = (2**15, 2**15)                           # 2**30 elements: offsets fit in int32
  gk = generated_kernel(_blocked_copy(shape, (64, 128)), S(shape, F32))
  assert "int64" not in gk.source
  small = rand(rng, (24, 40))
  fn = _blocked_copy(small.shape, (8, 16))
  assert "int64" not in generated_kernel(fn, small).source
  assert_close(fn(small), small * 2)


def test_int64_offsets_when_padded_lanes_pass_2_31():
  # Fewer than 2**31 elements, but the last 1000-block's padded lanes (1024)
  # reach offset 2**31 + 376: in int32 they would wrap negative and pass the
  # `< n` mask.
  n = 2**31 - 10
  spec = pl.BlockSpec((1000,), lambda i: (i,))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

  fn = pallas(kernel, S((n,), jnp.int8), grid=(pl.cdiv(n, 1000),), in_specs=[spec],
              out_specs=spec)
  source = generated_kernel(fn, S((n,), jnp.int8)).source
  assert "tl.arange(0, 1024).to(tl.int64)" in source and "< 2147483638" in source


def test_int64_offsets_with_one_dimension(rng):
  n = 2**31 + 5
  spec = pl.BlockSpec((1024,), lambda i: (i,))

  def kernel(x_ref, o_ref):
    o_ref[pl.ds(0, 512)] = x_ref[pl.ds(512, 512)]

  fn = pallas(kernel, S((n,), jnp.int8), grid=(pl.cdiv(n, 1024),), in_specs=[spec],
              out_specs=spec)
  gk = generated_kernel(fn, S((n,), jnp.int8))
  assert gk.launch_grid == (pl.cdiv(n, 1024), 1, 1)
  assert "tl.arange(0, 512).to(tl.int64)" in gk.source
  compiles_for_sm90(fn, S((n,), jnp.int8))


# Every case of both files again, with int64 index arithmetic forced on
# (the threshold lowered to 1), so the 64-bit path runs under the interpreter.
_ALL_CASES = {**{f"memory/{k}": v for k, v in MEMORY_CASES.items()},
              **{f"grid/{k}": v for k, v in CASES.items()}}


@pytest.mark.parametrize("name", sorted(_ALL_CASES))
def test_int64_index_arithmetic_matches_jax(name, rng, monkeypatch):
  monkeypatch.setattr(blockspec, "INT32_OFFSETS_BELOW", 1)
  fn, args, _ = _ALL_CASES[name](rng)
  source = generated_kernel(fn, *args).source
  assert "tl.int64" in source
  check_case(_ALL_CASES[name], rng)


@pytest.mark.parametrize("name", ["memory/gather_advanced_order", "memory/scatter_out_of_range_drops",
                                  "memory/atomic_add_float32_masked", "grid/ragged_last_block",
                                  "grid/element_windows", "grid/grid_rank5"])
def test_int64_index_arithmetic_compiles_for_sm90(name, rng, monkeypatch):
  monkeypatch.setattr(blockspec, "INT32_OFFSETS_BELOW", 1)
  fn, args, _ = _ALL_CASES[name](rng)
  compiles_for_sm90(fn, *args)


# --- what the backend refuses, and where it says so ---------------------------------------

def _assert_call_error(fn, args, *needles):
  with pytest.raises(pallas_prof.LoweringError) as info:
    jax.block_until_ready(fn(*args))
  return check_lowering_error(info.value, __file__, *needles)


def test_scratch_shapes_are_a_lowering_error(rng):
  from jax.experimental.pallas import tpu as pltpu
  x = rand(rng, (8,))

  def kernel(x_ref, o_ref, scratch_ref):
    o_ref[...] = x_ref[...]

  fn = pallas(kernel, S((8,), F32), scratch_shapes=[pltpu.VMEM((8,), F32)])
  err = _assert_call_error(fn, (x,), "scratch_shapes")
  assert err.eqn.primitive == "pallas_call" and err.eqn.file == __file__


def test_scalar_prefetch_is_a_lowering_error(rng):
  from jax.experimental.pallas import tpu as pltpu
  x = rand(rng, (8,))

  def kernel(n_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]

  spec = pl.BlockSpec((4,), lambda i, n: (i,))
  grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(2,), in_specs=[spec],
                                           out_specs=spec)
  fn = pl.pallas_call(kernel, out_shape=S((8,), F32), grid_spec=grid_spec,
                      compiler_params=pallas_prof.CompilerParams())
  _assert_call_error(fn, (jnp.int32(1), x), "scalar prefetch")


def test_dynamic_grid_bounds_are_a_lowering_error(rng):
  x = rand(rng, (8,))

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

  @jax.jit
  def run(x, n):
    return pallas(kernel, S((8,), F32), grid=(n,))(x)

  err = _assert_call_error(run, (x, 2), "dynamic grid bounds", "static")
  assert err.eqn.function.endswith("run")   # the jitted caller, not the kernel


def test_bounded_slice_block_dims_are_a_lowering_error(rng):
  x = rand(rng, (16,))

  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

  spec = pl.BlockSpec((pl.BoundedSlice(8),), lambda i: (pl.ds(i * 4, 8),))
  fn = pallas(kernel, S((16,), F32), grid=(2,), in_specs=[spec],
              out_specs=pl.BlockSpec((8,), lambda i: (i,)))
  _assert_call_error(fn, (x,), "BoundedSlice")
