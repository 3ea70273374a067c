"""Shape ops on values (broadcast, reshape, squeeze, transpose, slices, concatenate,
iota), run by Triton's interpreter against jax.numpy/lax.

Most blocks here are not powers of two, so every op has to keep padded lanes
out of the logical result.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from testkit.helpers import assert_close, pallas, random_array, run_on_values

DTYPES = ("float32", "bfloat16", "int8", "bool")


def run(fn, *arrays, name="shape"):
  return run_on_values(fn, *arrays, name=name)


def check(fn, *arrays, name="shape"):
  out = run(fn, *arrays, name=name)
  ref = jax.jit(fn)(*arrays)
  for (path, got), want in zip(jax.tree_util.tree_leaves_with_path(out), jax.tree.leaves(ref)):
    key = jax.tree_util.keystr(path)
    assert got.dtype == want.dtype, key
    assert got.shape == want.shape, key
    assert_close(got, want, err_msg=key)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_in_dim(rng, dtype):
  x = random_array(rng, (5, 7), dtype)
  v = random_array(rng, (6,), dtype)
  s = random_array(rng, (1,), dtype)
  check(lambda x, v, s: {
      "scalar_value": jnp.broadcast_to(s[0], (3, 5)),
      "scalar_literal": jnp.broadcast_to(jnp.asarray(1, x.dtype), (3, 5)),
      "row": jnp.broadcast_to(v[None, :], (3, 6)),
      "column": jnp.broadcast_to(v[:, None], (6, 3)),
      "middle": lax.broadcast_in_dim(x, (5, 3, 7), (0, 2)),
      "leading": jnp.broadcast_to(x, (2, 5, 7)),
      "unit_dim": jnp.broadcast_to(x[:, :1], (5, 7)),
  }, x, v, s)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_squeeze_expand(rng, dtype):
  pow2 = random_array(rng, (4, 8), dtype)
  odd = random_array(rng, (5, 7), dtype)
  rows = random_array(rng, (5, 8), dtype)
  tall = random_array(rng, (6, 4), dtype)
  check(lambda pow2, odd, rows, tall: {
      "pow2_2x16": pow2.reshape(2, 16),
      "pow2_flat": pow2.reshape(32),
      "pow2_3d": pow2.reshape(2, 4, 4),
      "pow2_back": pow2.reshape(32).reshape(8, 4),
      "unit_insert": odd.reshape(5, 1, 7),
      "unit_insert_outer": odd.reshape(1, 5, 7, 1),
      "unit_remove": odd.reshape(1, 5, 7, 1).reshape(5, 7),
      "squeeze": jnp.squeeze(odd[None, :, None, :], (0, 2)),
      "expand_dims": jnp.expand_dims(odd, 1),
      # only the leading dimension of each reshaped group is not a power of two
      "rows_flat": rows.reshape(40),
      "rows_regroup": rows.reshape(10, 4),
      "rows_split": rows.reshape(5, 2, 4),
      "tall_regroup": tall.reshape(3, 8),
      "scalar": odd[2:3, 4:5].reshape(()).reshape(1),
  }, pow2, odd, rows, tall)


@pytest.mark.parametrize("new_shape", [(2, 12), (35,)])
def test_reshape_moving_padded_lanes_raises(rng, new_shape):
  x = random_array(rng, (6, 4) if new_shape == (2, 12) else (5, 7), "float32")

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].reshape(new_shape)
  line = kernel.__code__.co_firstlineno + 1

  with pytest.raises(pallas_prof.LoweringError) as info:
    pallas(kernel, jax.ShapeDtypeStruct(new_shape, jnp.float32))(x)
  err = info.value
  assert err.primitive == "reshape"
  assert err.eqn.line == line and err.eqn.file == os.path.abspath(__file__)
  text = str(err)
  assert f"{os.path.abspath(__file__)}:{line}" in text
  assert "hint:" in text and "power" in text


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(rng, dtype):
  x = random_array(rng, (5, 7), dtype)
  z = random_array(rng, (3, 5, 6), dtype)
  perms = [(0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)]
  check(lambda x, z: {"2d": x.T, "2d_twice": x.T.T,
                      **{f"3d_{p}": jnp.transpose(z, p) for p in perms}}, x, z)


@pytest.mark.parametrize("dtype", DTYPES)
def test_static_slices(rng, dtype):
  x = random_array(rng, (5, 7), dtype)
  check(lambda x: {
      "rows": x[1:3],
      "block": x[1:4, 2:7],
      "row": x[0],
      "last_row": x[4],
      "column": x[:, 3],
      "element": x[2, 3].reshape(1),
      "strided": x[::2, 1::3],
      "reversed": x[::-1],
      "reversed_strided": x[:, ::-2],
      "reversed_both": x[::-1, ::-1],
      "one_wide": x[:, 6:7],
  }, x)


@pytest.mark.parametrize("start", [-5, 0, 2, 3, 100])
@pytest.mark.parametrize("dtype", ("float32", "int8", "bool"))
def test_dynamic_slice_clamps(rng, dtype, start):
  x = random_array(rng, (5, 7), dtype)
  i = np.array([start, 1], np.int32)
  check(lambda x, i: {
      "both": lax.dynamic_slice(x, (i[0], i[1]), (3, 4)),
      "rows": lax.dynamic_slice_in_dim(x, i[0], 2, axis=0),
      "columns": lax.dynamic_slice_in_dim(x, i[0], 5, axis=1),
      "one_column": lax.dynamic_slice_in_dim(x, i[0], 1, axis=1),
      "index": lax.dynamic_index_in_dim(x, i[0], 0, keepdims=False),
      "static_start": lax.dynamic_slice(x, (2, 3), (3, 4)),
  }, x, i)


@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate(rng, dtype):
  a, b = random_array(rng, (4, 8), dtype), random_array(rng, (4, 8), dtype)
  c, d = random_array(rng, (5, 7), dtype), random_array(rng, (2, 7), dtype)
  check(lambda a, b, c, d: {
      "halves_rows": jnp.concatenate([a, b], axis=0),
      "halves_columns": jnp.concatenate([a, b], axis=1),
      "odd_columns": jnp.concatenate([c, c[:, ::-1]], axis=1),
      "unequal_rows": jnp.concatenate([c, d], axis=0),
      "three": jnp.concatenate([d, c, d], axis=0),
      "with_one_row": jnp.concatenate([c[:1], d, c[2:3]], axis=0),
      "pow2_pieces_odd_total": jnp.concatenate([a, b[:2]], axis=0),
  }, a, b, c, d)


@pytest.mark.parametrize("start", [-3, 0, 2, 100])
@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "int8", "bool"))
def test_dynamic_update_slice_split_pad(rng, dtype, start):
  x = random_array(rng, (5, 7), dtype)
  u = random_array(rng, (2, 3), dtype)
  i = np.array([start, 1], np.int32)
  fill = np.asarray(random_array(rng, (1,), dtype))
  check(lambda x, u, i, fill: {
      "update_both": lax.dynamic_update_slice(x, u, (i[0], i[1])),
      "update_rows": lax.dynamic_update_slice_in_dim(x, x[3:], i[0], axis=0),
      "update_row": lax.dynamic_update_index_in_dim(x, x[4], i[0], axis=0),
      "update_static": lax.dynamic_update_slice(x, u, (1, 4)),
      "update_column": lax.dynamic_update_slice_in_dim(
          x, jnp.broadcast_to(u[:1, :1], (5, 1)), i[0], axis=1),
      "split": tuple(jnp.split(x, [2, 3], axis=1)),
      "split_rows": tuple(jnp.split(x, [1], axis=0)),
      "pad": jnp.pad(x, ((1, 2), (0, 3)), constant_values=fill[0]),
      "pad_crop": lax.pad(x, fill[0], ((-1, 2, 0), (2, -3, 0))),
      "pad_interior": lax.pad(x, fill[0], ((0, 0, 1), (1, 1, 2))),
      "pad_literal": jnp.pad(x, ((0, 1), (2, 0))),
  }, x, u, i, fill)


def test_iota(rng):
  x = random_array(rng, (5, 7), "float32")
  check(lambda x: {
      "rows_i32": lax.broadcasted_iota(jnp.int32, (5, 7), 0),
      "columns_i32": lax.broadcasted_iota(jnp.int32, (5, 7), 1),
      "f32": lax.broadcasted_iota(jnp.float32, (5, 7), 1) + x,
      "bf16": lax.broadcasted_iota(jnp.bfloat16, (3, 6), 1),
      "f16": lax.iota(jnp.float16, 9),
      "int8": lax.iota(jnp.int8, 7),
      "arange_mask": jnp.where(jnp.arange(7)[None, :] < 3, x, -x),
      "uint32": lax.broadcasted_iota(jnp.uint32, (2, 5), 1),
  }, x)


def test_shape_ops_compile_for_sm90(rng):
  """The interpreter is lenient; the compiler checks types and shapes."""
  x = random_array(rng, (5, 7), "bfloat16")
  y = random_array(rng, (4, 8), "int8")
  b = random_array(rng, (5, 7), jnp.bool_)
  i = np.array([3], np.int32)
  check(lambda x, y, b, i: {
      "bcast": lax.broadcast_in_dim(x, (5, 2, 7), (0, 2)), "reshape": y.reshape(2, 16),
      "unit": x.reshape(5, 1, 7), "group": x[:, :4].reshape(20), "t": x.T,
      "t3": jnp.transpose(y.reshape(2, 4, 4), (2, 0, 1)), "slice": x[1:4, ::2], "row": y[1],
      "elem": x[2, 3].reshape(1), "brow": b[:, 2], "rev": b[::-1],
      "dyn": lax.dynamic_slice(x, (i[0], 0), (2, 7)), "cat": jnp.concatenate([x, x[:2]], 0),
      "cat2": jnp.concatenate([y, y], 1), "iota": lax.broadcasted_iota(jnp.bfloat16, (5, 7), 1),
      "scalar": y[1:2, 1:2].reshape(()) + jnp.int8(100),
      "update": lax.dynamic_update_slice(x, x[:2, :3], (i[0], 1)),
      "split": tuple(jnp.split(y, 2, 1)),
      "pad": lax.pad(x, x[0, 0], ((1, -1, 1), (0, 2, 0))), "bpad": jnp.pad(b, ((1, 0), (0, 1))),
  }, x, y, b, i, name="shape_sm90")
  ck = compile_kernel(kernel_registry.find("shape_sm90")[-1].generated)
  assert ".target sm_90" in ck.ptx


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("n", [2, 3])
def test_stack_and_unstack(rng, axis, n):
  xs = [jnp.asarray(random_array(rng, (4, 6), jnp.float32)) for _ in range(n)]
  expected = jnp.stack(xs, axis=axis)

  def stack_kernel(*refs):
    *ins, out = refs
    out[...] = jnp.stack([r[...] for r in ins], axis=axis)

  got = pallas(stack_kernel, jax.ShapeDtypeStruct(expected.shape, jnp.float32))(*xs)
  assert_close(got, expected)

  def unstack_kernel(x_ref, *outs):
    for o, piece in zip(outs, jax.lax.unstack(x_ref[...], axis=axis) if hasattr(jax.lax, "unstack")
                        else [jnp.take(x_ref[...], i, axis=axis) for i in range(n)]):
      o[...] = piece

  pieces = pallas(unstack_kernel, [jax.ShapeDtypeStruct((4, 6), jnp.float32)] * n)(expected)
  for p, x in zip(pieces, xs):
    assert_close(p, x)
