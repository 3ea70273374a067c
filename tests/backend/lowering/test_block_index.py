"""A BlockSpec whose index map picks a block outside its array is reported at the
BlockSpec's line (where the mistake is), naming the program, the block index and the
array's extent: before launch when the index map can be evaluated over the grid and the
kernel touches the block on every program; in the bounds-checked mode at run time
otherwise. A partial last block is not outside."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import serial
from pallas_prof.backend.check_sites import CheckSite
from pallas_prof.backend.lowering.features import bounds
from tests.backend.lowering.test_bounds import check_mode  # noqa: F401  (the bounds-checked mode)
from testkit.helpers import pallas

S = jax.ShapeDtypeStruct
F32 = jnp.float32
HERE = __file__.rsplit("/", 1)[-1]


def _double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def _line_of(needle: str) -> int:
  """The line of this file that holds `needle` (once)."""
  lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
  found = [i + 1 for i, text in enumerate(lines) if needle in text and "_line_of(" not in text]
  assert len(found) == 1, (needle, found)
  return found[0]


def _lowering_error(call, *args) -> pallas_prof.LoweringError:
  with pytest.raises(pallas_prof.LoweringError) as info:
    jax.block_until_ready(call(*args))
  return info.value


@pytest.mark.parametrize("checked", [False, True], ids=["plain", "bounds_mode"])
def test_a_block_past_the_end_is_named_at_the_blockspec_line(checked):
  """The same error before launch with or without the bounds-checked mode (which said the
  body's line and the interpreter's words before)."""
  bounds.set_check_bounds(checked)
  try:
    _a_block_past_the_end()
  finally:
    bounds.set_check_bounds(None)


def _a_block_past_the_end():
  shifted = pl.BlockSpec((128,), lambda i: (i + 1,))     # reads one block ahead
  call = pallas(_double, S((512,), F32), grid=(4,), in_specs=[shifted],
                out_specs=pl.BlockSpec((128,), lambda i: (i,)))
  e = _lowering_error(call, jnp.arange(512, dtype=F32))
  assert e.location and e.location.endswith(f"{HERE}:{_line_of('reads one block ahead')}")
  text = str(e)
  assert "BlockSpec of x_ref (input 0) picks block 4 for program 3 of grid (4,)" in text
  assert "block 4 starts at element 512, at or past the end (512 elements)" in text
  assert "block indices 0 to 3" in text
  assert "o_ref[...] = x_ref" not in text     # not blamed on the body
  # the kernel's jaxpr is shown as it is: no equation of it is marked, and the note says the
  # failure is the call's (it said "could not be located in the printed jaxpr")
  from pallas_prof.instrument.errors import error_text
  report = error_text(e)
  assert "marks the failing equation" not in report and "could not be located" not in report
  assert "the failure is the pallas_call's own (its grid and BlockSpecs)" in report, report


def test_a_two_dimensional_grid_names_the_program_and_the_dimension():
  right = pl.BlockSpec((8, 128), lambda i, j: (i, j + 1))   # one column of blocks too far
  plain = pl.BlockSpec((8, 128), lambda i, j: (i, j))
  call = pallas(_double, S((16, 256), F32), grid=(2, 2), in_specs=[right], out_specs=plain)
  e = _lowering_error(call, jnp.ones((16, 256), F32))
  assert e.location.endswith(f"{HERE}:{_line_of('one column of blocks too far')}")
  text = str(e)
  assert "picks block (0, 2) for program (0, 1) of grid (2, 2)" in text
  assert "along dimension 1, block 2 starts at element 256, at or past the end (256 elements)" \
      in text
  assert "(2 of 4 programs pick a block outside)" in text


def test_an_output_block_past_the_end_is_named_as_the_output():
  into = pl.BlockSpec((128,), lambda i: (i + 1,))     # writes one block ahead
  call = pallas(_double, S((512,), F32), grid=(4,),
                in_specs=[pl.BlockSpec((128,), lambda i: (i,))], out_specs=into)
  e = _lowering_error(call, jnp.ones((512,), F32))
  assert e.location.endswith(f"{HERE}:{_line_of('writes one block ahead')}")
  assert "BlockSpec of o_ref (output 0) picks block 4 for program 3" in str(e)


def test_a_negative_block_index_is_before_the_start():
  behind = pl.BlockSpec((128,), lambda i: (i - 1,))     # reads one block behind
  call = pallas(_double, S((512,), F32), grid=(4,), in_specs=[behind],
                out_specs=pl.BlockSpec((128,), lambda i: (i,)))
  e = _lowering_error(call, jnp.ones((512,), F32))
  assert e.location.endswith(f"{HERE}:{_line_of('reads one block behind')}")
  assert ("picks block -1 for program 0 of grid (4,): along dimension 0, block -1 starts at "
          "element -128, before the array's start") in str(e)


def test_a_squeezed_index_past_its_dimension():
  rows = pl.BlockSpec((None, 128), lambda i: (i + 1, 0))     # one row too far
  call = pallas(_double, S((4, 128), F32), grid=(4,), in_specs=[rows],
                out_specs=pl.BlockSpec((None, 128), lambda i: (i, 0)))
  e = _lowering_error(call, jnp.ones((4, 128), F32))
  assert e.location.endswith(f"{HERE}:{_line_of('one row too far')}")
  assert "index 4 along dimension 0, a squeezed dimension of 4, is outside 0 to 3" in str(e)


def test_a_partial_last_block_is_inside():
  """100 elements in blocks of 32: block 3 starts at 96 and is masked past 100. Shifted by
  one, the last program's block is that partial one: still inside."""
  shifted = pl.BlockSpec((32,), lambda i: (i + 1,))
  plain = pl.BlockSpec((32,), lambda i: (i,))
  x = jnp.arange(100, dtype=F32)
  out = pallas(_double, S((96,), F32), grid=(3,), in_specs=[shifted], out_specs=plain)(x)
  # the last program's lanes past element 100 are masked: what they hold is not defined
  np.testing.assert_array_equal(np.asarray(out)[:68], np.asarray(x[32:]) * 2)


def test_a_guarded_access_is_not_refused_before_it_runs():
  """The block past the end is never read: pl.when keeps the last program off it."""
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

    @pl.when(pl.program_id(0) < 3)
    def _():
      o_ref[...] = x_ref[...]

  shifted = pl.BlockSpec((128,), lambda i: (i + 1,))
  plain = pl.BlockSpec((128,), lambda i: (i,))
  x = jnp.arange(512, dtype=F32)
  out = pallas(kernel, S((512,), F32), grid=(4,), in_specs=[shifted], out_specs=plain)(x)
  np.testing.assert_array_equal(np.asarray(out),
                                np.concatenate([np.asarray(x[128:]), np.zeros(128)]))


# --- the bounds-checked mode: what the check before launch cannot know ------------------

def _read_ahead_when(keep_on):
  """A kernel that reads its (shifted) input block only where `keep_on(program id)`:
  a condition the check before launch does not evaluate."""
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

    @pl.when(keep_on(pl.program_id(0)))
    def _():
      o_ref[...] = x_ref[...] * 2.0      # the read of the guarded block
  return kernel


def test_bounds_mode_names_the_blockspec_the_program_and_the_block(check_mode):
  shifted = pl.BlockSpec((128,), lambda i: (i + 1,))     # guarded, still one block ahead
  call = pallas(_read_ahead_when(lambda i: i < 4), S((512,), F32), grid=(4,),
                in_specs=[shifted], out_specs=pl.BlockSpec((128,), lambda i: (i,)))
  x = jnp.arange(512, dtype=F32)
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(x))
  e = info.value
  assert e.location.endswith(f"{HERE}:{_line_of('guarded, still one block ahead')}")
  text = str(e)
  assert ("the BlockSpec of x_ref (input 0) at " in text
          and "picks block 4 for program 3 of grid (4,): along dimension 0, block 4 starts at "
              "element 512, at or past the end (512 elements)" in text)
  assert f"`get` at line {_line_of('the read of the guarded block')} reads nothing of it" in text
  assert "clamp the index" in e.hint


def test_bounds_mode_two_dimensions_name_the_programs(check_mode):
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

    @pl.when(pl.program_id(1) >= 0)
    def _():
      o_ref[...] = x_ref[...]

  right = pl.BlockSpec((8, 128), lambda i, j: (i, j + 1))
  plain = pl.BlockSpec((8, 128), lambda i, j: (i, j))
  call = pallas(kernel, S((16, 256), F32), grid=(2, 2), in_specs=[right], out_specs=plain)
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(jnp.ones((16, 256), F32)))
  assert ("picks block (0 to 1, 2) for programs (0 to 1, 1) of grid (2, 2): along dimension "
          "1, block 2 starts at element 256") in str(info.value)


# the first block of the output is in no program's block: said, and not what is tested here
@pytest.mark.filterwarnings("ignore::pallas_prof.UncoveredOutputWarning")
def test_bounds_mode_an_output_block_before_the_start(check_mode):
  def kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) >= 0)
    def _():
      o_ref[...] = x_ref[...]            # the guarded write

  behind = pl.BlockSpec((128,), lambda i: (i - 1,))     # guarded, one block behind
  call = pallas(kernel, S((512,), F32), grid=(4,),
                in_specs=[pl.BlockSpec((128,), lambda i: (i,))], out_specs=behind)
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(jnp.ones((512,), F32)))
  e = info.value
  assert e.location.endswith(f"{HERE}:{_line_of('guarded, one block behind')}")
  assert ("the BlockSpec of o_ref (output 0) at " in str(e) and "picks block -1 for program 0 "
          "of grid (4,): along dimension 0, block -1 starts at element -128, before the "
          "array's start" in str(e))
  assert f"`swap` at line {_line_of('the guarded write')} writes nothing of it" in str(e)


def test_bounds_mode_passes_a_partial_last_block_and_an_access_that_never_happens(check_mode):
  shifted = pl.BlockSpec((32,), lambda i: (i + 1,))
  plain = pl.BlockSpec((32,), lambda i: (i,))
  x = jnp.arange(100, dtype=F32)
  out = pallas(_read_ahead_when(lambda i: i >= 0), S((96,), F32), grid=(3,),
               in_specs=[shifted], out_specs=plain)(x)
  np.testing.assert_array_equal(np.asarray(out)[:68], np.asarray(x[32:]) * 2)
  # the last program's block is past the end, and the guard keeps it from reading it
  guarded = pallas(_read_ahead_when(lambda i: i < 3), S((512,), F32), grid=(4,),
                   in_specs=[pl.BlockSpec((128,), lambda i: (i + 1,))],
                   out_specs=pl.BlockSpec((128,), lambda i: (i,)))
  y = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(np.asarray(guarded(y)),
                                np.concatenate([np.asarray(y[128:]) * 2, np.zeros(128)]))


def test_a_block_site_is_saved_and_read_back():
  site = CheckSite(base=0, eqn_index=2, access="read", ref="x_ref", block_shape=(128,),
                   array_shape=(512,), dtype="float32", checked_axes=(0,), kind="block",
                   operand="input 0", where=("k.py", 12, "<lambda>"), grid=(4,),
                   squeezed=(False,), static_ranges=(None,))
  assert serial.load(CheckSite, serial.dump(site), "kernel.json") == site
