"""interpreter_runtime.py: the interpreter's patches that the CPU path and
ejected programs share; GPU numerics under XLA's CPU threads; no numpy
warnings about results the kernel defines."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend.running import interpreter_memory, interpreter_runtime

RUNTIME = interpreter_runtime.__file__


@pytest.mark.parametrize("path", [RUNTIME, interpreter_memory.__file__])
def test_runtime_imports_neither_jax_nor_pallas_prof(path):
  tree = ast.parse(open(path).read())
  imported = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      imported |= {a.name.split(".")[0] for a in node.names}
    elif isinstance(node, ast.ImportFrom):
      assert node.level == 0, "a relative import would not survive being inlined"
      imported.add(node.module.split(".")[0])
  # importlib: interpreter_reductions.py and interpreter_memory.py beside it, in the
  # package (inlined with it in an ejected program)
  assert imported <= {"ast", "contextlib", "ctypes", "dataclasses", "importlib", "numpy", "os",
                      "triton", "ml_dtypes"}, imported
  # loaded by path, as an ejected program loads it, with the guard beside it: nothing pulls
  # JAX in
  code = ("import importlib.util, sys\n"
          f"spec = importlib.util.spec_from_file_location('rt', {RUNTIME!r})\n"
          "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
          "with m.InterpreterPatches(), m._memory().MemoryGuard([]): pass\n"
          "print(sorted(n for n in sys.modules if n.split('.')[0] in ('jax', 'pallas_prof')))\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
  assert out.returncode == 0, out.stderr
  assert out.stdout.strip() == "[]"


def _call(kernel, x, *out_dtypes):
  shapes = tuple(jax.ShapeDtypeStruct(x.shape, d) for d in out_dtypes)
  return pl.pallas_call(kernel, out_shape=shapes if len(shapes) > 1 else shapes[0],
                        compiler_params=pallas_prof.CompilerParams())(x)


def test_subnormal_results_are_kept_as_on_the_gpu():
  rng = np.random.default_rng()
  seed = int(rng.integers(2**31))
  x = (np.random.default_rng(seed).uniform(1, 2, (5, 37)) * 1e-20).astype(np.float32)

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * x_ref[...]        # 1e-40 .. 4e-40: subnormal

  expected = x * x                                # numpy outside XLA: no flush to zero
  assert np.all(expected != 0)
  for fn in (lambda v: _call(kernel, v, jnp.float32), jax.jit(lambda v: _call(kernel, v, jnp.float32))):
    got = np.asarray(fn(x))
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32),
                                  err_msg=f"seed {seed}")


def test_no_numpy_warnings_where_the_kernel_defines_the_result():
  x = np.array([np.nan, np.inf, -np.inf, 3e9, 3.5, -2.5, 0.0, -0.0], np.float32)

  def kernel(x_ref, i_ref, f_ref):
    i_ref[...] = x_ref[...].astype(jnp.int32)      # NaN -> 0, saturating, as XLA
    f_ref[...] = x_ref[...] * 1e38 / 0.0

  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ints, floats = jax.block_until_ready(_call(kernel, x, jnp.int32, jnp.float32))
  assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
  info = np.iinfo(np.int32)
  np.testing.assert_array_equal(ints, [0, info.max, info.min, info.max, 3, -2, 0, 0])
  with np.errstate(all="ignore"):
    np.testing.assert_array_equal(floats, x * np.float32(1e38) / np.float32(0))
  # narrowly: only the kernel's run; numpy warns in the rest of the program
  with pytest.warns(RuntimeWarning, match="invalid value"):
    np.array([np.nan], np.float32).astype(np.int32)


def test_a_read_past_an_arrays_end_counts_every_element_outside_it():
  """A newcomer's kernel read a block of 1024 wholly past its input's end and was told of
  4 elements: the rest landed in the output the allocator had placed next to it, and only
  the gap between the two counted (issue 39). Two views of one allocation make that layout
  here whatever the allocator does."""
  memory = np.zeros(1024 + 4 + 1024, np.float32)
  x, out = memory[:1024], memory[1028:]
  past_the_end = x.ctypes.data + 4 * np.arange(1024, 2048, dtype=np.uint64)
  guard = interpreter_memory.MemoryGuard([x, out], owner=lambda: ("x_ref", x))
  with pytest.raises(interpreter_memory.OutOfBuffers) as info:
    guard.check(past_the_end, None, 4, "reads")
  assert str(info.value).startswith("the kernel reads 1024 element(s) outside x_ref, 1020 of "
                                    "them inside another of its buffers (on a GPU"), info.value
  # where the ref is not known, what is counted is said as it is
  with pytest.raises(interpreter_memory.OutOfBuffers, match=r"reads 4 element\(s\) outside "
                     "every buffer it was given"):
    interpreter_memory.MemoryGuard([x, out]).check(past_the_end, None, 4, "reads")
  # an access inside its own ref passes
  interpreter_memory.MemoryGuard([x, out], owner=lambda: ("x_ref", x)).check(
      x.ctypes.data + 4 * np.arange(1024, dtype=np.uint64), None, 4, "reads")


def test_a_kernel_reading_past_its_input_is_told_the_whole_overrun():
  """The same under Triton's interpreter: the ref the failing line reads is found from the
  generated line, and all its elements past the end are counted."""
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 256 + 256, 256)]

  x = jnp.arange(256, dtype=jnp.float32)
  with pytest.raises(pallas_prof.BoundsError, match=r"reads 256 element\(s\) outside x_ref"):
    jax.block_until_ready(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,),
        compiler_params=pallas_prof.CompilerParams())(x))
